// The tuner's optimiser: from a LinkEstimate and an objective, choose a TransportConfig.
//
//  1. Coordinate search over the model (tuner/model): segment (the largest for the path
//     MTU, and the common smaller ones), window and receive window (multiples of what
//     the model says the flight needs: 1.5x, 2x, 3x, 4x, never below 1.5x because the
//     need is exact only for the estimated RTT, never above max_memory), FEC (off, the
//     FEC auto policy's choice fec::ChooseFecParameters for this loss process and its
//     neighbours in m and interleave, and a few fixed codes) and tail protection. The
//     pacing rate is the link's rate (cc=fixed); reorder thresholds, initial RTT come
//     from the estimate (reorder_packets >= 1.5 x the reorder lateness in packets,
//     reorder_rtt_fraction >= 1.5 x lateness / RTT). Passes repeat until nothing changes.
//     Candidates within `tie_tolerance` of the best score are ranked by cost: FEC
//     overhead, then memory (window + receive window).
//  2. The best `top_k` distinct candidates (always including the best without FEC and
//     the best with it) are run in the simulator (sim::RunScenario) on the fitted link
//     (LinkEstimate::ToLinkSpec) with the objective's workload, bounded by a wall-time
//     budget. The check overrules the model only by more than its noise: the model's
//     choice stands if it measured within a tolerance of the best, or if its run was cut
//     by the wall-time budget (no evidence against it); otherwise the cheapest
//     candidate within the tolerance of the best is chosen. The tolerance is at least
//     `measure_tolerance`; for goodput on a lossy link, one repair round trip (1.75 RTT)
//     over the run's transfer time, which a single loss near the end costs; for mct 2 %.
//
// Each check runs in a child process (fork): a configuration that makes the transport
// fail a CHECK, or a run that does not stop, costs that candidate (its note says so),
// not the tuner. Thread-safety: call Tune() from a single-threaded process, or at least
// where fork() is safe; it blocks the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "tuner/model/link_estimate.h"
#include "tuner/model/transport_model.h"
#include "tuner/model/uc_chunk.h"
#include "tuner/search/host_advice.h"

namespace longhaul::tuner {

struct SearchOptions {
  Workload workload;
  // Start of the search: every knob the search does not set (timers, ACK policy, cc,
  // flows, ...) keeps its value from here.
  TransportConfig base;
  // Upper bound on window and on receive window (each), bytes: host memory.
  ByteCount max_memory = ByteCount{8} << 30;
  double tie_tolerance = 0.005;      // relative, on the model's score
  // ---- simulator check ----
  int top_k = 3;                     // 0: no simulator check
  Duration check_budget = Duration::Seconds(60);  // wall time for all check runs
  ByteCount check_bytes = 0;         // bulk bytes per run; 0: auto (see CheckBytes)
  uint64_t check_messages = 0;       // mct: messages per run; 0: auto
  // Skip the check when the flight (BDP) exceeds this: the simulator holds it in memory.
  ByteCount max_check_flight = ByteCount{3} << 30;
  double measure_tolerance = 0.01;   // relative; the least tolerance for measured ties
  uint64_t seed = 1;
  // Progress (one line per stage or check run), e.g. to stderr. May be empty.
  std::function<void(const std::string&)> progress;
};

struct Candidate {
  TransportConfig config;
  Prediction prediction;
  double score = 0;          // model objective, larger is better
  std::string label;         // "segment=8894 window=16MiB recv_window=32MiB fec=off tail_protect=1"
  // Simulator check (when checked).
  bool checked = false;
  bool check_completed = false;  // the run delivered everything intact within its bounds
  bool timed_out = false;        // the run (or its turn) was cut by the wall-time budget
  double sim_goodput_bps = 0;
  double sim_mct_p99_s = 0;
  double sim_mct_mean_s = 0;
  double sim_wall_s = 0;
  uint64_t sim_fec_repair_packets = 0;
  std::string check_note;        // why a check did not complete, or FEC inactive
  // The model's prediction for the check's own workload (a finite transfer, or the
  // check's message count), to compare with the simulator's result.
  Prediction check_prediction;
  double measured_score() const;  // larger is better (goodput, or -p99)
};

struct TuneResult {
  LinkEstimate link;
  Objective objective = Objective::kGoodput;
  Workload workload;
  Candidate chosen;
  std::vector<Candidate> checked;  // the candidates run in the simulator, in model order
  size_t candidates_evaluated = 0;
  std::string check_link;          // the fitted link spec the checks ran on
  std::string check_workload;      // "bulk 8GiB" / "messages 1000 x 1MiB at load 0.5"
  std::string check_skipped;       // why there was no check, if there was none
  double measure_tolerance = 0;    // ties among the measured results (see above)
  double search_s = 0;             // wall time of the model search
  double check_s = 0;              // wall time of the checks
  HostAdvice host;
  // For the verbs datapath's UC mode: the chunk size for this link (docs/rdma.md 7.7).
  UcChunkAdvice uc_chunk;
};

// Bulk bytes per check run for a link: enough for >= 6 RTTs of transfer and 200k
// packets, at most 0.8M packets (a few CPU seconds at ~0.3-1M packets/s).
ByteCount CheckBytes(const LinkEstimate& link, ByteCount segment);
// Messages per check run: about 300k packets in total, 100..2000 messages.
uint64_t CheckMessages(ByteCount message_size, ByteCount segment);

// Errors: InvalidArgument for an unusable estimate (rate 0, no RTT) or options.
absl::StatusOr<TuneResult> Tune(const LinkEstimate& link, const SearchOptions& options);

// A candidate's knobs as a label (also used to de-duplicate).
std::string CandidateLabel(const TransportConfig& c);

}  // namespace longhaul::tuner
