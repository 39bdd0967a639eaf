// The sender's view of the message stream.
//
// Messages are laid end to end in a connection-wide stream of "units": a message of n
// bytes takes max(n, 1) units (a zero-byte message takes one unit that carries no byte,
// so it can be sent, acknowledged and repaired like any other). Packets carry contiguous
// unit ranges; the stream tracks what was never sent, what must be resent, and what was
// acknowledged. A message is send-complete when every unit up to its end is acknowledged,
// so completions come in submission order.
//
// Message bytes are read in place from the caller's memory until completion (zero copy).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "transport/base/interval_set.h"
#include "transport/base/units.h"

namespace longhaul {

struct SendMessage {
  uint64_t id = 0;
  uint64_t base = 0;   // first stream unit
  uint64_t units = 0;  // max(size, 1)
  ByteCount size = 0;
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> owner;
  uint64_t tag = 0;
  bool unordered = false;  // the receiver may deliver it before earlier messages
  uint64_t region = 0;     // SendBuffer::region
  uint64_t placement_key = 0;  // SendBuffer::placement_key
};

// One piece of a message within a unit range, for building DATA frames.
struct MessagePiece {
  const SendMessage* message = nullptr;
  uint64_t offset = 0;  // byte offset in the message
  uint64_t length = 0;  // payload bytes (0 for a zero-byte message)
  uint64_t units = 0;   // stream units covered
  bool last = false;
};

class SendStream {
 public:
  // Appends a message; returns its id.
  uint64_t Push(const uint8_t* data, ByteCount size, std::shared_ptr<const void> owner,
                uint64_t tag, bool unordered = false, uint64_t region = 0,
                uint64_t placement_key = 0);

  uint64_t stream_end() const { return end_; }
  uint64_t next_unsent() const { return next_unsent_; }
  bool has_unsent() const { return next_unsent_ < end_; }
  bool has_retransmissions() const { return !retransmit_.empty(); }
  uint64_t pending_messages() const { return messages_.size(); }
  ByteCount pending_bytes() const { return pending_bytes_; }

  // Message-count flow control: whether the message holding next_unsent() may be sent
  // when at most `max_inflight` messages may be outstanding (its id is below the first
  // pending message's id + max_inflight). Requires has_unsent().
  bool NextUnsentMessageAllowed(uint32_t max_inflight) const {
    // Every pending message is within the limit when there are no more of them than it.
    if (messages_.size() <= max_inflight) return true;
    return MessageAt(next_unsent_).id < next_id_ - messages_.size() + max_inflight;
  }

  // The message containing stream unit u (u < stream_end(), not yet completed).
  const SendMessage& MessageAt(uint64_t unit) const;
  // The piece of the message at `unit`, at most max_units long and not crossing the
  // message's end.
  MessagePiece PieceAt(uint64_t unit, uint64_t max_units) const;

  // Claims up to max_units of never-sent units (never crossing a message boundary) and
  // returns their start, or false if none. limit: flow-control bound (exclusive).
  bool TakeUnsent(uint64_t max_units, uint64_t limit, uint64_t* start, uint64_t* units);
  // Claims the lowest range queued for retransmission (never crossing a message boundary).
  bool TakeRetransmission(uint64_t max_units, uint64_t* start, uint64_t* units);
  // Queues a lost range for retransmission (minus anything already acknowledged).
  void QueueRetransmission(uint64_t start, uint64_t units);
  // Records acknowledgement of a range. Returns the units newly acknowledged.
  uint64_t Ack(uint64_t start, uint64_t units);
  // Pops the next message whose every unit is acknowledged; false if none.
  bool PopCompleted(SendMessage* out);
  // Pops the oldest pending message whether or not it was acknowledged (connection close).
  bool PopPending(SendMessage* out);
  bool IsAcked(uint64_t start, uint64_t units) const {
    return start + units <= cum_acked_ || acked_.ContainsRange(start, start + units);
  }

 private:
  std::deque<SendMessage> messages_;  // not yet completed, by id
  mutable uint64_t hint_id_ = 0;      // message of the last MessageAt lookup
  uint64_t first_id_ = 0;             // id of messages_.front()
  uint64_t next_id_ = 0;
  uint64_t end_ = 0;                  // stream units submitted
  uint64_t next_unsent_ = 0;
  uint64_t cum_acked_ = 0;            // every unit below is acknowledged
  IntervalSet acked_;                 // acknowledged units >= cum_acked_
  IntervalSet retransmit_;            // units to resend
  ByteCount pending_bytes_ = 0;
};

}  // namespace longhaul
