#include "tools/common/transport_flags.h"

#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/common/json_fields.h"
#include "tools/common/tool_flags.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"

namespace {

// Canonical default of a profile key, for the flags' help text. Function-local statics
// only, so this is safe during static initialisation.
const char* DefaultOf(const char* key) {
  static const auto* const kDefaults = new std::vector<std::pair<std::string, std::string>>(
      longhaul::ProfileKeyValues(longhaul::TransportConfig()));
  for (const auto& [k, v] : *kDefaults) {
    if (k == key) return v.c_str();
  }
  return "";
}

}  // namespace

DEFINE_string(profile, "",
              "Transport profile file (key=value lines); flags given explicitly "
              "override its values.");
DEFINE_string(segment, DefaultOf("segment"), "Payload bytes per packet (8KiB, 9000).");
DEFINE_string(mtu, "", "IP MTU of the path in bytes; sets --segment to the largest that fits.");
DEFINE_string(window, DefaultOf("window"),
              "Most bytes in flight; must cover rate x RTT (100gbit x 58ms = 725MB).");
DEFINE_string(recv_window, DefaultOf("recv_window"), "Receive credit in bytes: how far past the first undelivered byte the peer may send.");
DEFINE_uint32(max_inflight_messages, longhaul::TransportConfig().max_inflight_messages,
              "Most messages outstanding at the sender.");
DEFINE_uint32(flows, longhaul::TransportConfig().flows, "UDP flows (source ports) per connection.");
DEFINE_string(cc, DefaultOf("cc"), "Congestion control: fixed (pace at --rate) or bbr.");
DEFINE_string(rate, DefaultOf("rate"),
              "Pacing rate for cc=fixed, cap for bbr (10gbit, 800mbit; 0: no cap).");
DEFINE_string(rate_min, DefaultOf("rate_min"),
              "cc=bbr: the least bandwidth the controller assumes; it starts there instead "
              "of ramping up from an initial window, and cuts stop there (0: none; the "
              "tuner writes half the measured rate).");
DEFINE_string(initial_rate, DefaultOf("initial_rate"),
              "cc=bbr: the rate the first round trip is paced at, before anything is "
              "measured (its window: this rate over --initial_rtt, at least 10 packets); "
              "startup doubles from there (0: 10 packets only).");
DEFINE_double(cc_loss_threshold, longhaul::TransportConfig().cc_loss_threshold,
              "cc=bbr: per-round loss rate above which loss is congestion even without "
              "queueing delay (0.03, 3%); set it above the path's random loss.");
DEFINE_bool(cc_compete, longhaul::TransportConfig().cc_compete,
            "cc=bbr: compete for a share against traffic that keeps a queue (TCP CUBIC, "
            "BBR), once a queue has stood through its drains for 40 round trips; off: "
            "take what such traffic leaves, and the path's RTT where a queue stays flat "
            "(docs/congestion-control.md \"Sharing with TCP\").");
DEFINE_bool(cc_yield, longhaul::TransportConfig().cc_yield,
            "cc=bbr: yield fully to traffic that keeps a queue (a scavenger): every "
            "standing queue is drained, none is taken for a longer path, never "
            "competes (overrides --cc_compete).");
DEFINE_bool(ecn, longhaul::TransportConfig().ecn,
            "Send ECN-capable packets and react to CE marks.");
DEFINE_bool(tail_protect, longhaul::TransportConfig().tail_protect,
            "When idle, re-send the newest unacknowledged packets (each once) so tail losses "
            "are repaired without a detection round trip.");
DEFINE_string(pacing_burst, DefaultOf("pacing_burst"), "Largest catch-up burst when the sender wakes late (1ms); none after idle.");
DEFINE_uint32(reorder_packets, longhaul::TransportConfig().reorder_packets,
              "Packets reordering threshold for loss detection.");
DEFINE_double(reorder_rtt_fraction, longhaul::TransportConfig().reorder_rtt_fraction,
              "Time reordering threshold as a fraction of the RTT.");
DEFINE_string(initial_rtt, DefaultOf("initial_rtt"), "RTT assumed before the first sample (58ms).");
DEFINE_string(min_pto, DefaultOf("min_pto"), "Lower bound on the probe timeout.");
DEFINE_string(max_pto, DefaultOf("max_pto"), "Upper bound on the probe timeout (it does not back off; see docs/reliability.md).");
DEFINE_uint32(ack_every, longhaul::TransportConfig().ack_every,
              "Acknowledge after this many ack-eliciting packets.");
DEFINE_string(max_ack_delay, DefaultOf("max_ack_delay"), "Longest an ACK is held back.");
DEFINE_uint32(max_ack_ranges, longhaul::TransportConfig().max_ack_ranges,
              "Most ranges per ACK frame.");
DEFINE_string(fec, DefaultOf("fec"),
              "Forward error correction: off, K,M (K data + M parity per block) or auto.");
DEFINE_uint32(fec_interleave, longhaul::TransportConfig().fec_interleave,
              "FEC blocks filled round-robin (burst tolerance).");
DEFINE_string(fec_flush, DefaultOf("fec_flush"),
              "Close a partly filled FEC block after this long.");
DEFINE_double(fec_tail, longhaul::TransportConfig().fec_tail,
              "fec=auto: the message-completion percentile to protect (0.999: p99.9); the "
              "policy aims for at most (1 - fec_tail) / 4 repair rounds per message.");
DEFINE_double(fec_max_overhead, longhaul::TransportConfig().fec_max_overhead,
              "fec=auto: the most parity per data packet to spend (0.25: 25%); beyond it "
              "the policy protects as well as it can and reports best-effort.");
DEFINE_string(idle_timeout, DefaultOf("idle_timeout"),
              "Close the connection after this long idle.");
DEFINE_string(keepalive, DefaultOf("keepalive"),
              "Send a keepalive after this long without traffic.");

namespace longhaul {
namespace {

// Profile keys that have no flag of their own: --fec=K,M sets them.
constexpr const char* kKeysWithoutFlag[] = {"fec_k", "fec_m"};

bool HasFlag(const std::string& key) {
  for (const char* k : kKeysWithoutFlag) {
    if (key == k) return false;
  }
  return true;
}

// The flag's value as profile text: gflags' own text, which is exact for every type
// (doubles are printed with 17 significant digits, booleans as true / false).
std::string FlagValueText(const std::string& name) {
  std::string value;
  CHECK(gflags::GetCommandLineOption(name.c_str(), &value)) << name;
  return value;
}

}  // namespace

const bool kTransportFlagsDefined = true;

std::vector<std::string> TransportFlagNames() {
  std::vector<std::string> names;
  for (const std::string& key : ProfileKeys()) {
    if (key == "mtu" || !HasFlag(key)) continue;
    names.push_back(key);
    // --mtu comes after --segment so that, with a profile that sets segment, --mtu wins.
    if (key == "segment") names.push_back("mtu");
  }
  return names;
}

std::vector<std::string> ProfileKeysWithoutFlag() {
  return std::vector<std::string>(std::begin(kKeysWithoutFlag), std::end(kKeysWithoutFlag));
}

bool TransportFlagWasSet(const char* name) {
  return !gflags::GetCommandLineFlagInfoOrDie(name).is_default;
}

GivenSettings GivenTransportSettings() {
  GivenSettings given;
  given.cc = TransportFlagWasSet("cc");
  given.rate = TransportFlagWasSet("rate");
  given.segment = TransportFlagWasSet("segment") || TransportFlagWasSet("mtu");
  given.initial_rate = TransportFlagWasSet("initial_rate");
  given.rate_min = TransportFlagWasSet("rate_min");
  if (FLAGS_profile.empty()) return given;
  // Load the profile over two bases that differ in every field of interest: a field the
  // profile sets comes out equal.
  TransportConfig a, b;
  b.cc = a.cc == CongestionControl::kFixed ? CongestionControl::kBbr : CongestionControl::kFixed;
  b.rate = Bandwidth::BitsPerSecond(a.rate.bps() + 1234567);
  b.segment = a.segment + 64;
  b.initial_rate = Bandwidth::BitsPerSecond(a.initial_rate.bps() + 1);
  b.rate_min = Bandwidth::BitsPerSecond(a.rate_min.bps() + 1);  // never above a rate
  absl::StatusOr<TransportConfig> ra = LoadProfile(FLAGS_profile, a);
  absl::StatusOr<TransportConfig> rb = LoadProfile(FLAGS_profile, b);
  if (!ra.ok() || !rb.ok()) return given;
  given.cc = given.cc || ra->cc == rb->cc;
  given.rate = given.rate || ra->rate == rb->rate;
  given.segment = given.segment || ra->segment == rb->segment;
  given.initial_rate = given.initial_rate || ra->initial_rate == rb->initial_rate;
  given.rate_min = given.rate_min || ra->rate_min == rb->rate_min;
  return given;
}

bool ApplyToolRateDefault(TransportConfig* config) {
  const GivenSettings given = GivenTransportSettings();
  if (!given.cc && !given.rate) config->cc = CongestionControl::kBbr;
  if (config->cc == CongestionControl::kBbr && !given.rate) config->rate = Bandwidth::Zero();
  return config->cc == CongestionControl::kBbr && config->rate.IsZero();
}

absl::StatusOr<TransportConfig> TransportConfigFromFlags() {
  TransportConfig config;
  if (!FLAGS_profile.empty()) {
    absl::StatusOr<TransportConfig> loaded = LoadProfile(FLAGS_profile, config);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat("--profile: ", loaded.status().message()));
    }
    config = *loaded;
  }
  if (TransportFlagWasSet("mtu") && TransportFlagWasSet("segment")) {
    return absl::InvalidArgumentError(
        "--mtu and --segment are both given; --mtu derives the segment, so give one");
  }
  for (const std::string& name : TransportFlagNames()) {
    if (!TransportFlagWasSet(name.c_str())) continue;
    const std::string value = FlagValueText(name);
    if (absl::Status s = ApplyProfileKey(&config, name, value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, "=", value, ": ", s.message()));
    }
  }
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid transport configuration (from defaults, --profile and flags): ", s.message()));
  }
  return config;
}

namespace {

// A profile value of kind kInteger or kNumber as a number: the profile's canonical text
// always parses.
uint64_t ProfileInteger(const std::string& key, const std::string& value) {
  uint64_t v = 0;
  CHECK(absl::SimpleAtoi(value, &v)) << key << "=" << value;
  return v;
}
double ProfileNumber(const std::string& key, const std::string& value) {
  double v = 0;
  CHECK(absl::SimpleAtod(value, &v)) << key << "=" << value;
  return v;
}

}  // namespace

nlohmann::json TransportConfigToJson(const TransportConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  // Every key from the profile's list, typed by its kind; values with units keep their
  // profile text ("1GiB") and add their numeric form under <key>_bytes, <key>_bps or
  // <key>_ns. The canonical text parses back to the exact field value.
  for (const auto& [key, value] : ProfileKeyValues(config)) {
    const std::optional<ProfileValueKind> kind = ProfileKeyKind(key);
    CHECK(kind.has_value()) << key;
    j[key] = value;  // the kinds without a unit replace the text with their typed value
    switch (*kind) {
      case ProfileValueKind::kInteger:
        j[key] = ProfileInteger(key, value);
        break;
      case ProfileValueKind::kBool:
        j[key] = value == "true";
        break;
      case ProfileValueKind::kNumber:
        j[key] = ProfileNumber(key, value);
        break;
      case ProfileValueKind::kSize:
        j[key + "_bytes"] = ParseByteCount(value).value();
        break;
      case ProfileValueKind::kRate:
        j[key + "_bps"] = ParseBandwidth(value).value().bps();
        break;
      case ProfileValueKind::kDuration:
        j[key + "_ns"] = ParseDuration(value).value().ns();
        break;
      case ProfileValueKind::kChoice:
        break;
    }
  }
  j["max_datagram_bytes"] = config.MaxDatagramSize();
  return j;
}

nlohmann::json ConnectionStatsToJson(const ConnectionStats& s) {
  nlohmann::json j;
  LONGHAUL_JSON_SET_FIELDS(
      j, s, packets_sent, data_packets_sent, packets_retransmitted, packets_lost,
      tail_protect_packets, spurious_losses, pto_count, bytes_sent, data_bytes_sent,
      data_bytes_retransmitted, messages_sent, acks_received, flow_control_blocked,
      packets_received, bytes_received, data_bytes_received, duplicate_data_bytes,
      messages_received, acks_sent, checksum_failures, malformed_packets, ecn_ce_received,
      fec_repair_packets_sent, fec_overhead_bytes, fec_recovered_packets, fec_blocks_unrecoverable);
  return j;
}

}  // namespace longhaul
