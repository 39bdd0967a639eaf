#include "tools/perf/perf_engines.h"

#include "absl/strings/str_format.h"
#include "tools/perf/perf_format.h"

namespace longhaul::perf {

std::vector<EngineReport> EngineReports(const std::vector<EndpointStats>& per_engine,
                                        const std::vector<uint32_t>& connection_engines) {
  std::vector<EngineReport> out(per_engine.size());
  for (size_t i = 0; i < per_engine.size(); ++i) {
    const EndpointStats& s = per_engine[i];
    EngineReport& r = out[i];
    r.index = static_cast<uint32_t>(i);
    r.bytes_sent = s.bytes_sent;
    r.bytes_received = s.bytes_received;
    r.datagrams_sent = s.datagrams_sent;
    r.datagrams_received = s.datagrams_received;
    r.cpu_s = s.cpu_s;
  }
  for (uint32_t e : connection_engines) {
    if (e < out.size()) ++out[e].connections;
  }
  return out;
}

nlohmann::json EnginesJson(const std::vector<EngineReport>& engines) {
  nlohmann::json list = nlohmann::json::array();
  for (const EngineReport& r : engines) {
    nlohmann::json j;
    j["index"] = r.index;
    j["connections"] = r.connections;
    j["bytes_sent"] = r.bytes_sent;
    j["bytes_received"] = r.bytes_received;
    j["datagrams_sent"] = r.datagrams_sent;
    j["datagrams_received"] = r.datagrams_received;
    j["cpu_s"] = r.cpu_s;
    list.push_back(std::move(j));
  }
  return list;
}

std::vector<std::string> EngineLines(const std::vector<EngineReport>& engines) {
  std::vector<std::string> lines;
  if (engines.size() < 2) return lines;
  for (const EngineReport& r : engines) {
    lines.push_back(absl::StrFormat(
        "[E%d]  %d connection(s)  sent %s (%d datagrams)  received %s (%d datagrams)  cpu %.2f s",
        r.index, r.connections, FormatTransfer(r.bytes_sent), r.datagrams_sent,
        FormatTransfer(r.bytes_received), r.datagrams_received, r.cpu_s));
  }
  return lines;
}

}  // namespace longhaul::perf
