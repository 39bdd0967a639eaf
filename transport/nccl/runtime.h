// The plugin's process-wide runtime: the settings and devices read at the first init,
// the plugin instance id, the staging-buffer pool, and the one longhaul Endpoint (created
// at the first listen or connect, with NCCL_LONGHAUL_ENGINES driver threads: engines)
// with every connection (Link) and listen comm of the process.
//
// Connections: per remote plugin instance this process sends to (keyed by the handle's
// address, port and instance), one client Link per lane, and as many lanes as the
// endpoint has engines (one with a single engine). A new send comm takes the peer's next
// lane in turn (the same lane for every connect to one listen comm, so NCCL's retries
// and several comms to one listen comm agree); the Endpoint places each lane's
// connection on its next engine, so a peer's comms run on several engines at once. Each
// lane is paced at 1/lanes of the configured rate (LaneConfig), so that a peer's lanes
// together offer the link its rate. A lane's handshake runs on a helper thread so that
// connect never blocks. One server Link per accepted connection, on whichever engine the
// listening port's steering picked.
//
// Ownership: net_plugin.cc holds the current Runtime (shared_ptr) between the first init
// and the last finalize (or unload); comms hold a reference too, so a Runtime lives until
// its last comm closes. Stop() ends it: waits up to settings.linger for data in flight,
// closes the endpoint (joining the engine threads) and joins the connect helpers; it is
// idempotent and also run by the destructor.
//
// Thread-safety: every member may be called from any thread; `settings`, `keys`,
// `devices`, `instance` are written once before the Runtime is shared and only read
// afterwards. NCCL's service and proxy threads take `mu_` (endpoint, ports, listen comms,
// links, lanes); the engine threads (accept callbacks and connection events, several at
// once with engines > 1) take only `mu_` for a moment (OnAccept, FindListen),
// `count_mu_` (refusal counts) and `idle_mu_` (NotifyProgress), never waiting for NCCL's
// threads. Callbacks from the engine threads reach the Runtime through weak references.
//
// Errors: FailedPrecondition after Stop ("the plugin was finalized"); Unavailable naming
// the device and address when a device cannot listen; the Endpoint's errors otherwise.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/api/endpoint.h"
#include "transport/nccl/buffer_pool.h"
#include "transport/nccl/link.h"
#include "transport/nccl/net_plugin.h"
#include "transport/nccl/plugin_handle.h"
#include "transport/nccl/settings.h"

namespace longhaul::nccl {

// The configuration of one of `lanes` connections to a peer: `config` with its rate (the
// fixed controller's pacing rate, an adaptive one's cap), rate_min and initial_rate
// divided by `lanes`, so the lanes together keep to the configured rate.
TransportConfig LaneConfig(const TransportConfig& config, uint32_t lanes);

// 64 bits from the system's randomness (getrandom; /dev/urandom where the kernel has no
// getrandom). Unavailable naming the cause when neither gives 8 bytes.
absl::StatusOr<uint64_t> RandomId();

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  Settings settings;
  crypto::LoadedKeys keys;  // packet protection (LoadPluginKeys at the first init)
  std::vector<DeviceProperties> devices;
  uint64_t instance = 0;  // random id of this plugin instance (in the handles it writes)
  BufferPool pool;

  ~Runtime() { Stop(); }

  // The UDP port device `dev` listens on (the socket is opened at the first call).
  absl::StatusOr<uint16_t> ListenPort(int dev);

  // A new listen comm on device `dev` with a random 64-bit id (RandomId), bound to NCCL's
  // comm id `comm_id` when `has_comm_id` (the ABI gave the listener's context one).
  // Unavailable when the system has no randomness to give.
  absl::StatusOr<std::shared_ptr<ListenState>> AddListen(int dev, bool has_comm_id,
                                                         uint64_t comm_id);
  std::shared_ptr<ListenState> FindListen(uint64_t id);
  void RemoveListen(uint64_t id);

  // regMr (docs/nccl.md section 3, "Zero copy"): host memory NCCL sends from, registered
  // with the endpoint, whose verbs datapath with UC lanes gathers plaintext payloads from
  // it (Endpoint::RegisterMemory). Returns the region for SendBuffer::region, 0 when it
  // is not registered (no endpoint yet, or refused: logged once): sends from it copy.
  uint64_t RegisterMemory(void* data, size_t size);
  // Whether regMr registers anything: NCCL_LONGHAUL_DATAPATH=verbs with QP_TYPE=uc.
  bool zero_copy() const;
  void DeregisterMemory(uint64_t region);
  struct MrCounts {
    uint64_t registered = 0, bytes = 0, refused = 0, in_place_sends = 0, in_place_bytes = 0;
  };
  MrCounts mr_counts();
  void CountInPlaceSend(uint64_t bytes);
  // Irecv placement (docs/nccl.md "Zero copy"): bytes NCCL's buffers received where the
  // NIC wrote them (the message adopted an offered irecv buffer) and bytes copied into
  // them from the transport's memory; buffers offered.
  struct RecvCounts {
    uint64_t offered = 0, placed_messages = 0, placed_bytes = 0, copied_messages = 0,
             copied_bytes = 0;
  };
  void CountRecv(bool placed, uint64_t bytes);
  void CountOffer();
  RecvCounts recv_counts();

  // OPENs refused (by reason) and comms ended for exceeding their credit, since init.
  // Each call counts one and returns the totals as text for the log line ("3 OPENs
  // refused since init (no such listen comm 2, other communicator 1)"); `total` (may be
  // NULL) receives the number refused so far.
  std::string CountRefusedOpen(RejectReason reason, uint64_t* total);
  std::string CountCreditEnded();

  // The client link of the lane to `h.address:h.port` of instance `h.instance` that a
  // comm to listen comm `h.listen_id` takes (the peer's next lane in turn, or the lane
  // an earlier connect to that listen comm took), created (and its handshake started on
  // a helper thread) if that lane has none; with static keys the handshake authenticates
  // the listener by `h.public_key` (the caller checked it is allowed). When the link is
  // ready,
  // `sender` is attached to it (under the runtime's lock, so a closing comm cannot retire
  // the link in between); sender->id stays 0 otherwise. A failed or closed link is
  // returned once (the caller reports its error) and forgotten, so a later call retries.
  absl::StatusOr<std::shared_ptr<Link>> ClientLink(const PluginHandle& h,
                                                   const std::shared_ptr<SendState>& sender);

  // A send comm on `link` closed. Under the runtime's lock, so no connect can pick the
  // link while its last comm leaves: a link no comm uses is forgotten (new connects to
  // that peer make a new one) and closes once its data is acknowledged.
  void ReleaseSender(const std::shared_ptr<Link>& link, uint32_t id);

  // Waits until `pred` holds (re-checked at every progress notification) or `timeout`.
  template <typename Pred>
  bool WaitFor(Pred pred, Duration timeout) {
    std::unique_lock<std::mutex> l(idle_mu_);
    return idle_cv_.wait_for(l, std::chrono::nanoseconds(timeout.ns()), pred);
  }
  // Wakes WaitFor and Stop's linger (a link drained or closed).
  void NotifyProgress();

  // Waits (bounded by settings.linger) for data in flight, then closes the endpoint and
  // joins threads.
  void Stop();

  bool driver_running();
  // The endpoint's engines (lanes per peer): 0 before the endpoint exists.
  uint32_t engines();

 private:
  // A peer's client links, one slot per lane (null: none now), and which lane each
  // listen comm's connects take. Under mu_.
  struct ClientPeer {
    std::vector<std::shared_ptr<Link>> lanes;
    uint32_t next_lane = 0;
    std::unordered_map<uint64_t, uint32_t> lane_of_listen;
  };
  // Most listen comms a peer remembers lanes for; beyond, the memory starts afresh
  // (connects NCCL abandoned would otherwise accumulate).
  static constexpr size_t kMaxLaneMemory = 4096;

  absl::Status EnsureEndpointLocked();
  // Forgets lane `lane` of `key` if `link` still holds it (and the peer once it has no
  // lane left). Called with mu_ held.
  void ForgetLaneLocked(const std::string& key, uint32_t lane, const std::shared_ptr<Link>& link);
  // Engine thread: a client connected to one of our listen sockets.
  void OnAccept(std::shared_ptr<ConnectionHandle> h);

  // The endpoint, read under mu_; a registration holds reg_mu_ (taken before mu_) across
  // its call, which waits for the driver thread, so Stop cannot close it meanwhile.
  Endpoint* endpoint_for_registration();
  std::mutex reg_mu_;
  std::mutex mu_;
  std::unique_ptr<Endpoint> endpoint_;
  uint32_t engines_ = 0;  // the endpoint's, once it exists
  bool stopped_ = false;
  std::map<int, uint16_t> ports_;
  std::unordered_map<uint64_t, std::shared_ptr<ListenState>> listens_;
  std::mutex count_mu_;
  uint64_t refused_[6] = {};  // by RejectReason
  uint64_t refused_total_ = 0;
  uint64_t credit_ended_ = 0;
  MrCounts mr_;
  RecvCounts recv_;  // under count_mu_
  std::map<std::string, ClientPeer> client_peers_;
  std::vector<std::shared_ptr<Link>> links_;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace longhaul::nccl
