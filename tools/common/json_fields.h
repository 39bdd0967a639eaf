// JSON helpers of the tools' output. Tool layer; header only.
//
// LONGHAUL_JSON_SET_FIELDS: writes a struct's members into a JSON object under their own
// names, so that a key and the member it shows are spelt once.
//
//   nlohmann::json j;
//   LONGHAUL_JSON_SET_FIELDS(j, stats, packets_sent, packets_lost);
//   // j["packets_sent"] = stats.packets_sent; j["packets_lost"] = stats.packets_lost;
//
// nlohmann::json keeps an object's keys sorted, so the order of the members does not
// change the output. At most 63 members per call (nlohmann's macro limit).
#pragma once

#include "nlohmann/json.hpp"

// j[#m] = s.m for every member m listed; `j` is a nlohmann::json, `s` any struct.
#define LONGHAUL_JSON_SET_FIELDS(j, s, ...)                                  \
  do {                                                                       \
    nlohmann::json& nlohmann_json_j = (j);                                   \
    const auto& nlohmann_json_t = (s);                                       \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__)) \
  } while (false)

namespace longhaul {

// A message-completion-time summary under the keys every tool uses for it: mct_mean_s,
// mct_p50_s, mct_p99_s, mct_p999_s and mct_max_s (seconds). M has those members without
// the "mct_" prefix (sim::MessageTimes, longhaul-perf's MctSummary).
template <typename M>
void SetMctPercentiles(nlohmann::json& j, const M& m) {
  j["mct_mean_s"] = m.mean_s;
  j["mct_p50_s"] = m.p50_s;
  j["mct_p99_s"] = m.p99_s;
  j["mct_p999_s"] = m.p999_s;
  j["mct_max_s"] = m.max_s;
}

}  // namespace longhaul
