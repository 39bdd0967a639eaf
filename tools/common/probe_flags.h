// Probe flags shared by longhaul-probe and longhaul-tune --target (defined once, here),
// and the probe report's JSON and text forms. Tool layer (gflags).
//
//   --duration=10s  --max_bytes=1GiB  --start_rate=50mbit  --max_rate=100gbit
//   --train_duration=40ms  --rtt_probes=40  --pmtu / --nopmtu  --max_mtu=0
//   --loss_load=0.8  --loss_pps=20000
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tuner/probe/prober.h"

namespace longhaul {

// ProbeOptions for `target` from the flags; InvalidArgument naming a bad flag.
absl::StatusOr<tuner::ProbeOptions> ProbeOptionsFromFlags(const std::string& target);

// {"responder":..., "estimate":{...}, "rtt":{"idle":{...},"loaded":{...}}, "rate":{...},
//  "pmtu":{...}, "loss":{...}, "reorder":{...}, "elapsed_s":..., "wire_bytes_sent":...}
nlohmann::json ProbeReportToJson(const tuner::ProbeReport& r);

// A human-readable summary, several lines.
std::string ProbeReportText(const tuner::ProbeReport& r);

}  // namespace longhaul
