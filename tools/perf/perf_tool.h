// longhaul-perf's client and server runs (tools/perf/longhaul_perf_main.cc parses the
// flags into these options). docs/perf.md describes the tool, its output and its JSON.
#pragma once

#include <cstdint>
#include <string>

#include "longhaul/version.h"
#include "transport/core/config.h"
#include "transport/crypto/key_files.h"
#include "transport/datapath/options.h"

namespace longhaul::perf {

// What the JSON reports and the control request carry as "version":
// "longhaul-perf 0.1.0 (git REV, wire protocol 1)".
inline std::string PerfVersion() { return VersionLine("longhaul-perf"); }

struct ClientOptions {
  std::string host;
  uint16_t port = 5201;
  TransportConfig config;
  crypto::LoadedKeys keys;  // what endpoint.security came from (labels, files)
  EndpointOptions endpoint;
  double time_s = 10;
  uint64_t bytes = 0;  // per stream; 0: time-bounded
  bool reverse = false;
  uint32_t parallel = 1;
  uint64_t message_size = 1 << 20;
  std::string workload = "bulk";
  double load = 0.5;
  double interval_s = 1;
  bool json = false;
  Duration connect_timeout = Duration::Seconds(5);
  double timeout_s = 0;  // 0: time + 60 s, or 3600 s for --bytes
  std::string profile_path;
  // --verify=on: fill every message with the pattern and check it on receipt; off: send
  // the same bytes every time and check nothing (the server learns it from the request).
  bool verify = true;
  // Zero copy with the verbs datapath's UC lanes (--zero_copy): the payload pattern is
  // registered (Endpoint::RegisterMemory); off, it is copied like any message.
  bool zero_copy = true;
  // The path memory (tools/common/path_memory.h): "" for none. `path_memory_applies`:
  // no --initial_rate or --rate_min was given, so a remembered rate may set the start.
  std::string path_memory;
  bool path_memory_applies = false;
};

struct ServerOptions {
  std::string bind = "0.0.0.0";
  uint16_t port = 5201;
  TransportConfig config;
  crypto::LoadedKeys keys;  // what endpoint.security came from (labels, files)
  EndpointOptions endpoint;
  bool json = false;
  bool one_off = false;
  double max_duration_s = 3600;
  // Answer the tuner's probes (longhaul-probe / longhaul-tune --target) on the same UDP
  // port, so a link can be measured against any longhaul-perf server.
  bool answer_probes = true;
  bool zero_copy = true;  // as ClientOptions::zero_copy, for reverse tests
};

// Runs a test; returns the exit status (0: every byte delivered and, unless verify is
// off, verified; 1: an error, corruption or incomplete transfer).
int RunClient(const ClientOptions& options);
// Serves tests until SIGINT/SIGTERM (or after one test with one_off); returns the exit
// status (with one_off: that of the test).
int RunServer(const ServerOptions& options);

}  // namespace longhaul::perf
