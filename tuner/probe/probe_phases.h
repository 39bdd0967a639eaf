// The decisions of the prober's RTT, rate and loss phases (tuner/probe/prober.h), apart from
// its socket loop: which echo or train to send next and when, how long to wait for
// stragglers, what a train's report means (record it, repeat it, search the path MTU,
// try a smaller datagram, give up) and the phase's result. The prober sends, sleeps and
// polls, and feeds what it saw in here with the times it read; these classes read no
// clock and touch no socket, so the unit tests drive them with synthetic samples.
//
// Times are CLOCK_REALTIME nanoseconds as the prober reads them (any origin works:
// only differences and comparisons matter). Not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "tuner/estimate/loss_fit.h"
#include "tuner/estimate/rate.h"
#include "tuner/estimate/reorder.h"
#include "tuner/estimate/rtt_stats.h"
#include "tuner/probe/probe_protocol.h"

namespace longhaul::tuner::probe {

// Most packets in one train (rate trains and the loss phase's).
inline constexpr uint64_t kMaxTrainPackets = 200000;

// Phase 2: `probes` small echoes `spacing` apart from `start_ns`; stragglers are awaited
// for up to 3 x the largest RTT seen (at least 200 ms, at most 2 s); the summary is over
// the echoes that came back, in the order they were sent.
class RttPhase {
 public:
  RttPhase(int probes, Duration spacing, int64_t start_ns)
      : probes_(probes), spacing_ns_(spacing.ns()), next_ns_(start_ns) {}

  // When the next echo is due; nullopt once all are sent or when it would be due at or
  // after `send_end_ns` (the phase's time share for sending).
  std::optional<int64_t> NextSendNs(int64_t send_end_ns) const;
  // The echo due at NextSendNs() went out with this id.
  void OnSent(uint64_t echo_id);
  // An echo answered after `rtt` (any echo: the straggler wait counts every one seen).
  void OnReply(uint64_t echo_id, Duration rtt);

  bool AllAnswered() const;
  // Until when to wait for stragglers, read at `now_ns`: never after `phase_end_ns`.
  int64_t StragglerDeadlineNs(int64_t now_ns, int64_t phase_end_ns) const;
  // The idle-path RTT summary; Unavailable (naming `target`) when no echo came back.
  absl::StatusOr<RttSummary> Verdict(const std::string& target) const;

  int sent() const { return static_cast<int>(ids_.size()); }

 private:
  int probes_;
  int64_t spacing_ns_;
  int64_t next_ns_;
  std::vector<uint64_t> ids_;
  std::map<uint64_t, Duration> replies_;
};

struct RatePhaseOptions {
  std::string target;  // for error texts
  Bandwidth start_rate = Bandwidth::Mbps(50);
  Bandwidth max_rate = Bandwidth::Gbps(100);
  Duration train_duration = Duration::Milliseconds(40);
  uint32_t max_mtu = 0;    // 0: the local interface's MTU
  uint32_t local_mtu = 0;  // 0: unknown (1500 assumed)
};

// One train to send: `packets` datagrams of `payload` bytes at `rate`, taking
// `send_time`; its report is awaited for up to `wait`.
struct TrainPlan {
  Bandwidth rate;
  uint32_t payload = 0;
  uint64_t packets = 0;
  Duration send_time;
  Duration wait;
  ByteCount wire_bytes() const {
    return static_cast<ByteCount>(packets * (payload + kIpUdpOverhead));
  }
};

// What the rate phase ended with (ProbeReport's rate fields).
struct RateOutcome {
  Bandwidth rate;           // RateSearch::Estimate()
  double rel_error = 1.0;   // half the spread of the saturated trains over the rate
  std::string stop_reason;  // the search's, or "budget" when the phase ran out
  bool saturated = false;
  double max_delivery_bps = 0;
  int short_trains = 0;  // sent at < 90 % of their target rate
  bool host_limited = false;
  std::vector<std::string> notes;  // for ProbeReport::notes, in order
};

// Phase 3: trains at rising rates (RateSearch) of the largest datagram that gets
// through: 9000, 1500 or 1200 bytes on the wire, at most the MTU cap (max_mtu, else the
// local interface's, else 1500). A train of which nothing arrives asks for the path-MTU
// search (once) or the next smaller size; two more such trains fail the phase; three
// report requests unanswered fail it too.
class RatePhase {
 public:
  explicit RatePhase(const RatePhaseOptions& options);

  bool done() const { return search_.done(); }
  // The next train, its report awaited for 2 x rtt_p99 + its send time + 50 ms.
  TrainPlan NextTrain(Duration rtt_p99) const;
  // Why the phase stops instead of sending `plan` at `now_ns` (a note for the report),
  // or nullopt to send it: the plan and its wait would end after `phase_end_ns`, or
  // its bytes are over the probe's byte budget.
  std::optional<std::string> StopBefore(const TrainPlan& plan, int64_t now_ns, int64_t phase_end_ns,
                                        bool over_byte_budget) const;

  enum class Action {
    kRecord,      // OnReport: the train counted
    kRepeat,      // send the next train (the same rate); `text` is a note when not empty
    kSearchPmtu,  // run the path-MTU search, then call OnPathMtu; `text` is a progress line
    kNextSize,    // smaller datagrams from now on; `text` is a progress line
    kFail,        // the phase fails: Unavailable with `text`
  };
  struct Verdict {
    Action action;
    std::string text;
  };
  // No report for `train` arrived (the request or its answer lost, a stalled responder).
  Verdict OnNoReport(uint32_t train);
  // Nothing of `train` arrived although echoes do: datagrams too big for the path.
  // `may_search_pmtu`: the path-MTU search is enabled and has not run yet.
  Verdict OnEmptyTrain(uint32_t train, uint32_t payload, bool may_search_pmtu);
  // The path-MTU search asked for by OnEmptyTrain found `pmtu` (0: none): from 96 bytes
  // on, trains use it (kRepeat); else as OnEmptyTrain without the search.
  Verdict OnPathMtu(uint32_t train, uint32_t payload, uint32_t pmtu);
  // The responder's report of a train sent at `send_rate` over `send_span`: the delivery
  // rate is the report's fitted rate from 8 packets on, else its span rate.
  TrainResult OnReport(const TrainPlan& plan, Bandwidth send_rate, uint64_t sent,
                       Duration send_span, const TrainReport& report);

  // The result once the loop ended; DeadlineExceeded (naming the budgets) when no train
  // completed.
  absl::StatusOr<RateOutcome> Finish(Duration max_duration, ByteCount max_bytes) const;

  const std::vector<uint32_t>& payload_sizes() const { return sizes_; }
  const std::vector<TrainResult>& trains() const { return trains_; }

 private:
  Verdict Fallback(uint32_t train, uint32_t payload);

  RatePhaseOptions opt_;
  RateSearch search_;
  std::vector<uint32_t> sizes_;
  size_t size_index_ = 0;
  int empty_trains_ = 0;
  int missing_reports_ = 0;
  std::vector<TrainResult> trains_;
};

// Phase 5: one long paced train of small packets for the loss trace.
struct LossPlanInput {
  int64_t now_ns = 0;
  int64_t deadline_ns = 0;  // the probe's
  Duration rtt_p99;         // the idle p99 RTT (the prober's 200 ms when unknown)
  RttSummary rtt_idle;
  ByteCount max_bytes = 0;   // the probe's byte budget...
  ByteCount bytes_sent = 0;  // ...and what it has used
  double loss_load = 0.8;    // x rate
  Bandwidth rate;            // the rate phase's estimate
  uint32_t pmtu = 0;         // 0: not measured (1500)
  uint32_t packets_per_s = 20000;
  uint64_t max_trace_packets = 0;  // the responder's limit (0: none given)
};

// What to send: `packets` of `payload` bytes at `rate_bps`, every `echo_every`-th echoed,
// sending stopping at `stop_ns`; or, when `skip` is not empty, nothing (it says why).
struct LossPlan {
  std::string skip;
  double rate_bps = 0;
  uint32_t payload = 0;
  uint64_t packets = 0;
  uint64_t echo_every = 1;
  int64_t stop_ns = 0;
  // Time before the deadline kept for stragglers and the report (two tries): 5 x the
  // p99 RTT + the idle RTT spread + 600 ms (a busy responder may first drain a socket
  // buffer's worth of the train).
  Duration reserve;
  double seconds() const { return packets * (payload + kIpUdpOverhead) * 8.0 / rate_bps; }
};

// The train fills the time left before the reserve at loss_load x the rate (less when
// the byte budget is short), with packets sized for packets_per_s (64 bytes up to the
// path MTU), at most max_trace_packets (else kMaxTrainPackets). Skipped with under
// 0.2 s or under 1000 packets.
LossPlan PlanLossPhase(const LossPlanInput& in);

// What the loss phase's report says.
struct LossReading {
  LossEstimate loss;
  ReorderEstimate reorder;
  uint64_t duplicates = 0;
  uint64_t responder_drops = 0;
  std::vector<std::string> notes;  // the responder's own drops make the loss an upper bound
};
LossReading ReadLossReport(const TrainReport& report);

}  // namespace longhaul::tuner::probe
