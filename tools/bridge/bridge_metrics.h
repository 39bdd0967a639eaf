// What longhaul-bridge counts, and the Prometheus text format it serves them in
// (GET /metrics on --metrics=ADDR:PORT; docs/bridge.md section 6).
//
// Counters are kept by the bridge's io thread only (no locks): the sessions count stream
// and byte events, the tool counts reconnects; the metrics server runs on the same
// thread and formats a snapshot.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "transport/core/stats.h"

namespace longhaul::bridge {

struct Metrics {
  uint64_t streams_opened = 0;     // streams begun (client: accepted; server: OPEN)
  uint64_t streams_completed = 0;  // ended by FIN both ways
  // Streams ended by a reset, by reason (ResetCodeName) and by who reset them
  // ("local": this bridge, "peer": the other bridge).
  std::map<std::pair<std::string, std::string>, uint64_t> streams_reset;
  uint64_t bytes_from_tcp = 0;  // read from TCP sockets, sent over longhaul
  uint64_t bytes_to_tcp = 0;    // received over longhaul, written to TCP sockets
  uint64_t sessions_opened = 0;  // longhaul connections established
  uint64_t reconnects = 0;       // client: connections after the first
  uint64_t connect_failures = 0;  // client: attempts that failed
  uint64_t protocol_errors = 0;   // sessions ended by a malformed or out-of-bounds frame
  uint64_t target_connect_failures = 0;  // server: targets that refused or were unreachable
  // What the resource rules refused, by reason (tools/bridge/stream_protocol.h):
  // memory, targets, streams, sessions, frames, not_opened, stale_id, ids_forgotten,
  // peer_not_reading, window_deferred.
  std::map<std::string, uint64_t> refused;
  // Gauges the tool sets before formatting: what is charged to the budget now (server:
  // the process budget), its limit, target connections open, client keys connected.
  uint64_t memory_charged = 0;
  uint64_t memory_limit = 0;
  uint64_t targets_open = 0;
  uint64_t client_keys = 0;
  uint64_t connections_configured = 0;  // client: --connections (0: not shown)
};

// One longhaul connection's view, for the gauges. `connection` tells apart the
// connections to one peer (a client bridge keeps --connections of them): the client's
// index of the connection (0 .. --connections-1) on a client bridge, an accept counter
// on a server bridge; `engine` the engine (driver thread) that runs it.
struct SessionSnapshot {
  std::string peer;
  std::string connection;
  uint32_t engine = 0;
  uint64_t streams_open = 0;
  ConnectionStats stats;
  ConnectionDebugState debug;
};

// One engine's counters (Endpoint::engine_stats(), in engine order): a user sees an
// engine saturate when its cpu_s grows by about one second per second.
struct EngineSnapshot {
  uint64_t connections = 0;  // longhaul connections it runs now
  uint64_t bytes_sent = 0;   // UDP datagram bytes
  uint64_t bytes_received = 0;
  double cpu_s = 0;  // its thread's CPU time, user + system
};

// The Prometheus text exposition (version 0.0.4): longhaul_bridge_* counters and gauges
// with HELP and TYPE lines; per-session series carry peer="ADDR:PORT",
// connection="N" and engine="E" labels, per-engine series an engine="E" label.
// `mode` is "client" or "server"; `uptime_s` the seconds since start.
std::string FormatMetrics(const std::string& mode, double uptime_s, const Metrics& m,
                          const std::vector<SessionSnapshot>& sessions,
                          const std::vector<EngineSnapshot>& engines = {});

}  // namespace longhaul::bridge
