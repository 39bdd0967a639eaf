#include "tuner/probe/probe_phases.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/base/parse.h"

namespace longhaul::tuner::probe {
namespace {

constexpr uint32_t kMinPayload = 64;

RateSearchOptions SearchOptions(const RatePhaseOptions& o) {
  RateSearchOptions ro;
  ro.start_rate = o.start_rate;
  ro.max_rate = o.max_rate;
  return ro;
}

}  // namespace

// ---- RTT phase ----

std::optional<int64_t> RttPhase::NextSendNs(int64_t send_end_ns) const {
  if (static_cast<int>(ids_.size()) >= probes_ || next_ns_ >= send_end_ns) return std::nullopt;
  return next_ns_;
}

void RttPhase::OnSent(uint64_t echo_id) {
  ids_.push_back(echo_id);
  next_ns_ += spacing_ns_;
}

void RttPhase::OnReply(uint64_t echo_id, Duration rtt) { replies_[echo_id] = rtt; }

bool RttPhase::AllAnswered() const {
  for (uint64_t id : ids_) {
    if (!replies_.count(id)) return false;
  }
  return true;
}

int64_t RttPhase::StragglerDeadlineNs(int64_t now_ns, int64_t phase_end_ns) const {
  Duration longest = Duration::Milliseconds(200);
  for (const auto& [id, rtt] : replies_) longest = std::max(longest, rtt * 3);
  return std::min(phase_end_ns, now_ns + std::min(longest, Duration::Seconds(2)).ns());
}

absl::StatusOr<RttSummary> RttPhase::Verdict(const std::string& target) const {
  std::vector<Duration> rtts;
  for (uint64_t id : ids_) {
    auto it = replies_.find(id);
    if (it != replies_.end()) rtts.push_back(it->second);
  }
  if (rtts.empty()) {
    return absl::UnavailableError(
        absl::StrCat("none of ", ids_.size(), " echoes came back from ", target));
  }
  return SummarizeRtt(rtts);
}

// ---- rate phase ----

RatePhase::RatePhase(const RatePhaseOptions& options)
    : opt_(options), search_(SearchOptions(options)) {
  // Jumbo-sized trains first; smaller ones when nothing of a train arrives.
  const uint32_t cap = opt_.max_mtu ? opt_.max_mtu : (opt_.local_mtu ? opt_.local_mtu : 1500);
  for (uint32_t mtu : {9000u, 1500u, 1200u}) {
    if (mtu <= cap) sizes_.push_back(mtu - kIpUdpOverhead);
  }
  if (sizes_.empty()) sizes_.push_back(std::max<uint32_t>(cap, 96) - kIpUdpOverhead);
}

TrainPlan RatePhase::NextTrain(Duration rtt_p99) const {
  TrainPlan p;
  p.rate = search_.NextRate();
  p.payload = sizes_[size_index_];
  const double wire = p.payload + kIpUdpOverhead;
  const uint64_t n =
      static_cast<uint64_t>(p.rate.bps() * opt_.train_duration.seconds() / (8 * wire));
  p.packets = std::clamp<uint64_t>(n, 64, kMaxTrainPackets);
  p.send_time = p.rate.TransferTime(static_cast<ByteCount>(p.packets * wire));
  p.wait = rtt_p99 * 2 + p.send_time + Duration::Milliseconds(50);
  return p;
}

std::optional<std::string> RatePhase::StopBefore(const TrainPlan& plan, int64_t now_ns,
                                                 int64_t phase_end_ns,
                                                 bool over_byte_budget) const {
  if (now_ns + (plan.send_time + plan.wait).ns() > phase_end_ns) {
    return "rate phase stopped at its time share";
  }
  if (over_byte_budget) return "rate phase stopped at the byte budget";
  return std::nullopt;
}

RatePhase::Verdict RatePhase::OnNoReport(uint32_t train) {
  if (++missing_reports_ >= 3) {
    return {Action::kFail,
            absl::StrCat("the responder at ", opt_.target, " stopped answering report requests")};
  }
  return {Action::kRepeat, absl::StrFormat("no report for train %d: repeated", train)};
}

RatePhase::Verdict RatePhase::OnEmptyTrain(uint32_t train, uint32_t payload, bool may_search_pmtu) {
  if (may_search_pmtu) {
    return {Action::kSearchPmtu,
            absl::StrFormat("no %d-byte datagram of train %d arrived; searching the "
                            "path MTU first",
                            payload, train)};
  }
  return Fallback(train, payload);
}

RatePhase::Verdict RatePhase::OnPathMtu(uint32_t train, uint32_t payload, uint32_t pmtu) {
  if (pmtu >= 96) {
    sizes_ = {static_cast<uint32_t>(std::min<uint32_t>(pmtu, 9000) - kIpUdpOverhead)};
    size_index_ = 0;
    return {Action::kRepeat, ""};
  }
  return Fallback(train, payload);
}

RatePhase::Verdict RatePhase::Fallback(uint32_t train, uint32_t payload) {
  if (size_index_ + 1 < sizes_.size()) {
    ++size_index_;
    return {Action::kNextSize,
            absl::StrFormat("no %d-byte datagram of train %d arrived; trying %d bytes", payload,
                            train, sizes_[size_index_])};
  }
  if (++empty_trains_ >= 2) {
    return {Action::kFail, absl::StrCat("trains to ", opt_.target,
                                        " do not get through (echoes do): blocked or dropped")};
  }
  return {Action::kRepeat, ""};
}

TrainResult RatePhase::OnReport(const TrainPlan& plan, Bandwidth send_rate, uint64_t sent,
                                Duration send_span, const TrainReport& r) {
  TrainResult t;
  t.target_rate = plan.rate;
  t.send_rate = send_rate;
  t.packets_sent = sent;
  t.packets_received = r.packets;
  t.duration = send_span;
  if (r.packets >= 8 && r.fit_rate_bps > 0) {
    t.delivery_rate = Bandwidth::BitsPerSecond(static_cast<double>(r.fit_rate_bps));
  } else if (r.packets >= 2 && r.span_ns > 0) {
    t.delivery_rate = Bandwidth::FromBytesAndDuration(r.wire_bytes - r.first_wire_bytes,
                                                      Duration::Nanoseconds(r.span_ns));
  }
  search_.OnTrain(t);
  trains_.push_back(t);
  return t;
}

absl::StatusOr<RateOutcome> RatePhase::Finish(Duration max_duration, ByteCount max_bytes) const {
  if (trains_.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("no rate train completed within the probe's time or byte budget (",
                     max_duration.ToString(), ", ", FormatByteCount(max_bytes), ")"));
  }
  RateOutcome o;
  o.stop_reason = search_.done() ? search_.stop_reason() : "budget";
  o.saturated = search_.saturated();
  o.max_delivery_bps = search_.MaxDelivery().bps();
  o.rate = search_.Estimate();
  // Spread of the saturated trains' delivery rates around the estimate.
  double lo = o.rate.bps(), hi = o.rate.bps();
  for (const TrainResult& t : trains_) {
    if (search_.Saturated(t)) {
      lo = std::min(lo, t.delivery_rate.bps());
      hi = std::max(hi, t.delivery_rate.bps());
    }
  }
  o.rel_error = o.rate.bps() > 0 ? (hi - lo) / (2 * o.rate.bps()) : 1.0;
  if (!o.saturated) {
    o.notes.push_back(absl::StrCat("no train saturated the path (", o.stop_reason,
                                   "): the rate is a lower bound"));
  }
  // A sender that keeps falling short of its train rates is on a busy host: its trains
  // are stretched and the receiver sees the stretch, so the rate may read low.
  for (const TrainResult& t : trains_) {
    o.short_trains += t.send_rate.bps() < 0.9 * t.target_rate.bps();
  }
  if (o.short_trains >= std::max<int>(2, static_cast<int>(trains_.size()) / 2)) {
    o.host_limited = true;
    o.notes.push_back(absl::StrFormat(
        "the sender fell short of %d of %d train rates (a busy host): the rate may read low",
        o.short_trains, trains_.size()));
  }
  return o;
}

// ---- loss phase ----

LossPlan PlanLossPhase(const LossPlanInput& in) {
  LossPlan p;
  p.reserve = in.rtt_p99 * 5 + (in.rtt_idle.p99 - in.rtt_idle.min) + Duration::Milliseconds(600);
  const double seconds = (in.deadline_ns - in.now_ns - p.reserve.ns()) * 1e-9;
  if (seconds < 0.2) {
    p.skip = "no time left for the loss phase: loss unknown";
    return p;
  }
  const double left_bytes =
      static_cast<double>(in.max_bytes - std::min(in.max_bytes, in.bytes_sent));
  const double rate = std::min(in.loss_load * in.rate.bps(), left_bytes * 8 / seconds);
  const uint32_t path = in.pmtu ? in.pmtu : 1500;
  double wire = rate / (8.0 * std::max<uint32_t>(in.packets_per_s, 1));
  const uint32_t payload =
      static_cast<uint32_t>(std::clamp(wire - kIpUdpOverhead, static_cast<double>(kMinPayload),
                                       static_cast<double>(path - kIpUdpOverhead)));
  wire = payload + kIpUdpOverhead;
  uint64_t n = static_cast<uint64_t>(rate * seconds / (8 * wire));
  n = std::min<uint64_t>(n, in.max_trace_packets ? in.max_trace_packets : kMaxTrainPackets);
  if (n < 1000) {
    p.skip = "loss phase too short (under 1000 packets): loss unknown";
    return p;
  }
  p.rate_bps = rate;
  p.payload = payload;
  p.packets = n;
  p.echo_every = std::max<uint64_t>(1, n / 2000);
  p.stop_ns = in.deadline_ns - p.reserve.ns();
  return p;
}

LossReading ReadLossReport(const TrainReport& r) {
  LossReading out;
  LossCounts c;
  c.packets = r.trace_packets;
  c.lost = r.lost;
  c.bursts = r.bursts;
  c.n0x = r.n0x;
  c.n01 = r.n01;
  c.n1x = r.n1x;
  c.n11 = r.n11;
  c.n1x1 = r.n1x1;
  c.n111 = r.n111;
  c.triples = r.triples;
  out.loss = EstimateLoss(c);
  out.reorder.packets = r.packets;
  out.reorder.reordered = r.reordered;
  out.reorder.max_extent_packets = r.max_extent_packets;
  out.reorder.max_late = Duration::Nanoseconds(static_cast<int64_t>(r.max_late_ns));
  out.duplicates = r.duplicates;
  out.responder_drops = r.rx_drops;
  if (r.rx_drops > 0) {
    out.notes.push_back(absl::StrFormat(
        "the responder's socket dropped %d datagrams during the loss phase: the loss "
        "estimate is an upper bound (lower --loss_pps or give the responder more CPU)",
        r.rx_drops));
  }
  return out;
}

}  // namespace longhaul::tuner::probe
