// ShardPool: recycled, 64-byte-aligned buffers of one size for FEC shards.
//
// The encoder's parity accumulators, the decoder's copies of received shards and rebuilt
// shards all come from here, so once the pool has grown to the working set the FEC hot
// path does no heap allocation. Buffers are never shrunk or freed before the pool dies.
//
// Ownership: the pool owns every buffer it ever allocated. Acquire() lends one out;
// Release() (or a PooledShard going out of scope) returns it. The pool must outlive every
// lent buffer and every PooledShard.
// Thread-safety: none; one pool per thread (a Connection and its driver thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace longhaul::fec {

class ShardPool {
 public:
  // `shard_capacity`: bytes per buffer, rounded up to a multiple of 64 (the largest shard
  // the transport builds: packet frames after the FEC tag, padded). `max_buffers`: most
  // buffers that may be lent out at once (0 = unbounded); bounds a receiver's FEC memory.
  explicit ShardPool(size_t shard_capacity, size_t max_buffers = 0);
  ~ShardPool();
  ShardPool(const ShardPool&) = delete;
  ShardPool& operator=(const ShardPool&) = delete;

  size_t shard_capacity() const { return capacity_; }

  // A buffer of shard_capacity() bytes with unspecified contents, or nullptr when
  // max_buffers are already lent out.
  uint8_t* Acquire();
  // Returns a buffer obtained from Acquire() of this pool.
  void Release(uint8_t* buffer);

  size_t outstanding() const { return outstanding_; }  // lent out now
  size_t allocated() const { return allocated_; }      // ever allocated (lent + free)

 private:
  size_t capacity_;
  size_t max_buffers_;
  size_t outstanding_ = 0;
  size_t allocated_ = 0;
  std::vector<uint8_t*> free_;
};

// Move-only handle that returns its buffer to the pool when destroyed.
class PooledShard {
 public:
  PooledShard() = default;
  PooledShard(ShardPool* pool, uint8_t* data) : pool_(pool), data_(data) {}
  PooledShard(PooledShard&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), data_(std::exchange(o.data_, nullptr)) {}
  PooledShard& operator=(PooledShard&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::exchange(o.pool_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  PooledShard(const PooledShard&) = delete;
  PooledShard& operator=(const PooledShard&) = delete;
  ~PooledShard() { reset(); }

  uint8_t* data() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset() {
    if (data_ != nullptr) pool_->Release(data_);
    data_ = nullptr;
    pool_ = nullptr;
  }

 private:
  ShardPool* pool_ = nullptr;
  uint8_t* data_ = nullptr;
};

}  // namespace longhaul::fec
