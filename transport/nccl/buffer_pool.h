// Staging buffers for the plugin's copied sends (header + payload of a kData frame),
// reused: a fresh large allocation costs a page fault per 4 KiB on first touch, which at
// NCCL's message rates is most of the copy's cost.
//
// Get(size) hands out a buffer of at least `size` bytes (at least 1) as a shared_ptr
// whose deleter returns it to the pool; the transport keeps that shared_ptr until
// longhaul is done with the bytes, so a buffer comes back when its message was sent (or
// cancelled), on whichever thread drops the last reference. A free buffer is reused for
// a request of `want` bytes when its capacity is in [want, 2 x want + 64 KiB]; new
// buffers above 64 KiB are rounded up to a multiple of 64 KiB. The pool keeps at most
// kMaxFreeBuffers free buffers and kMaxFreeBytes free bytes; what does not fit is freed.
//
// Ownership: the free list lives in state shared with every outstanding buffer, so
// buffers may outlive the pool (they are then freed when dropped). Buffer contents are
// not initialised.
//
// Thread-safety: every member may be called from any thread (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace longhaul::nccl {

class BufferPool {
 public:
  static constexpr size_t kMaxFreeBuffers = 128;
  static constexpr size_t kMaxFreeBytes = size_t{512} << 20;
  static constexpr size_t kRoundBytes = 65536;  // rounding of new buffers above this size

  BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least max(size, 1) bytes.
  std::shared_ptr<uint8_t> Get(size_t size);

  // What the pool holds for reuse now (tests).
  struct Stats {
    size_t free_buffers = 0;
    size_t free_bytes = 0;
  };
  Stats stats() const;

  // The capacity a new buffer for a request of `size` bytes gets.
  static size_t CapacityFor(size_t size);

 private:
  struct Shared;
  std::shared_ptr<Shared> s_;
};

}  // namespace longhaul::nccl
