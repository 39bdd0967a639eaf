#include "transport/core/recv/receive_stream.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace longhaul {

ReceiveStream::Message& ReceiveStream::Slot(uint64_t id) {
  DCHECK_GE(id, next_id_);
  uint64_t idx = id - next_id_;
  while (messages_.size() <= idx) messages_.emplace_back();
  return messages_[idx];
}

uint64_t ReceiveStream::Frontier() const {
  if (messages_.empty() || !messages_.front().started) return delivered_units_;
  const Message& m = messages_.front();
  uint64_t prefix = m.contiguous;
  if (!m.received.empty() && m.received.front().first == 0) prefix = m.received.front().second;
  return m.base + prefix;
}

OwnedBuffer ReceiveStream::Allocate(ByteCount size) {
  // Reuse a returned buffer of a fitting size (at most twice as large).
  for (size_t i = pool_.size(); i-- > 0;) {
    if (pool_[i].capacity() >= size && pool_[i].capacity() <= 2 * size + 4096) {
      OwnedBuffer b = std::move(pool_[i]);
      pool_[i] = std::move(pool_.back());
      pool_.pop_back();
      return b;
    }
  }
  return OwnedBuffer::TryAllocate(size);
}

void ReceiveStream::ReturnBuffer(OwnedBuffer b) {
  if (!b || pool_.size() >= 64) return;
  pool_.push_back(std::move(b));
}

absl::Status ReceiveStream::Post(uint8_t* data, ByteCount capacity, uint64_t tag) {
  if (data == nullptr && capacity > 0) {
    return absl::InvalidArgumentError("PostReceive: null buffer with non-zero capacity");
  }
  // Skip messages already delivered out of order: the buffer is for the next one that
  // was not.
  // Skip too those that adopted an offer.
  uint64_t id = posted_next_id_++;
  while ((id - next_id_ < messages_.size() && messages_[id - next_id_].delivered) ||
         (id - next_id_ < posted_.size() && posted_[id - next_id_].valid)) {
    id = posted_next_id_++;
  }
  uint64_t idx = id - next_id_;
  while (posted_.size() <= idx) posted_.emplace_back();
  posted_[idx] = Posted{data, capacity, tag, true};
  // A message already arriving in owned memory is copied over at delivery.
  return absl::OkStatus();
}

uint8_t* ReceiveStream::Place(const wire::DataFrame& f) const {
  if (f.elided() || f.length == 0 || f.message_id < next_id_) return nullptr;
  const uint64_t idx = f.message_id - next_id_;
  if (idx >= max_messages_ || f.offset > f.message_length ||
      f.length > f.message_length - f.offset ||
      f.stream_base + f.offset + f.length > max_stream()) {
    return nullptr;
  }
  if (idx < messages_.size() && messages_[idx].started) {
    const Message& m = messages_[idx];
    if (m.complete || m.dest == nullptr || m.elided || m.base != f.stream_base ||
        m.size != f.message_length || m.unordered != f.unordered()) {
      return nullptr;
    }
    const uint64_t start = f.offset, end = f.offset + f.length;
    if (m.received.empty() ? start < m.contiguous : m.received.Overlaps(start, end)) {
      return nullptr;
    }
    return m.dest + start;
  }
  // The message's first piece: only into a buffer posted for it (OnData takes the same).
  if (idx < posted_.size() && posted_[idx].valid && posted_[idx].capacity >= f.message_length) {
    return posted_[idx].data + f.offset;
  }
  return nullptr;
}

uint64_t ReceiveStream::posted_count() const { return posted_next_id_ - next_id_; }

bool ReceiveStream::PostedFor(uint64_t id, uint8_t** data, ByteCount* capacity) const {
  if (id < next_id_ || id - next_id_ >= posted_.size() || !posted_[id - next_id_].valid) {
    return false;
  }
  const uint64_t idx = id - next_id_;
  if (idx < messages_.size() && messages_[idx].delivered) return false;
  *data = posted_[idx].data;
  *capacity = posted_[idx].capacity;
  return true;
}

absl::Status ReceiveStream::Hold(uint64_t id) {
  uint8_t* data = nullptr;
  ByteCount capacity = 0;
  if (!PostedFor(id, &data, &capacity)) {
    return absl::FailedPreconditionError(
        absl::StrCat("hold: message ", id, " has no posted buffer waiting for it"));
  }
  const uint64_t idx = id - next_id_;
  if (posted_[idx].held) return absl::OkStatus();
  posted_[idx].held = true;
  if (idx < messages_.size() && messages_[idx].complete) held_complete_.push_back(id);
  return absl::OkStatus();
}

bool ReceiveStream::TakeHeldComplete(uint64_t* id) {
  while (!held_complete_.empty()) {
    const uint64_t h = held_complete_.front();
    held_complete_.pop_front();
    if (!Held(h)) continue;  // released, or cancelled at close
    *id = h;
    return true;
  }
  return false;
}

void ReceiveStream::Release(uint64_t id) {
  if (Held(id)) posted_[id - next_id_].held = false;
}

absl::StatusOr<uint64_t> ReceiveStream::OnData(const wire::DataFrame& f) {
  if (f.message_id < next_id_) return 0;  // already delivered: a late duplicate
  if (f.message_id - next_id_ >= max_messages_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "message ", f.message_id, " is beyond the receive limit of ", max_messages_,
        " messages ahead of ", next_id_));
  }
  const uint64_t units = f.message_length == 0 ? 1 : f.message_length;
  const uint64_t piece_end = f.stream_base + f.offset + (f.message_length == 0 ? 1 : f.length);
  if (piece_end > max_stream()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data of message ", f.message_id, " exceeds the receive credit (stream unit ",
        piece_end, " > ", max_stream(), ")"));
  }
  Message& m = Slot(f.message_id);
  if (!m.started) {
    m.started = true;
    m.elided = f.elided();
    m.unordered = f.unordered();
    m.base = f.stream_base;
    m.size = f.message_length;
    m.units = units;
    uint64_t idx = f.message_id - next_id_;
    if (idx < posted_.size() && posted_[idx].valid) {
      if (posted_[idx].capacity < m.size) {
        m.too_large = true;
      } else {
        m.dest = posted_[idx].data;
        m.in_posted = true;
      }
    } else if (m.size > 0 && !m.elided) {
      // No posted buffer: transport-owned memory, bounded so a peer cannot make the
      // receiver allocate without limit (announcing a huge message costs it nothing).
      if (owned_outstanding_ + m.size > OwnedLimit()) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "message ", f.message_id, " of ", m.size,
            " bytes needs a posted receive buffer: transport-owned memory for undelivered "
            "messages is limited to max(2 x recv_window, 1 GiB) (",
            OwnedLimit(), " bytes), ", owned_outstanding_, " in use"));
      }
      m.owned = Allocate(m.size);
      if (!m.owned) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot allocate ", m.size, " bytes for message ", f.message_id));
      }
      m.dest = m.owned.data();
      owned_outstanding_ += m.size;
    }
  } else if (m.base != f.stream_base || m.size != f.message_length ||
             m.unordered != f.unordered() || (m.elided != f.elided() && f.length > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "message ", f.message_id, " changed size, position, ordering or elision (", m.size,
        " bytes at ", m.base, m.unordered ? " unordered" : "", " vs ", f.message_length, " at ",
        f.stream_base, f.unordered() ? " unordered" : "", ")"));
  }
  if (m.complete) return 0;
  // Units of this piece: bytes, or the single unit of a zero-byte message.
  uint64_t start = f.offset, end = f.offset + (m.size == 0 ? 1 : f.length);
  if (end == start) return 0;
  uint64_t fresh;
  if (start <= m.contiguous && m.received.empty()) {
    // In-order fast path.
    fresh = end > m.contiguous ? end - m.contiguous : 0;
    if (fresh > 0 && m.size > 0) Land(m, f, m.contiguous, end);
    if (end > m.contiguous) m.contiguous = end;
  } else {
    // Out of order: copy only the parts not already present.
    uint64_t before = m.received.total();
    if (m.received.empty() && m.contiguous > 0) m.received.Add(0, m.contiguous);
    before = m.received.total();
    if (m.size > 0) {
      // Walk the gaps of [start, end) in the set and land each.
      uint64_t pos = start;
      const auto& iv = m.received.intervals();
      auto it = iv.upper_bound(pos);
      if (it != iv.begin()) {
        auto prev = std::prev(it);
        if (prev->second > pos) pos = prev->second;
      }
      while (pos < end) {
        uint64_t gap_end = (it != iv.end() && it->first < end) ? it->first : end;
        if (gap_end > pos) Land(m, f, pos, gap_end);
        if (it == iv.end() || it->first >= end) break;
        pos = it->second;
        ++it;
      }
    }
    m.received.Add(start, end);
    fresh = m.received.total() - before;
    // Collapse back to the fast path when everything so far is contiguous.
    if (m.received.interval_count() == 1 && m.received.front().first == 0) {
      m.contiguous = m.received.front().second;
      m.received.clear();
    }
  }
  m.received_units += fresh;
  if (m.received_units == m.units) {
    m.complete = true;
    if (m.unordered) ready_.push_back(f.message_id);
    if (Held(f.message_id)) held_complete_.push_back(f.message_id);
  }
  return m.size == 0 ? 0 : fresh;
}

void ReceiveStream::Land(Message& m, const wire::DataFrame& f, uint64_t from, uint64_t to) {
  if (!f.elided()) {
    // A payload already opened into place (Place) is not copied onto itself.
    const uint8_t* src = f.payload + (from - f.offset);
    if (m.dest != nullptr && m.dest + from != src) std::memcpy(m.dest + from, src, to - from);
    return;
  }
  // Stamp i of the frame sits at message position first + i x kStampInterval.
  constexpr uint64_t kI = wire::kStampInterval;
  const uint64_t first = (f.offset + kI - 1) / kI * kI;
  for (uint64_t q = (from + kI - 1) / kI * kI; q < to; q += kI) {
    const uint8_t* stamp = f.payload + (q - first) / kI * wire::kStampWidth;
    m.stamp_digest += wire::StampTerm(q, stamp, std::min(wire::kStampWidth, m.size - q));
  }
}

absl::Status ReceiveStream::AddOffer(uint64_t key, uint8_t* data, ByteCount capacity) {
  if (absl::Status s = Connection::CheckOffer(key, data, capacity); !s.ok()) return s;
  if (FindOffer(key) != offers_.end()) {
    return absl::AlreadyExistsError(absl::StrCat("OfferReceive: key ", key, " is offered already"));
  }
  if (offers_.size() >= kMaxOffers) {
    return absl::ResourceExhaustedError(
        absl::StrCat("OfferReceive: ", kMaxOffers, " buffers are offered already"));
  }
  offers_.push_back(Offer{key, data, capacity});
  return absl::OkStatus();
}

absl::Status ReceiveStream::Adopt(uint64_t key, uint64_t id, ByteCount length) {
  auto o = FindOffer(key);
  if (o == offers_.end() || o->withdrawing) {
    return absl::NotFoundError(absl::StrCat("no buffer is offered under key ", key));
  }
  if (id < next_id_ || id - next_id_ >= max_messages_) {
    return absl::FailedPreconditionError(
        absl::StrCat("message ", id, " was delivered or is beyond the receive limit"));
  }
  const uint64_t idx = id - next_id_;
  if (idx < messages_.size() && (messages_[idx].delivered || messages_[idx].too_large ||
                                 (messages_[idx].started && messages_[idx].size != length))) {
    return absl::FailedPreconditionError(
        absl::StrCat("message ", id, " was delivered or began with another length"));
  }
  if (idx < posted_.size() && posted_[idx].valid) {
    return absl::FailedPreconditionError(
        absl::StrCat("message ", id, " has a posted buffer already"));
  }
  if (o->capacity < length) {
    return absl::OutOfRangeError(absl::StrCat("message ", id, " of ", length,
                                              " bytes does not fit the buffer offered under key ",
                                              key, " (", o->capacity, " bytes)"));
  }
  while (posted_.size() <= idx) posted_.emplace_back();
  posted_[idx] = Posted{o->data, o->capacity, key, true, /*held=*/true};
  // A message already arriving in owned memory is copied over at delivery.
  if (idx < messages_.size() && messages_[idx].complete) held_complete_.push_back(id);
  offers_.erase(o);
  return absl::OkStatus();
}

void ReceiveStream::Withdraw(uint64_t key) {
  auto o = FindOffer(key);
  if (o == offers_.end()) {
    withdrawn_.push_back(Offer{key});  // adopted (its message ends it) or unknown
    return;
  }
  if (o->advertised) {
    o->withdrawing = true;  // the datapath revokes, then OfferRevoked
    return;
  }
  withdrawn_.push_back(*o);
  offers_.erase(o);
}

void ReceiveStream::NotePlacement(uint64_t key, bool advertised) {
  auto o = FindOffer(key);
  if (o == offers_.end()) return;
  o->considered = true;
  o->advertised = advertised;
}

void ReceiveStream::OfferRevoked(uint64_t key) {
  auto o = FindOffer(key);
  if (o == offers_.end()) return;
  o->advertised = false;
  if (!o->withdrawing) return;  // still offered; it may be advertised again
  withdrawn_.push_back(*o);
  offers_.erase(o);
}

bool ReceiveStream::PopWithdrawn(const absl::Status& why, Event* e) {
  Offer o;
  absl::Status status;  // OK: withdrawn by the application
  if (!withdrawn_.empty()) {
    o = withdrawn_.front();
    withdrawn_.pop_front();
  } else if (!why.ok() && !offers_.empty()) {
    o = offers_.front();
    offers_.erase(offers_.begin());
    status = why;
  } else {
    return false;
  }
  *e = Event{};
  e->type = Event::Type::kOfferWithdrawn;
  e->tag = o.key;
  e->data = o.data;
  e->size = o.capacity;
  e->status = status;
  return true;
}

bool ReceiveStream::PopCancelledPost(const absl::Status& why, Event* e) {
  while (!posted_.empty()) {
    Posted p = posted_.front();
    posted_.pop_front();
    const uint64_t id = next_id_++;
    if (!messages_.empty()) messages_.pop_front();
    if (!p.valid) continue;
    *e = Event{};
    e->type = Event::Type::kReceiveComplete;
    e->message_id = id;
    e->tag = p.tag;
    e->data = p.data;
    e->status = why;
    return true;
  }
  return false;
}

void ReceiveStream::MakeDelivery(uint64_t id, Message& m, const Posted& p, Event* e) {
  if (m.owned) owned_outstanding_ -= m.size;
  *e = Event{};
  e->type = Event::Type::kReceiveComplete;
  e->message_id = id;
  e->size = m.size;
  e->stamp_digest = m.stamp_digest;
  if (p.valid) {
    e->tag = p.tag;
    if (m.too_large || p.capacity < m.size) {
      e->status = absl::OutOfRangeError(absl::StrCat("message ", id, " of ", m.size,
                                                     " bytes does not fit the posted buffer of ",
                                                     p.capacity, " bytes"));
      ReturnBuffer(std::move(m.owned));
    } else {
      if (!m.in_posted && m.size > 0 && m.owned) {
        // Posted after the message began arriving in owned memory: copy it over.
        std::memcpy(p.data, m.owned.data(), m.size);
        ReturnBuffer(std::move(m.owned));
      }
      e->data = p.data;
    }
  } else {
    if (m.owned) {
      m.owned.set_size(m.size);
      e->data = m.owned.data();
      e->owned = std::move(m.owned);
    }
  }
  m.dest = nullptr;
}

void ReceiveStream::AdvanceFront() {
  while (!messages_.empty() && messages_.front().delivered) {
    const Message& m = messages_.front();
    delivered_units_ = m.base + m.units;
    messages_.pop_front();
    if (!posted_.empty()) posted_.pop_front();
    ++next_id_;
  }
  if (posted_next_id_ < next_id_) posted_next_id_ = next_id_;
}

bool ReceiveStream::PopDelivered(Event* e) {
  // Complete unordered messages first, wherever they are (a held one waits its turn).
  for (size_t i = 0; i < ready_.size(); ++i) {
    const uint64_t id = ready_[i];
    if (id >= next_id_ && Held(id)) continue;
    ready_.erase(ready_.begin() + static_cast<ptrdiff_t>(i));
    --i;
    if (id < next_id_) continue;  // dropped by PopCancelledPost at close
    const uint64_t idx = id - next_id_;
    Message& m = messages_[idx];
    if (m.delivered) continue;
    Posted p;
    if (idx < posted_.size()) {
      p = posted_[idx];
      posted_[idx].valid = false;  // used; never cancelled
    }
    MakeDelivery(id, m, p, e);
    m.delivered = true;
    AdvanceFront();
    return true;
  }
  if (messages_.empty() || !messages_.front().complete || messages_.front().unordered ||
      Held(next_id_)) {
    return false;
  }
  Message m = std::move(messages_.front());
  messages_.pop_front();
  Posted p;
  if (!posted_.empty()) {
    p = posted_.front();
    posted_.pop_front();
  }
  if (posted_next_id_ <= next_id_) posted_next_id_ = next_id_ + 1;
  MakeDelivery(next_id_, m, p, e);
  ++next_id_;
  delivered_units_ = m.base + m.units;
  AdvanceFront();
  return true;
}

}  // namespace longhaul
