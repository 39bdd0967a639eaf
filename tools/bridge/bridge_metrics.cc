#include "tools/bridge/bridge_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longhaul::bridge {
namespace {

// Label values escape backslash, double quote and newline.
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void Head(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP longhaul_bridge_", name, " ", help, "\n# TYPE longhaul_bridge_",
                  name, " ", type, "\n");
}

void Sample(std::string* out, const char* name, const std::string& labels, double v) {
  absl::StrAppend(out, "longhaul_bridge_", name, labels.empty() ? "" : "{", labels,
                  labels.empty() ? "" : "}", " ", absl::StrFormat("%.17g", v), "\n");
}

void One(std::string* out, const char* name, const char* type, const char* help, double v) {
  Head(out, name, type, help);
  Sample(out, name, "", v);
}

// Per-engine series (--engines): connections, datagram bytes and thread CPU time.
void FormatEngines(std::string* out, const std::vector<EngineSnapshot>& engines) {
  if (engines.empty()) return;
  One(out, "engines", "gauge", "Engines (driver threads) of the longhaul endpoint (--engines).",
      static_cast<double>(engines.size()));
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const EngineSnapshot&);
  };
  static const Series kSeries[] = {
      {"engine_connections", "gauge", "longhaul connections the engine runs now.",
       [](const EngineSnapshot& e) { return static_cast<double>(e.connections); }},
      {"engine_sent_bytes_total", "counter", "UDP datagram bytes the engine sent.",
       [](const EngineSnapshot& e) { return static_cast<double>(e.bytes_sent); }},
      {"engine_received_bytes_total", "counter", "UDP datagram bytes the engine received.",
       [](const EngineSnapshot& e) { return static_cast<double>(e.bytes_received); }},
      {"engine_cpu_seconds_total", "counter",
       "CPU time of the engine's thread (user + system); near 1 s per s: saturated.",
       [](const EngineSnapshot& e) { return e.cpu_s; }},
  };
  for (const Series& series : kSeries) {
    Head(out, series.name, series.type, series.help);
    for (size_t i = 0; i < engines.size(); ++i) {
      Sample(out, series.name, absl::StrCat("engine=\"", i, "\""), series.get(engines[i]));
    }
  }
}

}  // namespace

std::string FormatMetrics(const std::string& mode, double uptime_s, const Metrics& m,
                          const std::vector<SessionSnapshot>& sessions,
                          const std::vector<EngineSnapshot>& engines) {
  std::string out;
  Head(&out, "info", "gauge", "The bridge's mode (label mode).");
  Sample(&out, "info", absl::StrCat("mode=\"", Escape(mode), "\""), 1);
  One(&out, "uptime_seconds", "gauge", "Seconds since the bridge started.", uptime_s);
  uint64_t open = 0;
  for (const auto& s : sessions) open += s.streams_open;
  One(&out, "streams_open", "gauge", "TCP connections carried now.", static_cast<double>(open));
  One(&out, "streams_opened_total", "counter", "Streams begun.", static_cast<double>(m.streams_opened));
  One(&out, "streams_completed_total", "counter", "Streams ended by a clean close both ways.",
      static_cast<double>(m.streams_completed));
  Head(&out, "streams_reset_total", "counter",
       "Streams ended by a reset, by reason and by who reset them (local or peer).");
  for (const auto& [key, n] : m.streams_reset) {
    Sample(&out, "streams_reset_total",
           absl::StrCat("reason=\"", Escape(key.first), "\",by=\"", Escape(key.second), "\""),
           static_cast<double>(n));
  }
  One(&out, "tcp_received_bytes_total", "counter", "Bytes read from TCP and sent over longhaul.",
      static_cast<double>(m.bytes_from_tcp));
  One(&out, "tcp_sent_bytes_total", "counter", "Bytes received over longhaul and written to TCP.",
      static_cast<double>(m.bytes_to_tcp));
  One(&out, "sessions_open", "gauge", "longhaul connections to peer bridges now.",
      static_cast<double>(sessions.size()));
  if (m.connections_configured > 0) {
    One(&out, "connections_configured", "gauge",
        "Client: longhaul connections kept to the server bridge (--connections).",
        static_cast<double>(m.connections_configured));
  }
  One(&out, "sessions_opened_total", "counter", "longhaul connections established.",
      static_cast<double>(m.sessions_opened));
  One(&out, "reconnects_total", "counter", "Client: connections to the peer after the first.",
      static_cast<double>(m.reconnects));
  One(&out, "connect_failures_total", "counter", "Client: attempts to reach the peer that failed.",
      static_cast<double>(m.connect_failures));
  One(&out, "protocol_errors_total", "counter", "Sessions ended by a malformed frame.",
      static_cast<double>(m.protocol_errors));
  One(&out, "target_connect_failures_total", "counter",
      "Server: targets that refused the connection or could not be reached.",
      static_cast<double>(m.target_connect_failures));
  Head(&out, "refused_total", "counter",
       "What the resource rules refused, by reason (docs/bridge.md section 4).");
  for (const auto& [reason, n] : m.refused) {
    Sample(&out, "refused_total", absl::StrCat("reason=\"", Escape(reason), "\""),
           static_cast<double>(n));
  }
  One(&out, "memory_charged_bytes", "gauge",
      "Bytes charged to the memory budget now (server: all clients).",
      static_cast<double>(m.memory_charged));
  One(&out, "memory_limit_bytes", "gauge", "The memory budget (server: --memory_total).",
      static_cast<double>(m.memory_limit));
  One(&out, "targets_open", "gauge", "Server: target TCP connections held for clients.",
      static_cast<double>(m.targets_open));
  One(&out, "client_keys", "gauge", "Server: client keys with a session now.",
      static_cast<double>(m.client_keys));

  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const SessionSnapshot&);
  };
  static const Series kSeries[] = {
      {"session_streams_open", "gauge", "Streams open on the connection.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.streams_open); }},
      {"session_rtt_seconds", "gauge", "Smoothed round-trip time.",
       [](const SessionSnapshot& s) { return s.debug.srtt.seconds(); }},
      {"session_min_rtt_seconds", "gauge", "Lowest round-trip time seen.",
       [](const SessionSnapshot& s) { return s.debug.min_rtt.seconds(); }},
      {"session_pacing_rate_bits_per_second", "gauge", "The sender's pacing rate.",
       [](const SessionSnapshot& s) { return s.debug.pacing_rate.bps(); }},
      {"session_sent_data_bytes_total", "counter", "Message bytes sent (first transmissions).",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.data_bytes_sent); }},
      {"session_received_data_bytes_total", "counter", "New message bytes received.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.data_bytes_received); }},
      {"session_packets_sent_total", "counter", "Datagrams sent.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.packets_sent); }},
      {"session_packets_lost_total", "counter", "Datagrams declared lost.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.packets_lost); }},
      {"session_packets_retransmitted_total", "counter", "Datagrams carrying repaired data.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.packets_retransmitted); }},
      {"session_fec_recovered_packets_total", "counter", "Data packets rebuilt from parity.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.fec_recovered_packets); }},
      {"session_fec_repair_packets_sent_total", "counter", "Parity packets sent.",
       [](const SessionSnapshot& s) { return static_cast<double>(s.stats.fec_repair_packets_sent); }},
      {"session_peer_loss_ratio", "gauge", "Loss rate the peer reports.",
       [](const SessionSnapshot& s) { return s.debug.peer_loss_rate; }},
  };
  for (const Series& series : kSeries) {
    Head(&out, series.name, series.type, series.help);
    for (const SessionSnapshot& s : sessions) {
      Sample(&out, series.name,
             absl::StrCat("peer=\"", Escape(s.peer), "\",connection=\"", Escape(s.connection),
                          "\",engine=\"", s.engine, "\""),
             series.get(s));
    }
  }
  FormatEngines(&out, engines);
  return out;
}

}  // namespace longhaul::bridge
