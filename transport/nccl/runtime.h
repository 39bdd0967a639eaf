// The plugin's process-wide runtime: the settings and devices read at the first init,
// the plugin instance id, the staging-buffer pool, and the one longhaul Endpoint (one
// driver thread, created at the first listen or connect) with every connection (Link)
// and listen comm of the process.
//
// Connections: one client Link per remote plugin instance this process sends to (keyed by
// the handle's address, port and instance; its handshake runs on a helper thread so that
// connect never blocks), one server Link per accepted connection. All send comms to a
// peer share its client Link.
//
// Ownership: net_plugin.cc holds the current Runtime (shared_ptr) between the first init
// and the last finalize (or unload); comms hold a reference too, so a Runtime lives until
// its last comm closes. Stop() ends it: waits up to settings.linger for data in flight,
// closes the endpoint (joining the driver thread) and joins the connect helpers; it is
// idempotent and also run by the destructor.
//
// Thread-safety: every member may be called from any thread; `settings`, `keys`,
// `devices`, `instance` are written once before the Runtime is shared and only read
// afterwards.
// Callbacks from the driver thread reach the Runtime through weak references.
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

  // OPENs refused (by reason) and comms ended for exceeding their credit, since init.
  // Each call counts one and returns the totals as text for the log line ("3 OPENs
  // refused since init (no such listen comm 2, other communicator 1)"); `total` (may be
  // NULL) receives the number refused so far.
  std::string CountRefusedOpen(RejectReason reason, uint64_t* total);
  std::string CountCreditEnded();

  // The client link to `h.address:h.port` of instance `h.instance`, created (and its
  // handshake started on a helper thread) if there is none; with static keys the
  // handshake authenticates the listener by `h.public_key` (the caller checked it is
  // allowed). When the link is ready,
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

 private:
  absl::Status EnsureEndpointLocked();
  // Driver thread: a client connected to one of our listen sockets.
  void OnAccept(std::shared_ptr<ConnectionHandle> h);

  std::mutex mu_;
  std::unique_ptr<Endpoint> endpoint_;
  bool stopped_ = false;
  std::map<int, uint16_t> ports_;
  std::unordered_map<uint64_t, std::shared_ptr<ListenState>> listens_;
  std::mutex count_mu_;
  uint64_t refused_[6] = {};  // by RejectReason
  uint64_t refused_total_ = 0;
  uint64_t credit_ended_ = 0;
  std::map<std::string, std::shared_ptr<Link>> client_links_;
  std::vector<std::shared_ptr<Link>> links_;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace longhaul::nccl
