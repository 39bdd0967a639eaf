// The receiver's message reassembly and in-order delivery.
//
// DATA pieces land in place: in the buffer posted for their message (posted buffers
// match messages in order), or in transport-owned memory when none was posted. Duplicate
// bytes are detected per message and dropped. Messages are delivered whole and in order:
// a complete message waits for every earlier one, unless its DATA frames carry the
// unordered flag, in which case it is delivered as soon as it is complete (its slot
// stays, marked delivered, until every earlier message was delivered too, so ids,
// posted buffers and the credit keep their meaning). The receive credit (flow control) is
// the stream offset of the first undelivered unit plus the receive window; pieces beyond
// it, or inconsistent with what arrived before, are protocol violations. Delivered
// messages the application has not consumed yet (AddUnconsumed / Consumed) are taken
// off that credit, and the credit advertised never shrinks (GrantCredit).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <algorithm>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "transport/base/interval_set.h"
#include "transport/base/units.h"
#include "transport/core/connection.h"
#include "transport/wire/packet.h"

namespace longhaul {

class ReceiveStream {
 public:
  ReceiveStream(ByteCount recv_window, uint64_t max_messages)
      : recv_window_(recv_window), max_messages_(max_messages) {}

  // Handles one DATA frame. Returns the new payload bytes (duplicates excluded), or a
  // protocol error (FailedPrecondition: flow control, InvalidArgument: inconsistent).
  absl::StatusOr<uint64_t> OnData(const wire::DataFrame& f);

  // Where the payload of DATA frame `f` would land if OnData accepted it now, when all of
  // it would be new bytes in memory that already exists (a started message's buffer, or
  // the buffer posted for it); null otherwise (including anything OnData would refuse).
  // Changes nothing: the frame is not authenticated yet. A one-pass opener decrypts the
  // payload there, and OnData then finds it in place (a frame whose payload pointer is
  // its landing place is not copied).
  uint8_t* Place(const wire::DataFrame& f) const;

  absl::Status Post(uint8_t* data, ByteCount capacity, uint64_t tag);
  // The buffer posted for message `id`, while the message is not delivered; false if none.
  bool PostedFor(uint64_t id, uint8_t** data, ByteCount* capacity) const;
  // Ids below this have a posted buffer or were delivered (Post's next id).
  uint64_t next_posted_id() const { return posted_next_id_; }
  uint64_t next_undelivered_id() const { return next_id_; }

  // Held delivery (receive-side placement, docs/rdma.md 7.15): a message whose posted
  // buffer a datapath let the peer write into is not delivered when it completes until
  // the datapath has revoked that access. Hold: FailedPrecondition unless `id` has a
  // posted buffer and is not delivered. TakeHeldComplete: the next held message that
  // completed (each once). Release: deliverable again (a no-op for an unknown id).
  absl::Status Hold(uint64_t id);
  bool TakeHeldComplete(uint64_t* id);
  void Release(uint64_t id);
  void ReturnBuffer(OwnedBuffer b);

  // Offered buffers (Connection::OfferReceive; docs/rdma.md 7.15): a buffer for the
  // message the peer sends under `key`, which only a datapath that places payloads can
  // tell (the key travels with its direct chunks). Adopt: the offer becomes the posted
  // buffer of message `id` (`length` bytes), held (FailedPrecondition when the message
  // was delivered, already has a posted buffer, or is another length than it began with;
  // OutOfRange when it does not fit; NotFound for no such offer, or one being withdrawn).
  // Withdraw: the application takes an offer back; its kOfferWithdrawn comes at once
  // unless a datapath advertised it (NotePlacement), then after OfferRevoked. An
  // adopted or unknown key answers at once too (an adopted offer ends with its
  // message's kReceiveComplete).
  using Offer = ReceiveOffer;
  static constexpr size_t kMaxOffers = 1024;
  absl::Status AddOffer(uint64_t key, uint8_t* data, ByteCount capacity);
  absl::Status Adopt(uint64_t key, uint64_t id, ByteCount length);
  void Withdraw(uint64_t key);
  void NotePlacement(uint64_t key, bool advertised);
  // The datapath took the peer's access to the offer away (withdrawn, or its link went).
  void OfferRevoked(uint64_t key);
  const std::vector<Offer>& offers() const { return offers_; }
  // The next kOfferWithdrawn event due (status OK); then, on close (`why` not OK), one
  // for every offer left, with that status. False when none.
  bool PopWithdrawn(const absl::Status& why, Event* e);

  // Next deliverable message: a complete unordered one, else the next in order; false
  // if none.
  bool PopDelivered(Event* e);
  // On close: the next posted buffer that will not be filled, as a Cancelled completion
  // carrying its tag (and `data` pointing at the buffer); false when none is left.
  bool PopCancelledPost(const absl::Status& why, Event* e);

  // Flow-control credit to advertise: the sender may send units below this. It is the
  // in-order frontier (every unit below it has arrived) plus the receive window, so the
  // span the receiver must reassemble is bounded by the window even for messages larger
  // than it.
  // Delivered events still held by the application (credit units; see
  // Connection::SetConsumptionTracking) reduce it; it never falls below what was
  // advertised already.
  uint64_t max_stream() const {
    const uint64_t f = Frontier();
    return std::max(granted_, f - std::min(f, unconsumed_) + recv_window_);
  }
  // The credit as an ACK carries it: max_stream(), remembered as advertised.
  uint64_t GrantCredit() {
    granted_ = max_stream();
    return granted_;
  }
  // The credit grew by a quarter of the window since it was last advertised (the
  // application took what it held): worth an ACK of its own, the sender may be waiting.
  bool CreditUpdateDue() const {
    return max_stream() >= granted_ + std::max<uint64_t>(recv_window_ / 4, 1);
  }
  void AddUnconsumed(uint64_t units) { unconsumed_ += units; }
  void Consumed(uint64_t units) { unconsumed_ -= std::min(units, unconsumed_); }
  uint64_t unconsumed() const { return unconsumed_; }
  uint64_t posted_count() const;

 private:
  struct Posted {
    uint8_t* data = nullptr;
    ByteCount capacity = 0;
    uint64_t tag = 0;
    bool valid = false;
    bool held = false;  // Hold: not delivered until Release
  };
  bool Held(uint64_t id) const {
    return id >= next_id_ && id - next_id_ < posted_.size() && posted_[id - next_id_].held;
  }
  struct Message {
    bool started = false;
    bool complete = false;
    bool too_large = false;
    bool unordered = false;
    bool delivered = false;  // unordered, handed over before earlier messages
    uint64_t base = 0;
    ByteCount size = 0;
    uint64_t units = 0;
    uint64_t received_units = 0;
    uint8_t* dest = nullptr;  // posted buffer or owned.data()
    bool in_posted = false;
    OwnedBuffer owned;
    IntervalSet received;  // units received, when not in order
    uint64_t contiguous = 0;  // units [0, contiguous) received
    bool elided = false;      // its DATA frames carry stamps, not bytes (no memory)
    uint64_t stamp_digest = 0;  // sum of wire::StampTerm over the stamps accepted
  };
  // Lands the frame's bytes (or, elided, its stamps) for message units [from, to).
  static void Land(Message& m, const wire::DataFrame& f, uint64_t from, uint64_t to);

  Message& Slot(uint64_t id);
  // Builds the delivery event of message `id` (its slot `m`, its posted buffer `p`).
  void MakeDelivery(uint64_t id, Message& m, const Posted& p, Event* e);
  // Drops delivered messages from the front, advancing next_id_.
  void AdvanceFront();
  uint64_t Frontier() const;
  OwnedBuffer Allocate(ByteCount size);
  // Transport-owned bytes held for messages not yet delivered, and the bound on them.
  ByteCount owned_outstanding_ = 0;
  ByteCount OwnedLimit() const {
    return std::max<ByteCount>(2 * recv_window_, ByteCount{1} << 30);
  }

  ByteCount recv_window_;
  uint64_t max_messages_;
  uint64_t granted_ = recv_window_;  // the largest credit advertised (the peer starts with this)
  uint64_t unconsumed_ = 0;          // delivered, not yet consumed by the application
  uint64_t next_id_ = 0;            // next message to deliver
  uint64_t delivered_units_ = 0;    // stream units delivered
  std::deque<Message> messages_;    // ids next_id_ .. next_id_ + size - 1
  std::deque<Posted> posted_;       // ids next_id_ .. ; may be longer than messages_
  std::deque<uint64_t> ready_;      // complete unordered messages not yet delivered
  std::deque<uint64_t> held_complete_;  // held messages that completed, for TakeHeldComplete
  uint64_t posted_next_id_ = 0;     // id the next Post() is for
  std::vector<OwnedBuffer> pool_;   // returned owned buffers
  std::vector<Offer> offers_;       // not adopted, not yet handed back
  std::deque<Offer> withdrawn_;     // handed back, their events due
  // The offer with `key`, or offers_.end().
  std::vector<Offer>::iterator FindOffer(uint64_t key) {
    return std::find_if(offers_.begin(), offers_.end(),
                        [key](const Offer& o) { return o.key == key; });
  }
};

}  // namespace longhaul
