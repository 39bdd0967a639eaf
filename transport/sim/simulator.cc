#include "transport/sim/simulator.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <queue>

#include <sys/mman.h>

#include "glog/logging.h"

namespace longhaul::sim {
namespace {

constexpr uint32_t kNoBuffer = 0xffffffffu;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// Most datagrams one node may emit in one wake before the simulator moves on (bounds the
// loop; the node is woken again at the same time to continue).
constexpr int kMaxTransmitsPerWake = 1 << 16;
constexpr uint64_t kPrefetchAhead = 4;  // deliveries ahead whose datagram is fetched
// Services of one node at one instant after which the simulator nudges its timer 1 ns
// ahead, so a node that keeps asking for `now` without progress cannot hang a run.
constexpr uint32_t kMaxSameTimeWakes = 1 << 12;

// 2 MiB-aligned memory advised to use transparent huge pages: the pool grows to a
// bandwidth-delay product of datagrams (725 MB at 100 Gbit/s x 58 ms), and first-touch
// faults on 4 KiB pages would otherwise cost more than the simulation itself.
constexpr size_t kHugePage = size_t{2} << 20;
uint8_t* AllocHuge(size_t bytes) {
  bytes = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, bytes));
  CHECK(p != nullptr) << "out of memory for " << bytes << " bytes of datagram buffers";
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

// Chunks released by finished simulators, kept for the next one in the same process:
// first touch of fresh memory (zeroing, and on a VM the hypervisor's faults) costs more
// than a whole simulated packet exchange, and test suites run many simulations.
constexpr size_t kMaxCachedBytes = size_t{4} << 30;
struct ChunkCache {
  std::mutex mu;
  std::vector<std::pair<size_t, uint8_t*>> chunks;  // (bytes, memory)
  size_t bytes = 0;
};
ChunkCache& Cache() {
  static auto* cache = new ChunkCache;
  return *cache;
}
uint8_t* TakeChunk(size_t bytes) {
  ChunkCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (size_t i = c.chunks.size(); i-- > 0;) {
    if (c.chunks[i].first == bytes) {
      uint8_t* p = c.chunks[i].second;
      c.chunks.erase(c.chunks.begin() + static_cast<ptrdiff_t>(i));
      c.bytes -= bytes;
      return p;
    }
  }
  return nullptr;
}
void ReturnChunk(size_t bytes, uint8_t* p) {
  ChunkCache& c = Cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.bytes + bytes <= kMaxCachedBytes) {
      c.chunks.emplace_back(bytes, p);
      c.bytes += bytes;
      return;
    }
  }
  std::free(p);
}

}  // namespace

void ReleaseCachedSimulatorMemory() {
  ChunkCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [bytes, p] : c.chunks) std::free(p);
  c.chunks.clear();
  c.bytes = 0;
}

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kDone: return "done";
    case StopReason::kIdle: return "idle";
    case StopReason::kTimeLimit: return "max_virtual_time";
    case StopReason::kWallLimit: return "max_wall_time";
  }
  return "?";
}

struct Simulator::Packet {
  int64_t at_ns;
  uint64_t seq;  // tie-break for the held heap
  uint32_t buffer;
  uint32_t len;
  uint32_t dst;
  Ecn ecn;
};

struct Simulator::PacketHeap {
  struct Later {
    bool operator()(const Packet& a, const Packet& b) const {
      return a.at_ns != b.at_ns ? a.at_ns > b.at_ns : a.seq > b.seq;
    }
  };
  std::priority_queue<Packet, std::vector<Packet>, Later> q;
};

// FIFO ring of packets with non-decreasing delivery times; grows by doubling.
class Simulator::Ring {
 public:
  Ring() : slots_(1024), mask_(1023) {}
  bool empty() const { return head_ == tail_; }
  const Packet& front() const { return slots_[head_ & mask_]; }
  // The packet `i` places behind the front, or null.
  const Packet* behind(uint64_t i) const {
    return head_ + i < tail_ ? &slots_[(head_ + i) & mask_] : nullptr;
  }
  void pop_front() { ++head_; }
  void push_back(const Packet& p) {
    if (tail_ - head_ == slots_.size()) Grow();
    slots_[tail_ & mask_] = p;
    ++tail_;
  }

 private:
  void Grow() {
    std::vector<Packet> next(slots_.size() * 2);
    for (uint64_t i = head_; i != tail_; ++i) next[i - head_] = slots_[i & mask_];
    tail_ -= head_;
    head_ = 0;
    slots_.swap(next);
    mask_ = slots_.size() - 1;
  }
  std::vector<Packet> slots_;
  uint64_t mask_;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

// Indexed binary min-heap: one entry per node keyed by (time, sequence).
class Simulator::TimerHeap {
 public:
  void Resize(size_t n) {
    pos_.resize(n, -1);
    key_.resize(n, {kNever, 0});
  }
  bool empty() const { return heap_.empty(); }
  int top() const { return heap_[0]; }
  int64_t top_time() const { return key_[heap_[0]].first; }
  void Set(int node, int64_t at_ns, uint64_t seq) {
    if (at_ns == kNever) {
      Remove(node);
      return;
    }
    key_[node] = {at_ns, seq};
    if (pos_[node] < 0) {
      pos_[node] = static_cast<int>(heap_.size());
      heap_.push_back(node);
      Up(pos_[node]);
    } else {
      Up(pos_[node]);
      Down(pos_[node]);
    }
  }
  void Remove(int node) {
    int i = pos_[node];
    if (i < 0) return;
    int last = heap_.back();
    heap_.pop_back();
    pos_[node] = -1;
    if (last != node) {
      heap_[i] = last;
      pos_[last] = i;
      Up(i);
      Down(pos_[last]);
    }
  }

 private:
  bool Less(int a, int b) const { return key_[a] < key_[b]; }
  void Swap(int i, int j) {
    std::swap(heap_[i], heap_[j]);
    pos_[heap_[i]] = i;
    pos_[heap_[j]] = j;
  }
  void Up(int i) {
    while (i > 0) {
      int p = (i - 1) / 2;
      if (!Less(heap_[i], heap_[p])) break;
      Swap(i, p);
      i = p;
    }
  }
  void Down(int i) {
    const int n = static_cast<int>(heap_.size());
    while (true) {
      int l = 2 * i + 1, r = l + 1, m = i;
      if (l < n && Less(heap_[l], heap_[m])) m = l;
      if (r < n && Less(heap_[r], heap_[m])) m = r;
      if (m == i) break;
      Swap(i, m);
      i = m;
    }
  }
  std::vector<int> heap_;
  std::vector<int> pos_;
  std::vector<std::pair<int64_t, uint64_t>> key_;
};

// Fixed-size datagram slots allocated in chunks (at least 1024 slots and one huge page)
// and recycled LIFO (the most recently freed slot is the warmest in cache).
class Simulator::BufferPool {
 public:
  explicit BufferPool(size_t slot) : slot_((slot + 63) & ~size_t{63}) {
    while ((slot_ << shift_) < kHugePage) ++shift_;
    mask_ = (1u << shift_) - 1;
    chunk_bytes_ = ((slot_ << shift_) + kHugePage - 1) & ~(kHugePage - 1);
  }
  ~BufferPool() {
    for (uint8_t* p : chunks_) ReturnChunk(chunk_bytes_, p);
  }
  size_t slot_size() const { return slot_; }
  uint32_t Alloc() {
    if (free_.empty()) Grow();
    uint32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  void Free(uint32_t b) { free_.push_back(b); }
  uint8_t* Data(uint32_t b) { return chunks_[b >> shift_] + (b & mask_) * slot_; }
  uint64_t allocated() const { return static_cast<uint64_t>(chunks_.size()) << shift_; }

 private:
  void Grow() {
    // Ids stay below 2^31 (the simulator tags small-slot ids with the top bit).
    CHECK_LT(chunks_.size(), size_t{1} << (31 - shift_)) << "datagram pool exhausted";
    uint32_t base = static_cast<uint32_t>(chunks_.size()) << shift_;
    uint8_t* p = TakeChunk(chunk_bytes_);
    chunks_.push_back(p != nullptr ? p : AllocHuge(chunk_bytes_));
    for (uint32_t i = mask_ + 1; i-- > 0;) free_.push_back(base + i);
  }
  size_t slot_;
  uint32_t shift_ = 10;  // 1024 slots: ~9 MiB chunks of 9 KiB datagrams
  uint32_t mask_ = 0;
  size_t chunk_bytes_ = 0;
  std::vector<uint8_t*> chunks_;
  std::vector<uint32_t> free_;
};

Simulator::Simulator(const SimulatorOptions& options)
    : options_(options),
      pool_(std::make_unique<BufferPool>(options.max_datagram)),
      small_(options.small_datagram > 0 && options.small_datagram < options.max_datagram
                 ? std::make_unique<BufferPool>(options.small_datagram)
                 : nullptr),
      held_(std::make_unique<PacketHeap>()),
      timers_(std::make_unique<TimerHeap>()) {
  // Each direction gets its own stream derived from the simulator seed.
  uint64_t s = options.seed;
  uint64_t seed_fwd = SplitMix64(s);
  uint64_t seed_rev = SplitMix64(s);
  absl::StatusOr<LinkSpec> reverse = ApplyLinkOverrides(options.link, options.reverse);
  CHECK(reverse.ok()) << reverse.status();
  LinkSpec rev = *reverse;
  if (rev.seed.has_value()) rev.seed = *rev.seed ^ 0x5bd1e995u;  // distinct reverse stream
  links_[0] = std::make_unique<LinkDirection>(options.link, seed_fwd);
  links_[1] = std::make_unique<LinkDirection>(rev, seed_rev);
  fifo_[0] = std::make_unique<Ring>();
  fifo_[1] = std::make_unique<Ring>();
  absl::StatusOr<std::vector<LinkSpec>> specs =
      ResolveLinkSchedule(options.link, options.schedule);
  CHECK(specs.ok()) << specs.status();
  schedule_specs_ = *std::move(specs);
  for (const LinkSpec& spec : schedule_specs_) {
    absl::StatusOr<LinkSpec> r = ApplyLinkOverrides(spec, options.reverse);
    CHECK(r.ok()) << r.status();
    reverse_specs_.push_back(*r);
  }
}

Simulator::~Simulator() = default;

int Simulator::AddPair(SimNode* left, SimNode* right) {
  nodes_.push_back(left);
  nodes_.push_back(right);
  timers_->Resize(nodes_.size());
  last_wake_ns_.resize(nodes_.size(), -1);
  same_time_wakes_.resize(nodes_.size(), 0);
  // Both start with a wake at their NextTimeout (they may have something to send at once).
  for (int n = static_cast<int>(nodes_.size()) - 2; n < static_cast<int>(nodes_.size()); ++n) {
    Time t = nodes_[n]->NextTimeout();
    if (!t.IsInfinite()) timers_->Set(n, std::max(t, now_).ns(), seq_++);
  }
  return static_cast<int>(nodes_.size() / 2) - 1;
}

void Simulator::ApplyScheduleStep() {
  const LinkSpec& spec = schedule_specs_[next_step_];
  links_[0]->Reconfigure(spec, now_);
  links_[1]->Reconfigure(reverse_specs_[next_step_], now_);
  Mix(0x5c4ed01e ^ next_step_);
  ++next_step_;
}

uint8_t* Simulator::Data(uint32_t b) {
  return b & kSmallBit ? small_->Data(b & ~kSmallBit) : pool_->Data(b);
}

void Simulator::FreeBuffer(uint32_t b) {
  if (b & kSmallBit) {
    small_->Free(b & ~kSmallBit);
  } else {
    pool_->Free(b);
  }
}

uint32_t Simulator::AllocFor(size_t len) {
  if (small_ != nullptr && len <= small_->slot_size()) return small_->Alloc() | kSmallBit;
  return pool_->Alloc();
}

void Simulator::Offer(int node, uint32_t buffer, size_t len, const TransmitInfo& info) {
  const int dir = node & 1;  // left (even) nodes send forward, right ones in reverse
  const Verdict v = links_[dir]->Offer(now_, len + info.elided_bytes, info.ecn != Ecn::kNotEct);
  Mix(static_cast<uint64_t>(now_.ns()));
  Mix(len | (static_cast<uint64_t>(node) << 32) | (static_cast<uint64_t>(v.drop) << 56));
  if (v.dropped()) {
    FreeBuffer(buffer);
    return;
  }
  const Ecn ecn = v.ce_mark ? Ecn::kCe : info.ecn;
  const uint32_t dst = static_cast<uint32_t>(node ^ 1);
  if (v.duplicate) {
    uint32_t copy = AllocFor(len);
    std::memcpy(Data(copy), Data(buffer), len);
    held_->q.push(Packet{v.duplicate_at.ns(), seq_++, copy, static_cast<uint32_t>(len), dst, ecn});
  }
  if (v.corrupt_bit >= 0) {
    // An elided datagram is shorter than the bytes the link carried: the flip lands in
    // the bytes it has (any flip fails the checksum alike).
    const uint64_t bit = static_cast<uint64_t>(v.corrupt_bit) % (len * 8);
    Data(buffer)[bit >> 3] ^= static_cast<uint8_t>(1u << (bit & 7));
    Mix(static_cast<uint64_t>(v.corrupt_bit));
  }
  Packet p{v.deliver_at.ns(), seq_++, buffer, static_cast<uint32_t>(len), dst, ecn};
  Mix(static_cast<uint64_t>(p.at_ns) ^ (static_cast<uint64_t>(v.reordered) << 63));
  if (v.reordered) {
    held_->q.push(p);
  } else {
    fifo_[dir]->push_back(p);
  }
}

void Simulator::Service(int node) {
  SimNode* n = nodes_[node];
  bool more = false;
  for (int i = 0;; ++i) {
    if (i == kMaxTransmitsPerWake) {
      more = true;
      break;
    }
    if (spare_ == kNoBuffer) spare_ = pool_->Alloc();
    TransmitInfo info;
    const size_t len = n->PollTransmit(now_, pool_->Data(spare_), pool_->slot_size(), &info);
    if (len == 0) break;
    CHECK_LE(len, pool_->slot_size()) << "PollTransmit overran its buffer";
    ++counters_.datagrams_sent;
    uint32_t b;
    if (small_ != nullptr && len <= small_->slot_size()) {
      // Short (elided) datagrams move to a small slot; the large one is written again.
      b = small_->Alloc() | kSmallBit;
      std::memcpy(Data(b), pool_->Data(spare_), len);
    } else {
      b = spare_;
      spare_ = kNoBuffer;
    }
    Offer(node, b, len, info);
  }
  int64_t t = more ? now_.ns() : n->NextTimeout().ns();
  if (t <= now_.ns()) {
    t = now_.ns();
    if (last_wake_ns_[node] == t) {
      if (++same_time_wakes_[node] >= kMaxSameTimeWakes) {
        ++counters_.stalls;
        same_time_wakes_[node] = 0;
        t += 1;
      }
    } else {
      last_wake_ns_[node] = t;
      same_time_wakes_[node] = 0;
    }
  }
  timers_->Set(node, t, seq_++);
}

void Simulator::Deliver(const Packet& p) {
  nodes_[p.dst]->OnDatagram(now_, std::span<const uint8_t>(Data(p.buffer), p.len), p.ecn);
  FreeBuffer(p.buffer);
  ++counters_.datagrams_delivered;
  Mix(static_cast<uint64_t>(now_.ns()) ^ (static_cast<uint64_t>(p.dst) << 48) ^ p.len);
  Service(static_cast<int>(p.dst));
}

StopReason Simulator::Run(Time until, const std::function<bool()>& done, Duration wall_limit) {
  // The wall-time bound needs the caller's clock; the simulator reads none itself.
  const bool wall_bound = options_.wall_seconds && !wall_limit.IsInfinite();
  const double wall_limit_s = wall_limit.seconds();
  const double wall_start = wall_bound ? options_.wall_seconds() : 0;
  const int64_t until_ns = until.ns();
  StopReason reason;
  while (true) {
    if (done && done()) {
      reason = StopReason::kDone;
      break;
    }
    // Find the earliest event; the comparison order fixes the tie-break order.
    int kind = -1;
    int64_t best = kNever;
    if (next_step_ < schedule_specs_.size()) {
      best = options_.schedule.steps[next_step_].at.ns();
      kind = 0;
    }
    if (!fifo_[0]->empty() && fifo_[0]->front().at_ns < best) {
      best = fifo_[0]->front().at_ns;
      kind = 1;
    }
    if (!fifo_[1]->empty() && fifo_[1]->front().at_ns < best) {
      best = fifo_[1]->front().at_ns;
      kind = 2;
    }
    if (!held_->q.empty() && held_->q.top().at_ns < best) {
      best = held_->q.top().at_ns;
      kind = 3;
    }
    if (!timers_->empty() && timers_->top_time() < best) {
      best = timers_->top_time();
      kind = 4;
    }
    // Only schedule steps left (no packet on the way, no timer): nothing can happen any
    // more, since a link change alone sends nothing.
    if (kind < 0 || (fifo_[0]->empty() && fifo_[1]->empty() && held_->q.empty() &&
                     timers_->empty())) {
      reason = StopReason::kIdle;
      break;
    }
    if (best > until_ns) {
      now_ = until;
      reason = StopReason::kTimeLimit;
      break;
    }
    if (best > now_.ns()) now_ = Time::FromNanoseconds(best);
    ++counters_.events;
    switch (kind) {
      case 0:
        ApplyScheduleStep();
        break;
      case 1:
      case 2: {
        const Packet p = fifo_[kind - 1]->front();
        fifo_[kind - 1]->pop_front();
        // The datagrams were written an RTT ago and are out of cache: fetch the start of
        // one a few deliveries ahead while this one is processed.
        if (const Packet* ahead = fifo_[kind - 1]->behind(kPrefetchAhead)) {
          __builtin_prefetch(Data(ahead->buffer));
          __builtin_prefetch(Data(ahead->buffer) + 64);
        }
        Deliver(p);
        break;
      }
      case 3: {
        const Packet p = held_->q.top();
        held_->q.pop();
        Deliver(p);
        break;
      }
      case 4: {
        const int node = timers_->top();
        timers_->Remove(node);
        ++counters_.timeouts;
        Mix(static_cast<uint64_t>(now_.ns()) ^ (static_cast<uint64_t>(node) << 40) ^ 0x7);
        if (nodes_[node]->NextTimeout() <= now_) nodes_[node]->OnTimeout(now_);
        Service(node);
        break;
      }
    }
    if ((counters_.events & 4095) == 0 && wall_bound &&
        options_.wall_seconds() - wall_start > wall_limit_s) {
      reason = StopReason::kWallLimit;
      break;
    }
  }
  counters_.pool_buffers = pool_->allocated() + (small_ != nullptr ? small_->allocated() : 0);
  return reason;
}

}  // namespace longhaul::sim
