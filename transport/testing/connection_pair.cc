#include "transport/testing/connection_pair.h"

#include <algorithm>

namespace longhaul::testing {

ConnectionPair::ConnectionPair(const TransportConfig& a_config, const TransportConfig& b_config,
                               PipeOptions pipe, uint64_t seed)
    : pipe_(pipe), now_(Time::FromNanoseconds(1'000'000'000)) {
  a_ = std::make_unique<Connection>(a_config, ConnectionIds{1, 2}, seed, now_);
  b_ = std::make_unique<Connection>(b_config, ConnectionIds{2, 1}, seed + 1, now_);
  buf_.resize(std::max(a_config.MaxDatagramSize(), b_config.MaxDatagramSize()));
  busy_until_[0] = busy_until_[1] = now_;
}

void ConnectionPair::Enqueue(int direction, std::vector<uint8_t> d, Ecn ecn) {
  uint64_t index = sent_[direction]++;
  FilterVerdict v;
  if (filter_) v = filter_(direction, index, d);
  if (v.drop) return;
  if (v.corrupt && !d.empty()) d[d.size() / 2] ^= 0x10;
  Time depart = now_;
  if (!pipe_.rate.IsZero()) {
    depart = std::max(now_, busy_until_[direction]) + pipe_.rate.TransferTime(d.size() + 28);
    busy_until_[direction] = depart;
  }
  Time arrive = depart + pipe_.one_way_delay + v.extra_delay;
  if (v.duplicate) {
    queue_.emplace(std::make_pair(arrive.ns() + 1, seq_++),
                   std::make_pair(direction, InFlight{d, ecn}));
  }
  queue_.emplace(std::make_pair(arrive.ns(), seq_++),
                 std::make_pair(direction, InFlight{std::move(d), ecn}));
}

void ConnectionPair::Pump(int side) {
  Connection& c = side == 0 ? *a_ : *b_;
  if (c.NextTimeout() <= now_) c.OnTimeout(now_);
  TransmitInfo info;
  for (int i = 0; i < 100000; ++i) {
    size_t n = c.PollTransmit(now_, buf_.data(), buf_.size(), &info);
    if (n == 0) break;
    Enqueue(side, std::vector<uint8_t>(buf_.begin(), buf_.begin() + n), info.ecn);
  }
  Event e;
  auto& out = side == 0 ? a_events_ : b_events_;
  while (c.PollEvent(&e)) out.push_back(std::move(e));
}

bool ConnectionPair::RunUntil(const std::function<bool()>& done, Duration limit,
                              uint64_t max_steps) {
  const Time end = now_ + limit;
  for (uint64_t step = 0; step < max_steps; ++step) {
    Pump(0);
    Pump(1);
    if (done()) return true;
    Time next = std::min(a_->NextTimeout(), b_->NextTimeout());
    if (!queue_.empty()) next = std::min(next, Time::FromNanoseconds(queue_.begin()->first.first));
    if (next.IsInfinite() || next > end) return done();
    if (next > now_) now_ = next;
    // Deliver everything due now.
    while (!queue_.empty() && queue_.begin()->first.first <= now_.ns()) {
      auto node = queue_.extract(queue_.begin());
      int dir = node.mapped().first;
      InFlight& f = node.mapped().second;
      (dir == 0 ? *b_ : *a_).OnDatagram(now_, f.bytes, f.ecn);
    }
  }
  return done();
}

}  // namespace longhaul::testing
