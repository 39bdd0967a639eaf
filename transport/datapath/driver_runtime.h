// DriverRuntime: the driver-thread side of a datapath that every driver shares. It owns
// the sans-IO endpoint (transport/endpoint) and, for each of its connections, the
// application's ConnectionHandle: it turns endpoint events into handles (accept
// callbacks, the accept queue, waiting Connect calls), applies the operations
// applications queue on handles, hands connection events and stats snapshots to them,
// and reaps closed connections. A driver adds only I/O: it feeds the endpoint datagrams
// and errors, sends what PollTransmit produces, sleeps until the next deadline, and calls
// the runtime at the points its loop documents (udp_driver.cc is the model).
//
// Thread-safety: Wake, Accept, WaitConnect and the ConnectWait are thread-safe; everything
// else runs on the driver thread only (SetDriverThread names it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/datapath/accept_queue.h"
#include "transport/datapath/connection_handle.h"
#include "transport/datapath/options.h"
#include "transport/endpoint/sans_io_endpoint.h"

namespace longhaul::datapath {

// The endpoint's configuration from the application's options, the same for every driver:
// cookie lifetime, connection and flow limits, a seed and a cookie secret from
// std::random_device unless the options fix the seed, the packet protection, and the
// driver's way of printing its addresses. Protected endpoints without an entropy source of
// their own draw their ephemeral keys from SystemEntropy.
endpoint::EndpointConfig EndpointConfigFor(const EndpointOptions& options,
                                           endpoint::AddressFormatter format_address);

// One engine's place in an endpoint (docs/architecture.md "Engines"): its index among
// `count`, what the engines share (the cookie secret, so a cookie verifies on any of them;
// the accept queue) and the CPU its thread is pinned to. The default is a lone engine.
struct EngineSlot {
  uint32_t index = 0;
  uint32_t count = 1;
  std::optional<endpoint::SipKey> cookie_secret;  // unset: drawn for this engine
  std::shared_ptr<AcceptQueue> accept_queue;      // null: the runtime's own
  // Tags of client connection ids (EndpointConfig::client_id_tag), counted across the
  // engines; null: the engine's own counter.
  std::shared_ptr<std::atomic<uint32_t>> client_tags;
  int cpu = -1;  // -1: not pinned
};

// EndpointConfigFor with the slot's engine index, count, cookie secret and client tags.
endpoint::EndpointConfig EngineConfigFor(const EndpointOptions& options,
                                         endpoint::AddressFormatter format_address,
                                         const EngineSlot& slot);

// Names the calling thread "lh-engine-<index>" (as /proc/self/task/*/comm shows it) and
// pins it to slot.cpu (unless -1); logs a warning when the kernel refuses the CPU.
void SetUpEngineThread(const EngineSlot& slot);

// The CPU time (user + system) the calling thread has used, in seconds.
double ThisThreadCpuSeconds();

// The checks every driver makes of the options it is created with: tx_batch in [1, 1024],
// spin in [0, 10ms], send_quantum at most 1 MiB, cookie_lifetime at least 1 s, and the endpoint configuration they
// give (EndpointConfig::Validate: packet protection chosen, limits). InvalidArgument
// naming the option.
absl::Status ValidateEndpointOptions(const EndpointOptions& options);

// The checks every driver makes of a Connect's options: the configuration is valid, the
// application data fits the handshake (kMaxAppDataSize), the engine is in [-1, 255].
// InvalidArgument naming it.
absl::Status ValidateConnectOptions(const ConnectOptions& options);

// Runs `fn` on a driver's thread and waits until it has run: at once when the caller is
// that thread, else through `post` (which queues a task for the thread and returns false,
// not running it, once the driver has stopped; `fn` then does not run either).
void RunOnDriverThread(bool on_driver_thread,
                       const std::function<bool(std::function<void()>)>& post,
                       const std::function<void()>& fn);

// The kernel's CSPRNG (getrandom(2), blocking until it is seeded); aborts the process if
// the kernel refuses, since no key may be made without it. Thread-safe.
void SystemEntropy(std::span<uint8_t> out);

// A Connect() waiting for its handshake; shared between the caller's thread and the
// driver thread.
struct ConnectWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool abandoned = false;  // the caller stopped waiting
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> value =
      absl::UnknownError("connect did not finish");
  EventCallback callback;  // ConnectOptions::callback, set on the handle before any event
};

class DriverRuntime final : public ConnectionHost {
 public:
  struct Hooks {
    // Wakes the driver thread from another thread (its loop then calls ApplyWakes). Called
    // with a handle's lock held: must not call back into handles or the runtime.
    std::function<void()> wake;
    // The endpoint no longer uses `local` (a client's socket): the driver closes it.
    std::function<void(endpoint::LocalId)> close_local;
    // The printable address of a local ("127.0.0.1:40001"), for ConnectionInfo.
    std::function<std::string(endpoint::LocalId)> local_address;
    // Optional. A connection the driver may now use (a client's kConnected, a server's
    // kIncoming), before any of its data is delivered; and one about to be released (its
    // close delivered): a datapath of its own (the verbs driver's UC lanes) lives between.
    std::function<void(endpoint::ConnectionId)> connection_up;
    std::function<void(endpoint::ConnectionId)> connection_gone;
    // Optional. The connection closed; called before its last events (its posted buffers
    // handed back among them) reach the application: a datapath that let the peer write
    // into those buffers ends that access here.
    std::function<void(endpoint::ConnectionId)> connection_closed;
    // Optional. The connection holds a new driver state from its peer
    // (Connection::TakePeerDriverState).
    std::function<void(endpoint::ConnectionId)> driver_state;
  };

  // `accept_queue`: shared with the other engines of an endpoint (null: one of its own,
  // stopped by FinishShutdown; a shared one is stopped by its owner).
  DriverRuntime(endpoint::EndpointConfig config, Hooks hooks,
                std::shared_ptr<AcceptQueue> accept_queue = nullptr);
  ~DriverRuntime() override;

  endpoint::SansIoEndpoint& endpoint() { return endpoint_; }
  const endpoint::SansIoEndpoint& endpoint() const { return endpoint_; }

  // ---- any thread ----
  void Wake(ConnectionHandle* handle) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout);
  // Waits for `wait` (the driver enforces the handshake timeout; `timeout` plus a second
  // only guards against a stuck driver thread).
  static absl::StatusOr<std::shared_ptr<ConnectionHandle>> WaitConnect(ConnectWait& wait,
                                                                       Duration timeout,
                                                                       const std::string& server);

  // ---- driver thread ----
  void SetDriverThread(std::thread::id id) { driver_thread_.store(id); }
  bool OnDriverThread() const { return std::this_thread::get_id() == driver_thread_.load(); }

  // Makes `local` a listener with `options` (the accept callback, backlog and policy are
  // kept here; the endpoint sees the policy and the configuration).
  absl::Status Listen(endpoint::LocalId local, ListenOptions options);
  // Starts a handshake; the outcome completes `wait`. On an immediate error `wait`
  // completes with it and the locals are closed.
  void StartConnect(Time now, const endpoint::PeerAddress& server,
                    std::vector<endpoint::LocalId> locals, ConnectOptions options,
                    std::shared_ptr<ConnectWait> wait);
  // Turns pending endpoint events into handles, accept-queue entries and finished
  // Connects. Call after every endpoint input (OnDatagram, OnLocalError, PollTransmit
  // rounds): an accepted connection's callback must run before its first data.
  void ProcessEndpointEvents();
  // Applies the operations applications queued on handles (Send, PostReceive, ...).
  void ApplyWakes();
  // True when handles woke from the driver thread itself (the loop must not sleep).
  bool HasLocalWakes() const { return !local_wakes_.empty(); }
  // Hands every connection's events and (every kStatsPublishPeriod) stats to its handle,
  // then reaps closed connections. The driver wakes at least every kStatsPublishPeriod
  // while it has connections.
  void DeliverAll(Time now);

  // Shutdown, in two steps around the driver's last transmit: BeginShutdown closes every
  // connection and fails pending handshakes; FinishShutdown delivers the last events,
  // detaches every handle (kClosed, Cancelled "endpoint closed") and ends Accept.
  void BeginShutdown(Time now);
  void FinishShutdown(Time now);

  // Adds the endpoint's counters to `stats`.
  void AddStats(EndpointStats* stats) const;

  static constexpr Duration kStatsPublishPeriod = Duration::Milliseconds(10);

 private:
  struct Entry {
    std::shared_ptr<ConnectionHandle> handle;
    Time last_publish;
  };
  struct ListenerState {
    AcceptCallback on_accept;
    uint32_t backlog = 0;
  };

  // A confirmed incoming connection: to the listener's accept callback or accept queue.
  void OnIncoming(endpoint::ConnectionId id);
  void OnConnected(const endpoint::EndpointEvent& e);
  void OnConnectFailed(const endpoint::EndpointEvent& e);
  void ApplyOps(endpoint::ConnectionId id, Entry& entry);
  std::shared_ptr<ConnectionHandle> MakeHandle(endpoint::ConnectionId id);
  static void Complete(ConnectWait& wait, absl::StatusOr<std::shared_ptr<ConnectionHandle>> v);

  endpoint::SansIoEndpoint endpoint_;
  Hooks hooks_;
  std::atomic<std::thread::id> driver_thread_{};

  absl::flat_hash_map<endpoint::ConnectionId, Entry> entries_;
  absl::flat_hash_map<ConnectionHandle*, endpoint::ConnectionId> handle_index_;
  absl::flat_hash_map<endpoint::LocalId, ListenerState> listeners_;
  absl::flat_hash_map<endpoint::ConnectionId, std::shared_ptr<ConnectWait>> waits_;

  // Scratch (driver thread).
  std::vector<ConnectionHandle::Op> ops_;
  std::vector<Event> events_;
  std::vector<endpoint::ConnectionId> ids_;

  // Cross-thread wake-ups.
  std::mutex wake_mu_;
  std::vector<ConnectionHandle*> wakes_;
  bool wake_posted_ = false;
  std::vector<ConnectionHandle*> local_wakes_;  // driver thread only

  std::shared_ptr<AcceptQueue> accept_queue_;
  bool owns_accept_queue_ = false;
};

}  // namespace longhaul::datapath
