#include "transport/emu/release_queue.h"

#include <algorithm>

namespace longhaul::emu {

ReleaseQueue::ReleaseQueue() : ring_(1024) {}

void ReleaseQueue::GrowRing() {
  std::vector<PendingDatagram> bigger(ring_.size() * 2);
  for (size_t i = 0; i < fifo_size_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
  ring_.swap(bigger);
  head_ = 0;
}

void ReleaseQueue::Push(PendingDatagram d, bool in_order) {
  d.seq = next_seq_++;
  if (in_order && d.deliver_ns >= fifo_last_ns_) {
    if (fifo_size_ == ring_.size()) GrowRing();
    ring_[(head_ + fifo_size_) & (ring_.size() - 1)] = d;
    ++fifo_size_;
    fifo_last_ns_ = d.deliver_ns;
    return;
  }
  heap_.push_back(d);
  std::push_heap(heap_.begin(), heap_.end(), Later);
}

int64_t ReleaseQueue::NextDeadline() const {
  int64_t t = kNever;
  if (fifo_size_ > 0) t = FifoFront().deliver_ns;
  if (!heap_.empty()) t = std::min(t, heap_.front().deliver_ns);
  return t;
}

bool ReleaseQueue::PopDue(int64_t now_ns, PendingDatagram* out) {
  const bool fifo = fifo_size_ > 0 && FifoFront().deliver_ns <= now_ns;
  const bool heap = !heap_.empty() && heap_.front().deliver_ns <= now_ns;
  if (!fifo && !heap) return false;
  if (fifo && (!heap || !Later(FifoFront(), heap_.front()))) {
    *out = FifoFront();
    head_ = (head_ + 1) & (ring_.size() - 1);
    --fifo_size_;
    return true;
  }
  std::pop_heap(heap_.begin(), heap_.end(), Later);
  *out = heap_.back();
  heap_.pop_back();
  return true;
}

void ReleaseQueue::Drain(std::vector<PendingDatagram>* out) {
  PendingDatagram d;
  while (PopDue(kNever, &d)) out->push_back(d);
}

}  // namespace longhaul::emu
