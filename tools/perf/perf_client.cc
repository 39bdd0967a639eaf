// The longhaul-perf client: connects --parallel connections, runs the test on them,
// prints iperf3-like interval lines and a summary (or one iperf3-shaped JSON object).
// With --engines=N the connections run on N engine threads (placed in turn); each
// PerfStream's events come from its own connection's engine only, and the streams share
// nothing but the pattern cache (PatternFor locks), so no lock is added for engines.

#include <sys/resource.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "tools/common/json_fields.h"
#include "tools/common/path_memory.h"
#include "tools/common/security_flags.h"
#include "tools/common/transport_flags.h"
#include "tools/perf/perf_control.h"
#include "tools/perf/perf_engines.h"
#include "tools/perf/perf_format.h"
#include "tools/perf/perf_stream.h"
#include "tools/perf/perf_summary.h"
#include "tools/perf/perf_tool.h"
#include "transport/api/endpoint.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/profile/profile.h"

namespace longhaul::perf {
namespace {

// The profile keys whose value differs from TransportConfig's defaults: what the server
// needs to run this side's settings (it applies them over its own configuration).
std::string ProfileDiff(const TransportConfig& c) {
  std::string out;
  auto mine = ProfileKeyValues(c);
  auto defaults = ProfileKeyValues(TransportConfig{});
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i < defaults.size() && defaults[i] == mine[i]) continue;
    absl::StrAppend(&out, mine[i].first, "=", mine[i].second, "\n");
  }
  return out;
}

uint64_t JsonU64(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return 0;
  const nlohmann::json& v =
      b == nullptr ? j[a] : (j[a].is_object() && j[a].contains(b) ? j[a][b] : nlohmann::json());
  return v.is_number() ? v.get<uint64_t>() : 0;
}
double JsonD(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return 0;
  const nlohmann::json& v =
      b == nullptr ? j[a] : (j[a].is_object() && j[a].contains(b) ? j[a][b] : nlohmann::json());
  return v.is_number() ? v.get<double>() : 0;
}

double CpuSeconds(bool user) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const timeval& t = user ? ru.ru_utime : ru.ru_stime;
  return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6;
}

std::string HostPart(const std::string& addr) {
  size_t c = addr.rfind(':');
  std::string h = c == std::string::npos ? addr : addr.substr(0, c);
  if (h.size() > 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
  return h;
}
int PortPart(const std::string& addr) {
  size_t c = addr.rfind(':');
  return c == std::string::npos ? 0 : std::atoi(addr.c_str() + c + 1);
}

struct StreamTrack {
  std::shared_ptr<PerfStream> stream;
  std::string local, remote;
  int64_t complete_since = 0;
  bool closed_by_us = false;
};

int Fail(const ClientOptions& o, const std::string& msg) {
  if (o.json) {
    nlohmann::json j;
    j["error"] = msg;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cerr << "longhaul-perf: error - " << msg << std::endl;
  }
  return 1;
}

PerfStream::Options StreamOptions(const ClientOptions& o, const std::string& test_id, uint32_t i,
                                  std::shared_ptr<PatternRegions> regions) {
  PerfStream::Options so;
  so.is_client = true;
  so.regions = std::move(regions);
  so.request.test_id = test_id;
  so.request.stream = i;
  so.request.streams = o.parallel;
  so.request.reverse = o.reverse;
  so.request.time_s = o.time_s;
  so.request.bytes = o.bytes;
  so.request.message_size = o.message_size;
  so.request.workload = o.workload;
  so.request.load = o.load;
  so.request.rate_bps = o.config.rate.bps();
  so.request.interval_s = o.interval_s;
  so.request.version = PerfVersion();
  so.request.verify = o.verify;
  return so;
}

// Connects o.parallel streams (printing each one's addresses in text mode); the error
// text when one fails.
absl::StatusOr<std::vector<StreamTrack>> ConnectStreams(Endpoint& ep, const ClientOptions& o,
                                                        const TransportConfig& config,
                                                        const std::string& app_data,
                                                        const std::string& test_id) {
  std::vector<StreamTrack> tracks(o.parallel);
  const std::shared_ptr<PatternRegions> regions = ZeroCopyRegions(ep, o.endpoint, o.zero_copy);
  for (uint32_t i = 0; i < o.parallel; ++i) {
    ConnectOptions co;
    co.config = config;
    co.app_data = app_data;
    co.timeout = o.connect_timeout;
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> h = ep.Connect(o.host, o.port, co);
    if (!h.ok()) {
      return absl::UnavailableError(absl::StrCat("unable to connect to server ", o.host, ":",
                                                 o.port, ": ", h.status().message()));
    }
    tracks[i].stream = std::make_shared<PerfStream>(*h, StreamOptions(o, test_id, i, regions));
    tracks[i].stream->Attach();
    tracks[i].local = (*h)->info().local_address;
    tracks[i].remote = (*h)->info().peer_address;
    if (!o.json) {
      std::cout << absl::StrFormat("[%3d] local %s port %d connected to %s port %d", i + 1,
                                   HostPart(tracks[i].local), PortPart(tracks[i].local),
                                   HostPart(tracks[i].remote), PortPart(tracks[i].remote))
                << std::endl;
    }
  }
  return tracks;
}

// The path memory's part of a run (tools/common/path_memory.h): the record that set the
// start, if any, and what to remember after the test. Only the sending side's connections
// are remembered (a forward test's; in reverse the server sends).
struct PathStart {
  std::optional<PathMemory> memory;
  std::string peer;  // HOST:PORT as given
  std::optional<PathRecord> record;
  std::optional<Bandwidth> initial_rate;
  int64_t now_s = 0;
};

PathStart ResumePath(const ClientOptions& o, TransportConfig* config) {
  PathStart ps;
  if (o.path_memory.empty() || o.reverse || config->cc != CongestionControl::kBbr) return ps;
  ps.peer = absl::StrCat(o.host, ":", o.port);
  ps.now_s = RealtimeNs() / 1000000000;
  ps.memory = PathMemory::LoadOrWarn(o.path_memory);
  if (!o.path_memory_applies) return ps;
  ps.record = ps.memory->Find(ps.peer, ps.now_s);
  if (ps.record) ps.initial_rate = ApplyPathRecord(*ps.record, o.parallel, config);
  return ps;
}

std::string PathStartText(const PathStart& ps) {
  if (!ps.memory) return "";
  if (!ps.initial_rate) {
    return absl::StrCat("path memory: nothing recent for ", ps.peer, ", starting from ten packets");
  }
  return absl::StrCat("path memory: starting at ", FormatBandwidth(*ps.initial_rate),
                      " per connection (half of the ", FormatBandwidth(ps.record->rate),
                      " measured ", ps.now_s - ps.record->saved_unix_s, " s ago)");
}

nlohmann::json PathStartJson(const PathStart& ps) {
  nlohmann::json j;
  j["file"] = ps.memory->file();
  j["peer"] = ps.peer;
  j["initial_rate_bps"] = ps.initial_rate ? ps.initial_rate->bps() : 0.0;
  if (ps.record) {
    j["remembered_bps"] = ps.record->rate.bps();
    j["remembered_age_s"] = ps.now_s - ps.record->saved_unix_s;
  }
  return j;
}

// Remembers what the connections measured, read before they close (PathRecordOf).
void RememberPath(PathStart& ps, std::vector<StreamTrack>& tracks) {
  if (!ps.memory) return;
  std::vector<ConnectionDebugState> states;
  for (StreamTrack& t : tracks) states.push_back(t.stream->handle().debug_state());
  ps.memory->Remember(ps.peer, PathRecordOf(states, RealtimeNs() / 1000000000));
  if (absl::Status st = ps.memory->Save(); !st.ok()) LOG(WARNING) << st.message();
}

void PrintSettings(const ClientOptions& o, const TransportConfig& eff,
                   const ConnectionInfo& info0) {
  std::cout << "      security: " << ConnectionSecurityText(info0, o.keys) << std::endl;
  std::cout << absl::StrFormat(
                   "      %s, %s messages of %s, rate %s (cc %s), segment %d, flows %d, fec %s%s",
                   o.reverse ? "reverse (server sends)" : "forward (client sends)", o.workload,
                   FormatByteCount(o.message_size), FormatBandwidth(eff.rate),
                   CongestionControlName(eff.cc), eff.segment, eff.flows, FecModeName(eff.fec),
                   o.verify ? "" : ", payload not verified (--verify=off)")
            << std::endl;
}

// A stream's cumulative counters now: this side's for what it measures itself, the
// peer's last interval report for the rest.
StreamCounters ReadCounters(PerfStream& s, bool reverse) {
  const nlohmann::json rep = s.remote_report();
  StreamCounters c;
  if (!reverse) {
    c.bytes = s.bytes_acked();
    c.retransmits = s.handle().stats().packets_retransmitted;
    c.fec_recovered = JsonU64(rep, "fec_recovered_packets");
    c.rtt_ms = s.handle().debug_state().srtt.milliseconds();
  } else {
    c.bytes = s.bytes_delivered();
    c.retransmits = JsonU64(rep, "packets_retransmitted");
    c.fec_recovered = s.handle().stats().fec_recovered_packets;
    c.rtt_ms = JsonD(rep, "srtt_ms");
  }
  return c;
}

void Sample(std::vector<StreamTrack>& tracks, const ClientOptions& o, double a, double b,
            IntervalLog* log) {
  std::vector<StreamCounters> counters;
  counters.reserve(tracks.size());
  for (StreamTrack& t : tracks) counters.push_back(ReadCounters(*t.stream, o.reverse));
  const std::vector<std::string> lines = log->Record(a, b, counters);
  if (!o.json) {
    for (const std::string& l : lines) std::cout << l << std::endl;
  }
}

// Ticks every stream and closes those that are done: every result is in and (sending
// side) every data byte acknowledged, or the connection ended. True when all are done.
bool TickStreams(std::vector<StreamTrack>& tracks, bool reverse, int64_t now) {
  bool all_done = true;
  for (StreamTrack& t : tracks) {
    PerfStream& s = *t.stream;
    s.Tick();
    if (s.complete() && t.complete_since == 0) t.complete_since = now;
    const bool drained = s.outstanding() == 0 || now - t.complete_since > 1000000000;
    const bool done = (s.complete() && (reverse || drained)) || s.closed() || !s.error().empty();
    if (done && !t.closed_by_us && !s.closed()) {
      t.closed_by_us = true;
      s.handle().Close();
    }
    all_done = all_done && done;
  }
  return all_done;
}

struct RunResult {
  bool timed_out = false;
  double end_s = 0;  // seconds from Begin to the end of the loop
};

// Runs the test until every stream is done or `timeout_s`, sampling every interval.
RunResult RunTest(std::vector<StreamTrack>& tracks, const ClientOptions& o, double timeout_s,
                  IntervalLog* log) {
  for (StreamTrack& t : tracks) t.stream->Begin();
  const int64_t t0 = MonotonicNs();
  if (!o.json) {
    std::cout << "[ ID] Interval           Transfer     Bitrate         Retr  FEC-rec  RTT"
              << std::endl;
  }
  const int64_t interval_ns = static_cast<int64_t>(o.interval_s * 1e9);
  int64_t next_interval = t0 + interval_ns;
  double last_boundary = 0;
  RunResult r;
  while (true) {
    const int64_t now = MonotonicNs();
    const bool all_done = TickStreams(tracks, o.reverse, now);
    if (now >= next_interval) {
      const double b = (now - t0) * 1e-9;
      Sample(tracks, o, last_boundary, b, log);
      last_boundary = b;
      next_interval += interval_ns;
      if (next_interval < now) next_interval = now + interval_ns;
    }
    if (all_done) break;
    if ((now - t0) * 1e-9 > timeout_s) {
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.end_s = (MonotonicNs() - t0) * 1e-9;
  if (r.end_s - last_boundary > 0.05 * o.interval_s) Sample(tracks, o, last_boundary, r.end_s, log);
  return r;
}

void CloseStreams(std::vector<StreamTrack>& tracks) {
  for (StreamTrack& t : tracks) {
    if (!t.stream->closed()) t.stream->handle().Close();
  }
  for (StreamTrack& t : tracks) {
    t.stream->handle().WaitClosed(Duration::Seconds(2));
    t.stream->Shutdown();
  }
}

// What the stream's sender and receiver reported (one of them is the server).
StreamOutcome Outcome(const PerfStream& s, bool reverse) {
  StreamOutcome out;
  out.complete = s.complete();
  out.error = s.error();
  out.sender_summary = reverse ? s.remote_final() : s.LocalSenderSummary();
  if (reverse && !out.sender_summary.is_object()) out.sender_summary = s.remote_end();
  out.receiver_result = reverse ? s.LocalReceiverResult() : s.remote_result();
  return out;
}

nlohmann::json StartJson(const ClientOptions& o, const std::vector<StreamTrack>& tracks,
                         const ConnectionInfo& info0, int64_t wall_start,
                         const std::string& test_id) {
  nlohmann::json start;
  nlohmann::json connected = nlohmann::json::array();
  for (size_t i = 0; i < tracks.size(); ++i) {
    nlohmann::json c;
    c["socket"] = i + 1;
    c["local_host"] = HostPart(tracks[i].local);
    c["local_port"] = PortPart(tracks[i].local);
    c["remote_host"] = HostPart(tracks[i].remote);
    c["remote_port"] = PortPart(tracks[i].remote);
    connected.push_back(c);
  }
  start["connected"] = connected;
  nlohmann::json security = ConnectionSecurityToJson(info0, o.keys);
  security["key"] = SecuritySettingsToJson(o.keys)["key"];
  start["longhaul"]["security"] = security;
  start["version"] = PerfVersion();
  utsname u{};
  uname(&u);
  start["system_info"] =
      absl::StrCat(u.sysname, " ", u.nodename, " ", u.release, " ", u.version, " ", u.machine);
  nlohmann::json ts;
  const time_t secs = static_cast<time_t>(wall_start / 1000000000);
  char tbuf[64];
  tm tmv{};
  gmtime_r(&secs, &tmv);
  strftime(tbuf, sizeof(tbuf), "%a, %d %b %Y %H:%M:%S GMT", &tmv);
  ts["time"] = tbuf;
  ts["timesecs"] = static_cast<int64_t>(secs);
  start["timestamp"] = ts;
  start["connecting_to"] = {{"host", o.host}, {"port", o.port}};
  start["cookie"] = test_id;
  start["target_bitrate"] = o.config.rate.bps();
  nlohmann::json ts2;
  ts2["protocol"] = "longhaul";
  ts2["num_streams"] = o.parallel;
  ts2["blksize"] = o.message_size;
  ts2["omit"] = 0;
  ts2["duration"] = o.bytes > 0 ? 0.0 : o.time_s;
  ts2["bytes"] = o.bytes;
  ts2["blocks"] = 0;
  ts2["reverse"] = o.reverse ? 1 : 0;
  ts2["workload"] = o.workload;
  ts2["verify"] = o.verify;
  if (o.workload == "messages") ts2["load"] = o.load;
  start["test_start"] = ts2;
  return start;
}

// CPU use over the test's wall time, this side's and (from its result) the server's.
nlohmann::json CpuJson(double cpu_user, double cpu_sys, double end_s, const nlohmann::json& rr) {
  const double wall = end_s > 0 ? end_s : 1;
  nlohmann::json cpu;
  cpu["host_user"] = 100 * cpu_user / wall;
  cpu["host_system"] = 100 * cpu_sys / wall;
  cpu["host_total"] = 100 * (cpu_user + cpu_sys) / wall;
  if (rr.is_object() && rr.contains("cpu")) {
    cpu["remote_user"] = 100 * JsonD(rr["cpu"], "user_s") / wall;
    cpu["remote_system"] = 100 * JsonD(rr["cpu"], "system_s") / wall;
    cpu["remote_total"] = cpu["remote_user"].get<double>() + cpu["remote_system"].get<double>();
  }
  return cpu;
}

// This side's driver and packet-protection counters (EndpointStats; the peer's are its own).
void AddEndpointStats(const EndpointStats& es, const EndpointOptions& eo, nlohmann::json* lh) {
  nlohmann::json driver;
  LONGHAUL_JSON_SET_FIELDS(driver, es, datagrams_sent, datagrams_received, send_syscalls,
                           recv_syscalls, gso_sends, gro_receives, send_blocked, stalled_deadlines,
                           gso, gro);
  driver["datapath"] = DatapathName(eo.datapath);
  if (eo.datapath == Datapath::kVerbs) {
    // docs/rdma.md 7.8: the UC lanes' chunks (all 0 with qp_type ud).
    driver["qp_type"] = QpTypeName(eo.verbs.qp_type);
    LONGHAUL_JSON_SET_FIELDS(driver, es, uc_lanes_opened, uc_chunks_sent, uc_chunk_bytes_sent,
                             uc_chunks_received, uc_stale_completions, uc_chunks_given_up,
                             uc_grant_waits, uc_lane_errors, uc_replays, uc_lanes_failed, uc_lanes_replaced, uc_lanes_stalled, uc_chunk_shrinks,
                             uc_chunk_grows, uc_payload_bytes_referenced, uc_payload_bytes_copied,
                             memory_regions, memory_region_bytes, uc_direct_chunks_sent,
                             uc_direct_bytes_sent, uc_placements_advertised,
                             uc_placements_revoked, uc_placement_errors,
                             uc_placements_withdrawn,
                             uc_direct_chunks_received, uc_direct_bytes_in_place,
                             uc_direct_bytes_copied, uc_direct_chunks_refused);
    driver["uc_lane_chunks_sent"] = es.uc_lane_chunks_sent;
  }
  driver["socket_recv_buffer"] = es.recv_buffer;
  driver["socket_send_buffer"] = es.send_buffer;
  (*lh)["driver"] = driver;
  nlohmann::json protection;
  LONGHAUL_JSON_SET_FIELDS(protection, es, packets_unauthenticated, packets_replayed,
                           packets_too_old, plaintext_refused, handshake_auth_failures,
                           payloads_opened_in_place, in_place_auth_failures);
  (*lh)["protection"] = protection;
}

// This side's engines: which of them ran the streams, and each one's counters.
std::vector<EngineReport> ClientEngines(const Endpoint& ep, std::vector<StreamTrack>& tracks) {
  std::vector<uint32_t> on;
  for (StreamTrack& t : tracks) on.push_back(t.stream->handle().info().engine);
  return EngineReports(ep.engine_stats(), on);
}

}  // namespace

int RunClient(const ClientOptions& o) {
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(o.endpoint);
  if (!ep.ok()) return Fail(o, std::string(ep.status().message()));
  const std::string app_data = ProfileDiff(o.config);
  if (app_data.size() > 900) {
    return Fail(o, absl::StrCat("the transport settings take ", app_data.size(),
                                " bytes as a profile; at most 900 fit the handshake"));
  }
  std::random_device rd;
  const std::string test_id =
      absl::StrFormat("%08x%08x", static_cast<uint32_t>(rd()), static_cast<uint32_t>(rd()));
  const int64_t wall_start = RealtimeNs();
  const double cpu_user0 = CpuSeconds(true), cpu_sys0 = CpuSeconds(false);
  if (!o.json) std::cout << "Connecting to host " << o.host << ", port " << o.port << std::endl;
  TransportConfig config = o.config;
  PathStart path = ResumePath(o, &config);
  absl::StatusOr<std::vector<StreamTrack>> connected =
      ConnectStreams(**ep, o, config, app_data, test_id);
  if (!connected.ok()) return Fail(o, std::string(connected.status().message()));
  std::vector<StreamTrack>& tracks = *connected;
  const TransportConfig& eff = tracks[0].stream->handle().config();
  const ConnectionInfo& info0 = tracks[0].stream->handle().info();
  if (!o.json) PrintSettings(o, eff, info0);
  if (!o.json && path.memory) std::cout << "      " << PathStartText(path) << std::endl;

  const double timeout_s = o.timeout_s > 0 ? o.timeout_s : (o.bytes > 0 ? 3600.0 : o.time_s + 60.0);
  IntervalLog log(tracks.size());
  const RunResult run = RunTest(tracks, o, timeout_s, &log);
  RememberPath(path, tracks);
  CloseStreams(tracks);
  const double cpu_user = CpuSeconds(true) - cpu_user0, cpu_sys = CpuSeconds(false) - cpu_sys0;
  const std::vector<EngineReport> engines = ClientEngines(**ep, tracks);

  SummaryOptions so;
  so.verify = o.verify;
  so.messages = o.workload == "messages";
  so.message_size = o.message_size;
  so.rate_bps = o.config.rate.bps();
  so.effective = eff;
  so.timed_out = run.timed_out;
  so.timeout_s = timeout_s;
  std::vector<StreamOutcome> outcomes;
  for (const StreamTrack& t : tracks) outcomes.push_back(Outcome(*t.stream, o.reverse));
  const ClientSummary summary = Summarize(outcomes, so);

  if (!o.json) {
    so.engine_lines = EngineLines(engines);
    if (const std::string uc = UcLine(o.endpoint, (*ep)->stats()); !uc.empty()) {
      so.engine_lines.insert(so.engine_lines.begin(), uc);  // the datapath's, then engines'
    }
    std::cout << SummaryText(summary, so, tracks.size()) << std::flush;
  } else {
    nlohmann::json j;
    j["start"] = StartJson(o, tracks, info0, wall_start, test_id);
    j["intervals"] = log.ToJson(!o.reverse);
    nlohmann::json end = SummaryEndJson(summary, so);
    end["cpu_utilization_percent"] =
        CpuJson(cpu_user, cpu_sys, run.end_s,
                o.reverse ? tracks[0].stream->remote_final() : tracks[0].stream->remote_result());
    nlohmann::json& lh = end["longhaul"];
    lh["params"] = TransportConfigToJson(eff);
    if (!o.profile_path.empty()) lh["profile"] = o.profile_path;
    AddEndpointStats((*ep)->stats(), o.endpoint, &lh);
    lh["engines"] = EnginesJson(engines);
    if (path.memory) lh["path_memory"] = PathStartJson(path);
    j["end"] = end;
    if (!summary.errors.empty()) j["error"] = summary.errors.front();
    std::cout << j.dump(2) << std::endl;
  }
  (*ep)->Close();
  return summary.passed() ? 0 : 1;
}

}  // namespace longhaul::perf
