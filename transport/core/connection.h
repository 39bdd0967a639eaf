// Connection: the sans-IO longhaul protocol core for one peer.
//
// A pure state machine: it never reads a clock, sleeps, starts threads or touches a
// socket. Drivers (UDP, verbs, the simulator) feed it datagrams and timeouts with the
// current time and send what PollTransmit() produces; applications submit messages and
// post receive buffers, and collect completions with PollEvent(). The same inputs in the
// same order give the same outputs.
//
// Messages: Send() takes a message of any size (0 bytes to tens of GiB). The bytes are
// read in place (zero copy) until the message's kSendComplete event, so the memory must
// stay valid and unchanged until then (or be owned through SendBuffer::owner). Messages
// arrive whole and, by default, in submission order: the receiver gets one
// kReceiveComplete per message, in order. A message sent with SendBuffer::unordered is
// delivered as soon as it is complete, before earlier messages that are still missing
// pieces (independent streams over one connection: one lost packet holds back only its
// own message); a message sent in order still waits for every earlier message, ordered
// or not. Send completions come in submission order either way. Data lands in place
// in a buffer posted with PostReceive() (posted buffers match message ids in order,
// skipping messages already delivered), or, when no buffer was posted for a message, in
// transport-owned memory handed over in the event (give it back with ReturnBuffer() to
// have it reused).
//
// Reliability: selective repeat. Every packet has a new packet number (retransmitted
// data travels in new packets); ACK frames carry SACK ranges; loss is declared by a
// packet-reorder threshold and a time threshold (RACK), with a probe timeout for tail
// loss. Pacing releases packets at the controller's rate.
//
// Thread-safety: none; one thread (the driver's) calls everything. transport/api adds
// thread-safe submission on top.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/ecn.h"
#include "transport/base/rng.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/stats.h"
#include "transport/wire/packet.h"

namespace longhaul {

class ConnectionImpl;

struct SendBuffer {
  const uint8_t* data = nullptr;
  ByteCount size = 0;
  // Optional owner of `data`, released after the message's send completion.
  std::shared_ptr<const void> owner;
  // Deliver as soon as the message is complete, not after every earlier message (the
  // DATA frames carry wire::kDataFlagUnordered).
  bool unordered = false;
  // Memory the driver registered (longhaul::Endpoint::RegisterMemory; 0: none). On a
  // connection whose driver sends payloads by reference (SetPayloadByReference) the
  // packets leave this message's bytes in `data`, where the NIC reads them: the memory
  // must stay as it is until the send completion, as always.
  uint64_t region = 0;
  // Receive-side placement (docs/rdma.md 7.15): the key of the buffer the receiver offered
  // for this message (Connection::OfferReceive; 0: none, 1 .. 2^63 - 1). A datapath that
  // places payloads writes the message's by-reference payloads straight into that buffer
  // once the receiver advertised it; the message is delivered the same either way.
  uint64_t placement_key = 0;
};

// Receive memory allocated by the connection (messages that had no posted buffer).
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  explicit OwnedBuffer(ByteCount capacity)
      : data_(capacity ? new uint8_t[capacity] : nullptr), capacity_(capacity) {}
  // Like the constructor, but an empty buffer (operator bool false) when memory is short.
  static OwnedBuffer TryAllocate(ByteCount capacity) {
    OwnedBuffer b;
    if (capacity == 0) return b;
    b.data_.reset(new (std::nothrow) uint8_t[capacity]);
    if (b.data_) b.capacity_ = capacity;
    return b;
  }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  ByteCount size() const { return size_; }
  ByteCount capacity() const { return capacity_; }
  void set_size(ByteCount s) { size_ = s; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  ByteCount capacity_ = 0;
  ByteCount size_ = 0;
};

struct Event {
  enum class Type {
    kSendComplete,     // every byte of a sent message was acknowledged
    kReceiveComplete,  // a message arrived whole, in order (status may say it did not fit)
    kClosed,           // the connection ended; status says why (OK for a clean close)
    kOfferWithdrawn,   // the buffer offered under `tag` (OfferReceive) is the
                       // application's again: no message was put in it, and no peer write
                       // can reach it any more (`data`, `size`: the buffer; status
                       // Cancelled when the connection closed)
  };
  Type type = Type::kClosed;
  uint64_t message_id = 0;
  uint64_t tag = 0;       // Send()'s tag, or PostReceive()'s tag (0 for owned memory)
  ByteCount size = 0;     // message size
  uint8_t* data = nullptr;  // receive: where the message is (posted buffer or owned.data())
  OwnedBuffer owned;      // receive into transport-owned memory
  absl::Status status;
  // kReceiveComplete with consumption tracking on: the receive credit this event holds
  // until the application took it (see Connection::SetConsumptionTracking).
  uint64_t credit_units = 0;
  // kReceiveComplete with TransportConfig::elide_payload: the sum of wire::StampTerm over
  // the stamps received, wire::MessageStampDigest of the sent message when each arrived
  // once at its place.
  uint64_t stamp_digest = 0;
};

// A receive buffer offered for the message the peer sends under `key`
// (Connection::OfferReceive), as a datapath that places payloads sees it.
struct ReceiveOffer {
  uint64_t key = 0;
  uint8_t* data = nullptr;
  ByteCount capacity = 0;
  bool considered = false;   // a datapath looked at it (NoteOfferPlacement)
  bool advertised = false;   // and let the peer write into it
  bool withdrawing = false;  // the application asked for it back (WithdrawOffer)
};

// What the driver needs to know about a datagram PollTransmit produced.
struct TransmitInfo {
  uint16_t flow = 0;          // which of the connection's UDP flows to use
  Ecn ecn = Ecn::kNotEct;     // codepoint to set
  // TransportConfig::elide_payload: payload bytes the datagram stands for but does not
  // carry (a simulated link charges length + elided_bytes).
  uint32_t elided_bytes = 0;
  // One pass on sealed connections. The caller sets fills_payload when it copies
  // payloads into the datagram itself (the endpoint encrypts them from the message
  // straight into place); PollTransmit then leaves up to wire::kMaxDeferredPayloads DATA
  // payloads out of the buffer and lists them here (the bytes at their offsets are
  // undefined until filled). Without it every byte is written. On a plaintext
  // connection set to send by reference (Connection::SetPayloadByReference) `deferred`
  // lists the payloads left in registered memory, whatever fills_payload says.
  bool fills_payload = false;
  uint32_t deferred_count = 0;
  std::array<wire::DeferredPayload, wire::kMaxDeferredPayloads> deferred{};
  std::span<const wire::DeferredPayload> deferred_payloads() const {
    return std::span<const wire::DeferredPayload>(deferred.data(), deferred_count);
  }
};

struct ConnectionIds {
  uint64_t local = 0;  // the id peers put in packets addressed to us
  uint64_t peer = 0;   // the id we put in packets addressed to the peer
  // The peer's receive window as negotiated at the handshake (initial flow-control
  // credit); 0 means the peer uses the same recv_window as this side's config.
  ByteCount peer_recv_window = 0;
  // The endpoint seals and opens every packet (AEAD, transport/crypto): PollTransmit
  // leaves wire::kSealTagSize bytes for the tag instead of writing a CRC32C (datagrams are
  // wire::kSealExpansion bytes longer than MaxDatagramSize()), and OnDatagram takes opened
  // packets (header and frames, no trailer).
  bool sealed = false;
};

// Close codes carried in CLOSE frames.
enum class CloseCode : uint64_t {
  kNoError = 0,
  kProtocolViolation = 1,
  kFlowControl = 2,
  kIdleTimeout = 3,
  kApplication = 4,
  kInternal = 5,
};

class Connection {
 public:
  // `config` must Validate(). `now` is the creation time (starts idle timers).
  Connection(const TransportConfig& config, ConnectionIds ids, uint64_t seed, Time now);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // ---- application side ----
  // Queues a message; returns its id. Fails if the connection is closed.
  absl::StatusOr<uint64_t> Send(SendBuffer buffer, uint64_t tag);
  // Posts a buffer for the next message that has none. A message larger than the buffer
  // completes with an OutOfRange status (its bytes are discarded).
  absl::Status PostReceive(uint8_t* data, ByteCount capacity, uint64_t tag);
  // Receive-side placement by key (docs/rdma.md 7.15), for an application that knows
  // which of the peer's messages a buffer is for but not its message id (the NCCL
  // plugin: an irecv is for its comm's next message). OfferReceive offers `capacity`
  // bytes at `data` for the message the peer sends with SendBuffer::placement_key ==
  // `key` (1 .. 2^63 - 1, unique among the offers not yet ended; at most
  // ReceiveStream::kMaxOffers). A datapath that places payloads may let the peer write
  // that message there and make the buffer its posted one (AdoptOffer): the message's
  // kReceiveComplete then carries tag `key` and `data` pointing at the buffer, and ends
  // the offer. Otherwise the buffer stays untouched by the connection (the message,
  // if it comes, arrives like any other) until WithdrawOffer: the offer ends with a
  // kOfferWithdrawn event once no peer write can reach it (at once unless a datapath
  // advertised it; at once too for an offer already adopted). The memory must stay valid
  // until one of those events, or kClosed.
  absl::Status OfferReceive(uint64_t key, uint8_t* data, ByteCount capacity);
  void WithdrawOffer(uint64_t key);
  // OfferReceive's checks of its arguments alone (InvalidArgument naming the problem).
  static absl::Status CheckOffer(uint64_t key, const uint8_t* data, ByteCount capacity);
  // Gives transport-owned receive memory back for reuse.
  void ReturnBuffer(OwnedBuffer buffer);
  // Next completion or state change; false if none.
  bool PollEvent(Event* event);
  // Receive flow control and an application that stops reading. By default a message
  // stops counting against the receive credit when PollEvent hands its kReceiveComplete
  // out. A layer that queues events for an application (the datapath's ConnectionHandle)
  // turns tracking on: each such event then carries credit_units (the bytes of its
  // transport-owned memory plus kEventCreditCharge) that count against the credit until
  // OnConsumed reports them taken. An application that stops reading so stalls its
  // sender within one receive window instead of growing a queue, and an ACK carrying the
  // grown credit goes out when it reads again.
  static constexpr uint64_t kEventCreditCharge = 128;
  void SetConsumptionTracking(bool on);
  void OnConsumed(uint64_t credit_units);
  // Starts a clean close (code kNoError) or an abortive one (any other code).
  void Close(CloseCode code, std::string reason);

  // ---- driver side ----
  void OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn = Ecn::kNotEct);
  // One pass on sealed connections (the endpoint opens a payload straight into place):
  // where the payload of DATA frame `f` belongs, when all of it would be new bytes in
  // memory that exists already (ReceiveStream::Place); null otherwise. Changes nothing.
  uint8_t* PlaceData(const wire::DataFrame& f) const;
  // OnDatagram for a datagram whose DATA frame with its payload at `placed_at` (a
  // pointer into `datagram`) was opened into `placed_to`, PlaceData's answer for it: the
  // bytes at `placed_at` are then not read.
  void OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn, const uint8_t* placed_at,
                  uint8_t* placed_to);
  // Receive-side placement on checksummed (plaintext) connections (docs/rdma.md 7.15): the
  // datapath wrote the payload of the datagram's first DATA frame somewhere else. The
  // payload belongs at `payload_offset` in `datagram`, whose bytes there are not read (they
  // may be overwritten, see below), and its `length` bytes are at `payload`. The CRC32C is
  // checked by reading them there. When `payload` is exactly where the message lands
  // (PlaceData) they are not copied; when it lands elsewhere they are copied there while
  // checked (or, for a message with no memory yet, copied by the receive stream as any
  // payload). Until the checksum matches nothing counts as received, so stale or
  // half-written bytes at `payload` cost only this datagram (a lost packet). A datagram
  // whose first DATA frame is not the placed one gets the bytes back at `payload_offset`
  // and is taken as any other. kInPlace: nothing was copied (delivered where it lies, or a
  // duplicate); kCopied: copied once; kRefused: dropped and counted (checksum, malformed,
  // closed). Counted in ConnectionStats::placed_payload_bytes(_copied).
  enum class Placed { kInPlace, kCopied, kRefused };
  Placed OnPlacedDatagram(Time now, std::span<uint8_t> datagram, Ecn ecn, size_t payload_offset,
                          const uint8_t* payload, size_t length);
  // What a datapath that places payloads needs of the receive side. PostedBuffer: the
  // buffer posted for message `id` while the message is not delivered (false if none);
  // ids in [next_undelivered_id(), next_posted_id()) may have one. HoldDelivery: the
  // message is not delivered when it completes (FailedPrecondition unless it has a posted
  // buffer and is not delivered) until ReleaseDelivery, so the datapath can first revoke
  // the peer's access to that buffer; TakeHeldComplete hands out each held message that
  // completed, once.
  bool PostedBuffer(uint64_t id, uint8_t** data, ByteCount* capacity) const;
  uint64_t next_undelivered_id() const;
  uint64_t next_posted_id() const;
  absl::Status HoldDelivery(uint64_t id);
  bool TakeHeldComplete(uint64_t* id);
  void ReleaseDelivery(uint64_t id);
  // Offers (OfferReceive) as a placing datapath needs them: the offers not adopted and
  // not ended; NoteOfferPlacement: a datapath looked at one and, when `advertised`, let
  // the peer write into it (its withdrawal then waits for OfferRevoked: the datapath took
  // that access away, withdrawn or not);
  // AdoptOffer: the first direct chunk of message `id` (`length` bytes) came for `key`
  // (ReceiveStream::Adopt's errors).
  const std::vector<ReceiveOffer>& offers() const;
  void NoteOfferPlacement(uint64_t key, bool advertised);
  void OfferRevoked(uint64_t key);
  absl::Status AdoptOffer(uint64_t key, uint64_t id, ByteCount length);
  void OnTimeout(Time now);
  // Writes the next datagram into `buffer` (capacity >= MaxDatagramSize(), plus
  // wire::kSealExpansion when sealed) and returns its
  // length, or 0 when nothing may be sent at `now` (pacing, window, nothing to send).
  size_t PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info = nullptr);
  // The path's IP MTU as the driver learned it (EMSGSIZE, IP_MTU, a probe). New packets
  // use the largest segment that fits it (never more than config.segment); data already
  // in flight is resent in pieces that fit.
  void OnPathMtu(ByteCount mtu);
  // The largest datagram the driver's datapath carries now (wire size, sealing included,
  // like PollTransmit's datagrams), for a driver whose datapath changes under the
  // connection (a verbs driver whose RDMA path came up or went away). Unlike OnPathMtu
  // it may raise the size as well as lower it: the datagram size becomes `datagram` at
  // once, clamped to [64 bytes of segment plus the packet overhead, MaxDatagramSize() (+
  // wire::kSealExpansion when sealed)], and the path MTU search stops and from then on
  // stays at or under it. Data in flight is resent in pieces that fit.
  void SetDatagramLimit(ByteCount datagram);
  // Zero copy, for a driver whose datapath gathers payloads from the application's
  // registered memory (the verbs driver's UC lanes): from now on PollTransmit leaves the
  // DATA payloads of messages with a SendBuffer::region out of plaintext datagrams (their
  // CRC32C still covers them) and lists them in TransmitInfo::deferred, for the driver to
  // send from their source or copy into place. Sealed connections ignore it (the seal
  // is the one pass over the bytes). Off by default.
  void SetPayloadByReference(bool on);
  // Payload bytes per packet now (config.segment, or less after OnPathMtu or
  // SetDatagramLimit).
  ByteCount segment() const;

  // ---- driver state ----
  // A small reliable channel between the two drivers of the connection, inside its
  // (protected) packets: a verbs driver exchanges its RDMA set-up through it (queue pair
  // numbers, buffer keys, window grants). The connection never interprets the bytes.
  // Latest wins: only the newest state matters, and a newer one replaces one not yet
  // delivered. A state goes out in the next PollTransmit (NextTimeout is due at once),
  // neither paced nor held back by the window, beside data where it fits, and again
  // whenever the packet that carried it is declared lost while it is still the newest.
  // A state longer than a datagram of the current size can carry waits until the size
  // allows it (SetDatagramLimit).
  //
  // Copies `state` (at most wire::kMaxDriverState bytes) as the newest local state.
  // Errors: InvalidArgument for a longer state (naming both sizes), FailedPrecondition
  // once the connection is closing or closed (nothing of it is sent then).
  absl::Status SetDriverState(std::span<const uint8_t> state);
  // The peer's newest state, if one arrived since the last call: copies it into `out`
  // and returns true; false (out untouched) otherwise.
  bool TakePeerDriverState(std::vector<uint8_t>* out);
  // Whether TakePeerDriverState would return true.
  bool has_new_peer_driver_state() const;
  // Earliest time OnTimeout() or PollTransmit() has work; Time::Infinite() if none.
  Time NextTimeout() const;
  // NextTimeout for a driver that batches: a pacing release is taken `quantum` bytes'
  // time at the pacing rate later (at most half of config.pacing_burst), so that waking
  // then finds a batch of datagrams due (the pacer lets a late sender catch up). Other
  // deadlines are unchanged; quantum 0 is NextTimeout.
  Time NextWake(ByteCount quantum) const;
  // NextTimeout() and NextWake(quantum) in one pass.
  void Deadlines(ByteCount quantum, Time* timeout, Time* wake) const;

  // ---- introspection ----
  const TransportConfig& config() const;
  const ConnectionStats& stats() const;
  ConnectionDebugState debug_state() const;
  bool closed() const;
  // Stream units (a message's max(size, 1)) submitted, and those sent at least once:
  // their difference is the backlog not yet sent (both only grow).
  uint64_t stream_units_submitted() const;
  uint64_t stream_units_sent() const;
  // Messages submitted but not yet send-complete, and their bytes.
  uint64_t pending_send_messages() const;
  ByteCount pending_send_bytes() const;
  // Messages the receiver has not yet delivered (including ones not started).
  uint64_t posted_receives() const;
  // The highest packet number of ours the peer acknowledged; -1 before the first ACK.
  // (The endpoint's key updates wait for the peer to acknowledge the current key.)
  int64_t largest_acked_packet() const;

 private:
  std::unique_ptr<ConnectionImpl> impl_;
};

}  // namespace longhaul
