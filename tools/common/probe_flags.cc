#include "tools/common/probe_flags.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"

DEFINE_string(duration, "10s", "probe: upper bound on the whole probe");
DEFINE_string(max_bytes, "1GiB", "probe: upper bound on the wire bytes the probe sends");
DEFINE_string(start_rate, "50mbit", "probe: rate of the first train");
DEFINE_string(max_rate, "100gbit", "probe: trains never go faster than this");
DEFINE_string(train_duration, "40ms", "probe: length of one rate train");
DEFINE_int32(rtt_probes, 40, "probe: echoes of the idle-RTT phase (5 ms apart)");
DEFINE_bool(pmtu, true, "probe: search the path MTU (DF-set probes)");
DEFINE_uint32(max_mtu, 0, "probe: largest MTU to try (0: the local interface's)");
DEFINE_double(loss_load, 0.8, "probe: loss-phase rate as a fraction of the measured rate");
DEFINE_uint32(loss_pps, 20000, "probe: loss-phase packet-rate target (more packets, more samples)");

namespace longhaul {
namespace {

nlohmann::json RttJson(const tuner::RttSummary& s) {
  nlohmann::json j;
  j["count"] = s.count;
  j["min_ns"] = s.min.ns();
  j["p50_ns"] = s.p50.ns();
  j["p90_ns"] = s.p90.ns();
  j["p99_ns"] = s.p99.ns();
  j["max_ns"] = s.max.ns();
  j["mean_ns"] = s.mean.ns();
  j["jitter_ns"] = s.jitter.ns();
  return j;
}

template <typename T>
absl::StatusOr<T> Flag(absl::StatusOr<T> v, const char* name) {
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", v.status().message()));
  return v;
}

}  // namespace

absl::StatusOr<tuner::ProbeOptions> ProbeOptionsFromFlags(const std::string& target) {
  tuner::ProbeOptions o;
  o.target = target;
  LH_ASSIGN_OR_RETURN(o.max_duration, Flag(ParseDuration(FLAGS_duration), "duration"));
  LH_ASSIGN_OR_RETURN(o.max_bytes, Flag(ParseByteCount(FLAGS_max_bytes), "max_bytes"));
  LH_ASSIGN_OR_RETURN(o.start_rate, Flag(ParseBandwidth(FLAGS_start_rate), "start_rate"));
  LH_ASSIGN_OR_RETURN(o.max_rate, Flag(ParseBandwidth(FLAGS_max_rate), "max_rate"));
  LH_ASSIGN_OR_RETURN(o.train_duration,
                      Flag(ParseDuration(FLAGS_train_duration), "train_duration"));
  if (o.max_duration <= Duration::Zero()) return absl::InvalidArgumentError("--duration must be > 0");
  if (o.max_duration > Duration::Seconds(600)) {
    return absl::InvalidArgumentError("--duration must be at most 600s");
  }
  if (o.train_duration < Duration::Milliseconds(1) || o.train_duration > Duration::Seconds(1)) {
    return absl::InvalidArgumentError("--train_duration must be in [1ms, 1s]");
  }
  if (FLAGS_rtt_probes < 1 || FLAGS_rtt_probes > 10000) {
    return absl::InvalidArgumentError("--rtt_probes must be in [1, 10000]");
  }
  o.rtt_probes = FLAGS_rtt_probes;
  o.pmtu = FLAGS_pmtu;
  if (FLAGS_max_mtu != 0 && (FLAGS_max_mtu < 576 || FLAGS_max_mtu > 65535)) {
    return absl::InvalidArgumentError("--max_mtu must be 0 or in [576, 65535]");
  }
  o.max_mtu = FLAGS_max_mtu;
  if (!(FLAGS_loss_load > 0 && FLAGS_loss_load <= 1)) {
    return absl::InvalidArgumentError("--loss_load must be in (0, 1]");
  }
  o.loss_load = FLAGS_loss_load;
  if (FLAGS_loss_pps < 100) return absl::InvalidArgumentError("--loss_pps must be >= 100");
  o.loss_packets_per_s = FLAGS_loss_pps;
  return o;
}

nlohmann::json ProbeReportToJson(const tuner::ProbeReport& r) {
  nlohmann::json j;
  j["responder"] = r.responder;
  const tuner::LinkEstimate& e = r.estimate;
  nlohmann::json est;
  est["rate_bps"] = e.rate.bps();
  est["rate_rel_error"] = e.rate_rel_error;
  est["rtt_ns"] = e.rtt.ns();
  est["rtt_p50_ns"] = e.rtt_p50.ns();
  est["rtt_p99_ns"] = e.rtt_p99.ns();
  est["jitter_ns"] = (e.rtt_p99 - e.rtt_p50).ns();
  est["loss"] = e.loss;
  est["loss_rel_error"] = e.loss_rel_error;
  est["mean_burst"] = e.mean_burst;
  est["reorder"] = e.reorder;
  est["reorder_late_ns"] = e.reorder_late.ns();
  est["pmtu_bytes"] = e.mtu;
  est["fitted_link"] = e.ToLinkSpec().ToString();
  j["estimate"] = est;
  j["rtt"]["idle"] = RttJson(r.rtt_idle);
  if (r.rtt_loaded.count > 0) j["rtt"]["loaded"] = RttJson(r.rtt_loaded);
  nlohmann::json trains = nlohmann::json::array();
  for (const tuner::TrainResult& t : r.trains) {
    nlohmann::json tj;
    tj["target_bps"] = t.target_rate.bps();
    tj["send_bps"] = t.send_rate.bps();
    tj["delivery_bps"] = t.delivery_rate.bps();
    tj["packets_sent"] = t.packets_sent;
    tj["packets_received"] = t.packets_received;
    tj["duration_s"] = t.duration.seconds();
    trains.push_back(tj);
  }
  j["rate"]["trains"] = trains;
  j["rate"]["stop_reason"] = r.rate_stop_reason;
  j["rate"]["saturated"] = r.rate_saturated;
  j["rate"]["max_delivery_bps"] = r.max_delivery_bps;
  j["rate"]["train_payload_bytes"] = r.train_payload_bytes;
  j["rate"]["short_trains"] = r.short_trains;
  j["rate"]["host_limited"] = r.host_limited;
  j["pmtu"]["pmtu_bytes"] = r.pmtu;
  j["pmtu"]["rounds"] = r.pmtu_rounds;
  j["pmtu"]["local_mtu_bytes"] = r.local_mtu;
  const tuner::LossEstimate& l = r.loss;
  j["loss"]["packets"] = l.packets;
  j["loss"]["lost"] = l.lost;
  j["loss"]["bursts"] = l.bursts;
  j["loss"]["loss_rate"] = l.loss_rate;
  j["loss"]["loss_rate_rel_error"] = l.packets ? l.loss_rate_rel_error : 0.0;
  j["loss"]["loss_rate_upper_if_none"] = l.loss_rate_upper_if_none;
  j["loss"]["mean_burst"] = l.mean_burst;
  j["loss"]["burst_ratio"] = l.burst_ratio;
  j["loss"]["gilbert2"] = {{"p", l.gilbert2.p}, {"r", l.gilbert2.r}};
  j["loss"]["gilbert3"] = {{"p", l.gilbert3.p}, {"r", l.gilbert3.r}, {"h", l.gilbert3.h},
                           {"fitted", l.gilbert3.three_parameter}, {"note", l.gilbert3.note}};
  j["loss"]["phase_rate_bps"] = r.loss_phase_rate_bps;
  j["loss"]["phase_s"] = r.loss_phase_s;
  j["loss"]["payload_bytes"] = r.loss_phase_payload_bytes;
  j["reorder"]["packets"] = r.reorder.packets;
  j["reorder"]["reordered"] = r.reorder.reordered;
  j["reorder"]["max_extent_packets"] = r.reorder.max_extent_packets;
  j["reorder"]["max_late_ns"] = r.reorder.max_late.ns();
  j["duplicates"] = r.duplicates;
  j["responder_drops"] = r.responder_drops;
  j["host_timer_late_p99_ns"] = r.timer_late_p99.ns();
  j["elapsed_s"] = r.elapsed_s;
  j["wire_bytes_sent"] = r.wire_bytes_sent;
  j["packets_sent"] = r.packets_sent;
  j["notes"] = r.notes;
  return j;
}

std::string ProbeReportText(const tuner::ProbeReport& r) {
  const tuner::LinkEstimate& e = r.estimate;
  std::string s;
  absl::StrAppendFormat(&s, "responder  %s\n", r.responder);
  absl::StrAppendFormat(&s, "rate       %s (+-%.1f%%, %s, %d trains)\n", FormatBandwidth(e.rate),
                        100 * e.rate_rel_error, r.rate_stop_reason, r.trains.size());
  absl::StrAppendFormat(&s, "rtt        idle: %s\n", r.rtt_idle.ToString());
  if (r.rtt_loaded.count > 0) {
    absl::StrAppendFormat(&s, "           loaded: %s\n", r.rtt_loaded.ToString());
  }
  absl::StrAppendFormat(&s, "loss       %s\n", r.loss.ToString());
  absl::StrAppendFormat(&s, "reorder    %s\n", r.reorder.ToString());
  absl::StrAppendFormat(&s, "path MTU   %d (local interface %d)\n", r.pmtu, r.local_mtu);
  absl::StrAppendFormat(&s, "host       sender wake-ups late by up to %.3f ms (p99)\n",
                        r.timer_late_p99.milliseconds());
  absl::StrAppendFormat(&s, "link spec  %s\n", e.ToLinkSpec().ToString());
  absl::StrAppendFormat(&s, "probe      %.2f s, %s sent in %d datagrams\n", r.elapsed_s,
                        FormatByteCount(r.wire_bytes_sent), r.packets_sent);
  for (const std::string& n : r.notes) absl::StrAppendFormat(&s, "note       %s\n", n);
  return s;
}

}  // namespace longhaul
