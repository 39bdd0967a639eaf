#include "tuner/search/search.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/fec/fec_policy.h"
#include "transport/sim/scenario.h"

namespace longhaul::tuner {
namespace {

constexpr ByteCount kMiB = ByteCount{1} << 20;

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ByteCount RoundUp(ByteCount v, ByteCount unit) { return (v + unit - 1) / unit * unit; }

struct FecOption {
  FecMode mode = FecMode::kOff;
  uint32_t k = 0, m = 0, depth = 1;
  bool operator<(const FecOption& o) const {
    return std::tie(mode, k, m, depth) < std::tie(o.mode, o.k, o.m, o.depth);
  }
};

struct Knobs {
  size_t segment = 0;  // index into segments
  size_t window = 0;   // index into window multipliers
  size_t recv = 0;     // index into receive-window multipliers
  size_t fec = 0;      // index into FEC options (0 = off)
  bool tail_protect = true;
};

// Model comparison with a tolerance: a clearly better score wins; within the tolerance,
// the cheaper candidate (less FEC overhead, then less memory) wins.
bool CheaperThan(const Candidate& a, const Candidate& b) {
  const double fa = a.prediction.fec_overhead, fb = b.prediction.fec_overhead;
  if (std::abs(fa - fb) > 1e-9) return fa < fb;
  const ByteCount ma = a.config.window + a.config.recv_window;
  const ByteCount mb = b.config.window + b.config.recv_window;
  if (ma != mb) return ma < mb;
  return a.score > b.score;
}

bool Within(double a, double best, double tol) {
  // Scores are goodput (positive) or -p99 (negative): compare relative to |best|.
  return a >= best - tol * std::abs(best);
}

class Searcher {
 public:
  Searcher(const LinkEstimate& link, const SearchOptions& opt) : link_(link), opt_(opt) {
    // Segments: the largest for the path MTU, and the common smaller MTUs below it.
    std::set<ByteCount> segs = {TransportConfig::SegmentForMtu(link.mtu)};
    for (ByteCount mtu : {1500, 4096, 9000}) {
      if (mtu < link.mtu) segs.insert(TransportConfig::SegmentForMtu(mtu));
    }
    segments_.assign(segs.rbegin(), segs.rend());  // largest first
    window_mults_ = {1.5, 2, 3, 4};
    recv_mults_ = {1.5, 2, 3};
    BuildFecOptions();
  }

  const std::vector<FecOption>& fec_options() const { return fecs_; }

  // Runs the coordinate search; returns the model's choice.
  Candidate Search() {
    Knobs cur;  // largest segment, 1.5x windows, FEC off, tail protection on
    Candidate best = Evaluate(cur);
    for (int pass = 0; pass < 4; ++pass) {
      const Knobs before = cur;
      auto try_dim = [&](auto set, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          Knobs k = cur;
          set(k, i);
          Candidate c = Evaluate(k);
          if (Prefer(c, best)) {
            best = c;
            cur = k;
          }
        }
      };
      try_dim([](Knobs& k, size_t i) { k.segment = i; }, segments_.size());
      try_dim([](Knobs& k, size_t i) { k.fec = i; }, fecs_.size());
      try_dim([](Knobs& k, size_t i) { k.window = i; }, window_mults_.size());
      try_dim([](Knobs& k, size_t i) { k.recv = i; }, recv_mults_.size());
      try_dim([](Knobs& k, size_t i) { k.tail_protect = i == 0; }, 2);
      if (std::tie(before.segment, before.window, before.recv, before.fec, before.tail_protect) ==
          std::tie(cur.segment, cur.window, cur.recv, cur.fec, cur.tail_protect)) {
        break;
      }
    }
    // The FEC dimension once more around the final point (its value depends on the
    // others), so the ranking below sees every FEC option at the chosen sizes.
    for (size_t i = 0; i < fecs_.size(); ++i) {
      Knobs k = cur;
      k.fec = i;
      Evaluate(k);
    }
    return best;
  }

  // All evaluated candidates, best model score first.
  std::vector<Candidate> Ranked() const {
    std::vector<Candidate> v;
    for (const auto& [label, c] : evaluated_) v.push_back(c);
    std::sort(v.begin(), v.end(), [](const Candidate& a, const Candidate& b) {
      if (a.score != b.score) return a.score > b.score;
      return a.label < b.label;
    });
    return v;
  }

  size_t evaluated() const { return evaluated_.size(); }

  // True if `a` should replace `b` as the choice.
  bool Prefer(const Candidate& a, const Candidate& b) const {
    const double tol = opt_.tie_tolerance;
    const double best = std::max(a.score, b.score);
    const bool a_in = Within(a.score, best, tol), b_in = Within(b.score, best, tol);
    if (a_in != b_in) return a_in;
    return CheaperThan(a, b);
  }

 private:
  void BuildFecOptions() {
    fecs_.push_back(FecOption{});  // off
    if (!(link_.loss > 0)) return;
    std::set<FecOption> set;
    const ByteCount seg = segments_.front();
    fec::FecPolicyInput in;
    in.loss_rate = link_.loss;
    in.mean_burst = std::max(1.0, link_.mean_burst);
    const ByteCount message = opt_.workload.objective == Objective::kMct
                                  ? opt_.workload.message_size
                                  : opt_.workload.chunk;
    in.packets_per_message = std::max<ByteCount>(1, (message + seg - 1) / seg);
    in.max_k = std::max<uint32_t>(opt_.base.fec_k, 4);
    const fec::FecPolicyDecision d = fec::ChooseFecParameters(in);
    auto add = [&](uint32_t k, uint32_t m, uint32_t depth) {
      if (k < 1 || m < 1 || k + m > 255 || depth < 1 || depth > 1024) return;
      set.insert(FecOption{FecMode::kFixed, k, m, depth});
    };
    if (d.enabled) {
      add(d.k, d.m, d.interleave);
      add(d.k, d.m + 1, d.interleave);
      if (d.m > 1) add(d.k, d.m - 1, d.interleave);
      add(d.k, d.m, 1);
      add(d.k, d.m, std::min<uint32_t>(64, d.interleave * 4));
      if (d.interleave >= 4) add(d.k, d.m, d.interleave / 4);
    }
    // Common fixed codes, so a poor fit of the policy's target still has alternatives.
    const uint32_t depth = link_.mean_burst > 1.5 ? 16 : 1;
    add(32, 1, depth);
    add(32, 2, depth);
    add(32, 4, depth);
    add(16, 4, depth);
    for (const FecOption& f : set) fecs_.push_back(f);
  }

  TransportConfig Materialize(const Knobs& k) const {
    TransportConfig c = opt_.base;
    c.segment = segments_[k.segment];
    if (c.cc == CongestionControl::kFixed) {
      c.rate = link_.rate;
    } else {
      // cc=bbr adapts inside bounds from the measurement: a cap a little above the
      // measured rate (room to find it again, no flood when the probe overestimated it)
      // and a floor at half of it (the controller starts there, and a round of loss or a
      // standing queue never cuts it further). Whole Mbit/s.
      const double mbps = link_.rate.bps() / 1e6;
      c.rate = Bandwidth::Mbps(std::ceil(1.05 * mbps));
      c.rate_min = Bandwidth::Mbps(std::floor(0.5 * mbps));
    }
    c.tail_protect = k.tail_protect;
    const FecOption& f = fecs_[k.fec];
    // fec=auto in the base stays auto, starting from the chosen code (the base's code when
    // the choice is none: auto drops it after the first loss report that shows no loss).
    c.fec = opt_.base.fec == FecMode::kAuto ? FecMode::kAuto : f.mode;
    if (f.mode != FecMode::kOff) {
      c.fec_k = f.k;
      c.fec_m = f.m;
      c.fec_interleave = f.depth;
      // The flush deadline closes a group when no data packet followed the last one in
      // time: it must exceed the packet spacing at the link rate (2 x, in 100 us steps),
      // or every packet would close a block of one. Not more: it also delays the loss
      // detection of protected packets.
      const double t_data = static_cast<double>(DataPacketWireBytes(c, link_.overhead)) * 8 /
                            std::max(link_.rate.bps(), 1.0);
      const int64_t want_us = static_cast<int64_t>(std::ceil(2 * t_data * 1e6 / 100) * 100);
      c.fec_flush = std::max(opt_.base.fec_flush, Duration::Microseconds(want_us));
    }
    // Loss detection must tolerate the measured reordering (reference B5: 1.5 x).
    const double rtt = std::max(link_.rtt.seconds(), 1e-6);
    if (link_.reorder > 0 && link_.reorder_late > Duration::Zero()) {
      const double wire = static_cast<double>(DataPacketWireBytes(c, link_.overhead));
      const double pkts = 1.5 * link_.reorder_late.seconds() * link_.rate.bps() / (8 * wire);
      c.reorder_packets = std::clamp<uint32_t>(static_cast<uint32_t>(std::ceil(pkts)),
                                               opt_.base.reorder_packets, 1u << 20);
      c.reorder_rtt_fraction = std::clamp(1.5 * link_.reorder_late.seconds() / rtt,
                                          opt_.base.reorder_rtt_fraction, 1.0);
    }
    // Start from the measured RTT rather than a guess (rounded up to a millisecond).
    const int64_t rtt_ms = static_cast<int64_t>(std::ceil(link_.rtt_p50.seconds() * 1e3));
    c.initial_rtt = Duration::Milliseconds(std::max<int64_t>(rtt_ms, 1));
    // Pacing burst: a sender whose thread wakes late (a busy host waits milliseconds for
    // a CPU) catches up by at most this much, and every wait beyond it is rate lost for
    // good. Allow 2 ms (or 2 x the prober's measured timer lateness, p99), but at most
    // 5 % of the bottleneck queue's time, so the catch-up burst never fills the queue.
    const double queue_s = static_cast<double>(link_.QueueBytes()) * 8 / std::max(link_.rate.bps(), 1.0);
    const double want_s = std::max(2e-3, 2 * link_.host_timer_late.seconds());
    const double burst_s = std::min(want_s, 0.05 * queue_s);
    c.pacing_burst = std::max(opt_.base.pacing_burst,
                              Duration::Microseconds(static_cast<int64_t>(burst_s * 1e5) * 10));
    // Windows from what the flight needs at this point, with unbounded windows.
    TransportConfig unbounded = c;
    unbounded.window = unbounded.recv_window = TransportConfig::kMaxWindow;
    const Prediction need = Predict(link_, unbounded, opt_.workload);
    const ByteCount cap = std::min<ByteCount>(TransportConfig::kMaxWindow, opt_.max_memory);
    const ByteCount floor = 4 * c.MaxDatagramSize();
    auto size = [&](ByteCount needed, double mult) {
      const double want = std::max(static_cast<double>(needed), static_cast<double>(floor)) * mult;
      return std::clamp<ByteCount>(RoundUp(static_cast<ByteCount>(want), kMiB), floor, cap);
    };
    c.window = size(need.window_needed, window_mults_[k.window]);
    c.recv_window = size(need.recv_window_needed, recv_mults_[k.recv]);
    return c;
  }

  Candidate Evaluate(const Knobs& k) {
    Candidate c;
    c.config = Materialize(k);
    c.label = CandidateLabel(c.config);
    auto it = evaluated_.find(c.label);
    if (it != evaluated_.end()) return it->second;
    c.prediction = Predict(link_, c.config, opt_.workload);
    c.score = c.prediction.Score(opt_.workload.objective);
    evaluated_.emplace(c.label, c);
    return c;
  }

  const LinkEstimate& link_;
  const SearchOptions& opt_;
  std::vector<ByteCount> segments_;
  std::vector<double> window_mults_;
  std::vector<double> recv_mults_;
  std::vector<FecOption> fecs_;
  std::map<std::string, Candidate> evaluated_;
};

void Progress(const SearchOptions& opt, const std::string& line) {
  if (opt.progress) opt.progress(line);
}

// What a check run reports back (plain data: it crosses a pipe from a child process).
struct CheckOutcome {
  bool done = false;     // stop_reason == "done"
  bool intact = false;   // delivered intact
  double wall_s = 0;
  double goodput_bps = 0;
  double mct_p99_s = 0;  // 0 without message times
  double mct_mean_s = 0;
  uint64_t fec_repair_packets = 0;
  char stop_reason[32] = {0};
  char error[256] = {0};
};

void CopyText(char* dst, size_t n, const std::string& s) {
  std::snprintf(dst, n, "%s", s.c_str());
}

// Runs the scenario in a child process, so that a candidate that makes the transport
// fail a CHECK (a bug) or run away costs that candidate, not the tuner. The child is
// killed after `limit_s` of wall time.
absl::StatusOr<CheckOutcome> RunIsolated(const sim::ScenarioOptions& so, double limit_s) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    close(fds[0]);
    CheckOutcome out;
    absl::StatusOr<sim::ScenarioResult> r = sim::RunScenario(so);
    if (r.ok()) {
      out.done = r->stop_reason == "done";
      out.intact = r->delivered_intact;
      out.wall_s = r->wall_s;
      out.goodput_bps = r->goodput_bps;
      out.fec_repair_packets = r->sender_total.fec_repair_packets_sent;
      if (r->has_message_times) {
        out.mct_p99_s = r->mct.p99_s;
        out.mct_mean_s = r->mct.mean_s;
      }
      CopyText(out.stop_reason, sizeof(out.stop_reason), r->stop_reason);
      CopyText(out.error, sizeof(out.error), r->error);
    } else {
      CopyText(out.stop_reason, sizeof(out.stop_reason), "invalid");
      CopyText(out.error, sizeof(out.error), std::string(r.status().message()));
    }
    const char* p = reinterpret_cast<const char*>(&out);
    size_t left = sizeof(out);
    while (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  CheckOutcome out;
  size_t got = 0;
  const double start = WallSeconds();
  bool killed = false;
  while (true) {
    pollfd pf{fds[0], POLLIN, 0};
    const int rc = poll(&pf, 1, 100);
    if (rc > 0) {
      const ssize_t n = read(fds[0], reinterpret_cast<char*>(&out) + got, sizeof(out) - got);
      if (n <= 0) break;  // EOF: the child exited (or died)
      got += static_cast<size_t>(n);
      if (got == sizeof(out)) break;
    }
    if (WallSeconds() - start > limit_s) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (killed) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "the simulator run did not end within %.0f s and was stopped", limit_s));
  }
  if (got != sizeof(out)) {
    if (WIFSIGNALED(status)) {
      return absl::InternalError(absl::StrCat(
          "the simulator run crashed (signal ", WTERMSIG(status),
          "): the transport failed on this configuration (see the messages above)"));
    }
    return absl::InternalError("the simulator run ended without a result");
  }
  return out;
}

// Runs one candidate in the simulator.
void Check(const LinkEstimate& link, const SearchOptions& opt, double budget_s, Candidate* c) {
  sim::ScenarioOptions so;
  so.link = link.ToLinkSpec(opt.seed);
  so.sender_config = so.receiver_config = c->config;
  so.seed = opt.seed;
  // Payload-free: the same protocol run (docs/simulator.md), several times faster, so a
  // check of a fast link fits its budget.
  so.payload = false;
  so.max_wall_time = Duration::Seconds(std::max(budget_s, 0.1));
  so.wall_seconds = WallSeconds;  // the bound above and the check's wall_s
  const double rate = std::max(link.rate.bps(), 1.0);
  if (opt.workload.objective == Objective::kMct) {
    so.workload = sim::Workload::kMessages;
    so.message_size = opt.workload.message_size;
    so.messages = opt.check_messages ? opt.check_messages
                                     : CheckMessages(opt.workload.message_size, c->config.segment);
    so.load = opt.workload.load;
    const double span = static_cast<double>(so.messages) * so.message_size * 8 /
                        (rate * std::max(so.load, 1e-3));
    so.max_virtual_time = Duration::Seconds(10 * span + 100 * link.rtt.seconds() + 10);
  } else {
    so.workload = sim::Workload::kBulk;
    so.bytes = opt.check_bytes ? opt.check_bytes : CheckBytes(link, c->config.segment);
    so.chunk = opt.workload.chunk;
    const double span = static_cast<double>(so.bytes) * 8 / rate;
    so.max_virtual_time = Duration::Seconds(10 * span + 100 * link.rtt.seconds() + 10);
  }
  c->checked = true;
  Workload w = opt.workload;
  if (so.workload == sim::Workload::kBulk) {
    w.bulk_bytes = so.bytes;
  } else {
    w.messages = so.messages;
  }
  c->check_prediction = Predict(link, c->config, w);
  absl::StatusOr<CheckOutcome> r = RunIsolated(so, budget_s + 30);
  if (!r.ok()) {
    c->check_note = std::string(r.status().message());
    c->timed_out = absl::IsDeadlineExceeded(r.status());
    return;
  }
  c->sim_wall_s = r->wall_s;
  c->sim_goodput_bps = r->goodput_bps;
  c->sim_fec_repair_packets = r->fec_repair_packets;
  c->sim_mct_p99_s = r->mct_p99_s;
  c->sim_mct_mean_s = r->mct_mean_s;
  c->check_completed = r->intact && r->done;
  c->timed_out = std::string(r->stop_reason) == "max_wall_time";
  if (!c->check_completed) {
    c->check_note = absl::StrCat("run ended: ", r->stop_reason,
                                 r->error[0] ? absl::StrCat(" (", r->error, ")") : "");
  } else if (c->config.fec == FecMode::kFixed && c->sim_fec_repair_packets == 0) {
    c->check_note = "no FEC repair packets were sent: FEC is inactive in this transport build";
  }
}

}  // namespace

double Candidate::measured_score() const { return sim_mct_p99_s > 0 ? -sim_mct_p99_s : sim_goodput_bps; }

ByteCount CheckBytes(const LinkEstimate& link, ByteCount segment) {
  const double bdp = static_cast<double>(link.BdpBytes());
  const double seg = static_cast<double>(std::max<ByteCount>(segment, 64));
  double bytes = std::max(6 * bdp, 200e3 * seg);
  bytes = std::min(bytes, 0.8e6 * seg);
  return RoundUp(static_cast<ByteCount>(bytes), kMiB);
}

uint64_t CheckMessages(ByteCount message_size, ByteCount segment) {
  const uint64_t packets = std::max<uint64_t>(1, (message_size + segment - 1) / segment);
  return std::clamp<uint64_t>(300000 / packets, 100, 2000);
}

std::string CandidateLabel(const TransportConfig& c) {
  std::string fec = c.fec == FecMode::kOff
                        ? "off"
                        : absl::StrFormat("%s%d,%d/%d", c.fec == FecMode::kAuto ? "auto:" : "",
                                          c.fec_k, c.fec_m, c.fec_interleave);
  return absl::StrFormat("segment=%d window=%s recv_window=%s fec=%s tail_protect=%d", c.segment,
                         FormatByteCount(c.window), FormatByteCount(c.recv_window), fec,
                         c.tail_protect ? 1 : 0);
}

absl::StatusOr<TuneResult> Tune(const LinkEstimate& link, const SearchOptions& opt) {
  if (!(link.rate.bps() > 0)) return absl::InvalidArgumentError("link rate must be > 0");
  if (link.rtt < Duration::Zero()) return absl::InvalidArgumentError("link RTT must be >= 0");
  if (link.mtu < 576) return absl::InvalidArgumentError("path MTU below 576 bytes");
  if (opt.workload.objective == Objective::kMct && opt.workload.message_size == 0) {
    return absl::InvalidArgumentError("objective mct needs a message size > 0");
  }
  if (!(opt.workload.load > 0 && opt.workload.load <= 1)) {
    return absl::InvalidArgumentError("load must be in (0, 1]");
  }
  LH_RETURN_IF_ERROR(opt.base.Validate());

  TuneResult res;
  res.link = link;
  res.objective = opt.workload.objective;
  res.workload = opt.workload;
  const double t0 = WallSeconds();
  Searcher searcher(link, opt);
  Progress(opt, absl::StrFormat("search: %s objective over segment x window x receive window x "
                                "FEC (%d options) x tail protection",
                                ObjectiveName(opt.workload.objective),
                                searcher.fec_options().size()));
  const Candidate model_choice = searcher.Search();
  res.candidates_evaluated = searcher.evaluated();
  res.search_s = WallSeconds() - t0;
  Progress(opt, absl::StrFormat("search: %d candidates in %.2f s; model choice %s: %s",
                                res.candidates_evaluated, res.search_s, model_choice.label,
                                model_choice.prediction.ToString(opt.workload.objective)));
  res.chosen = model_choice;

  // ---- the simulator check ----
  if (opt.top_k <= 0) {
    res.check_skipped = "disabled (top_k = 0)";
  } else if (link.BdpBytes() > opt.max_check_flight) {
    res.check_skipped = absl::StrFormat(
        "the flight (BDP %s) is above the simulator's memory bound %s",
        FormatByteCount(link.BdpBytes()), FormatByteCount(opt.max_check_flight));
  }
  if (!res.check_skipped.empty()) {
    Progress(opt, "check: skipped: " + res.check_skipped);
  } else {
    // The model's choice, the best of each FEC kind, then the best by score.
    std::vector<Candidate> ranked = searcher.Ranked();
    std::vector<Candidate> picks = {model_choice};
    auto have = [&](const Candidate& c) {
      for (const Candidate& p : picks) {
        if (p.label == c.label) return true;
      }
      return false;
    };
    for (bool want_fec : {false, true}) {
      for (const Candidate& c : ranked) {
        if ((c.config.fec != FecMode::kOff) != want_fec) continue;
        if (!have(c) && static_cast<int>(picks.size()) < opt.top_k) picks.push_back(c);
        break;
      }
    }
    for (const Candidate& c : ranked) {
      if (static_cast<int>(picks.size()) >= opt.top_k) break;
      if (!have(c)) picks.push_back(c);
    }
    const sim::LinkSpec spec = link.ToLinkSpec(opt.seed);
    res.check_link = spec.ToString();
    if (opt.workload.objective == Objective::kMct) {
      res.check_workload = absl::StrFormat(
          "messages %d x %s at load %.2g", opt.check_messages ? opt.check_messages
                                                               : CheckMessages(opt.workload.message_size,
                                                                               model_choice.config.segment),
          FormatByteCount(opt.workload.message_size), opt.workload.load);
    } else {
      res.check_workload = absl::StrCat(
          "bulk ", FormatByteCount(opt.check_bytes ? opt.check_bytes
                                                   : CheckBytes(link, model_choice.config.segment)));
    }
    const double c0 = WallSeconds();
    for (size_t i = 0; i < picks.size(); ++i) {
      Candidate& c = picks[i];
      const double left = opt.check_budget.seconds() - (WallSeconds() - c0);
      if (left <= 0.05) {
        c.check_note = "not run: check budget used up";
        c.timed_out = true;
        continue;
      }
      // An even share of what is left, so one slow run cannot starve the others.
      Check(link, opt, left / static_cast<double>(picks.size() - i), &c);
      Progress(opt, absl::StrFormat(
                        "check: %s -> %s%s", c.label,
                        c.check_completed
                            ? (opt.workload.objective == Objective::kMct
                                   ? absl::StrFormat("mct p99 %.3f ms", c.sim_mct_p99_s * 1e3)
                                   : absl::StrFormat("goodput %.4g Gbit/s", c.sim_goodput_bps / 1e9))
                            : "incomplete",
                        c.check_note.empty() ? "" : absl::StrCat(" (", c.check_note, ")")));
    }
    res.check_s = WallSeconds() - c0;
    res.checked = picks;
    // The best measured; near-ties by cost; nothing measured: the model's choice.
    const Candidate* best = nullptr;
    for (const Candidate& c : picks) {
      if (!c.check_completed) continue;
      if (best == nullptr || c.measured_score() > best->measured_score()) best = &c;
    }
    // One finite run is noisy: a loss near its end costs a repair round trip (or, for
    // messages, moves the p99 by one). Differences smaller than that are ties.
    double tolerance = opt.measure_tolerance;
    if (opt.workload.objective == Objective::kGoodput) {
      const double bytes = static_cast<double>(
          opt.check_bytes ? opt.check_bytes : CheckBytes(link, model_choice.config.segment));
      const double transfer_s = bytes * 8 / std::max(link.rate.bps(), 1.0);
      const double round_s = 1.75 * std::max(link.rtt_p50.seconds(), link.rtt.seconds());
      if (link.loss > 0) tolerance = std::max(tolerance, round_s / transfer_s);
    } else {
      tolerance = std::max(tolerance, 0.02);
    }
    res.measure_tolerance = tolerance;
    // A check cut short by the wall-time budget says nothing against its candidate: if
    // the model's choice could not be measured in time, it stands.
    const bool model_unmeasured =
        !picks[0].check_completed && picks[0].timed_out;
    if (best != nullptr && !model_unmeasured) {
      // The check overrules the model only by more than its noise: the model's choice
      // (picks[0]) stands when it measured within the tolerance of the best; otherwise
      // the cheapest of the candidates within the tolerance of the best.
      const Candidate* choice = best;
      if (picks[0].check_completed &&
          Within(picks[0].measured_score(), best->measured_score(), tolerance)) {
        choice = &picks[0];
      } else {
        for (const Candidate& c : picks) {
          if (!c.check_completed) continue;
          if (Within(c.measured_score(), best->measured_score(), tolerance) &&
              CheaperThan(c, *choice)) {
            choice = &c;
          }
        }
      }
      res.chosen = *choice;
    }
  }
  res.host = AdviseHost(res.chosen.config, ReadHostSettings());
  res.uc_chunk = AdviseUcChunk(link);
  return res;
}

}  // namespace longhaul::tuner
