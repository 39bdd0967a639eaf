// longhaul-perf's per-engine report (EndpointOptions::engines, --engines): for each
// engine of this side's endpoint, how many of the test's connections ran on it (each
// handle's ConnectionInfo::engine) and its counters and thread CPU time
// (Endpoint::engine_stats). The client adds it to its JSON as end.longhaul.engines and,
// with more than one engine, prints one line per engine; the server does the same in its
// test events. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "transport/datapath/options.h"

namespace longhaul::perf {

struct EngineReport {
  uint32_t index = 0;
  uint64_t connections = 0;  // the test's connections on this side that ran on the engine
  uint64_t bytes_sent = 0, bytes_received = 0;  // UDP payload bytes (EndpointStats)
  uint64_t datagrams_sent = 0, datagrams_received = 0;
  double cpu_s = 0;  // the engine thread's user + system CPU seconds since it started
};

// One report per entry of `per_engine` (in engine order); `connection_engines` holds the
// engine of each connection (an index past the engines counts nowhere).
std::vector<EngineReport> EngineReports(const std::vector<EndpointStats>& per_engine,
                                        const std::vector<uint32_t>& connection_engines);

// [{"index", "connections", "bytes_sent", "bytes_received", "datagrams_sent",
//   "datagrams_received", "cpu_s"}, ...]
nlohmann::json EnginesJson(const std::vector<EngineReport>& engines);

// "[E0]  2 connection(s)  sent 1.16 GBytes (812345 datagrams)  received ...  cpu 3.21 s",
// one per engine; none for a single engine (the totals say it all).
std::vector<std::string> EngineLines(const std::vector<EngineReport>& engines);

}  // namespace longhaul::perf
