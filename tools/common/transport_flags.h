// Command-line flags shared by every longhaul tool that runs a transport, defined once
// here so that --window=1GiB or --profile=tokyo.profile mean the same in every binary:
//
//   --profile=FILE                     profile file (transport/profile/profile_file.h)
//   --segment, --window, --recv_window sizes (8KiB, 1GiB)    --mtu  IP MTU, sets segment
//   --rate (10gbit)  --rate_min  --initial_rate  --cc (fixed|bbr)  --cc_loss_threshold (0.03)
//   --pacing_burst (100us)  --tail_protect / --notail_protect
//   --ecn / --noecn  --cc_compete / --nocc_compete  --cc_yield / --nocc_yield
//   --flows  --max_inflight_messages
//   --fec (off|K,M|auto)  --fec_interleave  --fec_flush (1ms)
//   --reorder_packets  --reorder_rtt_fraction  --initial_rtt  --min_pto  --max_pto
//   --ack_every  --max_ack_delay  --max_ack_ranges  --idle_timeout  --keepalive
//
// Each flag is named after its profile key and parsed by ApplyProfileKey, so flags and
// profiles accept exactly the same values. Tools must not define these flags again.
// Tool-layer code (gflags); the core never sees flags, only the TransportConfig.
// Not thread-safe: call from main() before starting threads.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/common/tool_flags.h"  // InitTool
#include "transport/core/config.h"
#include "transport/core/stats.h"

namespace longhaul {

// The transport configuration the command line asks for: TransportConfig defaults, then
// the --profile file (if given), then every transport flag set explicitly on the command
// line (or with gflags::SetCommandLineOption), in that order of precedence. Returns the
// Validate()d config, or InvalidArgument naming the offending flag ("--window=12x: bad
// value '12x' for 'window': ..."); a missing profile is NotFound naming the path.
[[nodiscard]] absl::StatusOr<TransportConfig> TransportConfigFromFlags();

// The transport flags in the order TransportConfigFromFlags applies them: the profile's
// keys in ProfileKeys() order, --mtu right after --segment, less ProfileKeysWithoutFlag().
// Each flag has its key's name.
std::vector<std::string> TransportFlagNames();
// The profile keys that have no flag of their own (fec_k and fec_m: --fec=K,M sets them).
std::vector<std::string> ProfileKeysWithoutFlag();

// True if the flag `name` (without dashes) was given explicitly. CHECK-fails for a name
// that is not a flag.
bool TransportFlagWasSet(const char* name);

// Which of the rate-related settings the command line gives: each is true when its flag
// was set explicitly or the --profile file sets the key (`segment` also for --mtu or a
// profile's mtu). A profile that cannot be loaded counts as setting nothing
// (TransportConfigFromFlags reports it).
struct GivenSettings {
  bool cc = false;
  bool rate = false;
  bool segment = false;
  bool initial_rate = false;
  bool rate_min = false;
};
GivenSettings GivenTransportSettings();

// The rate default of the tools that run on real links (longhaul-perf, longhaul-bridge):
// a newcomer's link rate is unknown, so without --cc, --rate or a profile's cc or rate
// the transport runs cc=bbr with no cap (it finds the link's rate); `--rate` alone keeps
// the fixed controller at that rate; cc=bbr with no rate given anywhere has no cap.
// Applied to TransportConfigFromFlags()'s result. Returns true when the rate was left to
// congestion control (cc=bbr, no cap).
bool ApplyToolRateDefault(TransportConfig* config);

// Every profile key (ProfileKeyValues) typed by its kind (ProfileKeyKind): integers as
// JSON numbers, booleans as booleans, numbers (reorder_rtt_fraction, cc_loss_threshold,
// fec_tail, fec_max_overhead) as numbers, the other keys as their profile text ("1GiB");
// plus the numeric forms of the values with units, <size>_bytes, <rate>_bps and
// <duration>_ns (segment_bytes, rate_bps, initial_rtt_ns, ...), and max_datagram_bytes.
nlohmann::json TransportConfigToJson(const TransportConfig& config);

// Defined beside the flags: the reference below links them (and so lists them in --help)
// into every binary that includes this header, whatever else it calls.
extern const bool kTransportFlagsDefined;
[[gnu::used]] static const bool* const kTransportFlagsAnchor = &kTransportFlagsDefined;

// Every counter of a connection's ConnectionStats, named as the struct names them (the
// tools' JSON: longhaul-perf's reports, longhaul-sim's result).
nlohmann::json ConnectionStatsToJson(const ConnectionStats& stats);

}  // namespace longhaul
