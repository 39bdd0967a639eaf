#include "transport/sim/scenario_apps.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/rng.h"
#include "transport/wire/packet.h"

namespace longhaul::sim::internal {
namespace {

// Message bytes are pattern_[shift + offset]: one random buffer, a different shift per
// (pair, message). 2^20 shifts, none a multiple of a typical segment by construction of
// the hash, so a piece landing at the wrong offset or in the wrong message mismatches.
constexpr int kShiftBits = 20;
constexpr ByteCount kShiftSpan = ByteCount{1} << kShiftBits;
constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

HugeBuffer AllocHuge(size_t bytes) {
  bytes = std::max<size_t>((bytes + kHugePage - 1) & ~(kHugePage - 1), kHugePage);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, bytes));
  CHECK(p != nullptr) << "out of memory for " << bytes << " bytes";
  madvise(p, bytes, MADV_HUGEPAGE);
  return HugeBuffer(p);
}

uint64_t Shift(int pair, uint64_t k) {
  uint64_t x =
      (k + 1) * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(pair) + 1) * 0xD1B54A32D192ED03ULL;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x >> (64 - kShiftBits);
}

HugeBuffer MakePattern(uint64_t seed, ByteCount max_message) {
  HugeBuffer pattern = AllocHuge(max_message + kShiftSpan);
  Rng rng(seed ^ 0x9a77e2);
  uint64_t* w = reinterpret_cast<uint64_t*>(pattern.get());
  const size_t words = (max_message + kShiftSpan) / 8;
  for (size_t i = 0; i < words; ++i) w[i] = rng.Next();
  for (size_t i = words * 8; i < max_message + kShiftSpan; ++i) {
    pattern.get()[i] = static_cast<uint8_t>(rng.Next());
  }
  return pattern;
}

void MarkFinished(PairState* pair) {
  if (pair->finished) return;
  pair->finished = true;
  ++*pair->finished_pairs;
}

void Fail(PairState* pair, std::string why) {
  if (pair->result.error.empty()) pair->result.error = std::move(why);
  MarkFinished(pair);
}

// ---- SenderApp ----

SenderApp::SenderApp(const ScenarioOptions& opt, PairState* pair, const uint8_t* pattern,
                     Duration interval)
    : opt_(opt), pair_(pair), pattern_(pattern), interval_(interval) {
  // A greedy bulk sender: send completions arrive in order, so a message waiting for a
  // repair holds back the completion of everything after it for one or more round
  // trips. Keep far more than the window submitted (the buffers are views of one shared
  // pattern, so this costs no memory) so the sender never runs dry behind a repair.
  target_outstanding_ = std::max<ByteCount>(8 * opt.sender_config.window, 4 * opt.chunk);
}

Time SenderApp::NextWake() const {
  if (!started_) return pair_->start;
  if (opt_.workload == Workload::kMessages && next_ < pair_->total_messages) {
    return SubmitTime(next_);
  }
  return Time::Infinite();
}

void SenderApp::OnWake(Time now, Connection& conn) {
  started_ = true;
  if (opt_.workload == Workload::kBulk) {
    Fill(now, conn);
    return;
  }
  while (next_ < pair_->total_messages && SubmitTime(next_) <= now) {
    pair_->submit_times[next_] = SubmitTime(next_);
    Submit(conn, next_);
    ++next_;
  }
}

void SenderApp::OnEvent(Time now, Connection& conn, Event& ev) {
  if (ev.type == Event::Type::kSendComplete) {
    outstanding_ -= std::min(outstanding_, ev.size);
    // A cancelled send means the connection is closing: its kClosed event says why.
    if (opt_.workload == Workload::kBulk && !conn.closed()) Fill(now, conn);
  } else if (ev.type == Event::Type::kClosed && !pair_->finished) {
    Fail(pair_, absl::StrCat("sender closed: ", ev.status.ToString()));
  }
}

Time SenderApp::SubmitTime(uint64_t k) const {
  return pair_->start + Duration::Nanoseconds(static_cast<int64_t>(
                            std::llround(static_cast<double>(interval_.ns()) * k)));
}

void SenderApp::Fill(Time, Connection& conn) {
  while (next_ < pair_->total_messages && outstanding_ < target_outstanding_) {
    Submit(conn, next_);
    ++next_;
  }
}

void SenderApp::Submit(Connection& conn, uint64_t k) {
  const ByteCount size = pair_->sizes[k];
  SendBuffer b;
  b.data = pattern_ + Shift(pair_->index, k);
  b.size = size;
  absl::StatusOr<uint64_t> id = conn.Send(std::move(b), k);
  if (!id.ok()) {
    Fail(pair_, absl::StrCat("Send(message ", k, ") failed: ", id.status().ToString()));
    next_ = pair_->total_messages;
    return;
  }
  pair_->sent_ids[k] = *id;
  outstanding_ += size;
}

// ---- ReceiverApp ----

ReceiverApp::ReceiverApp(const ScenarioOptions& opt, PairState* pair, const uint8_t* pattern)
    : pair_(pair), pattern_(pattern), workload_(opt.workload), payload_(opt.payload) {
  ByteCount max_size = pair->sizes.empty() ? 0 : pair->sizes[0];
  buffer_size_ = std::max<ByteCount>(max_size, 1);
  // A few buffers posted ahead, recycled in turn, keep the working set small and warm
  // in cache while data arrives in order; messages that arrive further ahead (behind
  // a loss) land in transport-owned memory, which is verified and handed back too.
  pool_limit_ =
      std::min<uint64_t>(std::max<uint64_t>(opt.posted_receives, 1), pair->total_messages);
}

void ReceiverApp::Start(Connection& conn) {
  while (posted_ < pair_->total_messages && buffers_.size() < pool_limit_) {
    buffers_.push_back(AllocHuge(buffer_size_));
    Post(conn, buffers_.size() - 1);
  }
}

void ReceiverApp::OnEvent(Time now, Connection& conn, Event& ev) {
  if (ev.type == Event::Type::kClosed) {
    if (!pair_->finished) Fail(pair_, absl::StrCat("receiver closed: ", ev.status.ToString()));
    return;
  }
  if (ev.type != Event::Type::kReceiveComplete) return;
  Verify(now, ev);
  if (ev.owned) {
    conn.ReturnBuffer(std::move(ev.owned));
  } else if (ev.tag > 0 && ev.tag <= buffers_.size() && posted_ < pair_->total_messages) {
    Post(conn, ev.tag - 1);
  }
}

void ReceiverApp::Post(Connection& conn, size_t i) {
  absl::Status s = conn.PostReceive(buffers_[i].get(), buffer_size_, i + 1);
  if (!s.ok()) {
    Fail(pair_, absl::StrCat("PostReceive failed: ", s.ToString()));
    return;
  }
  ++posted_;
}

void ReceiverApp::Verify(Time now, const Event& ev) {
  ConnectionResult& r = pair_->result;
  const uint64_t k = received_++;
  if (pair_->finished) return;
  if (k >= pair_->total_messages) {
    Fail(pair_, absl::StrCat("extra message delivered (id ", ev.message_id, ")"));
    return;
  }
  if (!ev.status.ok()) {
    Fail(pair_, absl::StrCat("message ", k, " completed with ", ev.status.ToString()));
    return;
  }
  if (ev.message_id != pair_->sent_ids[k]) {
    Fail(pair_, absl::StrCat("message ", k, " out of order: got id ", ev.message_id, ", expected ",
                             pair_->sent_ids[k]));
    return;
  }
  if (ev.size != pair_->sizes[k]) {
    Fail(pair_,
         absl::StrCat("message ", k, " has ", ev.size, " bytes, expected ", pair_->sizes[k]));
    return;
  }
  const uint8_t* expected = pattern_ + Shift(pair_->index, k);
  if (payload_ && ev.size > 0 &&
      (ev.data == nullptr || std::memcmp(ev.data, expected, ev.size) != 0)) {
    Fail(pair_, absl::StrCat("message ", k, " payload mismatch"));
    return;
  }
  if (!payload_ && ev.stamp_digest != wire::MessageStampDigest(expected, ev.size)) {
    Fail(pair_, absl::StrCat("message ", k, " stamp digest mismatch (payload-free run)"));
    return;
  }
  r.bytes_delivered += ev.size;
  ++r.messages_delivered;
  r.last_delivery = now;
  DeliveryRecord d;
  d.connection = pair_->index;
  d.index = k;
  d.size = ev.size;
  d.done_s = now.seconds();
  if (workload_ == Workload::kMessages) {
    pair_->mct_s.push_back((now - pair_->submit_times[k]).seconds());
    d.submit_s = pair_->submit_times[k].seconds();
  }
  pair_->deliveries.push_back(d);
  if (r.messages_delivered == pair_->total_messages) {
    r.complete = true;
    MarkFinished(pair_);
  }
}

}  // namespace longhaul::sim::internal
