// ReleaseQueue: the datagrams of one emulated direction waiting for their modelled
// delivery time, released in time order.
//
// With a constant (or order-preserving jittered) delay, delivery times never decrease, so
// almost every datagram goes through a FIFO ring (O(1), no comparisons). Datagrams that
// the model reorders (held back) and duplicate copies can arrive out of order; they go
// through a small binary heap. PopDue() merges both in (time, arrival sequence) order,
// so ties are released in the order they were pushed.
//
// Times are integer nanoseconds on the caller's clock (the emulator uses a monotonic
// clock relative to its start). The queue holds slot indices, not memory: the caller owns
// the buffers (PacketPool).
//
// Thread-safety: none; one thread owns a queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace longhaul::emu {

struct PendingDatagram {
  int64_t deliver_ns = 0;  // release no earlier than this
  uint32_t slot = 0;       // PacketPool slot holding the bytes
  uint32_t bytes = 0;      // datagram length
  uint32_t flow = 0;       // caller-defined (UDP relay: client-map index)
  uint32_t flow_gen = 0;   // caller-defined (UDP relay: client-map generation)
  uint8_t tos = 0;         // IP TOS / traffic-class byte to send with (UDP relay)
  uint64_t seq = 0;        // assigned by Push(): arrival order, breaks time ties
};

class ReleaseQueue {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  ReleaseQueue();

  // Queues `d` (its seq is assigned here). `in_order` promises that d.deliver_ns is not
  // earlier than any in-order datagram pushed before; such datagrams use the FIFO. A
  // broken promise is tolerated (the datagram goes to the heap), never misordered.
  void Push(PendingDatagram d, bool in_order);

  // Earliest delivery time queued, or kNever when empty.
  int64_t NextDeadline() const;

  // If the earliest datagram is due (deliver_ns <= now_ns), moves it to *out and returns
  // true. Call repeatedly to release everything due at one wake.
  bool PopDue(int64_t now_ns, PendingDatagram* out);

  // Removes everything (e.g. at shutdown), appending it to *out in release order.
  void Drain(std::vector<PendingDatagram>* out);

  size_t size() const { return fifo_size_ + heap_.size(); }
  bool empty() const { return size() == 0; }
  size_t fifo_size() const { return fifo_size_; }
  size_t heap_size() const { return heap_.size(); }

 private:
  static bool Later(const PendingDatagram& a, const PendingDatagram& b) {
    return a.deliver_ns != b.deliver_ns ? a.deliver_ns > b.deliver_ns : a.seq > b.seq;
  }
  const PendingDatagram& FifoFront() const { return ring_[head_]; }
  void GrowRing();

  std::vector<PendingDatagram> ring_;  // power-of-two capacity
  size_t head_ = 0;
  size_t fifo_size_ = 0;
  int64_t fifo_last_ns_ = std::numeric_limits<int64_t>::min();
  std::vector<PendingDatagram> heap_;  // min-heap by (deliver_ns, seq)
  uint64_t next_seq_ = 0;
};

}  // namespace longhaul::emu
