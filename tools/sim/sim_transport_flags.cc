#include "tools/sim/sim_transport_flags.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"

DEFINE_string(window, "", "sender window: most bytes in flight (e.g. 1GiB; default 1GiB)");
DEFINE_string(recv_window, "", "receiver credit beyond the in-order point (default 2GiB)");
DEFINE_string(segment, "",
              "message bytes per packet (default: the largest that fits the link MTU)");
DEFINE_string(rate, "",
              "pacing rate (cc=fixed) or cap (adaptive), e.g. 10gbit (cc=fixed default: the "
              "link rate, since the fixed controller is for dedicated lines of known rate)");
DEFINE_string(cc, "fixed", "congestion control: fixed or bbr");
DEFINE_string(fec, "off", "forward error correction: off, fixed or auto");
DEFINE_int32(fec_k, 32, "FEC data packets per block");
DEFINE_int32(fec_m, 4, "FEC parity packets per block");
DEFINE_int32(fec_interleave, 1, "FEC blocks filled round-robin");
DEFINE_int32(reorder_packets, 16, "loss detection: packet reorder threshold");
DEFINE_double(reorder_rtt_fraction, 0.125, "loss detection: RACK reorder window (x RTT)");
DEFINE_string(initial_rtt, "100ms", "RTT assumed before the first sample");
DEFINE_string(min_pto, "5ms", "lower bound of the probe timeout");
DEFINE_int32(ack_every, 32, "acknowledge after this many ack-eliciting packets");
DEFINE_string(max_ack_delay, "1ms", "longest an acknowledgement is held back");
DEFINE_string(pacing_burst, "100us", "largest burst the pacer releases at once (as time)");

namespace longhaul::sim_tool {
namespace {

absl::Status FlagError(const char* flag, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", s.message()));
}

}  // namespace

bool FlagWasSet(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default;
}

absl::StatusOr<TransportConfig> TransportConfigFromFlags() {
  TransportConfig c;
#define LH_SIZE_FLAG(name)                                      \
  if (!FLAGS_##name.empty()) {                                  \
    absl::StatusOr<ByteCount> v = ParseByteCount(FLAGS_##name); \
    if (!v.ok()) return FlagError(#name, v.status());           \
    c.name = *v;                                                \
  }
#define LH_DURATION_FLAG(name)                                 \
  {                                                            \
    absl::StatusOr<Duration> v = ParseDuration(FLAGS_##name);  \
    if (!v.ok()) return FlagError(#name, v.status());          \
    c.name = *v;                                               \
  }
  LH_SIZE_FLAG(window);
  LH_SIZE_FLAG(recv_window);
  LH_SIZE_FLAG(segment);
  if (!FLAGS_rate.empty()) {
    absl::StatusOr<Bandwidth> v = ParseBandwidth(FLAGS_rate);
    if (!v.ok()) return FlagError("rate", v.status());
    c.rate = *v;
  }
  if (FLAGS_cc == "fixed") c.cc = CongestionControl::kFixed;
  else if (FLAGS_cc == "bbr") c.cc = CongestionControl::kBbr;
  else return absl::InvalidArgumentError(absl::StrCat("--cc: unknown '", FLAGS_cc, "' (fixed, bbr)"));
  if (FLAGS_fec == "off") c.fec = FecMode::kOff;
  else if (FLAGS_fec == "fixed") c.fec = FecMode::kFixed;
  else if (FLAGS_fec == "auto") c.fec = FecMode::kAuto;
  else return absl::InvalidArgumentError(absl::StrCat("--fec: unknown '", FLAGS_fec, "' (off, fixed, auto)"));
  c.fec_k = static_cast<uint32_t>(FLAGS_fec_k);
  c.fec_m = static_cast<uint32_t>(FLAGS_fec_m);
  c.fec_interleave = static_cast<uint32_t>(FLAGS_fec_interleave);
  c.reorder_packets = static_cast<uint32_t>(FLAGS_reorder_packets);
  c.reorder_rtt_fraction = FLAGS_reorder_rtt_fraction;
  LH_DURATION_FLAG(initial_rtt);
  LH_DURATION_FLAG(min_pto);
  c.ack_every = static_cast<uint32_t>(FLAGS_ack_every);
  LH_DURATION_FLAG(max_ack_delay);
  LH_DURATION_FLAG(pacing_burst);
#undef LH_SIZE_FLAG
#undef LH_DURATION_FLAG
  return c;
}

nlohmann::json TransportConfigToJson(const TransportConfig& c) {
  nlohmann::json j;
  j["segment"] = c.segment;
  j["max_datagram"] = c.MaxDatagramSize();
  j["window"] = c.window;
  j["recv_window"] = c.recv_window;
  j["max_inflight_messages"] = c.max_inflight_messages;
  j["flows"] = c.flows;
  j["cc"] = CongestionControlName(c.cc);
  j["rate_bps"] = c.rate.bps();
  j["ecn"] = c.ecn;
  j["pacing_burst_ns"] = c.pacing_burst.ns();
  j["reorder_packets"] = c.reorder_packets;
  j["reorder_rtt_fraction"] = c.reorder_rtt_fraction;
  j["initial_rtt_ns"] = c.initial_rtt.ns();
  j["min_pto_ns"] = c.min_pto.ns();
  j["max_pto_ns"] = c.max_pto.ns();
  j["ack_every"] = c.ack_every;
  j["max_ack_delay_ns"] = c.max_ack_delay.ns();
  j["max_ack_ranges"] = c.max_ack_ranges;
  j["fec"] = FecModeName(c.fec);
  j["fec_k"] = c.fec_k;
  j["fec_m"] = c.fec_m;
  j["fec_interleave"] = c.fec_interleave;
  j["fec_flush_ns"] = c.fec_flush.ns();
  j["idle_timeout_ns"] = c.idle_timeout.ns();
  j["keepalive_ns"] = c.keepalive.ns();
  return j;
}

}  // namespace longhaul::sim_tool
