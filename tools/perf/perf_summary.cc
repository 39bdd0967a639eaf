#include "tools/perf/perf_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/common/transport_flags.h"
#include "tools/perf/perf_control.h"
#include "tools/perf/perf_format.h"

namespace longhaul::perf {
namespace {

uint64_t JsonU64(const nlohmann::json& j, const char* a) {
  if (!j.is_object() || !j.contains(a)) return 0;
  return j[a].is_number() ? j[a].get<uint64_t>() : 0;
}
double JsonD(const nlohmann::json& j, const char* a) {
  if (!j.is_object() || !j.contains(a)) return 0;
  return j[a].is_number() ? j[a].get<double>() : 0;
}
nlohmann::json Member(const nlohmann::json& j, const char* key, nlohmann::json otherwise) {
  return j.is_object() && j.contains(key) ? j[key] : otherwise;
}

void AddStats(ConnectionStats* total, const ConnectionStats& x) {
  nlohmann::json a = ConnectionStatsToJson(*total), b = ConnectionStatsToJson(x);
  for (auto& [k, v] : b.items()) a[k] = a[k].get<uint64_t>() + v.get<uint64_t>();
  *total = StatsFromJson(a);
}

// One side's end.streams entry as iperf3 writes it: the span, the bytes and their rate.
nlohmann::json SideSummary(int id, double seconds, uint64_t bytes) {
  nlohmann::json j;
  j["socket"] = id;
  j["start"] = 0;
  j["end"] = seconds;
  j["seconds"] = seconds;
  j["bytes"] = bytes;
  j["bits_per_second"] = seconds > 0 ? bytes * 8.0 / seconds : 0.0;
  return j;
}

// Adds one stream's outcome to the summary: its errors, sums and end.streams entry.
void AddStream(int id, const StreamOutcome& s, const SummaryOptions& o, ClientSummary* out) {
  if (!s.error.empty()) {
    out->ok = false;
    out->errors.push_back(absl::StrCat("stream ", id, ": ", s.error));
  }
  if (!s.complete) {
    out->ok = false;
    if (s.error.empty()) out->errors.push_back(absl::StrCat("stream ", id, ": did not complete"));
  }
  const nlohmann::json& sender = s.sender_summary;
  const nlohmann::json& receiver = s.receiver_result;
  const uint64_t sb = JsonU64(sender, "bytes_acked");
  const double ss = JsonD(sender, "seconds");
  const ConnectionStats sst = StatsFromJson(Member(sender, "stats", nlohmann::json()));
  const ConnectionStats rst = StatsFromJson(Member(receiver, "stats", nlohmann::json()));
  // The receiver says whether it checked the payload (a server from before --verify
  // says nothing, and checks); unchecked, the delivered bytes are the received ones.
  const bool receiver_verified = !(receiver.is_object() && receiver.contains("verified") &&
                                   receiver["verified"].is_boolean()) ||
                                 receiver["verified"].get<bool>();
  if (!o.verify && receiver.is_object() && receiver_verified) {
    out->ok = false;
    out->errors.push_back(
        absl::StrCat("stream ", id,
                     ": the server checked the payload although --verify=off (a longhaul-perf from "
                     "before --verify: run both sides with --verify=on)"));
  }
  const uint64_t rb = JsonU64(receiver, receiver_verified ? "bytes_verified" : "bytes_received");
  const double rs = JsonD(receiver, "seconds");
  const uint64_t rc = JsonU64(receiver, "corrupt_messages");
  const uint64_t submitted = JsonU64(sender, "data_bytes_submitted");
  if (rc > 0) out->ok = false;
  if (s.complete && rb != submitted) {
    out->ok = false;
    out->errors.push_back(absl::StrCat("stream ", id, ": ", submitted, " bytes sent but ", rb,
                                       o.verify ? " verified intact" : " received"));
  }
  if (receiver.is_object() && receiver.contains("corruption")) {
    for (const auto& c : receiver["corruption"]) {
      if (c.is_string())
        out->corruption.push_back(absl::StrCat("stream ", id, ": ", c.get<std::string>()));
    }
  }
  out->sent_bytes += sb;
  out->recv_bytes += rb;
  out->sent_secs = std::max(out->sent_secs, ss);
  out->recv_secs = std::max(out->recv_secs, rs);
  out->retx_total += sst.packets_retransmitted;
  out->fec_total += rst.fec_recovered_packets;
  out->corrupt += rc;
  AddStats(&out->snd_total, sst);
  AddStats(&out->rcv_total, rst);
  const nlohmann::json sdbg = Member(sender, "debug", nlohmann::json::object());
  out->min_rtt_ms = std::max(out->min_rtt_ms, JsonD(sdbg, "min_rtt_ms"));
  out->srtt_ms = std::max(out->srtt_ms, JsonD(sdbg, "srtt_ms"));
  out->rttvar_ms = std::max(out->rttvar_ms, JsonD(sdbg, "rttvar_ms"));

  nlohmann::json snd = SideSummary(id, ss, sb), rcv = SideSummary(id, rs, rb);
  snd["retransmits"] = sst.packets_retransmitted;
  snd["max_rtt"] = static_cast<uint64_t>(JsonD(sdbg, "srtt_ms") * 1000);
  snd["min_rtt"] = static_cast<uint64_t>(JsonD(sdbg, "min_rtt_ms") * 1000);
  snd["mean_rtt"] = static_cast<uint64_t>(JsonD(sdbg, "srtt_ms") * 1000);
  snd["sender"] = true;
  rcv["corrupt_messages"] = rc;
  rcv["fec_recovered"] = rst.fec_recovered_packets;
  rcv["sender"] = false;
  nlohmann::json pair;
  pair["sender"] = snd;
  pair["receiver"] = rcv;
  out->end_streams.push_back(pair);
  out->lines.push_back(
      IntervalLine(absl::StrFormat("%3d", id), 0, ss, sb,
                   absl::StrFormat("  %4d  %7d            sender", sst.packets_retransmitted,
                                   rst.fec_recovered_packets)));
  out->lines.push_back(IntervalLine(absl::StrFormat("%3d", id), 0, rs, rb,
                                    absl::StrFormat("                         receiver")));
}

// Messages workload: completion times. With several streams the receivers' summaries
// are combined by weight (means) and maxima (tails); per-stream values are in streams.
nlohmann::json CombineCompletionTimes(const std::vector<StreamOutcome>& streams,
                                      const SummaryOptions& o, double min_rtt_ms) {
  double n = 0, mean = 0, p50 = 0, p99 = 0, p999 = 0, mx = 0;
  for (const StreamOutcome& s : streams) {
    const nlohmann::json& r = s.receiver_result;
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
  const ByteCount seg = o.effective.segment;
  const ByteCount per_packet = o.effective.MaxDatagramSize() - seg + 28;
  const ByteCount packets = std::max<ByteCount>(1, (o.message_size + seg - 1) / seg);
  const double ideal = min_rtt_ms * 1e-3 / 2 +
                       static_cast<double>(o.message_size + packets * per_packet) * 8 / o.rate_bps;
  nlohmann::json mct;
  mct["messages"] = static_cast<uint64_t>(n);
  mct["mct_mean_s"] = n > 0 ? mean / n : 0.0;
  mct["mct_p50_s"] = n > 0 ? p50 / n : 0.0;
  mct["mct_p99_s"] = p99;
  mct["mct_p999_s"] = p999;
  mct["mct_max_s"] = mx;
  mct["mct_ideal_s"] = ideal;
  return mct;
}

nlohmann::json SumJson(double secs, uint64_t bytes, bool sender) {
  nlohmann::json j;
  j["start"] = 0;
  j["end"] = secs;
  j["seconds"] = secs;
  j["bytes"] = bytes;
  j["bits_per_second"] = secs > 0 ? bytes * 8.0 / secs : 0.0;
  j["sender"] = sender;
  return j;
}

}  // namespace

nlohmann::json IntervalJson(int socket, const IntervalSample& s, bool sender) {
  nlohmann::json j;
  j["socket"] = socket;
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

std::string IntervalLine(const std::string& id, double a, double b, uint64_t bytes,
                         const std::string& tail) {
  const double bps = b > a ? bytes * 8.0 / (b - a) : 0;
  return absl::StrFormat("[%s] %6.2f-%-6.2f sec  %s  %s%s", id, a, b, FormatTransfer(bytes),
                         FormatBitrate(bps), tail);
}

std::vector<std::string> IntervalLog::Record(double a, double b,
                                             const std::vector<StreamCounters>& counters) {
  std::vector<std::string> lines;
  IntervalSample sum;
  sum.start = a;
  sum.end = b;
  double rtt_total = 0;
  for (size_t i = 0; i < counters.size() && i < last_.size(); ++i) {
    const StreamCounters& c = counters[i];
    StreamCounters& last = last_[i];
    IntervalSample is;
    is.start = a;
    is.end = b;
    is.bytes = c.bytes - std::min(c.bytes, last.bytes);
    is.retransmits = c.retransmits - std::min(c.retransmits, last.retransmits);
    is.fec_recovered = c.fec_recovered - std::min(c.fec_recovered, last.fec_recovered);
    is.rtt_ms = c.rtt_ms;
    last = c;
    streams_[i].push_back(is);
    sum.bytes += is.bytes;
    sum.retransmits += is.retransmits;
    sum.fec_recovered += is.fec_recovered;
    rtt_total += c.rtt_ms;
    lines.push_back(IntervalLine(
        absl::StrFormat("%3d", i + 1), a, b, is.bytes,
        absl::StrFormat("  %4d  %7d  %.2f ms", is.retransmits, is.fec_recovered, c.rtt_ms)));
  }
  sum.rtt_ms = last_.empty() ? 0 : rtt_total / last_.size();
  sums_.push_back(sum);
  if (last_.size() > 1) {
    lines.push_back(IntervalLine(
        "SUM", a, b, sum.bytes, absl::StrFormat("  %4d  %7d", sum.retransmits, sum.fec_recovered)));
  }
  return lines;
}

nlohmann::json IntervalLog::ToJson(bool sender) const {
  nlohmann::json intervals = nlohmann::json::array();
  for (size_t k = 0; k < sums_.size(); ++k) {
    nlohmann::json iv;
    nlohmann::json streams = nlohmann::json::array();
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (k < streams_[i].size()) {
        streams.push_back(IntervalJson(static_cast<int>(i) + 1, streams_[i][k], sender));
      }
    }
    iv["streams"] = streams;
    nlohmann::json sum = IntervalJson(0, sums_[k], sender);
    sum.erase("socket");
    iv["sum"] = sum;
    intervals.push_back(iv);
  }
  return intervals;
}

ClientSummary Summarize(const std::vector<StreamOutcome>& streams, const SummaryOptions& o) {
  ClientSummary out;
  out.ok = !o.timed_out;
  if (o.timed_out) {
    out.errors.push_back(absl::StrFormat("the test did not finish within %.0f s", o.timeout_s));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    AddStream(static_cast<int>(i) + 1, streams[i], o, &out);
  }
  if (o.messages) out.mct = CombineCompletionTimes(streams, o, out.min_rtt_ms);
  return out;
}

std::string SummaryText(const ClientSummary& s, const SummaryOptions& o, size_t streams) {
  std::string t;
  auto line = [&t](const std::string& l) { absl::StrAppend(&t, l, "\n"); };
  line("- - - - - - - - - - - - - - - - - - - - - - - - -");
  line("[ ID] Interval           Transfer     Bitrate         Retr  FEC-rec");
  for (const std::string& l : s.lines) line(l);
  if (streams > 1) {
    line(IntervalLine("SUM", 0, s.sent_secs, s.sent_bytes,
                      absl::StrFormat("  %4d  %7d            sender", s.retx_total, s.fec_total)));
    line(IntervalLine("SUM", 0, s.recv_secs, s.recv_bytes, "                         receiver"));
  }
  if (o.verify) {
    line(absl::StrFormat("payload: %d bytes verified intact, %d corrupt message(s)", s.recv_bytes,
                         s.corrupt));
  } else {
    line(absl::StrFormat("payload: not verified (--verify=off), %d bytes received", s.recv_bytes));
  }
  for (const std::string& c : s.corruption) line(absl::StrCat("  corrupt: ", c));
  const uint64_t lost = s.snd_total.packets_lost;
  const uint64_t data_pkts = s.snd_total.data_packets_sent;
  line(absl::StrFormat(
      "transport: %d packets lost (%.4f%%), %d retransmitted, %d FEC-recovered, "
      "rtt min %.3f ms / smoothed %.3f ms",
      lost, data_pkts ? 100.0 * lost / data_pkts : 0.0, s.snd_total.packets_retransmitted,
      s.rcv_total.fec_recovered_packets, s.min_rtt_ms, s.srtt_ms));
  if (o.messages) {
    const nlohmann::json& m = s.mct;
    line(
        absl::StrFormat("message completion (%d messages): ideal %.3f ms, mean %.3f, p50 %.3f, "
                        "p99 %.3f, p99.9 %.3f, max %.3f ms",
                        m["messages"].get<uint64_t>(), m["mct_ideal_s"].get<double>() * 1e3,
                        m["mct_mean_s"].get<double>() * 1e3, m["mct_p50_s"].get<double>() * 1e3,
                        m["mct_p99_s"].get<double>() * 1e3, m["mct_p999_s"].get<double>() * 1e3,
                        m["mct_max_s"].get<double>() * 1e3));
  }
  for (const std::string& l : o.engine_lines) line(l);
  for (const std::string& e : s.errors) line(absl::StrCat("error: ", e));
  line(absl::StrCat("\nlonghaul-perf ", s.passed() ? "Done." : "FAILED."));
  return t;
}

nlohmann::json SummaryEndJson(const ClientSummary& s, const SummaryOptions& o) {
  nlohmann::json end;
  end["streams"] = s.end_streams;
  nlohmann::json sent = SumJson(s.sent_secs, s.sent_bytes, true);
  sent["retransmits"] = s.retx_total;
  end["sum_sent"] = sent;
  end["sum_received"] = SumJson(s.recv_secs, s.recv_bytes, false);
  if (o.messages) {
    for (auto& [k, v] : s.mct.items()) end[k] = v;
  }
  const ConnectionStats& snd = s.snd_total;
  const ConnectionStats& rcv = s.rcv_total;
  nlohmann::json lh;
  const uint64_t data_pkts = snd.data_packets_sent;
  lh["loss"] = {{"packets_lost", snd.packets_lost},
                {"loss_rate", data_pkts ? double(snd.packets_lost) / data_pkts : 0.0},
                {"spurious_losses", snd.spurious_losses},
                {"checksum_failures", rcv.checksum_failures}};
  lh["retransmission"] = {{"packets_retransmitted", snd.packets_retransmitted},
                          {"data_bytes_retransmitted", snd.data_bytes_retransmitted},
                          {"pto_count", snd.pto_count},
                          {"tail_protect_packets", snd.tail_protect_packets}};
  lh["fec"] = {{"repair_packets_sent", snd.fec_repair_packets_sent},
               {"overhead_bytes", snd.fec_overhead_bytes},
               {"recovered_packets", rcv.fec_recovered_packets},
               {"blocks_unrecoverable", rcv.fec_blocks_unrecoverable}};
  lh["rtt"] = {{"min_ms", s.min_rtt_ms}, {"srtt_ms", s.srtt_ms}, {"rttvar_ms", s.rttvar_ms}};
  if (o.verify) {
    lh["integrity"] = {{"verified", true},
                       {"verified_bytes", s.recv_bytes},
                       {"corrupt_messages", s.corrupt},
                       {"corruption", s.corruption},
                       {"intact", s.passed()}};
  } else {
    // Nothing was checked: what arrived, and whether all of it did (no "intact").
    lh["integrity"] = {{"verified", false}, {"received_bytes", s.recv_bytes}, {"complete", s.ok}};
  }
  lh["sender_stats"] = ConnectionStatsToJson(snd);
  lh["receiver_stats"] = ConnectionStatsToJson(rcv);
  if (!s.errors.empty()) lh["errors"] = s.errors;
  end["longhaul"] = lh;
  return end;
}

}  // namespace longhaul::perf
