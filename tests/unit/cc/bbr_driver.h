// Test helpers for BbrController: a driver that feeds it ACK and loss events as a path
// of a given rate and RTT would (no network), and the paths the tests share.
#pragma once

#include <algorithm>

#include "transport/core/cc/bbr.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/config.h"
#include "transport/core/loss/rtt_estimator.h"

namespace longhaul {
namespace bbr_testing {

inline constexpr Duration kRtt = Duration::Milliseconds(58);

inline TransportConfig BbrConfig() {
  TransportConfig c;
  c.cc = CongestionControl::kBbr;
  c.rate = Bandwidth::Zero();  // no cap
  c.segment = 8192;
  return c;
}

// Feeds a controller ACKs as a path of a given delivery rate and RTT would produce them:
// each ACK acknowledges `bytes`, carries a delivery-rate sample over one RTT, and the
// delivered counters are consistent, so the controller counts round trips as it would
// on a real connection (a round ends once the ACKed packet was sent after the previous
// round's end, i.e. once a further RTT's worth of data is delivered).
class Driver {
 public:
  explicit Driver(CongestionController* cc) : cc_(cc), rtt_(Duration::Milliseconds(100)) {}

  Time now() const { return now_; }
  void Advance(Duration d) { now_ += d; }

  // One round trip at `rate` with `rtt`, in `acks` ACKs spread over the RTT.
  void Round(Bandwidth rate, Duration rtt, int acks = 16, uint64_t ce = 0, uint64_t ect = 0,
             bool app_limited = false) {
    const ByteCount per_rtt = rate.BytesIn(rtt);
    const ByteCount bytes = std::max<ByteCount>(per_rtt / acks, 1);
    for (int i = 0; i < acks; ++i) {
      Ack(rtt / acks, bytes, rate, rtt, i == acks - 1 ? ce : 0, i == acks - 1 ? ect : 0,
          app_limited);
    }
  }

  void Ack(Duration dt, ByteCount bytes, Bandwidth rate, Duration rtt, uint64_t ce = 0,
           uint64_t ect = 0, bool app_limited = false) {
    now_ += dt;
    delivered_ += bytes;
    rtt_.OnSample(rtt, Duration::Zero());
    AckEvent ev;
    ev.now = now_;
    ev.bytes_acked = bytes;
    ev.total_delivered = delivered_;
    ev.bytes_in_flight = in_flight_ ? in_flight_ : rate.BytesIn(rtt);
    ev.ce_delta = ce;
    ev.ect_delta = ect;
    ev.sample.rtt = rtt;
    ev.sample.interval = rtt;
    ev.sample.delivered = std::min<ByteCount>(delivered_, rate.BytesIn(rtt));
    ev.sample.delivery_rate = rate;
    ev.sample.is_app_limited = app_limited;
    cc_->OnAck(ev, rtt_);
  }

  void Loss(uint64_t packets, ByteCount bytes_per_packet, Duration latest_rtt) {
    rtt_.OnSample(latest_rtt, Duration::Zero());
    LossEvent ev;
    ev.now = now_;
    ev.packets_lost = packets;
    ev.bytes_lost = packets * bytes_per_packet;
    ev.bytes_in_flight = in_flight_;
    ev.largest_lost_sent_time = now_ - Duration::Microseconds(1);
    cc_->OnLoss(ev, rtt_);
  }

  // In flight reported with the following events (0: one RTT at the sample rate).
  void set_in_flight(ByteCount b) { in_flight_ = b; }

 private:
  CongestionController* cc_;
  RttEstimator rtt_;
  Time now_ = Time::Zero() + Duration::Seconds(1);
  ByteCount delivered_ = 0;
  ByteCount in_flight_ = 0;
};

// Runs startup on a path of `rate` until the controller leaves it, then `rounds` more.
inline void FillPipe(Driver* d, BbrController* bbr, Bandwidth rate, int rounds = 4) {
  Bandwidth r = Bandwidth::Mbps(10);
  for (int i = 0; i < 40 && bbr->mode() == BbrController::Mode::kStartup; ++i) {
    r = std::min(r.Scaled(2), rate);
    d->Round(r, kRtt);
  }
  for (int i = 0; i < rounds; ++i) d->Round(rate, kRtt);
}

// FillPipe on the 10 Gbit/s link most tests use; returns its rate.
inline Bandwidth FillTenGbps(Driver* d, BbrController* bbr) {
  const Bandwidth link = Bandwidth::Gbps(10);
  FillPipe(d, bbr, link);
  return link;
}

// A full pipe, then another flow's queue: this flow's share of it stays in flight (1.3
// BDP of the link) in the rounds that follow.
inline void FillPipeThenQueue(Driver* d, BbrController* bbr, Bandwidth link) {
  FillPipe(d, bbr, link);
  d->set_in_flight(static_cast<ByteCount>(1.3 * static_cast<double>(link.BytesIn(kRtt))));
}

}  // namespace bbr_testing
}  // namespace longhaul
