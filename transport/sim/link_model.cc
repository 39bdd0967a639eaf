#include "transport/sim/link_model.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace longhaul::sim {

LinkDirection::LinkDirection(const LinkSpec& spec, uint64_t seed)
    : rng_(spec.seed.has_value() ? *spec.seed : seed) {
  Configure(spec);
}

void LinkDirection::Configure(const LinkSpec& spec) {
  CHECK(!spec.rate.IsZero()) << "link rate must be > 0";
  spec_ = spec;
  // Picoseconds keep serialisation exact enough that a long run does not drift from the
  // configured rate (122.24 ns per 1528-byte packet at 100 Gbit/s would lose 0.2% in ns).
  ps_per_byte_ = 8e12 / spec.rate.bps();
  bytes_per_ps_ = spec.rate.bps() / 8e12;
  delay_ps_ = spec.OneWayDelay().ns() * 1000;
  if (spec.jitter.ns() != jitter_ns_) jitter_anchor_ps_ = -1;  // restart the process
  jitter_ns_ = spec.jitter.ns();
  jitter_period_ps_ = std::max<int64_t>(jitter_ns_, 1) * 1000;
  reorder_delay_ns_ = spec.reorder_delay.ns();
  queue_limit_ = spec.QueueLimitBytes();
  ecn_threshold_ = spec.EcnThresholdBytes();
  gilbert_ = spec.burst > 1 && spec.loss > 0 && spec.loss < 1;
  if (gilbert_) {
    // Two-state Gilbert model: Good never loses, Bad always loses. The mean sojourn in Bad
    // is 1/p_bg packets = burst, and the stationary share of Bad is p_gb/(p_gb+p_bg) = loss.
    p_bg_ = 1.0 / spec.burst;
    p_gb_ = std::min(1.0, spec.loss * p_bg_ / (1.0 - spec.loss));
  } else {
    p_bg_ = 1;
    p_gb_ = spec.loss;
    bad_state_ = false;
  }
}

void LinkDirection::Reconfigure(const LinkSpec& spec, Time now) {
  int64_t now_ps = now.ns() * 1000;
  if (first_offer_ps_ >= 0 && now_ps > last_offer_ps_) {
    Integrate(now_ps);
    last_offer_ps_ = now_ps;
  }
  LinkSpec next = spec;
  next.seed = spec_.seed;  // the RNG stream continues
  Configure(next);
}

bool LinkDirection::DrawLoss() {
  if (spec_.loss <= 0) return false;
  if (spec_.loss >= 1) return true;
  if (!gilbert_) return rng_.Uniform() < spec_.loss;
  if (bad_state_) {
    if (rng_.Uniform() < p_bg_) bad_state_ = false;
  } else {
    if (rng_.Uniform() < p_gb_) bad_state_ = true;
  }
  return bad_state_;
}

int64_t LinkDirection::JitterAt(int64_t t_ps) {
  if (jitter_anchor_ps_ < 0 || t_ps >= jitter_anchor_ps_ + 2 * jitter_period_ps_) {
    // First use, or idle for more than a period: start afresh at t.
    jitter_anchor_ps_ = t_ps;
    jitter_a_ns_ = static_cast<int64_t>(rng_.UniformInt(jitter_ns_ + 1));
    jitter_b_ns_ = static_cast<int64_t>(rng_.UniformInt(jitter_ns_ + 1));
  } else if (t_ps >= jitter_anchor_ps_ + jitter_period_ps_) {
    jitter_anchor_ps_ += jitter_period_ps_;
    jitter_a_ns_ = jitter_b_ns_;
    jitter_b_ns_ = static_cast<int64_t>(rng_.UniformInt(jitter_ns_ + 1));
  }
  // |b - a| <= jitter over a period of `jitter`: the slope stays within [-1, 1].
  const double f = static_cast<double>(t_ps - jitter_anchor_ps_) /
                   static_cast<double>(jitter_period_ps_);
  return jitter_a_ns_ + std::llround(static_cast<double>(jitter_b_ns_ - jitter_a_ns_) * f);
}

void LinkDirection::Integrate(int64_t now_ps) {
  // Between offers the backlog drains linearly: b(t) = (busy_until - t) x rate while
  // positive, so its integral over [t0, t1] is rate x (d0^2 - d1^2) / 2 with d = busy - t.
  double d0 = static_cast<double>(std::max<int64_t>(0, busy_until_ps_ - last_offer_ps_));
  double d1 = static_cast<double>(std::max<int64_t>(0, busy_until_ps_ - now_ps));
  queue_integral_ += bytes_per_ps_ * (d0 * d0 - d1 * d1) * 0.5;
}

ByteCount LinkDirection::BacklogBytes(Time now) const {
  int64_t d = busy_until_ps_ - now.ns() * 1000;
  return d <= 0 ? 0 : static_cast<ByteCount>(static_cast<double>(d) * bytes_per_ps_);
}

Verdict LinkDirection::Offer(Time now, size_t bytes, bool ect) {
  Verdict v;
  const int64_t now_ps = now.ns() * 1000;
  ++counters_.offered;
  counters_.offered_bytes += bytes;
  if (first_offer_ps_ < 0) {
    first_offer_ps_ = now_ps;
    last_offer_ps_ = now_ps;
  }
  const ByteCount wire = bytes + spec_.overhead;
  if (wire > spec_.mtu) {
    ++counters_.dropped_too_big;
    v.drop = DropReason::kTooBig;
    return v;
  }
  if (DrawLoss()) {
    ++counters_.dropped_loss;
    if (!last_lost_) ++counters_.loss_bursts;
    last_lost_ = true;
    v.drop = DropReason::kLoss;
    return v;
  }
  last_lost_ = false;

  if (now_ps > last_offer_ps_) {
    Integrate(now_ps);
    last_offer_ps_ = now_ps;
  }
  const int64_t backlog_ps = busy_until_ps_ - now_ps;
  const ByteCount backlog =
      backlog_ps <= 0 ? 0 : static_cast<ByteCount>(static_cast<double>(backlog_ps) * bytes_per_ps_);
  // An idle link always accepts (the packet goes straight onto the wire).
  if (backlog_ps > 0 && backlog + wire > queue_limit_) {
    ++counters_.dropped_queue;
    v.drop = DropReason::kQueueFull;
    return v;
  }
  if (ect && ecn_threshold_ > 0 && backlog > ecn_threshold_) {
    v.ce_mark = true;
    ++counters_.ce_marked;
  }
  counters_.max_queue_bytes = std::max<ByteCount>(counters_.max_queue_bytes, backlog + wire);

  const int64_t tx_ps = std::llround(static_cast<double>(wire) * ps_per_byte_);
  busy_until_ps_ = std::max(now_ps, busy_until_ps_) + tx_ps;
  counters_.busy_time += Duration::Nanoseconds(tx_ps / 1000);

  int64_t deliver_ns = (busy_until_ps_ + delay_ps_ + 999) / 1000;
  if (jitter_ns_ > 0) deliver_ns += JitterAt(busy_until_ps_);
  if (deliver_ns < last_in_order_ns_) deliver_ns = last_in_order_ns_;
  if (spec_.reorder > 0 && rng_.Uniform() < spec_.reorder) {
    v.reordered = true;
    ++counters_.reordered;
    deliver_ns += reorder_delay_ns_;
  } else {
    last_in_order_ns_ = deliver_ns;
  }
  v.deliver_at = Time::FromNanoseconds(deliver_ns);
  if (spec_.dup > 0 && rng_.Uniform() < spec_.dup) {
    v.duplicate = true;
    ++counters_.duplicated;
    v.duplicate_at = v.deliver_at + Duration::Nanoseconds(std::max<int64_t>(1, tx_ps / 1000));
  }
  if (spec_.corrupt > 0 && bytes > 0 && rng_.Uniform() < spec_.corrupt) {
    v.corrupt_bit = static_cast<int64_t>(rng_.UniformInt(static_cast<uint64_t>(bytes) * 8));
    ++counters_.corrupted;
  }
  ++counters_.delivered;
  counters_.delivered_bytes += bytes;
  return v;
}

double LinkDirection::QueueByteSeconds(Time now) const {
  if (first_offer_ps_ < 0) return 0;
  const int64_t now_ps = std::max(now.ns() * 1000, last_offer_ps_);
  const double d0 = static_cast<double>(std::max<int64_t>(0, busy_until_ps_ - last_offer_ps_));
  const double d1 = static_cast<double>(std::max<int64_t>(0, busy_until_ps_ - now_ps));
  return (queue_integral_ + bytes_per_ps_ * (d0 * d0 - d1 * d1) * 0.5) * 1e-12;
}

LinkCounters LinkDirection::Finish(Time now) const {
  LinkCounters c = counters_;
  if (first_offer_ps_ < 0) return c;
  int64_t now_ps = std::max(now.ns() * 1000, last_offer_ps_);
  double integral = queue_integral_;
  double d0 = static_cast<double>(std::max<int64_t>(0, busy_until_ps_ - last_offer_ps_));
  double d1 = static_cast<double>(std::max<int64_t>(0, busy_until_ps_ - now_ps));
  integral += bytes_per_ps_ * (d0 * d0 - d1 * d1) * 0.5;
  int64_t span = now_ps - first_offer_ps_;
  c.avg_queue_bytes = span > 0 ? integral / static_cast<double>(span) : 0;
  return c;
}

}  // namespace longhaul::sim
