#include "tuner/model/transport_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/fec/loss_model.h"
#include "transport/wire/packet.h"

namespace longhaul::tuner {
namespace {

// Mirrors of the connection's constants (transport/core/connection.cc).
constexpr double kGranularityS = 100e-6;  // loss and probe timer granularity
constexpr ByteCount kShardAlignment = 64;  // FEC shard lengths are multiples of 64
constexpr ByteCount kPacketNumberBytes = 8;  // in front of an FEC data shard
// Largest number of tail packets the repair-delay distribution looks at.
constexpr int64_t kMaxTailPackets = 4'000'000;

// Wire layout of one full data packet and of one FEC repair packet.
struct Geometry {
  double datagram = 0;      // data packet: UDP payload bytes
  double wire = 0;          // + link overhead
  double rep_datagram = 0;  // repair packet
  double rep_wire = 0;
  double k = 0, m = 0;      // FEC geometry (m = 0: off)
  // Per data packet, including its share of repair packets.
  double wire_per_data() const { return wire + (k > 0 ? m / k * rep_wire : 0); }
  double datagram_per_data() const { return datagram + (k > 0 ? m / k * rep_datagram : 0); }
};

Geometry MakeGeometry(const TransportConfig& c, ByteCount overhead, ByteCount message_length) {
  // A representative mid-transfer DATA frame (varint fields sized as in a long run).
  wire::DataFrame df;
  df.message_id = 1000;
  df.message_length = std::max<ByteCount>(message_length, c.segment);
  df.offset = df.message_length / 2;
  df.stream_base = ByteCount{1} << 34;
  df.length = c.segment;
  const double dfh = static_cast<double>(wire::DataFrameHeaderSize(df));
  const bool fec = c.fec != FecMode::kOff;
  Geometry g;
  g.datagram = static_cast<double>(wire::kPacketOverhead) + dfh + static_cast<double>(c.segment) +
               (fec ? static_cast<double>(wire::kFecSourceFrameSize) : 0.0);
  g.wire = g.datagram + static_cast<double>(overhead);
  if (fec) {
    g.k = c.fec_k;
    g.m = c.fec_m;
    const ByteCount shard = (kPacketNumberBytes + static_cast<ByteCount>(dfh) + c.segment +
                             kShardAlignment - 1) / kShardAlignment * kShardAlignment;
    wire::FecRepairFrame rf;
    rf.block_id = 1u << 20;
    rf.length = shard;
    g.rep_datagram = static_cast<double>(wire::kPacketOverhead +
                                         wire::FecRepairFrameHeaderSize(rf) + shard);
    g.rep_wire = g.rep_datagram + static_cast<double>(overhead);
  }
  return g;
}

fec::GilbertModel LossChain(double loss, double mean_burst) {
  if (loss <= 0) return fec::GilbertModel{0.0, 1.0};
  // A mean run of at most 1/(1-p) is what random loss gives: treat it as Bernoulli.
  if (mean_burst <= 1.0 / (1.0 - std::min(loss, 0.5)) + 1e-9) return fec::GilbertModel::Bernoulli(loss);
  return fec::GilbertModel::FromLossAndBurst(loss, mean_burst);
}

// One possible extra delay of one packet, with its probability.
struct Outcome {
  double extra;
  double prob;
  uint32_t packet;
};

// Distribution of the largest extra delay over independent packets, each with a few
// mutually exclusive outcomes (the rest of its probability: no extra delay).
struct MaxDistribution {
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
  double p_any = 0;  // P(some packet has an extra delay > 0)
};

MaxDistribution MaxOfOutcomes(std::vector<Outcome> outcomes, uint32_t packets) {
  MaxDistribution d;
  outcomes.erase(std::remove_if(outcomes.begin(), outcomes.end(),
                                [](const Outcome& o) { return !(o.extra > 0 && o.prob > 0); }),
                 outcomes.end());
  if (outcomes.empty()) return d;
  std::sort(outcomes.begin(), outcomes.end(),
            [](const Outcome& a, const Outcome& b) { return a.extra > b.extra; });
  std::vector<double> exceed(packets, 0.0);  // P(packet's extra > x) for the current x
  double log_p = 0;                          // log P(max <= x)
  bool got50 = false, got99 = false;
  for (size_t j = 0; j < outcomes.size();) {
    const double e = outcomes[j].extra;
    // Cross every outcome with this extra value.
    for (; j < outcomes.size() && outcomes[j].extra == e; ++j) {
      double& ex = exceed[outcomes[j].packet];
      const double before = ex;
      ex = std::min(1.0, ex + outcomes[j].prob);
      log_p += (ex < 1.0 ? std::log1p(-ex) : -1e300) - std::log1p(-before);
    }
    const double p_le = std::exp(log_p);  // P(max < e), i.e. P(max <= x) for x just below e
    const double next = j < outcomes.size() ? outcomes[j].extra : 0.0;
    d.mean += (e - next) * (1.0 - p_le);
    if (!got99 && p_le < 0.99) {
      d.p99 = e;
      got99 = true;
    }
    if (!got50 && p_le < 0.5) {
      d.p50 = e;
      got50 = true;
    }
  }
  d.p_any = 1.0 - std::exp(log_p);
  return d;
}

// The quantities the steps of Predict share, derived from the link, the settings and
// the workload step by step (each step fills its part, in the order Predict calls them).
struct ModelState {
  const LinkEstimate& link;
  const TransportConfig& cfg;
  const Workload& wl;
  // setup
  double C = 0;  // bottleneck, wire bits/s
  double P = 0;  // pacing rate, wire bits/s
  double S = 0;  // segment bytes
  Geometry g;
  bool fec = false;
  double depth = 1;  // FEC interleave
  bool tail_on = false;
  double w_data = 0;  // wire bytes per data packet
  double d_data = 0;  // datagram bytes per data packet
  // loss
  double p_rand = 0, p = 0, queue_s = 0, burst = 1, residual = 0;
  // round trip and loss detection
  double rtt_min = 0, rtt50 = 0, rtt99 = 0, send_limit = 0;
  double rtt_eff = 0, rtt_eff99 = 0, srtt = 0, rttvar = 0, frac = 0, rp = 0, fec_wait = 0;
  double one_way = 0;
  // flight limits and repairs
  double max_dgram = 0, window_eff = 0, t_pkt_send = 0, det = 0, t_fec = 0;
  double q_sr = 0, q_fec = 0;

  ModelState(const LinkEstimate& l, const TransportConfig& c, const Workload& w)
      : link(l), cfg(c), wl(w) {}
  double TimeThreshold() const { return std::max((1 + frac) * srtt, kGranularityS) + fec_wait; }
  double Pto() const {
    return std::clamp(srtt + std::max(4 * rttvar, kGranularityS) + cfg.max_ack_delay.seconds(),
                      cfg.min_pto.seconds(), cfg.max_pto.seconds());
  }
  // Message bytes/s of a wire rate, less what the repeats take.
  double StreamRate(double wire_bps) const { return wire_bps / (8 * w_data) * S * (1 - residual); }
};

// Pacing rate, packet geometry and FEC block closing.
void SetUp(ModelState& s, Prediction* pr) {
  const TransportConfig& cfg = s.cfg;
  s.C = std::max(s.link.rate.bps(), 1.0);
  s.P = cfg.rate.bps();
  // No cap, or an adaptive controller's cap above the bottleneck: it paces at the
  // bottleneck it measures.
  if (s.P <= 0 || (cfg.cc == CongestionControl::kBbr && s.P > s.C)) s.P = s.C;
  s.S = static_cast<double>(cfg.segment);
  const ByteCount msg_len = s.wl.objective == Objective::kMct ? s.wl.message_size : s.wl.chunk;
  s.g = MakeGeometry(cfg, s.link.overhead, msg_len);
  s.fec = s.g.k > 0;
  s.depth = std::max<uint32_t>(cfg.fec_interleave, 1);
  if (s.fec) {
    // A group (D blocks) closes when full, when the sender runs out of data, or when no
    // data packet followed the last one within fec_flush. While data flows faster than
    // that the blocks fill; a path so slow that packets are further apart than the flush
    // deadline closes a group after every packet (m parity per data packet).
    const double t_data = s.g.wire * 8 / std::min(s.P, s.C);
    if (t_data >= cfg.fec_flush.seconds()) s.g.k = 1;
  }
  // The connection sends no tail-protection copies while FEC is on.
  s.tail_on = cfg.tail_protect && !s.fec;
  s.w_data = s.g.wire_per_data();
  s.d_data = s.g.datagram_per_data();
  pr->header_efficiency = s.S / s.g.wire;
  pr->fec_overhead = s.fec ? (s.g.m / s.g.k) * s.g.rep_wire / s.g.wire : 0.0;
}

// Loss at the bottleneck (random, then queue overflow when paced above it), and what
// FEC leaves of it over the interleaved chain.
void LossAndRepair(ModelState& s, Prediction* pr) {
  s.p_rand = std::clamp(s.link.loss, 0.0, 0.5);
  const double arrive = (1 - s.p_rand) * s.P;  // wire bits/s reaching the queue
  const double p_queue = arrive > s.C ? 1.0 - s.C / arrive : 0.0;
  s.p = s.p_rand + (1 - s.p_rand) * p_queue;
  pr->loss = s.p;
  s.queue_s = arrive > s.C ? static_cast<double>(s.link.QueueBytes()) * 8 / s.C : 0.0;
  // Queue drops come in runs too (drop-tail), but the random process dominates the model.
  s.burst = std::max(1.0, s.link.mean_burst);
  const fec::GilbertModel chain = LossChain(s.p, s.burst);
  s.residual = s.p;
  if (s.fec && s.p > 0) {
    const int k = static_cast<int>(s.g.k), m = static_cast<int>(s.g.m);
    const fec::GilbertModel sub = chain.Subsampled(static_cast<uint32_t>(s.depth));
    const std::vector<double> dist = fec::LossCountDistribution(sub, k + m, k + m);
    double res = 0, fail = 0;
    for (int j = m + 1; j <= k + m; ++j) {
      res += dist[j] * j / (k + m);
      fail += dist[j];
    }
    pr->block_failure = fail;
    s.residual = res;
  }
  pr->residual_loss = s.residual;
  // Every data packet lost and not rebuilt is sent again (and again with probability
  // `residual`): a fraction `residual` of data packets are repeats.
  pr->retransmitted = s.residual;
}

// Round trip, ACK delay and the loss-detection thresholds.
void RoundTrip(ModelState& s, Prediction* pr) {
  const TransportConfig& cfg = s.cfg;
  s.rtt_min = s.link.rtt.seconds();
  s.rtt50 = std::max(s.link.rtt_p50.seconds(), s.rtt_min);
  s.rtt99 = std::max(s.link.rtt_p99.seconds(), s.rtt50);
  const double t_wire_pkt = s.w_data * 8 / s.C;  // serialisation of one data packet
  s.send_limit = std::min(s.P, s.C / std::max(1e-12, 1 - s.p_rand));
  // ACKs go out every ack_every packets or after max_ack_delay.
  const double ack_interval =
      std::min(cfg.ack_every * s.w_data * 8 / std::min(s.P, s.C), cfg.max_ack_delay.seconds());
  s.rtt_eff = s.rtt50 + s.queue_s + t_wire_pkt + ack_interval;  // in-flight residence
  s.rtt_eff99 = s.rtt99 + s.queue_s + t_wire_pkt + ack_interval;
  s.srtt = s.rtt50 + s.queue_s + t_wire_pkt + ack_interval / 2;
  s.rttvar = std::max(s.rtt99 - s.rtt50, 0.0) / 2;
  pr->rtt_effective_s = s.rtt_eff;
  s.frac = cfg.reorder_rtt_fraction;
  // Loss detection of FEC members waits for their block: the packet threshold grows by
  // the block's span (nominal k), the time threshold by that span at the pacing rate plus
  // the flush deadline (transport/core/connection.cc, DetectLosses).
  const double span = s.fec ? (cfg.fec_k + s.g.m) * s.depth : 0.0;
  s.rp = cfg.reorder_packets + span;
  s.fec_wait =
      s.fec ? span * static_cast<double>(cfg.MaxDatagramSize()) * 8 / s.P + cfg.fec_flush.seconds()
            : 0.0;
  s.one_way = s.rtt50 / 2 + s.queue_s;
}

// The window and the receive window, stalls behind holes, the steady goodput and the
// windows the settings would need.
void FlightLimits(ModelState& s, Prediction* pr) {
  const TransportConfig& cfg = s.cfg;
  s.max_dgram = static_cast<double>(cfg.MaxDatagramSize());
  s.window_eff = std::max(0.0, static_cast<double>(cfg.window) - s.max_dgram);
  // wire rate at which window_eff datagram bytes are in flight for rtt_eff
  pr->window_limit_bps = s.window_eff / s.rtt_eff * 8 * (s.w_data / s.d_data);
  double rate = std::min(s.send_limit, pr->window_limit_bps);  // wire bits/s sent
  // Hole hold time: a selective-repeat repair is detected by the packet threshold (the
  // ACK of the reorder_packets-th later packet) or the time threshold, then resent at
  // once (repairs go first) and arrives one way later, as the original would have.
  s.t_pkt_send = s.w_data * 8 / std::max(rate, 1.0);
  s.det = std::max(kGranularityS, std::min(s.rp * s.t_pkt_send + s.rtt_eff, s.TimeThreshold()));
  pr->repair_s = s.det;
  // FEC repairs a hole when the block's parity arrives: about a group later.
  s.t_fec = s.fec ? s.depth * (s.g.k + s.g.m) * s.t_pkt_send : 0.0;
  // Receive window: message bytes beyond the first undelivered one. The sender learns
  // of delivered bytes an RTT (+ ACK delay) after sending them; behind a hole, after
  // the repair as well.
  const double recv_w = static_cast<double>(cfg.recv_window);
  const double hold_base = s.rtt_eff + (s.fec && s.p > 0 ? s.t_fec : 0.0);
  pr->recv_window_limit_bps = recv_w / hold_base / s.S * (8 * s.w_data) / (1 - s.residual);
  pr->limit = s.P <= s.C ? "pacing" : "link";
  if (s.P > s.C && pr->window_limit_bps < s.C) pr->limit = "window";
  if (s.P <= s.C && pr->window_limit_bps < s.P) pr->limit = "window";
  if (pr->recv_window_limit_bps < rate) {
    rate = pr->recv_window_limit_bps;
    pr->limit = "receive window";
  }
  double gs = s.StreamRate(rate);
  // Stalls behind selective-repeat holes. A hole sent at t0 pins the receiver's credit
  // until its repair arrives; the sender runs into the credit after recv_window / G of
  // sending and waits for the rest of (RTT + repair): a stall s. Holes sent during those
  // recv_window / G are absorbed by the same stall (their own credit limit comes later
  // by the stall's length). So a renewal cycle is: recv_window / G sending, s stalled,
  // then sending until the next hole (1 / hole rate, in sending time).
  const double need_hole = s.rtt_eff + s.det;
  const double run = recv_w / std::max(gs, 1.0);
  const double stall = std::max(0.0, need_hole - run);
  const double hole_rate = gs / s.S * (s.fec ? pr->block_failure / s.g.k : s.p / s.burst);
  double stall_fraction = 0;
  if (stall > 0 && hole_rate > 0) {
    stall_fraction = stall / (run + stall + 1.0 / hole_rate);
    if (stall_fraction > 0.01 && pr->limit != "window") pr->limit = "receive window";
  }
  gs *= (1 - stall_fraction);
  pr->send_rate_bps = rate * (1 - stall_fraction);
  // The bottleneck delivers at most C of wire bits; repeats of lost packets are part
  // of what it carries only when they survive, so at most C x S / w_data of new data.
  gs = std::min(gs, s.C / (8 * s.w_data) * s.S);
  pr->steady_goodput_bps = gs * 8;
  // What the window must hold: rate x (RTT + repair time) (config.h). In flight proper
  // is rate x RTT; the repair time is headroom for the data waiting on a repair, which
  // an application that bounds its submissions by the window (longhaul-perf) needs.
  pr->window_needed = static_cast<ByteCount>(
      std::ceil(s.send_limit / (8 * s.w_data) * s.d_data * (s.rtt_eff99 + (s.p > 0 ? s.det : 0.0)) +
                s.max_dgram));
  pr->recv_window_needed = static_cast<ByteCount>(std::ceil(
      s.StreamRate(s.send_limit) *
          (s.rtt_eff99 + (s.p > 0 ? (s.fec && pr->block_failure < 1e-9 ? s.t_fec : s.det) : 0.0)) +
      s.S));
  // Per-packet event probabilities: losses come in bursts; for the largest delay what
  // counts is how many bursts (events) there are, not how many packets they hit.
  s.q_sr = (s.fec ? s.residual : s.p) / s.burst;                      // selective repeat
  s.q_fec = s.fec ? std::max(0.0, s.p - s.residual) / s.burst : 0.0;  // rebuilt by FEC
}

// The outcomes of one packet that may need a repair: a selective repeat (detected after
// `normal`, or sooner through a tail copy `copy_extra` later), or an FEC rebuild.
void AddPacketOutcomes(const ModelState& s, double normal, bool copy, double copy_extra,
                       double fec_extra, uint32_t idx, std::vector<Outcome>* outs) {
  if (s.q_sr > 0) {
    if (copy) {
      outs->push_back({std::min(normal, copy_extra), s.q_sr * (1 - s.p), idx});
      outs->push_back({normal, s.q_sr * s.p, idx});
    } else {
      outs->push_back({normal, s.q_sr * (1 - s.p), idx});
      outs->push_back({normal + s.TimeThreshold(), s.q_sr * s.p, idx});
    }
  }
  if (s.q_fec > 0)
    outs->push_back({copy ? std::min(fec_extra, copy_extra) : fec_extra, s.q_fec, idx});
}

// Bulk: the end of a transfer. Packet i counted back from the last one (sent i x t_pkt
// before it). Its loss is repaired by: the packet threshold (later packets or tail
// copies acknowledged), the time threshold, a probe timeout (the very last packet with
// nothing after it), or a tail-protection copy sent (i + 1) packet times after the end.
void BulkTail(const ModelState& s, Prediction* pr) {
  const double t_pkt = s.t_pkt_send;
  std::vector<Outcome> outs;
  const double horizon = std::max({s.TimeThreshold(), s.Pto(), s.rp * t_pkt + s.rtt_eff}) + t_pkt;
  const int64_t n_tail =
      std::min<int64_t>(kMaxTailPackets, static_cast<int64_t>(horizon / t_pkt) + 1);
  if (s.q_sr > 0 || s.q_fec > 0) {
    for (int64_t i = 0; i < n_tail; ++i) {
      const double delta = static_cast<double>(i) * t_pkt;
      double d = std::numeric_limits<double>::infinity();
      if (s.tail_on || i >= s.rp) d = std::min(d, s.rp * t_pkt + s.rtt_eff);
      if (s.tail_on || i >= 1) d = std::min(d, s.TimeThreshold());
      if (i == 0 && !s.tail_on) d = std::min(d, s.Pto());
      const double normal = std::max(0.0, d - delta);
      const bool copy = s.tail_on && (2 * i + 1) * t_pkt <= s.srtt;
      // The final group closes at the end; its parity follows the last data packet.
      const double fec_extra = s.g.m * s.depth * t_pkt;
      AddPacketOutcomes(s, normal, copy, (i + 1) * t_pkt, fec_extra, static_cast<uint32_t>(i),
                        &outs);
    }
  }
  MaxDistribution tail = MaxOfOutcomes(std::move(outs), static_cast<uint32_t>(n_tail));
  pr->tail_s = tail.mean;
  if (s.wl.bulk_bytes > 0) {
    pr->transfer_s =
        static_cast<double>(s.wl.bulk_bytes) * 8 / std::max(pr->steady_goodput_bps, 1.0) +
        s.one_way + tail.mean;
    pr->goodput_bps = static_cast<double>(s.wl.bulk_bytes) * 8 / pr->transfer_s;
  } else {
    pr->goodput_bps = pr->steady_goodput_bps;
  }
}

// One message's serialisation: its wire and datagram bytes (with its parity: the
// message closes its last group early, the remainder spread over up to D shortened
// blocks, each with m parity) at the sending rate, or window rounds.
double MessageSendTime(const ModelState& s, double n_pkts) {
  double m_wire = n_pkts * s.w_data;
  double m_dgram = n_pkts * s.d_data;
  if (s.fec) {
    const double group = s.depth * s.g.k;
    const double full = std::floor(n_pkts / group);
    const double rest = n_pkts - full * group;
    const double blocks = full * s.depth + (rest > 0 ? std::min(s.depth, rest) : 0.0);
    m_wire = n_pkts * s.g.wire + blocks * s.g.m * s.g.rep_wire;
    m_dgram = n_pkts * s.g.datagram + blocks * s.g.m * s.g.rep_datagram;
  }
  double t_ser = m_wire * 8 / std::min(s.P, s.C);
  if (m_dgram > s.window_eff && s.window_eff > 0) {
    t_ser = std::max(
        t_ser, (m_dgram / s.window_eff - 1) * s.rtt_eff + s.window_eff * 8 / std::min(s.P, s.C));
  }
  return t_ser;
}

// The repair outcomes of the N packets of one message followed by `gap` idle (tail
// copies fill it).
std::vector<Outcome> MessageOutcomes(const ModelState& s, uint32_t N, double n_pkts, double gap) {
  const double t_msg_pkt = s.w_data * 8 / std::min(s.P, s.C);
  const double n_copy = s.tail_on ? std::floor(gap / t_msg_pkt) : 0.0;
  const double rp = s.rp;
  std::vector<Outcome> outs;
  if (!(s.q_sr > 0 || s.q_fec > 0)) return outs;
  outs.reserve(2 * N);
  for (uint32_t i = 0; i < N; ++i) {
    const double delta = i * t_msg_pkt;
    double d = std::numeric_limits<double>::infinity();
    // Packet threshold: reorder_packets later packets, from this message, its tail
    // copies, then the next message.
    const double later_in_msg = i;
    if (later_in_msg >= rp) {
      d = std::min(d, rp * t_msg_pkt + s.rtt_eff);
    } else if (later_in_msg + n_copy >= rp) {
      d = std::min(d, rp * t_msg_pkt + s.rtt_eff);
    } else {
      d = std::min(d, delta + gap + (rp - later_in_msg - n_copy) * t_msg_pkt + s.rtt_eff);
    }
    // Time threshold once any later packet is acknowledged; a probe timeout for a
    // last packet with nothing after it before the next message.
    if (i >= 1 || n_copy >= 1) {
      d = std::min(d, s.TimeThreshold());
    } else {
      d = std::min(d, std::max(s.TimeThreshold(), delta + gap + t_msg_pkt + s.rtt_eff));
      d = std::min(d, s.Pto());
    }
    const double normal = std::max(0.0, d - delta);
    const bool copy = (i + 1) <= n_copy && (2.0 * i + 1) * t_msg_pkt <= s.srtt;
    const double fec_extra =
        s.g.m * std::min<double>(s.depth, std::ceil(n_pkts / s.g.k)) * t_msg_pkt;
    AddPacketOutcomes(s, normal, copy, (i + 1) * t_msg_pkt, fec_extra, i, &outs);
  }
  return outs;
}

// Messages complete in order: a message also waits for any earlier one still being
// repaired. Packet i of the message b places back finished b x interval earlier, so
// its repair delays this message by (its own extra - b x interval). Returns the
// packets the outcomes now span.
uint32_t AddEarlierMessages(bool stable, uint32_t N, double interval, std::vector<Outcome>* outs) {
  const size_t own = outs->size();
  uint32_t packets = N;
  double longest = 0;
  for (size_t j = 0; j < own; ++j) longest = std::max(longest, (*outs)[j].extra);
  const int64_t back_max = stable ? static_cast<int64_t>(longest / interval) : 0;
  const int64_t cap_back =
      std::max<int64_t>(0, static_cast<int64_t>(kMaxTailPackets / std::max<size_t>(own, 1)));
  for (int64_t b = 1; b <= std::min(back_max, cap_back); ++b) {
    for (size_t j = 0; j < own; ++j) {
      const double e = (*outs)[j].extra - static_cast<double>(b) * interval;
      if (e > 0) outs->push_back({e, (*outs)[j].prob, packets + (*outs)[j].packet});
    }
    packets += N;
  }
  return packets;
}

// Messages: the completion time of one message under the offered load.
void MessageCompletion(const ModelState& s, Prediction* pr) {
  const TransportConfig& cfg = s.cfg;
  const double M = static_cast<double>(std::max<ByteCount>(s.wl.message_size, 1));
  const double n_pkts = std::ceil(M / s.S);
  const uint32_t N = static_cast<uint32_t>(std::min(n_pkts, 4e6));
  // The simulator's ideal: rtt/2 + (size + per-packet headers at their largest) at C.
  const double hdr_max = static_cast<double>(cfg.MaxDatagramSize() - cfg.segment + s.link.overhead);
  pr->mct_ideal_s = s.rtt_min / 2 + (M + n_pkts * hdr_max) * 8 / s.C;
  const double t_ser = MessageSendTime(s, n_pkts);
  const double interval = M * 8 / (s.C * std::max(s.wl.load, 1e-9));
  const double rho = t_ser / interval;
  pr->stable = rho < 1.0;
  const double gap = std::max(0.0, interval - t_ser);  // idle after each message
  std::vector<Outcome> outs = MessageOutcomes(s, N, n_pkts, gap);
  const uint32_t packets = AddEarlierMessages(pr->stable, N, interval, &outs);
  MaxDistribution ex = MaxOfOutcomes(std::move(outs), packets);
  // Probability of a selective-repeat repair (any packet needs one).
  pr->p_message_repair =
      s.q_sr > 0 ? -std::expm1(static_cast<double>(N) * std::log1p(-s.q_sr)) : 0.0;
  const double one_way_p50 = s.rtt50 / 2 + s.queue_s;
  const double one_way_p99 = s.rtt_min / 2 + s.queue_s + 0.53 * (s.rtt99 - s.rtt_min);
  pr->mct_base_s = one_way_p50 + t_ser;
  pr->mct_mean_s = pr->mct_base_s + ex.mean;
  pr->mct_p50_s = pr->mct_base_s + ex.p50;
  pr->mct_p99_s = pr->mct_base_s + std::max(ex.p99, one_way_p99 - one_way_p50);
  if (!pr->stable) {
    // The backlog grows for the whole run; report it as a very long completion time.
    const double backlog = (rho - 1) * interval * static_cast<double>(s.wl.messages);
    pr->mct_mean_s += backlog / 2;
    pr->mct_p50_s += backlog / 2;
    pr->mct_p99_s += backlog;
  }
}

}  // namespace

const char* ObjectiveName(Objective o) {
  switch (o) {
    case Objective::kGoodput:
      return "goodput";
    case Objective::kMct:
      return "mct";
  }
  return "?";
}

absl::StatusOr<Objective> ParseObjective(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "goodput") return Objective::kGoodput;
  if (t == "mct") return Objective::kMct;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown objective '", text, "' (expected goodput or mct)"));
}

ByteCount DataPacketWireBytes(const TransportConfig& config, ByteCount link_overhead) {
  return static_cast<ByteCount>(MakeGeometry(config, link_overhead, 16 << 20).wire);
}

double Prediction::Score(Objective o) const {
  return o == Objective::kGoodput ? goodput_bps : -mct_p99_s;
}

std::string Prediction::ToString(Objective o) const {
  if (o == Objective::kMct) {
    return absl::StrFormat(
        "mct p99 %.3f ms (mean %.3f, base %.3f, ideal %.3f), P(repair) %.3g, goodput %.4g Gbit/s",
        mct_p99_s * 1e3, mct_mean_s * 1e3, mct_base_s * 1e3, mct_ideal_s * 1e3, p_message_repair,
        steady_goodput_bps / 1e9);
  }
  return absl::StrFormat(
      "goodput %.4g Gbit/s (steady %.4g, limited by %s), loss %.3g, residual %.3g",
      goodput_bps / 1e9, steady_goodput_bps / 1e9, limit, loss, residual_loss);
}

Prediction Predict(const LinkEstimate& link, const TransportConfig& cfg, const Workload& wl) {
  Prediction pr;
  ModelState s(link, cfg, wl);
  SetUp(s, &pr);
  LossAndRepair(s, &pr);
  RoundTrip(s, &pr);
  FlightLimits(s, &pr);
  if (wl.objective == Objective::kGoodput) {
    BulkTail(s, &pr);
  } else {
    pr.goodput_bps = pr.steady_goodput_bps;
  }
  if (wl.objective == Objective::kMct) MessageCompletion(s, &pr);
  return pr;
}

}  // namespace longhaul::tuner
