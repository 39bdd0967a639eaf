#include "tuner/model/transport_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/core/fec/loss_model.h"
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

}  // namespace

const char* ObjectiveName(Objective o) {
  switch (o) {
    case Objective::kGoodput: return "goodput";
    case Objective::kMct: return "mct";
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
  return absl::StrFormat("goodput %.4g Gbit/s (steady %.4g, limited by %s), loss %.3g, residual %.3g",
                         goodput_bps / 1e9, steady_goodput_bps / 1e9, limit, loss, residual_loss);
}

Prediction Predict(const LinkEstimate& link, const TransportConfig& cfg, const Workload& wl) {
  Prediction pr;
  const double C = std::max(link.rate.bps(), 1.0);  // bottleneck, wire bits/s
  double P = cfg.rate.bps();                          // pacing rate
  // No cap, or an adaptive controller's cap above the bottleneck: it paces at the
  // bottleneck it measures.
  if (P <= 0 || (cfg.cc == CongestionControl::kBbr && P > C)) P = C;
  const double S = static_cast<double>(cfg.segment);
  const ByteCount msg_len = wl.objective == Objective::kMct ? wl.message_size : wl.chunk;
  Geometry g = MakeGeometry(cfg, link.overhead, msg_len);
  const bool fec = g.k > 0;
  const double depth = std::max<uint32_t>(cfg.fec_interleave, 1);
  if (fec) {
    // A group (D blocks) closes when full, when the sender runs out of data, or when no
    // data packet followed the last one within fec_flush. While data flows faster than
    // that the blocks fill; a path so slow that packets are further apart than the flush
    // deadline closes a group after every packet (m parity per data packet).
    const double t_data = g.wire * 8 / std::min(P, C);
    if (t_data >= cfg.fec_flush.seconds()) g.k = 1;
  }
  // The connection sends no tail-protection copies while FEC is on.
  const bool tail_on = cfg.tail_protect && !fec;
  const double w_data = g.wire_per_data();      // wire bytes per data packet
  const double d_data = g.datagram_per_data();  // datagram bytes per data packet
  pr.header_efficiency = S / g.wire;
  pr.fec_overhead = fec ? (g.m / g.k) * g.rep_wire / g.wire : 0.0;

  // ---- loss at the bottleneck: random, then queue overflow when paced above it ----
  const double p_rand = std::clamp(link.loss, 0.0, 0.5);
  const double arrive = (1 - p_rand) * P;  // wire bits/s reaching the queue
  const double p_queue = arrive > C ? 1.0 - C / arrive : 0.0;
  const double p = p_rand + (1 - p_rand) * p_queue;
  pr.loss = p;
  const double queue_s = arrive > C ? static_cast<double>(link.QueueBytes()) * 8 / C : 0.0;
  // Queue drops come in runs too (drop-tail), but the random process dominates the model.
  const double burst = std::max(1.0, link.mean_burst);
  const fec::GilbertModel chain = LossChain(p, burst);

  // ---- FEC: block failure and residual loss over the interleaved chain ----
  double residual = p;
  if (fec && p > 0) {
    const int k = static_cast<int>(g.k), m = static_cast<int>(g.m);
    const fec::GilbertModel sub = chain.Subsampled(static_cast<uint32_t>(depth));
    const std::vector<double> dist = fec::LossCountDistribution(sub, k + m, k + m);
    double res = 0, fail = 0;
    for (int j = m + 1; j <= k + m; ++j) {
      res += dist[j] * j / (k + m);
      fail += dist[j];
    }
    pr.block_failure = fail;
    residual = res;
  }
  pr.residual_loss = residual;
  // Every data packet lost and not rebuilt is sent again (and again with probability
  // `residual`): a fraction `residual` of data packets are repeats.
  pr.retransmitted = residual;

  // ---- round trip, ACK delay, loss detection ----
  const double rtt_min = link.rtt.seconds();
  const double rtt50 = std::max(link.rtt_p50.seconds(), rtt_min);
  const double rtt99 = std::max(link.rtt_p99.seconds(), rtt50);
  const double t_wire_pkt = w_data * 8 / C;  // serialisation of one data packet
  const double send_limit = std::min(P, C / std::max(1e-12, 1 - p_rand));
  // ACKs go out every ack_every packets or after max_ack_delay.
  const double ack_interval = std::min(cfg.ack_every * w_data * 8 / std::min(P, C),
                                       cfg.max_ack_delay.seconds());
  const double rtt_eff = rtt50 + queue_s + t_wire_pkt + ack_interval;  // in-flight residence
  const double rtt_eff99 = rtt99 + queue_s + t_wire_pkt + ack_interval;
  const double srtt = rtt50 + queue_s + t_wire_pkt + ack_interval / 2;
  const double rttvar = std::max(rtt99 - rtt50, 0.0) / 2;
  pr.rtt_effective_s = rtt_eff;
  const double frac = cfg.reorder_rtt_fraction;
  // Loss detection of FEC members waits for their block: the packet threshold grows by
  // the block's span (nominal k), the time threshold by that span at the pacing rate plus
  // the flush deadline (transport/core/connection.cc, DetectLosses).
  const double span = fec ? (cfg.fec_k + g.m) * depth : 0.0;
  const double rp = cfg.reorder_packets + span;
  const double fec_wait =
      fec ? span * static_cast<double>(cfg.MaxDatagramSize()) * 8 / P + cfg.fec_flush.seconds() : 0.0;
  const double one_way = rtt50 / 2 + queue_s;
  auto time_threshold = [&]() { return std::max((1 + frac) * srtt, kGranularityS) + fec_wait; };
  auto pto = [&]() {
    return std::clamp(srtt + std::max(4 * rttvar, kGranularityS) + cfg.max_ack_delay.seconds(),
                      cfg.min_pto.seconds(), cfg.max_pto.seconds());
  };

  // ---- flight limits ----
  const double max_dgram = static_cast<double>(cfg.MaxDatagramSize());
  const double window_eff = std::max(0.0, static_cast<double>(cfg.window) - max_dgram);
  // wire rate at which window_eff datagram bytes are in flight for rtt_eff
  pr.window_limit_bps = window_eff / rtt_eff * 8 * (w_data / d_data);
  double rate = std::min(send_limit, pr.window_limit_bps);  // wire bits/s sent
  // Per data packet on the send side.
  auto stream_rate = [&](double wire_bps) { return wire_bps / (8 * w_data) * S * (1 - residual); };
  // Hole hold time: a selective-repeat repair is detected by the packet threshold (the
  // ACK of the reorder_packets-th later packet) or the time threshold, then resent at
  // once (repairs go first) and arrives one way later, as the original would have.
  const double t_pkt_send = w_data * 8 / std::max(rate, 1.0);
  const double det = std::max(kGranularityS, std::min(rp * t_pkt_send + rtt_eff, time_threshold()));
  pr.repair_s = det;
  // FEC repairs a hole when the block's parity arrives: about a group later.
  const double t_fec = fec ? depth * (g.k + g.m) * t_pkt_send : 0.0;
  // Receive window: message bytes beyond the first undelivered one. The sender learns
  // of delivered bytes an RTT (+ ACK delay) after sending them; behind a hole, after
  // the repair as well.
  const double recv_w = static_cast<double>(cfg.recv_window);
  const double hold_base = rtt_eff + (fec && p > 0 ? t_fec : 0.0);
  pr.recv_window_limit_bps = recv_w / hold_base / S * (8 * w_data) / (1 - residual);
  pr.limit = P <= C ? "pacing" : "link";
  if (P > C && pr.window_limit_bps < C) pr.limit = "window";
  if (P <= C && pr.window_limit_bps < P) pr.limit = "window";
  if (pr.recv_window_limit_bps < rate) {
    rate = pr.recv_window_limit_bps;
    pr.limit = "receive window";
  }
  double gs = stream_rate(rate);
  // Stalls behind selective-repeat holes. A hole sent at t0 pins the receiver's credit
  // until its repair arrives; the sender runs into the credit after recv_window / G of
  // sending and waits for the rest of (RTT + repair): a stall s. Holes sent during those
  // recv_window / G are absorbed by the same stall (their own credit limit comes later
  // by the stall's length). So a renewal cycle is: recv_window / G sending, s stalled,
  // then sending until the next hole (1 / hole rate, in sending time).
  const double need_hole = rtt_eff + det;
  const double run = recv_w / std::max(gs, 1.0);
  const double stall = std::max(0.0, need_hole - run);
  const double hole_rate = gs / S * (fec ? pr.block_failure / g.k : p / burst);
  double stall_fraction = 0;
  if (stall > 0 && hole_rate > 0) {
    stall_fraction = stall / (run + stall + 1.0 / hole_rate);
    if (stall_fraction > 0.01 && pr.limit != "window") pr.limit = "receive window";
  }
  gs *= (1 - stall_fraction);
  pr.send_rate_bps = rate * (1 - stall_fraction);
  // The bottleneck delivers at most C of wire bits; repeats of lost packets are part
  // of what it carries only when they survive, so at most C x S / w_data of new data.
  gs = std::min(gs, C / (8 * w_data) * S);
  pr.steady_goodput_bps = gs * 8;
  // What the window must hold: rate x (RTT + repair time) (config.h). In flight proper
  // is rate x RTT; the repair time is headroom for the data waiting on a repair, which
  // an application that bounds its submissions by the window (longhaul-perf) needs.
  pr.window_needed = static_cast<ByteCount>(std::ceil(
      send_limit / (8 * w_data) * d_data * (rtt_eff99 + (p > 0 ? det : 0.0)) + max_dgram));
  pr.recv_window_needed = static_cast<ByteCount>(
      std::ceil(stream_rate(send_limit) * (rtt_eff99 + (p > 0 ? (fec && pr.block_failure < 1e-9
                                                                      ? t_fec
                                                                      : det)
                                                          : 0.0)) +
                S));

  // Per-packet event probabilities: losses come in bursts; for the largest delay what
  // counts is how many bursts (events) there are, not how many packets they hit.
  const double q_sr = (fec ? residual : p) / burst;             // needs selective repeat
  const double q_fec = fec ? std::max(0.0, p - residual) / burst : 0.0;  // rebuilt by FEC
  const double t_pkt = t_pkt_send;

  // ---- bulk: the end of a transfer ----
  // Packet i counted back from the last one (sent i x t_pkt before it). Its loss is
  // repaired by: the packet threshold (later packets or tail copies acknowledged), the
  // time threshold, a probe timeout (the very last packet with nothing after it), or a
  // tail-protection copy sent (i + 1) packet times after the end.
  if (wl.objective == Objective::kGoodput) {
    std::vector<Outcome> outs;
    const double horizon = std::max({time_threshold(), pto(), rp * t_pkt + rtt_eff}) + t_pkt;
    const int64_t n_tail = std::min<int64_t>(kMaxTailPackets,
                                             static_cast<int64_t>(horizon / t_pkt) + 1);
    if (q_sr > 0 || q_fec > 0) {
      for (int64_t i = 0; i < n_tail; ++i) {
        const double delta = static_cast<double>(i) * t_pkt;
        double d = std::numeric_limits<double>::infinity();
        if (tail_on || i >= rp) d = std::min(d, rp * t_pkt + rtt_eff);
        if (tail_on || i >= 1) d = std::min(d, time_threshold());
        if (i == 0 && !tail_on) d = std::min(d, pto());
        const double normal = std::max(0.0, d - delta);
        const uint32_t idx = static_cast<uint32_t>(i);
        const bool copy = tail_on && (2 * i + 1) * t_pkt <= srtt;
        const double copy_extra = (i + 1) * t_pkt;
        if (q_sr > 0) {
          if (copy) {
            outs.push_back({std::min(normal, copy_extra), q_sr * (1 - p), idx});
            outs.push_back({normal, q_sr * p, idx});
          } else {
            outs.push_back({normal, q_sr * (1 - p), idx});
            outs.push_back({normal + time_threshold(), q_sr * p, idx});
          }
        }
        if (q_fec > 0) {
          // The final group closes at the end; its parity follows the last data packet.
          const double fec_extra = g.m * depth * t_pkt;
          outs.push_back({copy ? std::min(fec_extra, copy_extra) : fec_extra, q_fec, idx});
        }
      }
    }
    MaxDistribution tail = MaxOfOutcomes(std::move(outs), static_cast<uint32_t>(n_tail));
    pr.tail_s = tail.mean;
    if (wl.bulk_bytes > 0) {
      pr.transfer_s = static_cast<double>(wl.bulk_bytes) * 8 / std::max(pr.steady_goodput_bps, 1.0) +
                      one_way + tail.mean;
      pr.goodput_bps = static_cast<double>(wl.bulk_bytes) * 8 / pr.transfer_s;
    } else {
      pr.goodput_bps = pr.steady_goodput_bps;
    }
  } else {
    pr.goodput_bps = pr.steady_goodput_bps;
  }

  // ---- messages: completion time ----
  if (wl.objective == Objective::kMct) {
    const double M = static_cast<double>(std::max<ByteCount>(wl.message_size, 1));
    const double n_pkts = std::ceil(M / S);
    const uint32_t N = static_cast<uint32_t>(std::min(n_pkts, 4e6));
    // The simulator's ideal: rtt/2 + (size + per-packet headers at their largest) at C.
    const double hdr_max = static_cast<double>(cfg.MaxDatagramSize() - cfg.segment + link.overhead);
    pr.mct_ideal_s = rtt_min / 2 + (M + n_pkts * hdr_max) * 8 / C;
    // Serialisation at the sending rate (with the message's parity), or window rounds.
    // With FEC, the message closes its last group early: the remainder is spread over up
    // to D shortened blocks, each with m parity.
    double m_wire = n_pkts * w_data;
    double m_dgram = n_pkts * d_data;
    if (fec) {
      const double group = depth * g.k;
      const double full = std::floor(n_pkts / group);
      const double rest = n_pkts - full * group;
      const double blocks = full * depth + (rest > 0 ? std::min(depth, rest) : 0.0);
      m_wire = n_pkts * g.wire + blocks * g.m * g.rep_wire;
      m_dgram = n_pkts * g.datagram + blocks * g.m * g.rep_datagram;
    }
    double t_ser = m_wire * 8 / std::min(P, C);
    if (m_dgram > window_eff && window_eff > 0) {
      t_ser = std::max(t_ser, (m_dgram / window_eff - 1) * rtt_eff + window_eff * 8 / std::min(P, C));
    }
    const double interval = M * 8 / (C * std::max(wl.load, 1e-9));
    const double rho = t_ser / interval;
    pr.stable = rho < 1.0;
    const double gap = std::max(0.0, interval - t_ser);  // idle after each message
    const double t_msg_pkt = w_data * 8 / std::min(P, C);
    const double n_copy = tail_on ? std::floor(gap / t_msg_pkt) : 0.0;
    std::vector<Outcome> outs;
    if (q_sr > 0 || q_fec > 0) {
      outs.reserve(2 * N);
      for (uint32_t i = 0; i < N; ++i) {
        const double delta = i * t_msg_pkt;
        double d = std::numeric_limits<double>::infinity();
        // Packet threshold: reorder_packets later packets, from this message, its tail
        // copies, then the next message.
        const double later_in_msg = i;
        if (later_in_msg >= rp) {
          d = std::min(d, rp * t_msg_pkt + rtt_eff);
        } else if (later_in_msg + n_copy >= rp) {
          d = std::min(d, rp * t_msg_pkt + rtt_eff);
        } else {
          d = std::min(d, delta + gap + (rp - later_in_msg - n_copy) * t_msg_pkt + rtt_eff);
        }
        // Time threshold once any later packet is acknowledged; a probe timeout for a
        // last packet with nothing after it before the next message.
        if (i >= 1 || n_copy >= 1) {
          d = std::min(d, time_threshold());
        } else {
          d = std::min(d, std::max(time_threshold(), delta + gap + t_msg_pkt + rtt_eff));
          d = std::min(d, pto());
        }
        const double normal = std::max(0.0, d - delta);
        const bool copy = (i + 1) <= n_copy && (2.0 * i + 1) * t_msg_pkt <= srtt;
        const double copy_extra = (i + 1) * t_msg_pkt;
        if (q_sr > 0) {
          if (copy) {
            outs.push_back({std::min(normal, copy_extra), q_sr * (1 - p), i});
            outs.push_back({normal, q_sr * p, i});
          } else {
            outs.push_back({normal, q_sr * (1 - p), i});
            outs.push_back({normal + time_threshold(), q_sr * p, i});
          }
        }
        if (q_fec > 0) {
          const double fec_extra =
              g.m * std::min<double>(depth, std::ceil(n_pkts / g.k)) * t_msg_pkt;
          outs.push_back({copy ? std::min(fec_extra, copy_extra) : fec_extra, q_fec, i});
        }
      }
    }
    // Messages complete in order: a message also waits for any earlier one still being
    // repaired. Packet i of the message b places back finished b x interval earlier, so
    // its repair delays this message by (its own extra - b x interval).
    const size_t own = outs.size();
    uint32_t packets = N;
    double longest = 0;
    for (size_t j = 0; j < own; ++j) longest = std::max(longest, outs[j].extra);
    const int64_t back_max = pr.stable ? static_cast<int64_t>(longest / interval) : 0;
    const int64_t cap_back = std::max<int64_t>(0, static_cast<int64_t>(kMaxTailPackets / std::max<size_t>(own, 1)));
    for (int64_t b = 1; b <= std::min(back_max, cap_back); ++b) {
      for (size_t j = 0; j < own; ++j) {
        const double e = outs[j].extra - static_cast<double>(b) * interval;
        if (e > 0) outs.push_back({e, outs[j].prob, packets + outs[j].packet});
      }
      packets += N;
    }
    MaxDistribution ex = MaxOfOutcomes(std::move(outs), packets);
    // Probability of a selective-repeat repair (any packet needs one).
    pr.p_message_repair = q_sr > 0 ? -std::expm1(static_cast<double>(N) * std::log1p(-q_sr)) : 0.0;
    const double one_way_p50 = rtt50 / 2 + queue_s;
    const double one_way_p99 = rtt_min / 2 + queue_s + 0.53 * (rtt99 - rtt_min);
    pr.mct_base_s = one_way_p50 + t_ser;
    pr.mct_mean_s = pr.mct_base_s + ex.mean;
    pr.mct_p50_s = pr.mct_base_s + ex.p50;
    pr.mct_p99_s = pr.mct_base_s + std::max(ex.p99, one_way_p99 - one_way_p50);
    if (!pr.stable) {
      // The backlog grows for the whole run; report it as a very long completion time.
      const double backlog = (rho - 1) * interval * static_cast<double>(wl.messages);
      pr.mct_mean_s += backlog / 2;
      pr.mct_p50_s += backlog / 2;
      pr.mct_p99_s += backlog;
    }
  }
  return pr;
}

}  // namespace longhaul::tuner
