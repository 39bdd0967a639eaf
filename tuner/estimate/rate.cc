#include "tuner/estimate/rate.h"

#include <algorithm>

namespace longhaul::tuner {

void TrainReceipt::Add(ByteCount bytes, Time now) {
  if (packets == 0) {
    first_wire_bytes = bytes;
    first_arrival = now;
  }
  // x: bytes that arrived before this packet (the bottleneck serialised them first).
  const double x = static_cast<double>(wire_bytes);
  const double y = (now - first_arrival).seconds();
  sx += x;
  sy += y;
  sxx += x * x;
  sxy += x * y;
  ++packets;
  wire_bytes += bytes;
  last_arrival = now;
}

Bandwidth TrainReceipt::SpanRate() const {
  if (packets < 2 || last_arrival <= first_arrival) return Bandwidth::Zero();
  return Bandwidth::FromBytesAndDuration(wire_bytes - first_wire_bytes,
                                         last_arrival - first_arrival);
}

Bandwidth TrainReceipt::FittedRate() const {
  if (packets < 3) return Bandwidth::Zero();
  const double n = static_cast<double>(packets);
  const double var = sxx - sx * sx / n;
  const double cov = sxy - sx * sy / n;
  if (!(var > 0) || !(cov > 0)) return Bandwidth::Zero();
  return Bandwidth::BitsPerSecond(8.0 * var / cov);  // bytes per second x 8
}

Bandwidth TrainReceipt::DeliveryRate() const {
  if (packets >= 8) {
    const Bandwidth fit = FittedRate();
    if (!fit.IsZero()) return fit;
  }
  return SpanRate();
}

RateSearch::RateSearch(const RateSearchOptions& options)
    : opt_(options), next_(std::min(options.start_rate, options.max_rate)) {}

bool RateSearch::Saturated(const TrainResult& t) const {
  if (t.delivery_rate.IsZero()) return false;
  // The path delivered clearly less than the sender put in: by rate (the bottleneck
  // spaced the packets), or by count (the queue overflowed).
  const bool rate_sat =
      !t.send_rate.IsZero() && t.delivery_rate.bps() < opt_.saturation * t.send_rate.bps();
  const bool loss_sat = t.packets_sent > 0 && static_cast<double>(t.packets_received) <
                                                  opt_.loss_saturation * static_cast<double>(t.packets_sent);
  return rate_sat || loss_sat;
}

bool RateSearch::Short(const TrainResult& t) const {
  return t.send_rate.bps() < opt_.sender_shortfall * t.target_rate.bps();
}

void RateSearch::OnTrain(const TrainResult& t) {
  if (done_) return;
  trains_.push_back(t);
  const Bandwidth delivered = t.delivery_rate;
  // A train cannot arrive faster than it was sent (beyond the fit's noise): one that
  // did was compressed on the way (a relay or host that stalled, then released a burst)
  // and does not count for the best rate.
  if (!(delivered.bps() > 1.05 * t.send_rate.bps())) best_ = std::max(best_, delivered);
  const bool saturated = Saturated(t);
  if (saturated) ++saturated_trains_;
  // The sender itself could not reach the target (CPU, socket buffers): consecutive
  // such trains end the search.
  if (!saturated && Short(t)) {
    ++sender_limited_;
  } else {
    sender_limited_ = 0;
  }

  // BBR full-pipe detection on the best delivery rate so far.
  if (best_.bps() >= full_bw_.bps() * opt_.full_pipe_growth) {
    full_bw_ = best_;
    full_bw_count_ = 0;
  } else {
    ++full_bw_count_;
  }

  // Full pipe: BBR's rule, and two saturated trains that agree within 10 % (one
  // stretched train on a busy host must not end the search on its own).
  bool agreed = false;
  if (saturated_trains_ >= 2) {
    double a = 0, b = 0;  // the two fastest saturated deliveries
    for (const TrainResult& x : trains_) {
      if (!Saturated(x)) continue;
      const double v = x.delivery_rate.bps();
      if (v > a) {
        b = a;
        a = v;
      } else if (v > b) {
        b = v;
      }
    }
    agreed = b >= 0.9 * a;
  }
  if (agreed && full_bw_count_ >= opt_.full_pipe_rounds) {
    done_ = true;
    stop_reason_ = "full pipe";
  } else if (sender_limited_ >= 3) {
    done_ = true;
    stop_reason_ = "sender limited";
  } else if (static_cast<int>(trains_.size()) >= opt_.max_trains) {
    done_ = true;
    stop_reason_ = "max trains";
  }
  if (done_) return;

  // A short, unsaturated train is repeated at the same target; after a saturated train
  // probe above the best delivery rate; otherwise keep doubling (an early train that
  // looked saturated by noise does not stop the ramp).
  Bandwidth next = saturated            ? best_.Scaled(opt_.probe_gain)
                   : Short(t)           ? t.target_rate
                                        : t.target_rate.Scaled(opt_.growth);
  if (next > opt_.max_rate) {
    if (t.target_rate >= opt_.max_rate) {
      done_ = true;
      stop_reason_ = "max rate";
      return;
    }
    next = opt_.max_rate;
  }
  next_ = next;
}

Bandwidth RateSearch::Estimate() const {
  std::vector<double> sat;
  double top = 0;
  for (const TrainResult& t : trains_) {
    if (Saturated(t)) top = std::max(top, t.delivery_rate.bps());
  }
  for (const TrainResult& t : trains_) {
    if (Saturated(t) && t.delivery_rate.bps() >= 0.7 * top) sat.push_back(t.delivery_rate.bps());
  }
  if (sat.empty()) return best_;
  std::sort(sat.begin(), sat.end());
  const size_t n = sat.size();
  const double median = n % 2 ? sat[n / 2] : 0.5 * (sat[n / 2 - 1] + sat[n / 2]);
  return Bandwidth::BitsPerSecond(median);
}

}  // namespace longhaul::tuner
