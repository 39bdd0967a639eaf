// ConnectionHandle: the application's thread-safe view of one longhaul connection that a
// driver (transport/drivers/udp) runs on its own thread.
//
// Submission: Send, PostReceive, ReturnBuffer and Close may be called from any thread,
// including from inside an event callback. They queue an operation and wake the driver
// once per batch (no system call per message when the driver is already awake), and the
// driver applies the queued operations in order on its thread.
//
// Zero-copy lifetime: Send reads the message bytes in place until that message's
// kSendComplete event (success, or a cancellation when the connection closes), so the
// memory must stay valid and unchanged until then; or pass SendBuffer::owner to have the
// transport hold it. Posted receive buffers are written until their kReceiveComplete
// event or until kClosed. Transport-owned receive memory (Event::owned) belongs to the
// application once delivered; give it back with ReturnBuffer to have it reused.
//
// Memory: received messages wait in the event queue until the application takes them;
// what they hold counts against the receive credit (Connection::SetConsumptionTracking),
// so an application that stops polling stalls its sender within one recv_window instead
// of letting the queue grow, and the sender resumes when it polls again. An event given
// to the callback is taken when the callback returns.
//
// Completions: by polling (Poll / Wait; a thread-safe queue), or by a callback that the
// driver thread calls for every event, in order, without holding any lock (the callback
// may submit; it must not block for long, it holds up the driver). Set the callback
// before events arrive (ConnectOptions / ListenOptions::on_accept) or later with
// SetCallback, which passes the events still queued to the callback first, in order (on
// the driver thread; on the calling thread when the connection has already ended, so a
// callback set late still sees the kClosed).
//
// Every handle ends with exactly one kClosed event whose status says why: OK for a clean
// close by either side, DeadlineExceeded "peer unreachable: no packet received for 30s"
// when the peer vanished, Aborted for errors, Cancelled when the endpoint shut down.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/connection.h"
#include "transport/core/stats.h"

namespace longhaul {

class ConnectionHandle;
using EventCallback = std::function<void(Event&)>;

// What a driver offers the handles it runs. Implemented by the UDP driver.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  // `handle` has queued operations: apply them soon. Called with the handle's lock held;
  // must not call back into the handle.
  virtual void Wake(ConnectionHandle* handle) = 0;
};

// Facts about a connection fixed when it was set up.
struct ConnectionInfo {
  TransportConfig config;  // effective (negotiated) configuration of this side
  uint64_t local_id = 0;   // connection ids (see ConnectionIds)
  uint64_t peer_id = 0;
  std::string local_address;  // "127.0.0.1:40001" (flow 0)
  std::string peer_address;   // "127.0.0.1:5201"
  std::string peer_app_data;  // the peer's handshake application data
  bool is_server = false;
  // The engine (driver thread) that runs the connection: 0 .. EndpointOptions::engines-1.
  uint32_t engine = 0;
  // Packet protection of this connection: the mode ("insecure (plaintext)", or the Noise
  // pattern: "Noise IK (static keys)"), the AEAD ("aes-256-gcm"; empty when plaintext) and
  // the peer's static public key (hex) when static keys authenticated it.
  std::string security;
  std::string cipher;
  std::string peer_key;
};

class ConnectionHandle {
 public:
  ConnectionHandle(ConnectionHost* host, ConnectionInfo info);
  ~ConnectionHandle();
  ConnectionHandle(const ConnectionHandle&) = delete;
  ConnectionHandle& operator=(const ConnectionHandle&) = delete;

  // ---- application side (thread-safe) ----

  // Queues a message; returns its id (consecutive from 0). Errors: FailedPrecondition once
  // the connection is closing or closed; InvalidArgument for a null buffer of non-zero size.
  absl::StatusOr<uint64_t> Send(SendBuffer buffer, uint64_t tag);
  // Posts a receive buffer for the next message that has none (see Connection).
  absl::Status PostReceive(uint8_t* data, ByteCount capacity, uint64_t tag);
  // Offers a buffer for the peer's message sent under `key` (Connection::OfferReceive):
  // it ends with that message's kReceiveComplete (tag `key`) if a placing datapath
  // adopts it, else with a kOfferWithdrawn after WithdrawOffer (or at the close). An
  // offer the driver refuses (a key offered already, too many offers) ends at once with
  // a kOfferWithdrawn carrying the reason. Errors here: InvalidArgument (the key, the
  // buffer), FailedPrecondition once closed.
  absl::Status OfferReceive(uint64_t key, uint8_t* data, ByteCount capacity);
  void WithdrawOffer(uint64_t key);
  // Returns transport-owned receive memory for reuse (a no-op once closed).
  void ReturnBuffer(OwnedBuffer buffer);
  // Starts a clean close (CLOSE with no error; messages not yet acknowledged are
  // cancelled). The kClosed event follows.
  void Close();
  // Closes with an application error that the peer sees as the reason.
  void Abort(std::string reason);

  // Next queued event; false if none (events go to the callback when one is set).
  bool Poll(Event* event);
  // Waits up to `timeout` for an event. False on timeout, or when the connection is
  // closed and every event was taken.
  bool Wait(Event* event, Duration timeout);
  // Sets (or clears, with nullptr) the callback; see the header comment.
  void SetCallback(EventCallback callback);
  // Waits until the kClosed event was produced (not necessarily consumed). True if so.
  bool WaitClosed(Duration timeout);

  bool closed() const;
  // OK while open; after kClosed, its status.
  absl::Status status() const;
  // Bytes (stream units: a message counts max(size, 1)) accepted by Send that the
  // driver has not yet transmitted once: the connection's send backlog. An application
  // that multiplexes several sources keeps it small so that what it submits next is not
  // queued behind a long backlog (longhaul-bridge does). Lock-free; the driver updates
  // what was sent on every pass of its loop.
  uint64_t unsent_bytes() const {
    const uint64_t submitted = submitted_units_.load(std::memory_order_relaxed);
    const uint64_t sent = sent_units_.load(std::memory_order_relaxed);
    return submitted > sent ? submitted - sent : 0;
  }
  // Snapshots the driver publishes (every few milliseconds and at close).
  ConnectionStats stats() const;
  ConnectionDebugState debug_state() const;
  const ConnectionInfo& info() const { return info_; }
  const TransportConfig& config() const { return info_.config; }

  // ---- driver side (the driver thread only) ----

  struct Op {
    enum class Kind { kSend, kPost, kReturn, kClose, kOffer, kWithdraw };
    Kind kind = Kind::kSend;
    SendBuffer send;
    uint64_t tag = 0;
    uint64_t expected_id = 0;  // kSend: the id Send() returned
    uint8_t* data = nullptr;   // kPost, kOffer (tag: the key; kWithdraw too)
    ByteCount capacity = 0;
    OwnedBuffer owned;                     // kReturn
    CloseCode code = CloseCode::kNoError;  // kClose
    std::string reason;
  };
  // Moves the queued operations into `ops` (appending) and re-arms the wake-up.
  void TakeOps(std::vector<Op>* ops);
  // Hands events to the callback or the queue. Consumes `events`.
  void Deliver(std::vector<Event>* events);
  // Delivers events queued before a callback was set (after SetCallback).
  void FlushToCallback();
  void PublishStats(const ConnectionStats& stats, const ConnectionDebugState& debug);
  // Credit units (Event::credit_units) of the events the application took since the last
  // call, for Connection::OnConsumed.
  uint64_t TakeConsumed() { return consumed_.exchange(0, std::memory_order_relaxed); }
  // The connection's Connection::stream_units_sent() (see unsent_bytes()).
  void PublishSent(uint64_t units) { sent_units_.store(units, std::memory_order_relaxed); }
  // The driver is done with this connection (closed, or the endpoint shut down): queued
  // sends are cancelled, a kClosed event with `status` is produced if none was, and
  // later submissions fail.
  void Detach(absl::Status status);

 private:
  void WakeLocked();
  // Queues a kPost or kOffer of `capacity` bytes at `data` (FailedPrecondition once closed).
  absl::Status QueueReceive(Op::Kind kind, uint8_t* data, ByteCount capacity, uint64_t tag);
  // The application took `e` from the queue: its credit goes back to the driver, which is
  // woken when that is worth an ACK (a fraction of the window, or the queue is empty).
  void TakenLocked(const Event& e);

  const ConnectionInfo info_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ConnectionHost* host_;  // null once detached
  std::vector<Op> ops_;
  bool wake_queued_ = false;
  std::deque<Event> events_;
  int waiters_ = 0;
  EventCallback callback_;
  bool flush_pending_ = false;  // events_ must go to the new callback first
  bool delivering_ = false;     // a callback is running (driver thread)
  uint64_t next_send_id_ = 0;
  std::atomic<uint64_t> submitted_units_{0};  // by Send (under mu_)
  std::atomic<uint64_t> sent_units_{0};       // by the driver
  std::atomic<uint64_t> consumed_{0};         // credit units taken, not yet reported
  bool closing_ = false;  // Close/Abort requested
  bool closed_ = false;   // kClosed produced
  absl::Status status_;
  ConnectionStats stats_;
  ConnectionDebugState debug_;
};

}  // namespace longhaul
