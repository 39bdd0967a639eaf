// longhaul-tune: chooses transport parameters for a link and writes them as a profile.
//
//   longhaul-tune --link=SPEC      a known link (a link spec or a named link), no network
//   longhaul-tune --target=HOST:PORT   probe the path to a responder first (longhaul-probe
//                                      --server, or a longhaul-perf server), then choose
//   --objective=goodput|mct [--message_size=SIZE --load=F]   what to optimise
//   --out=FILE    write the profile (key=value lines with a provenance header)
//   --json        print the choice, the prediction and the checks as JSON
//
// See docs/tuning.md. Exit status: 0 a profile was chosen (and written), 1 the probe or
// the search failed, 2 bad flags.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "longhaul/version.h"
#include "nlohmann/json.hpp"
#include "tools/common/json_fields.h"
#include "tools/common/probe_flags.h"
#include "tools/common/tool_flags.h"
#include "tools/common/transport_flags.h"
#include "transport/base/parse.h"
#include "transport/profile/profile.h"
#include "transport/sim/link_files.h"
#include "transport/sim/link_spec.h"
#include "tuner/model/link_estimate.h"
#include "tuner/model/transport_model.h"
#include "tuner/probe/prober.h"
#include "tuner/profile/tuned_profile.h"
#include "tuner/search/search.h"

DEFINE_string(link, "",
              "a known link: a named link (tokyo-singapore, ts-1g, ...) and/or key=value pairs "
              "(rate=10gbit,rtt=58ms,loss=1e-4); no network is used");
DEFINE_string(target, "",
              "HOST:PORT of a probe responder (longhaul-probe --server or longhaul-perf's "
              "server): probe the path, then choose");
DEFINE_string(objective, "goodput", "goodput (bulk transfer) or mct (p99 message completion time)");
DEFINE_string(message_size, "1MiB", "mct: message size");
DEFINE_double(load, 0.5, "mct: offered load as a fraction of the link rate");
DEFINE_string(bytes, "0",
              "goodput: size of a transfer to optimise for (0: an unbounded transfer)");
DEFINE_string(out, "", "write the profile to this file");
DEFINE_bool(json, false, "print one JSON object (estimates, choice, prediction, checks)");
DEFINE_int32(top_k, 3, "candidates checked in the simulator (0: model only)");
DEFINE_string(check_budget, "60s", "wall-time bound on all simulator checks");
DEFINE_string(check_bytes, "0", "bulk bytes per simulator check (0: chosen from the link)");
DEFINE_uint64(check_messages, 0, "mct: messages per simulator check (0: chosen)");
DEFINE_string(max_memory, "8GiB", "upper bound on window and on receive window (each)");
DEFINE_uint64(seed, 1, "seed of the simulator checks");
DECLARE_string(profile);

namespace longhaul {
namespace {

constexpr ToolUsage kUsage("longhaul-tune");

// The command line as typed, for the profile's provenance (arguments with spaces or
// shell characters quoted).
std::string CommandLine(int argc, char** argv) {
  std::vector<std::string> parts = {"longhaul-tune"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.find_first_of(" \t'\"$`\\;&|<>()") != std::string::npos) a = absl::StrCat("'", a, "'");
    parts.push_back(a);
  }
  return absl::StrJoin(parts, " ");
}

std::string Rate(double bps) {
  return bps >= 1e9 ? absl::StrFormat("%.4g Gbit/s", bps / 1e9)
                    : absl::StrFormat("%.4g Mbit/s", bps / 1e6);
}

nlohmann::json EstimateJson(const tuner::LinkEstimate& e) {
  nlohmann::json j;
  j["source"] = e.source;
  j["rate_bps"] = e.rate.bps();
  j["rtt_ns"] = e.rtt.ns();
  j["rtt_p50_ns"] = e.rtt_p50.ns();
  j["rtt_p99_ns"] = e.rtt_p99.ns();
  j["loss"] = e.loss;
  j["mean_burst"] = e.mean_burst;
  j["reorder"] = e.reorder;
  j["reorder_late_ns"] = e.reorder_late.ns();
  j["mtu_bytes"] = e.mtu;
  j["overhead_bytes"] = e.overhead;
  j["bdp_bytes"] = e.BdpBytes();
  j["rate_rel_error"] = e.rate_rel_error;
  j["loss_rel_error"] = e.loss_rel_error;
  j["fitted_link"] = e.ToLinkSpec().ToString();
  j["host_timer_late_ns"] = e.host_timer_late.ns();
  return j;
}

nlohmann::json PredictionJson(const tuner::Prediction& p, tuner::Objective o) {
  nlohmann::json j;
  LONGHAUL_JSON_SET_FIELDS(j, p, goodput_bps, steady_goodput_bps, limit, header_efficiency,
                           fec_overhead, retransmitted, loss, residual_loss, block_failure,
                           rtt_effective_s, repair_s, tail_s);
  j["window_needed_bytes"] = p.window_needed;
  j["recv_window_needed_bytes"] = p.recv_window_needed;
  if (p.transfer_s > 0) j["transfer_s"] = p.transfer_s;
  if (o == tuner::Objective::kMct) {
    LONGHAUL_JSON_SET_FIELDS(j, p, stable, mct_ideal_s, mct_base_s, mct_mean_s, mct_p50_s,
                             mct_p99_s, p_message_repair);
  }
  return j;
}

nlohmann::json CandidateJson(const tuner::Candidate& c, tuner::Objective o) {
  nlohmann::json j;
  j["label"] = c.label;
  j["params"] = TransportConfigToJson(c.config);
  j["prediction"] = PredictionJson(c.prediction, o);
  if (c.checked) {
    nlohmann::json s;
    s["completed"] = c.check_completed;
    s["goodput_bps"] = c.sim_goodput_bps;
    if (o == tuner::Objective::kMct) {
      s["mct_p99_s"] = c.sim_mct_p99_s;
      s["mct_mean_s"] = c.sim_mct_mean_s;
    }
    s["fec_repair_packets"] = c.sim_fec_repair_packets;
    s["wall_s"] = c.sim_wall_s;
    s["model_for_this_run"] = PredictionJson(c.check_prediction, o);
    if (!c.check_note.empty()) s["note"] = c.check_note;
    j["simulated"] = s;
  }
  return j;
}

std::string PredictedLine(const tuner::Candidate& c, tuner::Objective o) {
  if (o == tuner::Objective::kMct) {
    return absl::StrFormat("mct p99 %.3f ms, mean %.3f ms (ideal %.3f ms), goodput %s (model)",
                           c.prediction.mct_p99_s * 1e3, c.prediction.mct_mean_s * 1e3,
                           c.prediction.mct_ideal_s * 1e3, Rate(c.prediction.steady_goodput_bps));
  }
  return absl::StrFormat("goodput %s (model, %s; limited by %s)", Rate(c.prediction.goodput_bps),
                         c.prediction.transfer_s > 0 ? "this transfer size" : "an unbounded transfer",
                         c.prediction.limit);
}

std::string CheckedLine(const tuner::TuneResult& r) {
  if (!r.check_skipped.empty()) return absl::StrCat("none (", r.check_skipped, ")");
  const tuner::Candidate& c = r.chosen;
  if (!c.checked || !c.check_completed) {
    return absl::StrCat("the model's choice was not measured",
                        c.check_note.empty() ? "" : absl::StrCat(" (", c.check_note, ")"),
                        c.timed_out ? "; it stands (a run cut by the time budget is no evidence "
                                      "against it)"
                                    : "");
  }
  std::string what =
      r.objective == tuner::Objective::kMct
          ? absl::StrFormat("mct p99 %.3f ms, mean %.3f ms (model for that run: p99 %.3f ms)",
                            c.sim_mct_p99_s * 1e3, c.sim_mct_mean_s * 1e3,
                            c.check_prediction.mct_p99_s * 1e3)
          : absl::StrFormat("goodput %s (model for that run: %s)", Rate(c.sim_goodput_bps),
                            Rate(c.check_prediction.goodput_bps));
  return absl::StrFormat("%s in the simulator (%s on %s; best of %d candidates)%s", what,
                         r.check_workload, r.check_link, r.checked.size(),
                         c.check_note.empty() ? "" : absl::StrCat("; ", c.check_note));
}

// The search's options from the flags (a usage error exits).
tuner::SearchOptions SearchOptionsFromFlags() {
  tuner::SearchOptions opt;
  opt.workload.objective = kUsage.Or(tuner::ParseObjective(FLAGS_objective), "objective");
  opt.workload.message_size = kUsage.Or(ParseByteCount(FLAGS_message_size), "message_size");
  opt.workload.bulk_bytes = kUsage.Or(ParseByteCount(FLAGS_bytes), "bytes");
  opt.workload.load = FLAGS_load;
  if (!(FLAGS_load > 0 && FLAGS_load <= 1)) kUsage.Fail("--load must be in (0, 1]");
  if (opt.workload.objective == tuner::Objective::kMct && opt.workload.message_size == 0) {
    kUsage.Fail("--message_size must be > 0");
  }
  opt.top_k = FLAGS_top_k;
  if (opt.top_k < 0 || opt.top_k > 32) kUsage.Fail("--top_k must be in [0, 32]");
  opt.check_budget = kUsage.Or(ParseDuration(FLAGS_check_budget), "check_budget");
  opt.check_bytes = kUsage.Or(ParseByteCount(FLAGS_check_bytes), "check_bytes");
  opt.check_messages = FLAGS_check_messages;
  opt.max_memory = kUsage.Or(ParseByteCount(FLAGS_max_memory), "max_memory");
  if (opt.max_memory < (ByteCount{1} << 20)) kUsage.Fail("--max_memory must be at least 1MiB");
  opt.seed = FLAGS_seed;
  absl::StatusOr<TransportConfig> base = TransportConfigFromFlags();
  if (!base.ok()) kUsage.Fail(base.status().message());
  opt.base = *base;
  if (!FLAGS_json) {
    opt.progress = [](const std::string& line) { std::cerr << "longhaul-tune: " << line << "\n"; };
  }
  return opt;
}

// The link to tune for: a known link (--link) or a probe of --target (its report goes to
// stderr and, as JSON, to `probe_json`). False when the probe failed (said on stderr).
bool MeasureLink(tuner::LinkEstimate* link, nlohmann::json* probe_json) {
  if (!FLAGS_link.empty()) {
    sim::LinkSpec spec = kUsage.Or(sim::LoadLinkSpec(FLAGS_link), "link");
    *link = tuner::LinkEstimate::FromLinkSpec(spec);
    return true;
  }
  absl::StatusOr<tuner::ProbeOptions> po = ProbeOptionsFromFlags(FLAGS_target);
  if (!po.ok()) kUsage.Fail(po.status().message());
  if (!FLAGS_json) {
    po->progress = [](const std::string& line) { std::cerr << "longhaul-tune: " << line << "\n"; };
  }
  absl::StatusOr<tuner::ProbeReport> report = tuner::RunProbe(*po);
  if (!report.ok()) {
    std::cerr << "longhaul-tune: probe of " << FLAGS_target
              << " failed: " << report.status().message() << "\n";
    return false;
  }
  std::cerr << ProbeReportText(*report);
  *link = report->estimate;
  *probe_json = ProbeReportToJson(*report);
  return true;
}

// The profile header: how the choice was made.
tuner::Provenance MakeProvenance(const std::string& command, const tuner::LinkEstimate& link,
                                 const tuner::SearchOptions& opt, const tuner::TuneResult& r) {
  const tuner::Objective o = r.objective;
  tuner::Provenance prov;
  prov.Add("command", command);
  prov.Add("version", "longhaul " + std::string(Version()) + " (git " + std::string(GitRevision()) + ")");
  prov.Add("date", tuner::UtcTimestamp());
  prov.Add("link", absl::StrCat(link.ToString(), " [", link.source, "]"));
  prov.Add("objective",
           o == tuner::Objective::kMct
               ? absl::StrFormat("mct (p99 completion of %s messages at load %.2g)",
                                 FormatByteCount(opt.workload.message_size), opt.workload.load)
               : std::string(opt.workload.bulk_bytes
                                 ? absl::StrCat("goodput (transfers of ",
                                                FormatByteCount(opt.workload.bulk_bytes), ")")
                                 : "goodput (bulk transfer)"));
  prov.Add("predicted", PredictedLine(r.chosen, o));
  prov.Add("checked", CheckedLine(r));
  prov.Add("host",
           absl::StrFormat("net.core.rmem_max >= %d, net.core.wmem_max >= %d, IP MTU >= %d",
                           r.host.rmem_max_needed, r.host.wmem_max_needed, r.host.mtu_needed));
  return prov;
}

// Writes the profile to --out and reads it back; false (said on stderr) on failure.
bool WriteProfile(const std::string& text) {
  std::ofstream f(FLAGS_out, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::cerr << "longhaul-tune: cannot write " << FLAGS_out << "\n";
    return false;
  }
  // What was written must read back as the chosen configuration.
  absl::StatusOr<TransportConfig> back = tuner::LoadTunedProfile(FLAGS_out, TransportConfig());
  if (!back.ok()) {
    std::cerr << "longhaul-tune: the profile written does not read back: " << back.status() << "\n";
    return false;
  }
  return true;
}

nlohmann::json HostJson(const tuner::HostAdvice& host) {
  nlohmann::json h;
  h["rmem_max_needed"] = host.rmem_max_needed;
  h["wmem_max_needed"] = host.wmem_max_needed;
  h["mtu_needed"] = host.mtu_needed;
  h["rmem_max"] = host.current.rmem_max;
  h["wmem_max"] = host.current.wmem_max;
  h["rmem_ok"] = host.rmem_ok;
  h["wmem_ok"] = host.wmem_ok;
  h["commands"] = host.commands;
  return h;
}

nlohmann::json ResultJson(const std::string& command, const tuner::LinkEstimate& link,
                          const nlohmann::json& probe_json, const tuner::SearchOptions& opt,
                          const tuner::TuneResult& r, const std::string& text) {
  const tuner::Objective o = r.objective;
  nlohmann::json j;
  j["version"] = std::string(Version());
  j["command"] = command;
  j["link"] = EstimateJson(link);
  if (!probe_json.is_null()) j["probe"] = probe_json;
  nlohmann::json w;
  w["objective"] = tuner::ObjectiveName(o);
  if (o == tuner::Objective::kMct) {
    w["message_size"] = opt.workload.message_size;
    w["load"] = opt.workload.load;
  } else {
    w["bytes"] = opt.workload.bulk_bytes;
  }
  j["workload"] = w;
  j["chosen"] = CandidateJson(r.chosen, o);
  nlohmann::json checked = nlohmann::json::array();
  for (const tuner::Candidate& c : r.checked) checked.push_back(CandidateJson(c, o));
  j["checked"] = checked;
  j["check_link"] = r.check_link;
  j["check_workload"] = r.check_workload;
  if (!r.check_skipped.empty()) j["check_skipped"] = r.check_skipped;
  j["candidates_evaluated"] = r.candidates_evaluated;
  j["measure_tolerance"] = r.measure_tolerance;
  j["search_s"] = r.search_s;
  j["check_s"] = r.check_s;
  j["host"] = HostJson(r.host);
  j["uc_chunk"] = {{"packets", r.uc_chunk.packets},
                   {"chunk_loss", r.uc_chunk.chunk_loss},
                   {"budget", r.uc_chunk.budget}};
  j["profile"] = text;
  if (!FLAGS_out.empty()) j["profile_path"] = FLAGS_out;
  return j;
}

void PrintResult(const tuner::LinkEstimate& link, const tuner::Provenance& prov,
                 const tuner::TuneResult& r, const std::string& text) {
  const tuner::Objective o = r.objective;
  std::cout << "link       " << link.ToString() << "\n";
  std::cout << "source     " << link.source << "\n";
  std::cout << "objective  " << prov.Get("objective") << "\n";
  std::cout << "choice     " << r.chosen.label << "\n";
  std::cout << "predicted  " << PredictedLine(r.chosen, o) << "\n";
  std::cout << "checked    " << CheckedLine(r) << "\n";
  if (!r.checked.empty()) {
    std::cout << "candidates (model -> simulator):\n";
    for (const tuner::Candidate& c : r.checked) {
      std::string sim = !c.checked ? "not run"
                        : !c.check_completed ? "incomplete"
                        : o == tuner::Objective::kMct
                            ? absl::StrFormat("p99 %.3f ms", c.sim_mct_p99_s * 1e3)
                            : Rate(c.sim_goodput_bps);
      std::string model = o == tuner::Objective::kMct
                              ? absl::StrFormat("p99 %.3f ms", c.prediction.mct_p99_s * 1e3)
                              : Rate(c.prediction.goodput_bps);
      std::cout << absl::StrFormat(
          "  %s %-80s %s -> %s%s\n", c.label == r.chosen.label ? "*" : " ", c.label, model, sim,
          c.check_note.empty() ? "" : absl::StrCat("  (", c.check_note, ")"));
    }
  }
  std::cout << "verbs UC   chunk of " << r.uc_chunk.why
            << "; soft-RoCE (rxe) needs 1 (docs/rdma.md 7.7, 7.11)\n";
  std::cout << "host settings:\n";
  for (const std::string& l : r.host.lines) std::cout << "  " << l << "\n";
  for (const std::string& c : r.host.commands) std::cout << "  $ " << c << "\n";
  if (!FLAGS_out.empty()) {
    std::cout << "wrote      " << FLAGS_out << "\n";
  } else {
    std::cout << "\n" << text;
  }
}

int Main(int argc, char** argv) {
  const std::string command = CommandLine(argc, argv);
  InitTool(&argc, &argv,
           "chooses longhaul transport parameters for a link and writes a profile.\n"
           "usage: longhaul-tune (--link=SPEC | --target=HOST:PORT) [--objective=goodput|mct\n"
           "       [--message_size=SIZE] [--load=F]] [--out=FILE] [--json] [transport flags]\n"
           "The profile paces cc=fixed at the measured rate; for a shared or changing link\n"
           "give --cc=bbr --fec=auto: rate (cap) = 1.05 x and rate_min = 0.5 x the measured\n"
           "rate, auto FEC starting from the chosen code.\n"
           "docs/tuning.md explains the model, the search and the profile header.");
  if (argc > 1) kUsage.Fail(absl::StrCat("unexpected argument '", argv[1], "'"));
  if (FLAGS_link.empty() == FLAGS_target.empty()) {
    kUsage.Fail("give exactly one of --link=SPEC (a known link) or --target=HOST:PORT (probe it)");
  }
  const tuner::SearchOptions opt = SearchOptionsFromFlags();
  tuner::LinkEstimate link;
  nlohmann::json probe_json;
  if (!MeasureLink(&link, &probe_json)) return 1;

  absl::StatusOr<tuner::TuneResult> r = tuner::Tune(link, opt);
  if (!r.ok()) {
    if (absl::IsInvalidArgument(r.status())) kUsage.Fail(r.status().message());
    std::cerr << "longhaul-tune: " << r.status() << "\n";
    return 1;
  }
  const tuner::Provenance prov = MakeProvenance(command, link, opt, *r);
  const std::string text = tuner::FormatTunedProfile(r->chosen.config, prov);
  if (!FLAGS_out.empty() && !WriteProfile(text)) return 1;
  if (FLAGS_json) {
    std::cout << ResultJson(command, link, probe_json, opt, *r, text).dump(2) << "\n";
    return 0;
  }
  PrintResult(link, prov, *r, text);
  return 0;
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) { return longhaul::Main(argc, argv); }
