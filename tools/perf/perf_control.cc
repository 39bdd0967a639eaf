#include "tools/perf/perf_control.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tools/common/json_fields.h"
#include "tools/perf/perf_pattern.h"
#include "transport/base/status.h"

namespace longhaul::perf {

std::string EncodeControl(const nlohmann::json& j) {
  std::string s(reinterpret_cast<const char*>(kControlMagic), sizeof(kControlMagic));
  s += j.dump();
  return s;
}

bool IsControl(const uint8_t* data, size_t size) {
  return size >= sizeof(kControlMagic) &&
         std::memcmp(data, kControlMagic, sizeof(kControlMagic)) == 0;
}

absl::StatusOr<nlohmann::json> DecodeControl(const uint8_t* data, size_t size) {
  if (!IsControl(data, size)) return absl::InvalidArgumentError("not a control message");
  if (size > kMaxControlMessage) {
    return absl::InvalidArgumentError("control message larger than 1 MiB");
  }
  nlohmann::json j = nlohmann::json::parse(
      reinterpret_cast<const char*>(data) + sizeof(kControlMagic),
      reinterpret_cast<const char*>(data) + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("control message is not valid JSON");
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return absl::InvalidArgumentError("control message without a \"type\"");
  }
  return j;
}

nlohmann::json RequestToJson(const TestRequest& r) {
  nlohmann::json j;
  j["type"] = "request";
  LONGHAUL_JSON_SET_FIELDS(j, r, test_id, stream, streams, reverse, time_s, bytes, message_size,
                           workload, load, rate_bps, interval_s, version, verify);
  return j;
}

namespace {

template <typename T>
absl::Status Get(const nlohmann::json& j, const char* key, T* out) {
  if (!j.contains(key)) return absl::InvalidArgumentError(absl::StrCat("missing \"", key, "\""));
  const nlohmann::json& v = j[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean())
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a boolean"));
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string())
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a string"));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number())
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a number"));
  } else {
    if (!v.is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not an unsigned integer"));
    }
    if (v.get<uint64_t>() > std::numeric_limits<T>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is too large"));
    }
  }
  *out = v.get<T>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestRequest> RequestFromJson(const nlohmann::json& j, double max_time_s) {
  TestRequest r;
  for (absl::Status s :
       {Get(j, "test_id", &r.test_id), Get(j, "stream", &r.stream), Get(j, "streams", &r.streams),
        Get(j, "reverse", &r.reverse), Get(j, "time_s", &r.time_s), Get(j, "bytes", &r.bytes),
        Get(j, "message_size", &r.message_size), Get(j, "workload", &r.workload),
        Get(j, "load", &r.load), Get(j, "rate_bps", &r.rate_bps),
        Get(j, "interval_s", &r.interval_s), Get(j, "version", &r.version)}) {
    LH_RETURN_IF_ERROR(s);
  }
  // Optional: a client from before --verify sends none (and verifies).
  if (j.contains("verify")) {
    LH_RETURN_IF_ERROR(Get(j, "verify", &r.verify));
  }
  if (r.test_id.empty() || r.test_id.size() > 64) {
    return absl::InvalidArgumentError("test_id must have 1..64 characters");
  }
  if (r.streams < 1 || r.streams > 128 || r.stream >= r.streams) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", r.stream, " of ", r.streams, " (1..128 streams)"));
  }
  if (r.message_size < kMinMessageSize || r.message_size > kMaxMessageSize) {
    return absl::InvalidArgumentError(absl::StrCat("message_size=", r.message_size, " is outside [",
                                                   kMinMessageSize, ", ", kMaxMessageSize, "]"));
  }
  if (r.bytes == 0 && !(r.time_s > 0 && r.time_s <= max_time_s)) {
    return absl::InvalidArgumentError(absl::StrCat("time_s=", r.time_s, " is outside (0, ",
                                                   max_time_s, "] (the server's limit)"));
  }
  if (r.workload != "bulk" && r.workload != "messages") {
    return absl::InvalidArgumentError(absl::StrCat("unknown workload '", r.workload, "'"));
  }
  if (!(r.load > 0 && r.load <= 100)) return absl::InvalidArgumentError("load must be in (0, 100]");
  if (!(r.rate_bps >= 0 && std::isfinite(r.rate_bps))) {
    return absl::InvalidArgumentError("rate_bps must be >= 0");
  }
  if (r.workload == "messages" && r.rate_bps == 0) {
    return absl::InvalidArgumentError("workload 'messages' needs rate_bps > 0 (its schedule)");
  }
  if (!(r.interval_s >= 0.01 && r.interval_s <= 3600)) {
    return absl::InvalidArgumentError("interval_s must be in [0.01, 3600]");
  }
  return r;
}

ConnectionStats StatsFromJson(const nlohmann::json& j) {
  ConnectionStats s;
  auto g = [&](const char* k) -> uint64_t {
    return j.is_object() && j.contains(k) && j[k].is_number_unsigned() ? j[k].get<uint64_t>() : 0;
  };
  s.packets_sent = g("packets_sent");
  s.data_packets_sent = g("data_packets_sent");
  s.packets_retransmitted = g("packets_retransmitted");
  s.packets_lost = g("packets_lost");
  s.tail_protect_packets = g("tail_protect_packets");
  s.spurious_losses = g("spurious_losses");
  s.pto_count = g("pto_count");
  s.bytes_sent = g("bytes_sent");
  s.data_bytes_sent = g("data_bytes_sent");
  s.data_bytes_retransmitted = g("data_bytes_retransmitted");
  s.messages_sent = g("messages_sent");
  s.acks_received = g("acks_received");
  s.flow_control_blocked = g("flow_control_blocked");
  s.packets_received = g("packets_received");
  s.bytes_received = g("bytes_received");
  s.data_bytes_received = g("data_bytes_received");
  s.duplicate_data_bytes = g("duplicate_data_bytes");
  s.messages_received = g("messages_received");
  s.acks_sent = g("acks_sent");
  s.checksum_failures = g("checksum_failures");
  s.malformed_packets = g("malformed_packets");
  s.ecn_ce_received = g("ecn_ce_received");
  s.fec_repair_packets_sent = g("fec_repair_packets_sent");
  s.fec_overhead_bytes = g("fec_overhead_bytes");
  s.fec_recovered_packets = g("fec_recovered_packets");
  s.fec_blocks_unrecoverable = g("fec_blocks_unrecoverable");
  return s;
}

nlohmann::json DebugToJson(const ConnectionDebugState& d) {
  nlohmann::json j;
  j["srtt_ms"] = d.srtt.milliseconds();
  j["min_rtt_ms"] = d.min_rtt.milliseconds();
  j["rttvar_ms"] = d.rttvar.milliseconds();
  j["latest_rtt_ms"] = d.latest_rtt.milliseconds();
  j["pacing_rate_bps"] = d.pacing_rate.bps();
  j["congestion_window_bytes"] = d.congestion_window;
  j["cc_mode"] = d.cc_mode ? d.cc_mode : "";
  j["cc_bandwidth_estimate_bps"] = d.cc_bandwidth_estimate.bps();
  j["reorder_packets"] = d.reorder_packets;
  j["peer_loss_rate"] = d.peer_loss_rate;
  j["fec_k"] = d.fec_k;
  j["fec_m"] = d.fec_m;
  return j;
}

}  // namespace longhaul::perf
