#include "transport/fec/shard_pool.h"

#include <cstdlib>

#include "glog/logging.h"
#include "transport/fec/cauchy_code.h"

namespace longhaul::fec {

ShardPool::ShardPool(size_t shard_capacity, size_t max_buffers)
    : capacity_(RoundUpToShardAlignment(shard_capacity == 0 ? 1 : shard_capacity)),
      max_buffers_(max_buffers) {}

ShardPool::~ShardPool() {
  // Buffers still lent out would dangle; that is a bug in the owner's teardown order.
  DCHECK_EQ(outstanding_, 0u) << "ShardPool destroyed with buffers lent out";
  for (uint8_t* b : free_) std::free(b);
}

uint8_t* ShardPool::Acquire() {
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    ++outstanding_;
    return b;
  }
  if (max_buffers_ != 0 && outstanding_ >= max_buffers_) return nullptr;
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(kShardAlignment, capacity_));
  CHECK(b != nullptr) << "out of memory allocating a " << capacity_ << "-byte shard";
  ++allocated_;
  ++outstanding_;
  return b;
}

void ShardPool::Release(uint8_t* buffer) {
  DCHECK(buffer != nullptr);
  DCHECK_GT(outstanding_, 0u);
  --outstanding_;
  free_.push_back(buffer);
}

}  // namespace longhaul::fec
