#include "transport/nccl/buffer_pool.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace longhaul::nccl {

struct BufferPool::Shared {
  std::mutex mu;
  std::vector<std::pair<size_t, uint8_t*>> free;  // (capacity, buffer)
  size_t free_bytes = 0;

  void Put(uint8_t* p, size_t cap) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (free.size() < kMaxFreeBuffers && free_bytes + cap <= kMaxFreeBytes) {
        free.emplace_back(cap, p);
        free_bytes += cap;
        return;
      }
    }
    delete[] p;
  }
  ~Shared() {
    for (auto& [cap, p] : free) delete[] p;
  }
};

BufferPool::BufferPool() : s_(std::make_shared<Shared>()) {}

size_t BufferPool::CapacityFor(size_t size) {
  const size_t want = std::max<size_t>(size, 1);
  return want <= kRoundBytes ? want : (want + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

std::shared_ptr<uint8_t> BufferPool::Get(size_t size) {
  const size_t want = std::max<size_t>(size, 1);
  uint8_t* p = nullptr;
  size_t cap = 0;
  {
    std::lock_guard<std::mutex> l(s_->mu);
    // Newest first: the most recently returned buffer is the likeliest to be in cache.
    for (size_t i = s_->free.size(); i-- > 0;) {
      if (s_->free[i].first >= want && s_->free[i].first <= 2 * want + kRoundBytes) {
        cap = s_->free[i].first;
        p = s_->free[i].second;
        s_->free_bytes -= cap;
        s_->free[i] = s_->free.back();
        s_->free.pop_back();
        break;
      }
    }
  }
  if (p == nullptr) {
    cap = CapacityFor(want);
    p = new uint8_t[cap];
  }
  std::shared_ptr<Shared> s = s_;
  return std::shared_ptr<uint8_t>(p, [s, cap](uint8_t* q) { s->Put(q, cap); });
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> l(s_->mu);
  return Stats{s_->free.size(), s_->free_bytes};
}

}  // namespace longhaul::nccl
