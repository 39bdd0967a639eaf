#include "transport/core/send/send_stream.h"

#include <algorithm>

#include "glog/logging.h"

namespace longhaul {

uint64_t SendStream::Push(const uint8_t* data, ByteCount size, std::shared_ptr<const void> owner,
                          uint64_t tag, bool unordered, uint64_t region,
                          uint64_t placement_key) {
  SendMessage m;
  m.id = next_id_++;
  m.base = end_;
  m.units = size == 0 ? 1 : size;
  m.size = size;
  m.data = data;
  m.owner = std::move(owner);
  m.tag = tag;
  m.unordered = unordered;
  m.region = region;
  m.placement_key = placement_key;
  end_ += m.units;
  pending_bytes_ += size;
  messages_.push_back(std::move(m));
  return messages_.back().id;
}

const SendMessage& SendStream::MessageAt(uint64_t unit) const {
  DCHECK_GE(unit, cum_acked_ > 0 ? messages_.front().base : 0);
  DCHECK_LT(unit, end_);
  // Lookups walk forward (the next unsent unit, repairs near it): try the message of the
  // last lookup and the one after it before searching.
  const uint64_t front_id = next_id_ - messages_.size();
  if (hint_id_ >= front_id) {
    for (uint64_t i = hint_id_ - front_id; i < messages_.size() && i <= hint_id_ - front_id + 1;
         ++i) {
      const SendMessage& m = messages_[i];
      if (unit >= m.base && unit < m.base + m.units) {
        hint_id_ = m.id;
        return m;
      }
    }
  }
  // Messages are contiguous and sorted by base: binary search.
  auto it = std::upper_bound(messages_.begin(), messages_.end(), unit,
                             [](uint64_t u, const SendMessage& m) { return u < m.base; });
  CHECK(it != messages_.begin()) << "unit " << unit << " precedes pending messages";
  hint_id_ = std::prev(it)->id;
  return *std::prev(it);
}

MessagePiece SendStream::PieceAt(uint64_t unit, uint64_t max_units) const {
  const SendMessage& m = MessageAt(unit);
  MessagePiece p;
  p.message = &m;
  uint64_t rel = unit - m.base;
  p.units = std::min<uint64_t>(max_units, m.units - rel);
  p.offset = m.size == 0 ? 0 : rel;
  p.length = m.size == 0 ? 0 : p.units;
  p.last = rel + p.units == m.units;
  return p;
}

bool SendStream::TakeUnsent(uint64_t max_units, uint64_t limit, uint64_t* start,
                            uint64_t* units) {
  uint64_t avail_end = std::min(end_, limit);
  if (next_unsent_ >= avail_end || max_units == 0) return false;
  const SendMessage& m = MessageAt(next_unsent_);
  uint64_t n = std::min({max_units, avail_end - next_unsent_, m.base + m.units - next_unsent_});
  *start = next_unsent_;
  *units = n;
  next_unsent_ += n;
  return true;
}

bool SendStream::TakeRetransmission(uint64_t max_units, uint64_t* start, uint64_t* units) {
  while (!retransmit_.empty()) {
    auto [s, e] = retransmit_.front();
    // Skip what was acknowledged after being queued (a late ACK of the original).
    if (e <= cum_acked_) {
      retransmit_.Remove(s, e);
      continue;
    }
    if (s < cum_acked_) {
      retransmit_.Remove(s, cum_acked_);
      continue;
    }
    const SendMessage& m = MessageAt(s);
    uint64_t n = std::min({max_units, e - s, m.base + m.units - s});
    if (n == 0) return false;
    retransmit_.Remove(s, s + n);
    if (acked_.ContainsRange(s, s + n)) continue;
    *start = s;
    *units = n;
    return true;
  }
  return false;
}

void SendStream::QueueRetransmission(uint64_t start, uint64_t units) {
  uint64_t end = start + units;
  if (end <= cum_acked_) return;
  if (start < cum_acked_) start = cum_acked_;
  if (acked_.ContainsRange(start, end)) return;
  retransmit_.Add(start, end);
}

uint64_t SendStream::Ack(uint64_t start, uint64_t units) {
  uint64_t end = start + units;
  if (end <= cum_acked_) return 0;
  if (start <= cum_acked_ && acked_.empty()) {  // in-order fast path
    uint64_t added = end - cum_acked_;
    cum_acked_ = end;
    return added;
  }
  if (start < cum_acked_) start = cum_acked_;
  uint64_t added = acked_.Add(start, end);
  // Advance the cumulative point over the lowest interval if it starts there.
  if (!acked_.empty()) {
    auto [s, e] = acked_.front();
    if (s <= cum_acked_) {
      cum_acked_ = e;
      acked_.EraseBelow(e);
    }
  }
  return added;
}

bool SendStream::PopPending(SendMessage* out) {
  if (messages_.empty()) return false;
  *out = std::move(messages_.front());
  messages_.pop_front();
  ++first_id_;
  pending_bytes_ -= out->size;
  return true;
}

bool SendStream::PopCompleted(SendMessage* out) {
  if (messages_.empty()) return false;
  const SendMessage& m = messages_.front();
  if (m.base + m.units > cum_acked_) return false;
  *out = std::move(messages_.front());
  messages_.pop_front();
  ++first_id_;
  pending_bytes_ -= out->size;
  return true;
}

}  // namespace longhaul
