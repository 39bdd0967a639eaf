// One longhaul connection of the plugin and the per-comm state its driver-thread
// callbacks share with the NCCL-facing comms (comms.h).
//
// A Link is either the client side (this process's send comms to one remote plugin
// instance, multiplexed by comm id) or the server side (the recv comms from one remote
// instance). The driver thread calls OnEvent for the connection's completions, messages
// and close; it routes frames (frames.h) to SendState (credits, rejects), RecvState
// (messages queued for their irecv) and ListenState (comms waiting for accept), and
// never waits for NCCL's threads.
//
// Ownership: the Runtime (runtime.h) holds every Link (shared_ptr) until Stop; comms hold
// their Link; a Link holds its receivers, weak references to its senders and the
// Runtime, and, while they are in flight, the completions of its in-place sends.
//
// Thread-safety: every public member may be called from any thread (one mutex per
// Link); OnEvent only from the connection's driver thread: one engine's thread per
// connection, so the members OnEvent alone touches (expect_payload_, expected_,
// reported_unknown_, RecvState::received) need no lock even when several engines run
// other Links' events at once. What several Links share (the Runtime, a ListenState that
// comms on several connections open) has its own lock; the lock order is
// ListenState::mu, then Link::mu_, then RecvState::mu. SendState and RecvState are
// shared between one comm and the driver thread (atomics; RecvState::mu for the queue);
// ListenState between the runtime, the driver thread and one listen comm (its mu).
//
// Errors: the connection's state as a status: Unavailable while connecting or when the
// handshake failed, Aborted once closed ("longhaul connection <key> closed: ...") or when
// longhaul refuses a message.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"
#include "transport/api/endpoint.h"
#include "transport/nccl/frames.h"

namespace longhaul::nccl {

class Runtime;
class Link;

// Completion of a message sent in place (zero copy): set by the driver's callback when
// longhaul reports the message acknowledged (or cancelled).
struct ZeroCopyWait {
  std::atomic<int> state{0};  // 0 in flight, 1 acknowledged, 2 cancelled / failed
};

// A message that arrived for a recv comm and waits for its irecv. `payload` points into
// `owned` (the transport's receive buffer, handed back with ReturnBuffer when copied).
struct Incoming {
  OwnedBuffer owned;
  const uint8_t* payload = nullptr;
  size_t size = 0;
  int tag = 0;
};

// A send comm's state that the driver thread updates.
struct SendState {
  uint32_t id = 0;                         // the comm's id on its link; 0: not attached
  uint64_t credit = 0;                     // granted by the receiver (handle)
  std::atomic<uint64_t> peer_consumed{0};  // cumulative, from kCredit frames
  std::atomic<int32_t> reject_reason{0};   // a RejectReason; valid once `rejected`
  std::atomic<bool> rejected{false};       // a kReject came: the comm was refused or ended
};

// A recv comm's state that the driver thread fills. The receiver enforces the credit it
// granted: a message that arrives while `queued` bytes wait and would take them past
// `credit` (the sender's own rule, kMessageOverhead per message included) ends the comm.
struct RecvState {
  uint32_t id = 0;                    // the sender's comm id on the link
  uint64_t listen = 0;                // the listen comm it opened (for kReject)
  uint64_t credit = 0;                // granted (the listener's credit, as in its handles)
  uint64_t received = 0;              // charged bytes queued in total (driver thread only)
  std::atomic<uint64_t> consumed{0};  // charged bytes taken off the queue in total
  std::mutex mu;
  std::deque<Incoming> queue;  // arrived, not yet matched to an irecv
  bool peer_closed = false;
  absl::Status ended;  // not OK: the comm was ended (the sender exceeded its credit)
  // Irecv buffers offered to the connection (placement, docs/nccl.md "Zero copy"), by
  // key (OfferKey): offered and not yet ended by a kOfferWithdrawn or by their message
  // delivered in them. The driver thread erases keys and notifies `offers_cv`.
  std::unordered_set<uint64_t> offers;
  std::condition_variable offers_cv;
};

// The key under which a receiver offers the irecv buffer for message `seq` (the comm's
// messages counted from 0) of send comm `comm`, and which the sender's in-place send
// carries (SendBuffer::placement_key): never 0 (comm ids start at 1), below 2^63.
inline uint64_t OfferKey(uint32_t comm, uint64_t seq) {
  return (uint64_t{comm & 0x7fffffffu} << 32) | (seq & 0xffffffffu);
}
inline uint32_t OfferComm(uint64_t key) { return static_cast<uint32_t>(key >> 32); }

// Bound on the comms that opened a listen comm and wait for its accept (NCCL accepts one
// per listen comm and closes it). OPENs beyond it are refused; OPENs for listen ids that
// do not exist keep no state at all.
inline constexpr size_t kMaxPendingOpens = 16;

// A listen comm: the comms that opened to it (kOpen) and wait for accept. It is bound to
// the NCCL communicator it was made for (comm id, where the ABI gives one: an OPEN must
// carry the same) and, from the first OPEN on, to that OPEN's peer: its static key, or
// without static keys its connection; OPENs from anyone else are refused.
class ListenState {
 public:
  uint64_t id = 0;  // random, never 0
  int dev = 0;
  bool has_comm_id = false;
  uint64_t comm_id = 0;
  std::mutex mu;
  struct Pending {
    std::shared_ptr<Link> link;
    std::shared_ptr<RecvState> state;
  };
  std::deque<Pending> pending;
  std::string bound_peer;  // empty until the first OPEN is taken
  bool closed = false;
};

class Link : public std::enable_shared_from_this<Link> {
 public:
  enum class State { kConnecting, kReady, kFailed, kClosed };

  // `key` names the connection in logs and errors (peer address, port and instance);
  // a client link is lane `lane` of its peer (runtime.h).
  Link(bool client, std::string key, std::weak_ptr<Runtime> rt, uint32_t lane = 0)
      : client_(client), key_(std::move(key)), rt_(std::move(rt)), lane_(lane) {}

  bool client() const { return client_; }
  const std::string& key() const { return key_; }
  uint32_t lane() const { return lane_; }
  // The engine whose thread runs the connection (ConnectionInfo::engine; 0 before it is
  // up).
  uint32_t engine() {
    std::shared_ptr<ConnectionHandle> c = conn();
    return c ? c->info().engine : 0;
  }

  // Driver thread: one event of the connection.
  void OnEvent(Event& e);

  // Sends a header-only frame. Returns the connection's error if it cannot.
  absl::Status SendControl(FrameKind kind, uint32_t comm, uint64_t value, uint64_t instance,
                           int32_t tag = 0);
  // Sends a kOpen for listen comm `listen_id` from send comm `comm` with `body`.
  absl::Status SendOpen(uint32_t comm, uint64_t listen_id, uint64_t instance, const OpenBody& body);
  // Refuses (or ends) the peer's comm `comm` (kReject with `reason`).
  void SendReject(uint32_t comm, uint64_t listen_id, RejectReason reason);
  // Sends a data frame from a staging buffer that already holds header and payload.
  absl::Status SendData(std::shared_ptr<uint8_t> buf, size_t bytes);
  // Sends a kDataHead frame and, right behind it on the connection, `size` bytes at
  // `data` in place; `wait` completes when longhaul reports them acknowledged.
  // `region`: the memory's registration (MrHandle::region; 0: none), for zero copy;
  // `placement_key`: the receiver's offered irecv buffer for it (OfferKey; 0: none).
  absl::Status SendInPlace(uint32_t comm, int tag, const void* data, size_t size,
                           std::shared_ptr<ZeroCopyWait> wait, uint64_t region = 0,
                           uint64_t placement_key = 0);
  // Aborts the connection (pending in-place sends are cancelled: longhaul stops reading
  // their memory) and waits up to `timeout` for its end.
  void AbortAndWait(const std::string& reason, Duration timeout);

  absl::Status status() {
    std::lock_guard<std::mutex> l(mu_);
    return StatusLocked();
  }
  State state() {
    std::lock_guard<std::mutex> l(mu_);
    return state_;
  }
  std::shared_ptr<ConnectionHandle> conn() {
    std::lock_guard<std::mutex> l(mu_);
    return conn_;
  }

  void SetReady(std::shared_ptr<ConnectionHandle> conn);
  void SetFailed(absl::Status s);

  // Attaches a send comm: assigns and returns its id.
  uint32_t AddSender(std::shared_ptr<SendState> s);
  // A send comm closed. Closes the connection once no comm uses it and every message
  // was acknowledged (from the driver's callback if messages are still in flight).
  void RemoveSender(uint32_t id);
  void AddReceiver(const std::shared_ptr<RecvState>& s);
  void RemoveReceiver(uint32_t id);
  // Messages handed to longhaul and not yet acknowledged.
  uint64_t pending_sends() {
    std::lock_guard<std::mutex> l(mu_);
    return state_ == State::kReady ? pending_sends_ : 0;
  }
  bool idle() {
    std::lock_guard<std::mutex> l(mu_);
    return users_ == 0;
  }

  std::thread connect_thread;  // client: runs the blocking handshake

 private:
  absl::Status StatusLocked() const;
  void HandleFrame(const FrameHeader& h, Event& e);
  void HandlePayload(const FrameHeader& h, Event& e, const uint8_t* payload, size_t size);
  void HandleOpen(const FrameHeader& h, const Event& e);
  // The peer's identity for binding a listen comm: its static key (hex) when static keys
  // authenticated it, else this connection.
  std::string PeerIdentity();
  // Ends receiver `r` (driver thread): drops what it queued, refuses the sender's comm.
  void EndReceiver(const std::shared_ptr<RecvState>& r, absl::Status why, RejectReason reason);

  const bool client_;
  const std::string key_;
  std::weak_ptr<Runtime> rt_;
  const uint32_t lane_;
  std::mutex mu_;
  State state_ = State::kConnecting;
  absl::Status status_;
  std::shared_ptr<ConnectionHandle> conn_;
  std::unordered_map<uint32_t, std::weak_ptr<SendState>> senders_;
  std::unordered_map<uint32_t, std::shared_ptr<RecvState>> receivers_;
  uint32_t next_comm_id_ = 1;
  int users_ = 0;
  uint64_t pending_sends_ = 0;
  bool close_when_idle_ = false;
  bool reported_unknown_ = false;
  uint64_t serial_ = 0;  // PeerIdentity without static keys (under mu_)
  std::unordered_map<uint64_t, std::shared_ptr<ZeroCopyWait>> in_place_;  // by message id
  // Receiver: a kDataHead announced the next message.
  bool expect_payload_ = false;
  FrameHeader expected_{};
};

}  // namespace longhaul::nccl
