// The longhaul-perf client: connects --parallel connections, runs the test on them,
// prints iperf3-like interval lines and a summary (or one iperf3-shaped JSON object).

#include <sys/resource.h>
#include <sys/utsname.h>

#include <chrono>
#include <cinttypes>
#include <ctime>
#include <iostream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/common/security_flags.h"
#include "tools/common/transport_flags.h"
#include "tools/perf/perf_control.h"
#include "tools/perf/perf_format.h"
#include "tools/perf/perf_stream.h"
#include "tools/perf/perf_tool.h"
#include "transport/api/endpoint.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/core/profile/profile.h"

namespace longhaul::perf {
namespace {

struct IntervalSample {
  double start = 0, end = 0;
  uint64_t bytes = 0;
  uint64_t retransmits = 0;
  uint64_t fec_recovered = 0;
  double rtt_ms = 0;
};

struct StreamTrack {
  std::shared_ptr<PerfStream> stream;
  std::string local, remote;
  uint64_t last_bytes = 0, last_retx = 0, last_fec = 0;
  std::vector<IntervalSample> intervals;
  int64_t complete_since = 0;
  bool closed_by_us = false;
};

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

nlohmann::json IntervalJson(int id, const IntervalSample& s, bool sender) {
  nlohmann::json j;
  j["socket"] = id;
  j["start"] = s.start;
  j["end"] = s.end;
  j["seconds"] = s.end - s.start;
  j["bytes"] = s.bytes;
  j["bits_per_second"] = s.end > s.start ? s.bytes * 8.0 / (s.end - s.start) : 0.0;
  j["retransmits"] = s.retransmits;
  j["fec_recovered"] = s.fec_recovered;
  j["rtt"] = static_cast<uint64_t>(s.rtt_ms * 1000);  // microseconds, as iperf3
  j["omitted"] = false;
  j["sender"] = sender;
  return j;
}

std::string Line(const std::string& id, double a, double b, uint64_t bytes,
                 const std::string& tail) {
  const double bps = b > a ? bytes * 8.0 / (b - a) : 0;
  return absl::StrFormat("[%s] %6.2f-%-6.2f sec  %s  %s%s", id, a, b, FormatTransfer(bytes),
                         FormatBitrate(bps), tail);
}

}  // namespace

int RunClient(const ClientOptions& o) {
  auto fail = [&](const std::string& msg) {
    if (o.json) {
      nlohmann::json j;
      j["error"] = msg;
      std::cout << j.dump(2) << std::endl;
    } else {
      std::cerr << "longhaul-perf: error - " << msg << std::endl;
    }
    return 1;
  };
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(o.endpoint);
  if (!ep.ok()) return fail(std::string(ep.status().message()));
  const std::string app_data = ProfileDiff(o.config);
  if (app_data.size() > 900) {
    return fail(absl::StrCat("the transport settings take ", app_data.size(),
                             " bytes as a profile; at most 900 fit the handshake"));
  }
  std::random_device rd;
  const std::string test_id =
      absl::StrFormat("%08x%08x", static_cast<uint32_t>(rd()), static_cast<uint32_t>(rd()));
  const int64_t wall_start = RealtimeNs();
  const double cpu_user0 = CpuSeconds(true), cpu_sys0 = CpuSeconds(false);
  if (!o.json) std::cout << "Connecting to host " << o.host << ", port " << o.port << std::endl;

  std::vector<StreamTrack> tracks(o.parallel);
  for (uint32_t i = 0; i < o.parallel; ++i) {
    ConnectOptions co;
    co.config = o.config;
    co.app_data = app_data;
    co.timeout = o.connect_timeout;
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> h = (*ep)->Connect(o.host, o.port, co);
    if (!h.ok()) {
      return fail(absl::StrCat("unable to connect to server ", o.host, ":", o.port, ": ",
                               h.status().message()));
    }
    PerfStream::Options so;
    so.is_client = true;
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
    tracks[i].stream = std::make_shared<PerfStream>(*h, so);
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
  const TransportConfig& eff = tracks[0].stream->handle().config();
  const ConnectionInfo& info0 = tracks[0].stream->handle().info();
  if (!o.json) {
    std::cout << "      security: " << ConnectionSecurityText(info0, o.keys) << std::endl;
    std::cout << absl::StrFormat(
                     "      %s, %s messages of %s, rate %s (cc %s), segment %d, flows %d, fec %s%s",
                     o.reverse ? "reverse (server sends)" : "forward (client sends)", o.workload,
                     FormatByteCount(o.message_size), FormatBandwidth(eff.rate),
                     CongestionControlName(eff.cc), eff.segment, eff.flows, FecModeName(eff.fec),
                     o.verify ? "" : ", payload not verified (--verify=off)")
              << std::endl;
  }
  for (StreamTrack& t : tracks) t.stream->Begin();
  const int64_t t0 = MonotonicNs();
  const double timeout_s = o.timeout_s > 0 ? o.timeout_s : (o.bytes > 0 ? 3600.0 : o.time_s + 60.0);
  if (!o.json) {
    std::cout << "[ ID] Interval           Transfer     Bitrate         Retr  FEC-rec  RTT"
              << std::endl;
  }
  const int64_t interval_ns = static_cast<int64_t>(o.interval_s * 1e9);
  int64_t next_interval = t0 + interval_ns;
  double last_boundary = 0;
  std::vector<IntervalSample> sums;
  bool timed_out = false;

  auto sample = [&](double a, double b) {
    IntervalSample sum;
    sum.start = a;
    sum.end = b;
    double rtt_total = 0;
    for (size_t i = 0; i < tracks.size(); ++i) {
      StreamTrack& t = tracks[i];
      PerfStream& s = *t.stream;
      const nlohmann::json rep = s.remote_report();
      uint64_t bytes, retx, fec;
      double rtt;
      if (!o.reverse) {
        bytes = s.bytes_acked();
        retx = s.handle().stats().packets_retransmitted;
        fec = JsonU64(rep, "fec_recovered_packets");
        rtt = s.handle().debug_state().srtt.milliseconds();
      } else {
        bytes = s.bytes_delivered();
        retx = JsonU64(rep, "packets_retransmitted");
        fec = s.handle().stats().fec_recovered_packets;
        rtt = JsonD(rep, "srtt_ms");
      }
      IntervalSample is;
      is.start = a;
      is.end = b;
      is.bytes = bytes - std::min(bytes, t.last_bytes);
      is.retransmits = retx - std::min(retx, t.last_retx);
      is.fec_recovered = fec - std::min(fec, t.last_fec);
      is.rtt_ms = rtt;
      t.last_bytes = bytes;
      t.last_retx = retx;
      t.last_fec = fec;
      t.intervals.push_back(is);
      sum.bytes += is.bytes;
      sum.retransmits += is.retransmits;
      sum.fec_recovered += is.fec_recovered;
      rtt_total += rtt;
      if (!o.json) {
        std::cout << Line(absl::StrFormat("%3d", i + 1), a, b, is.bytes,
                          absl::StrFormat("  %4d  %7d  %.2f ms", is.retransmits, is.fec_recovered,
                                          rtt))
                  << std::endl;
      }
    }
    sum.rtt_ms = tracks.empty() ? 0 : rtt_total / tracks.size();
    sums.push_back(sum);
    if (!o.json && tracks.size() > 1) {
      std::cout << Line("SUM", a, b, sum.bytes,
                        absl::StrFormat("  %4d  %7d", sum.retransmits, sum.fec_recovered))
                << std::endl;
    }
  };

  while (true) {
    const int64_t now = MonotonicNs();
    bool all_done = true;
    for (StreamTrack& t : tracks) {
      PerfStream& s = *t.stream;
      s.Tick();
      if (s.complete() && t.complete_since == 0) t.complete_since = now;
      // Done: every result is in and (sending side) every data byte acknowledged, or the
      // connection ended.
      const bool drained = s.outstanding() == 0 || now - t.complete_since > 1000000000;
      const bool done =
          (s.complete() && (o.reverse || drained)) || s.closed() || !s.error().empty();
      if (done && !t.closed_by_us && !s.closed()) {
        t.closed_by_us = true;
        s.handle().Close();
      }
      all_done = all_done && done;
    }
    if (now >= next_interval) {
      const double b = (now - t0) * 1e-9;
      sample(last_boundary, b);
      last_boundary = b;
      next_interval += interval_ns;
      if (next_interval < now) next_interval = now + interval_ns;
    }
    if (all_done) break;
    if ((now - t0) * 1e-9 > timeout_s) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double end_s = (MonotonicNs() - t0) * 1e-9;
  if (end_s - last_boundary > 0.05 * o.interval_s) sample(last_boundary, end_s);
  for (StreamTrack& t : tracks) {
    if (!t.stream->closed()) t.stream->handle().Close();
  }
  for (StreamTrack& t : tracks) {
    t.stream->handle().WaitClosed(Duration::Seconds(2));
    t.stream->Shutdown();
  }
  const double cpu_user = CpuSeconds(true) - cpu_user0, cpu_sys = CpuSeconds(false) - cpu_sys0;

  // ---- summary ----
  bool ok = !timed_out;
  std::vector<std::string> errors;
  if (timed_out)
    errors.push_back(absl::StrFormat("the test did not finish within %.0f s", timeout_s));
  uint64_t sent_bytes = 0, recv_bytes = 0, retx_total = 0, corrupt = 0, fec_total = 0;
  double sent_secs = 0, recv_secs = 0;
  std::vector<std::string> corruption;
  nlohmann::json end_streams = nlohmann::json::array();
  ConnectionStats snd_total, rcv_total;
  double min_rtt_ms = 0, srtt_ms = 0, rttvar_ms = 0;
  std::vector<std::string> lines;
  for (size_t i = 0; i < tracks.size(); ++i) {
    PerfStream& s = *tracks[i].stream;
    const int id = static_cast<int>(i) + 1;
    if (!s.error().empty()) {
      ok = false;
      errors.push_back(absl::StrCat("stream ", id, ": ", s.error()));
    }
    if (!s.complete()) {
      ok = false;
      if (s.error().empty()) errors.push_back(absl::StrCat("stream ", id, ": did not complete"));
    }
    nlohmann::json snd, rcv;
    nlohmann::json sender_summary = o.reverse ? s.remote_final() : s.LocalSenderSummary();
    if (o.reverse && !sender_summary.is_object()) sender_summary = s.remote_end();
    nlohmann::json receiver_result = o.reverse ? s.LocalReceiverResult() : s.remote_result();
    const uint64_t sb = JsonU64(sender_summary, "bytes_acked");
    const double ss = JsonD(sender_summary, "seconds");
    const ConnectionStats sst = StatsFromJson(
        sender_summary.is_object() && sender_summary.contains("stats") ? sender_summary["stats"]
                                                                       : nlohmann::json());
    const ConnectionStats rst = StatsFromJson(
        receiver_result.is_object() && receiver_result.contains("stats") ? receiver_result["stats"]
                                                                         : nlohmann::json());
    // The receiver says whether it checked the payload (a server from before --verify
    // says nothing, and checks); unchecked, the delivered bytes are the received ones.
    const bool receiver_verified =
        !(receiver_result.is_object() && receiver_result.contains("verified") &&
          receiver_result["verified"].is_boolean()) ||
        receiver_result["verified"].get<bool>();
    if (!o.verify && receiver_result.is_object() && receiver_verified) {
      ok = false;
      errors.push_back(absl::StrCat(
          "stream ", id,
          ": the server checked the payload although --verify=off (a longhaul-perf from "
          "before --verify: run both sides with --verify=on)"));
    }
    const uint64_t rb =
        JsonU64(receiver_result, receiver_verified ? "bytes_verified" : "bytes_received");
    const double rs = JsonD(receiver_result, "seconds");
    const uint64_t rc = JsonU64(receiver_result, "corrupt_messages");
    const uint64_t submitted = JsonU64(sender_summary, "data_bytes_submitted");
    if (rc > 0) ok = false;
    if (s.complete() && rb != submitted) {
      ok = false;
      errors.push_back(absl::StrCat("stream ", id, ": ", submitted, " bytes sent but ", rb,
                                    o.verify ? " verified intact" : " received"));
    }
    if (receiver_result.is_object() && receiver_result.contains("corruption")) {
      for (const auto& c : receiver_result["corruption"]) {
        if (c.is_string())
          corruption.push_back(absl::StrCat("stream ", id, ": ", c.get<std::string>()));
      }
    }
    sent_bytes += sb;
    recv_bytes += rb;
    sent_secs = std::max(sent_secs, ss);
    recv_secs = std::max(recv_secs, rs);
    retx_total += sst.packets_retransmitted;
    fec_total += rst.fec_recovered_packets;
    corrupt += rc;
    auto add = [](ConnectionStats* t, const ConnectionStats& x) {
      nlohmann::json a = ConnectionStatsToJson(*t), b = ConnectionStatsToJson(x);
      for (auto& [k, v] : b.items()) a[k] = a[k].get<uint64_t>() + v.get<uint64_t>();
      *t = StatsFromJson(a);
    };
    add(&snd_total, sst);
    add(&rcv_total, rst);
    nlohmann::json sdbg = sender_summary.is_object() && sender_summary.contains("debug")
                              ? sender_summary["debug"]
                              : nlohmann::json::object();
    min_rtt_ms = std::max(min_rtt_ms, JsonD(sdbg, "min_rtt_ms"));
    srtt_ms = std::max(srtt_ms, JsonD(sdbg, "srtt_ms"));
    rttvar_ms = std::max(rttvar_ms, JsonD(sdbg, "rttvar_ms"));
    snd["socket"] = id;
    snd["start"] = 0;
    snd["end"] = ss;
    snd["seconds"] = ss;
    snd["bytes"] = sb;
    snd["bits_per_second"] = ss > 0 ? sb * 8.0 / ss : 0.0;
    snd["retransmits"] = sst.packets_retransmitted;
    snd["max_rtt"] = static_cast<uint64_t>(JsonD(sdbg, "srtt_ms") * 1000);
    snd["min_rtt"] = static_cast<uint64_t>(JsonD(sdbg, "min_rtt_ms") * 1000);
    snd["mean_rtt"] = static_cast<uint64_t>(JsonD(sdbg, "srtt_ms") * 1000);
    snd["sender"] = true;
    rcv["socket"] = id;
    rcv["start"] = 0;
    rcv["end"] = rs;
    rcv["seconds"] = rs;
    rcv["bytes"] = rb;
    rcv["bits_per_second"] = rs > 0 ? rb * 8.0 / rs : 0.0;
    rcv["corrupt_messages"] = rc;
    rcv["fec_recovered"] = rst.fec_recovered_packets;
    rcv["sender"] = false;
    nlohmann::json pair;
    pair["sender"] = snd;
    pair["receiver"] = rcv;
    end_streams.push_back(pair);
    lines.push_back(Line(absl::StrFormat("%3d", id), 0, ss, sb,
                         absl::StrFormat("  %4d  %7d            sender", sst.packets_retransmitted,
                                         rst.fec_recovered_packets)));
    lines.push_back(Line(absl::StrFormat("%3d", id), 0, rs, rb,
                         absl::StrFormat("                         receiver")));
  }
  // Messages workload: completion times. With several streams the receivers' summaries
  // are combined by weight (means) and maxima (tails); per-stream values are in streams.
  nlohmann::json mct;
  const bool messages = o.workload == "messages";
  if (messages) {
    double n = 0, mean = 0, p50 = 0, p99 = 0, p999 = 0, mx = 0;
    for (StreamTrack& t : tracks) {
      nlohmann::json r = o.reverse ? t.stream->LocalReceiverResult() : t.stream->remote_result();
      if (!r.is_object() || !r.contains("mct")) continue;
      const nlohmann::json& m = r["mct"];
      double c = JsonD(m, "messages");
      n += c;
      mean += c * JsonD(m, "mct_mean_s");
      p50 += c * JsonD(m, "mct_p50_s");
      p99 = std::max(p99, JsonD(m, "mct_p99_s"));
      p999 = std::max(p999, JsonD(m, "mct_p999_s"));
      mx = std::max(mx, JsonD(m, "mct_max_s"));
    }
    const ByteCount seg = eff.segment;
    const ByteCount per_packet = eff.MaxDatagramSize() - seg + 28;
    const ByteCount packets = std::max<ByteCount>(1, (o.message_size + seg - 1) / seg);
    const double ideal =
        min_rtt_ms * 1e-3 / 2 +
        static_cast<double>(o.message_size + packets * per_packet) * 8 / o.config.rate.bps();
    mct["messages"] = static_cast<uint64_t>(n);
    mct["mct_mean_s"] = n > 0 ? mean / n : 0.0;
    mct["mct_p50_s"] = n > 0 ? p50 / n : 0.0;
    mct["mct_p99_s"] = p99;
    mct["mct_p999_s"] = p999;
    mct["mct_max_s"] = mx;
    mct["mct_ideal_s"] = ideal;
  }

  if (!o.json) {
    std::cout << "- - - - - - - - - - - - - - - - - - - - - - - - -" << std::endl;
    std::cout << "[ ID] Interval           Transfer     Bitrate         Retr  FEC-rec" << std::endl;
    for (const std::string& l : lines) std::cout << l << std::endl;
    if (tracks.size() > 1) {
      std::cout << Line("SUM", 0, sent_secs, sent_bytes,
                        absl::StrFormat("  %4d  %7d            sender", retx_total, fec_total))
                << std::endl;
      std::cout << Line("SUM", 0, recv_secs, recv_bytes, "                         receiver")
                << std::endl;
    }
    if (o.verify) {
      std::cout << absl::StrFormat("payload: %d bytes verified intact, %d corrupt message(s)",
                                   recv_bytes, corrupt)
                << std::endl;
    } else {
      std::cout << absl::StrFormat("payload: not verified (--verify=off), %d bytes received",
                                   recv_bytes)
                << std::endl;
    }
    for (const std::string& c : corruption) std::cout << "  corrupt: " << c << std::endl;
    const uint64_t lost = snd_total.packets_lost;
    const uint64_t data_pkts = snd_total.data_packets_sent;
    std::cout << absl::StrFormat(
                     "transport: %d packets lost (%.4f%%), %d retransmitted, %d FEC-recovered, "
                     "rtt min %.3f ms / smoothed %.3f ms",
                     lost, data_pkts ? 100.0 * lost / data_pkts : 0.0,
                     snd_total.packets_retransmitted, rcv_total.fec_recovered_packets, min_rtt_ms,
                     srtt_ms)
              << std::endl;
    if (messages) {
      std::cout << absl::StrFormat(
                       "message completion (%d messages): ideal %.3f ms, mean %.3f, p50 %.3f, "
                       "p99 %.3f, p99.9 %.3f, max %.3f ms",
                       mct["messages"].get<uint64_t>(), mct["mct_ideal_s"].get<double>() * 1e3,
                       mct["mct_mean_s"].get<double>() * 1e3, mct["mct_p50_s"].get<double>() * 1e3,
                       mct["mct_p99_s"].get<double>() * 1e3, mct["mct_p999_s"].get<double>() * 1e3,
                       mct["mct_max_s"].get<double>() * 1e3)
                << std::endl;
    }
    for (const std::string& e : errors) std::cout << "error: " << e << std::endl;
    std::cout << "\nlonghaul-perf " << (ok && corrupt == 0 ? "Done." : "FAILED.") << std::endl;
  } else {
    nlohmann::json j;
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
    if (messages) ts2["load"] = o.load;
    start["test_start"] = ts2;
    j["start"] = start;
    nlohmann::json intervals = nlohmann::json::array();
    for (size_t k = 0; k < sums.size(); ++k) {
      nlohmann::json iv;
      nlohmann::json streams = nlohmann::json::array();
      for (size_t i = 0; i < tracks.size(); ++i) {
        if (k < tracks[i].intervals.size()) {
          streams.push_back(
              IntervalJson(static_cast<int>(i) + 1, tracks[i].intervals[k], !o.reverse));
        }
      }
      iv["streams"] = streams;
      nlohmann::json sum = IntervalJson(0, sums[k], !o.reverse);
      sum.erase("socket");
      iv["sum"] = sum;
      intervals.push_back(iv);
    }
    j["intervals"] = intervals;
    nlohmann::json end;
    end["streams"] = end_streams;
    nlohmann::json ss;
    ss["start"] = 0;
    ss["end"] = sent_secs;
    ss["seconds"] = sent_secs;
    ss["bytes"] = sent_bytes;
    ss["bits_per_second"] = sent_secs > 0 ? sent_bytes * 8.0 / sent_secs : 0.0;
    ss["retransmits"] = retx_total;
    ss["sender"] = true;
    end["sum_sent"] = ss;
    nlohmann::json sr;
    sr["start"] = 0;
    sr["end"] = recv_secs;
    sr["seconds"] = recv_secs;
    sr["bytes"] = recv_bytes;
    sr["bits_per_second"] = recv_secs > 0 ? recv_bytes * 8.0 / recv_secs : 0.0;
    sr["sender"] = false;
    end["sum_received"] = sr;
    if (messages) {
      for (auto& [k, v] : mct.items()) end[k] = v;
    }
    const double wall = end_s > 0 ? end_s : 1;
    nlohmann::json cpu;
    cpu["host_user"] = 100 * cpu_user / wall;
    cpu["host_system"] = 100 * cpu_sys / wall;
    cpu["host_total"] = 100 * (cpu_user + cpu_sys) / wall;
    {
      nlohmann::json rr =
          o.reverse ? tracks[0].stream->remote_final() : tracks[0].stream->remote_result();
      if (rr.is_object() && rr.contains("cpu")) {
        cpu["remote_user"] = 100 * JsonD(rr["cpu"], "user_s") / wall;
        cpu["remote_system"] = 100 * JsonD(rr["cpu"], "system_s") / wall;
        cpu["remote_total"] = cpu["remote_user"].get<double>() + cpu["remote_system"].get<double>();
      }
    }
    end["cpu_utilization_percent"] = cpu;
    nlohmann::json lh;
    const uint64_t data_pkts = snd_total.data_packets_sent;
    lh["loss"] = {{"packets_lost", snd_total.packets_lost},
                  {"loss_rate", data_pkts ? double(snd_total.packets_lost) / data_pkts : 0.0},
                  {"spurious_losses", snd_total.spurious_losses},
                  {"checksum_failures", rcv_total.checksum_failures}};
    lh["retransmission"] = {{"packets_retransmitted", snd_total.packets_retransmitted},
                            {"data_bytes_retransmitted", snd_total.data_bytes_retransmitted},
                            {"pto_count", snd_total.pto_count},
                            {"tail_protect_packets", snd_total.tail_protect_packets}};
    lh["fec"] = {{"repair_packets_sent", snd_total.fec_repair_packets_sent},
                 {"overhead_bytes", snd_total.fec_overhead_bytes},
                 {"recovered_packets", rcv_total.fec_recovered_packets},
                 {"blocks_unrecoverable", rcv_total.fec_blocks_unrecoverable}};
    lh["rtt"] = {{"min_ms", min_rtt_ms}, {"srtt_ms", srtt_ms}, {"rttvar_ms", rttvar_ms}};
    if (o.verify) {
      lh["integrity"] = {{"verified", true},
                         {"verified_bytes", recv_bytes},
                         {"corrupt_messages", corrupt},
                         {"corruption", corruption},
                         {"intact", ok && corrupt == 0}};
    } else {
      // Nothing was checked: what arrived, and whether all of it did (no "intact").
      lh["integrity"] = {{"verified", false}, {"received_bytes", recv_bytes}, {"complete", ok}};
    }
    lh["params"] = TransportConfigToJson(eff);
    if (!o.profile_path.empty()) lh["profile"] = o.profile_path;
    lh["sender_stats"] = ConnectionStatsToJson(snd_total);
    lh["receiver_stats"] = ConnectionStatsToJson(rcv_total);
    EndpointStats es = (*ep)->stats();
    lh["driver"] = {{"datagrams_sent", es.datagrams_sent},
                    {"datagrams_received", es.datagrams_received},
                    {"send_syscalls", es.send_syscalls},
                    {"recv_syscalls", es.recv_syscalls},
                    {"gso_sends", es.gso_sends},
                    {"gro_receives", es.gro_receives},
                    {"send_blocked", es.send_blocked},
                    {"stalled_deadlines", es.stalled_deadlines},
                    {"gso", es.gso},
                    {"gro", es.gro},
                    {"socket_recv_buffer", es.recv_buffer},
                    {"socket_send_buffer", es.send_buffer}};
    // This side's packet protection counters (EndpointStats; the peer's are its own).
    lh["protection"] = {{"packets_unauthenticated", es.packets_unauthenticated},
                        {"packets_replayed", es.packets_replayed},
                        {"packets_too_old", es.packets_too_old},
                        {"plaintext_refused", es.plaintext_refused},
                        {"handshake_auth_failures", es.handshake_auth_failures},
                        {"payloads_opened_in_place", es.payloads_opened_in_place},
                        {"in_place_auth_failures", es.in_place_auth_failures}};
    if (!errors.empty()) lh["errors"] = errors;
    end["longhaul"] = lh;
    j["end"] = end;
    if (!errors.empty()) j["error"] = errors.front();
    std::cout << j.dump(2) << std::endl;
  }
  (*ep)->Close();
  return ok && corrupt == 0 ? 0 : 1;
}

}  // namespace longhaul::perf
