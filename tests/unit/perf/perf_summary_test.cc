// longhaul-perf's client summary without sockets: interval samples from cumulative
// counters, and the end-of-test summary (text and JSON) from synthetic sender and
// receiver reports: sums, errors, corruption, --verify=off and completion times.
#include "tools/perf/perf_summary.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/common/transport_flags.h"

namespace longhaul::perf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(IntervalLogTest, DifferencesOfTheCountersPerStreamAndSummed) {
  IntervalLog log(2);
  std::vector<std::string> lines = log.Record(0, 1, {{1000, 2, 1, 10.0}, {3000, 0, 4, 20.0}});
  ASSERT_EQ(lines.size(), 3u);  // two streams and the SUM
  EXPECT_THAT(lines[0], HasSubstr("[  1]   0.00-1.00"));
  EXPECT_THAT(lines[1], HasSubstr("20.00 ms"));
  EXPECT_THAT(lines[2], HasSubstr("[SUM]"));
  log.Record(1, 2, {{1500, 2, 1, 12.0}, {3000, 1, 4, 22.0}});
  ASSERT_EQ(log.sums().size(), 2u);
  EXPECT_EQ(log.sums()[0].bytes, 4000u);
  EXPECT_EQ(log.sums()[0].retransmits, 2u);
  EXPECT_EQ(log.sums()[0].fec_recovered, 5u);
  EXPECT_DOUBLE_EQ(log.sums()[0].rtt_ms, 15.0);  // the streams' mean
  EXPECT_EQ(log.stream(0)[1].bytes, 500u);
  EXPECT_EQ(log.stream(1)[1].bytes, 0u);
  EXPECT_EQ(log.stream(1)[1].retransmits, 1u);
  EXPECT_EQ(log.sums()[1].bytes, 500u);
}

TEST(IntervalLogTest, ACounterThatGoesBackCountsZeroNotAWrap) {
  IntervalLog log(1);
  log.Record(0, 1, {{5000, 3, 0, 1.0}});
  const std::vector<std::string> lines = log.Record(1, 2, {{4000, 1, 0, 1.0}});
  EXPECT_EQ(lines.size(), 1u);  // one stream: no SUM line
  EXPECT_EQ(log.stream(0)[1].bytes, 0u);
  EXPECT_EQ(log.stream(0)[1].retransmits, 0u);
  log.Record(2, 3, {{4500, 1, 0, 1.0}});  // from the last reading on
  EXPECT_EQ(log.stream(0)[2].bytes, 500u);
}

TEST(IntervalLogTest, JsonIsIperf3Shaped) {
  IntervalLog log(2);
  log.Record(0, 0.5, {{125000, 1, 2, 1.5}, {0, 0, 0, 2.5}});
  const nlohmann::json j = log.ToJson(/*sender=*/true);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  const nlohmann::json& s1 = j[0]["streams"][0];
  EXPECT_EQ(s1["socket"], 1);
  EXPECT_EQ(s1["bytes"], 125000u);
  EXPECT_DOUBLE_EQ(s1["seconds"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s1["bits_per_second"].get<double>(), 2e6);
  EXPECT_EQ(s1["rtt"], 1500u);  // microseconds
  EXPECT_EQ(s1["sender"], true);
  EXPECT_EQ(j[0]["streams"][1]["socket"], 2);
  EXPECT_FALSE(j[0]["sum"].contains("socket"));
  EXPECT_EQ(j[0]["sum"]["bytes"], 125000u);
  EXPECT_EQ(j[0]["sum"]["retransmits"], 1u);
}

// A sender's summary as PerfStream writes it.
nlohmann::json Sender(uint64_t acked, uint64_t submitted, double seconds, uint64_t retx,
                      double min_rtt_ms, double srtt_ms) {
  ConnectionStats st;
  st.packets_retransmitted = retx;
  st.data_packets_sent = 1000;
  st.packets_lost = retx;
  nlohmann::json j;
  j["bytes_acked"] = acked;
  j["data_bytes_submitted"] = submitted;
  j["seconds"] = seconds;
  j["stats"] = ConnectionStatsToJson(st);
  j["debug"] = {{"min_rtt_ms", min_rtt_ms}, {"srtt_ms", srtt_ms}, {"rttvar_ms", 1.0}};
  return j;
}

// A receiver's result as PerfStream writes it.
nlohmann::json Receiver(uint64_t verified, double seconds, uint64_t fec = 0) {
  ConnectionStats st;
  st.fec_recovered_packets = fec;
  nlohmann::json j;
  j["verified"] = true;
  j["bytes_verified"] = verified;
  j["bytes_received"] = verified;
  j["seconds"] = seconds;
  j["corrupt_messages"] = 0;
  j["corruption"] = nlohmann::json::array();
  j["stats"] = ConnectionStatsToJson(st);
  return j;
}

StreamOutcome Stream(uint64_t bytes, double seconds, uint64_t retx = 0, double srtt = 50) {
  StreamOutcome s;
  s.complete = true;
  s.sender_summary = Sender(bytes, bytes, seconds, retx, 40.0, srtt);
  s.receiver_result = Receiver(bytes, seconds, retx);
  return s;
}

TEST(ClientSummaryTest, SumsTheStreamsAndPasses) {
  SummaryOptions o;
  const ClientSummary s =
      Summarize({Stream(1'000'000, 2.0, 3, 50), Stream(3'000'000, 4.0, 1, 60)}, o);
  EXPECT_TRUE(s.ok);
  EXPECT_TRUE(s.passed());
  EXPECT_TRUE(s.errors.empty());
  EXPECT_EQ(s.sent_bytes, 4'000'000u);
  EXPECT_EQ(s.recv_bytes, 4'000'000u);
  EXPECT_DOUBLE_EQ(s.sent_secs, 4.0);  // the longest stream
  EXPECT_EQ(s.retx_total, 4u);
  EXPECT_EQ(s.fec_total, 4u);
  EXPECT_EQ(s.snd_total.packets_retransmitted, 4u);
  EXPECT_EQ(s.snd_total.data_packets_sent, 2000u);
  EXPECT_DOUBLE_EQ(s.srtt_ms, 60.0);  // the largest
  EXPECT_DOUBLE_EQ(s.min_rtt_ms, 40.0);
  ASSERT_EQ(s.end_streams.size(), 2u);
  EXPECT_EQ(s.end_streams[1]["sender"]["socket"], 2);
  EXPECT_EQ(s.end_streams[1]["sender"]["bytes"], 3'000'000u);
  EXPECT_DOUBLE_EQ(s.end_streams[1]["receiver"]["bits_per_second"].get<double>(), 6e6);
  EXPECT_EQ(s.end_streams[0]["sender"]["max_rtt"], 50000u);
  EXPECT_EQ(s.lines.size(), 4u);  // sender and receiver per stream

  const nlohmann::json end = SummaryEndJson(s, o);
  EXPECT_EQ(end["sum_sent"]["bytes"], 4'000'000u);
  EXPECT_EQ(end["sum_sent"]["retransmits"], 4u);
  EXPECT_DOUBLE_EQ(end["sum_received"]["bits_per_second"].get<double>(), 8e6);
  EXPECT_EQ(end["sum_received"]["sender"], false);
  EXPECT_EQ(end["longhaul"]["integrity"]["intact"], true);
  EXPECT_EQ(end["longhaul"]["integrity"]["verified_bytes"], 4'000'000u);
  EXPECT_EQ(end["longhaul"]["loss"]["packets_lost"], 4u);
  EXPECT_DOUBLE_EQ(end["longhaul"]["loss"]["loss_rate"].get<double>(), 0.002);
  EXPECT_FALSE(end["longhaul"].contains("errors"));
  EXPECT_FALSE(end.contains("mct_p99_s"));

  const std::string text = SummaryText(s, o, 2);
  EXPECT_THAT(text, HasSubstr("[SUM]"));
  EXPECT_THAT(text, HasSubstr("payload: 4000000 bytes verified intact, 0 corrupt message(s)"));
  EXPECT_THAT(text, HasSubstr("transport: 4 packets lost (0.2000%), 4 retransmitted"));
  EXPECT_THAT(text, HasSubstr("\nlonghaul-perf Done.\n"));
}

TEST(ClientSummaryTest, EngineLinesComeBeforeTheVerdict) {
  SummaryOptions o;
  o.engine_lines = {"[E0]  1 connection(s)", "[E1]  1 connection(s)"};
  const std::string text = SummaryText(Summarize({Stream(1000, 1.0), Stream(1000, 1.0)}, o), o, 2);
  const size_t e0 = text.find("[E0]"), e1 = text.find("[E1]"), done = text.find("Done.");
  ASSERT_NE(e0, std::string::npos) << text;
  ASSERT_NE(e1, std::string::npos) << text;
  EXPECT_LT(e0, e1);
  EXPECT_LT(e1, done);
  EXPECT_GT(e0, text.find("transport:"));
}

TEST(ClientSummaryTest, MissingBytesFailWithTheStreamNamed) {
  StreamOutcome short_stream = Stream(1000, 1.0);
  short_stream.sender_summary["data_bytes_submitted"] = 1200;
  const ClientSummary s = Summarize({Stream(500, 1.0), short_stream}, {});
  EXPECT_FALSE(s.ok);
  EXPECT_FALSE(s.passed());
  EXPECT_THAT(s.errors, ElementsAre("stream 2: 1200 bytes sent but 1000 verified intact"));
  EXPECT_THAT(SummaryText(s, {}, 2), HasSubstr("error: stream 2: 1200 bytes sent"));
  EXPECT_THAT(SummaryText(s, {}, 2), HasSubstr("longhaul-perf FAILED."));
  EXPECT_EQ(SummaryEndJson(s, {})["longhaul"]["errors"][0],
            "stream 2: 1200 bytes sent but 1000 verified intact");
}

TEST(ClientSummaryTest, CorruptionFailsAndIsListed) {
  StreamOutcome bad = Stream(1000, 1.0);
  bad.receiver_result["corrupt_messages"] = 2;
  bad.receiver_result["corruption"] = {"message 7 at offset 12", 5};
  const ClientSummary s = Summarize({bad}, {});
  EXPECT_FALSE(s.passed());
  EXPECT_EQ(s.corrupt, 2u);
  EXPECT_THAT(s.corruption, ElementsAre("stream 1: message 7 at offset 12"));
  const nlohmann::json end = SummaryEndJson(s, {});
  EXPECT_EQ(end["longhaul"]["integrity"]["intact"], false);
  EXPECT_EQ(end["longhaul"]["integrity"]["corrupt_messages"], 2u);
  EXPECT_THAT(SummaryText(s, {}, 1), HasSubstr("  corrupt: stream 1: message 7 at offset 12"));
}

TEST(ClientSummaryTest, TimeoutAndIncompleteStreamsAreErrors) {
  SummaryOptions o;
  o.timed_out = true;
  o.timeout_s = 70;
  StreamOutcome incomplete = Stream(1000, 1.0);
  incomplete.complete = false;
  StreamOutcome failed = Stream(1000, 1.0);
  failed.complete = false;
  failed.error = "connection closed by peer";
  const ClientSummary s = Summarize({incomplete, failed}, o);
  EXPECT_FALSE(s.ok);
  EXPECT_THAT(s.errors,
              ElementsAre("the test did not finish within 70 s", "stream 1: did not complete",
                          "stream 2: connection closed by peer"));
}

TEST(ClientSummaryTest, VerifyOffCountsReceivedBytesAndRefusesAVerifyingServer) {
  SummaryOptions o;
  o.verify = false;
  StreamOutcome unchecked = Stream(1000, 1.0);
  unchecked.receiver_result["verified"] = false;
  unchecked.receiver_result["bytes_verified"] = 0;
  ClientSummary s = Summarize({unchecked}, o);
  EXPECT_TRUE(s.passed());
  EXPECT_EQ(s.recv_bytes, 1000u);
  nlohmann::json integrity = SummaryEndJson(s, o)["longhaul"]["integrity"];
  EXPECT_EQ(integrity["verified"], false);
  EXPECT_EQ(integrity["received_bytes"], 1000u);
  EXPECT_EQ(integrity["complete"], true);
  EXPECT_FALSE(integrity.contains("intact"));
  EXPECT_THAT(SummaryText(s, o, 1), HasSubstr("payload: not verified (--verify=off), 1000 bytes"));

  // A server that says nothing about verifying checks: refused with --verify=off.
  StreamOutcome old_server = Stream(1000, 1.0);
  old_server.receiver_result.erase("verified");
  s = Summarize({old_server}, o);
  EXPECT_FALSE(s.ok);
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_THAT(s.errors[0], HasSubstr("the server checked the payload although --verify=off"));
}

TEST(ClientSummaryTest, CompletionTimesCombineByWeightAndMaximum) {
  SummaryOptions o;
  o.messages = true;
  o.message_size = 1 << 20;
  o.rate_bps = 1e9;
  StreamOutcome a = Stream(10 << 20, 1.0), b = Stream(30 << 20, 1.0);
  a.receiver_result["mct"] = {{"messages", 10},   {"mct_mean_s", 1.0}, {"mct_p50_s", 1.0},
                              {"mct_p99_s", 2.0}, {"mct_p999_s", 2.5}, {"mct_max_s", 3.0}};
  b.receiver_result["mct"] = {{"messages", 30},   {"mct_mean_s", 2.0}, {"mct_p50_s", 3.0},
                              {"mct_p99_s", 1.5}, {"mct_p999_s", 4.0}, {"mct_max_s", 4.5}};
  const ClientSummary s = Summarize({a, b}, o);
  EXPECT_EQ(s.mct["messages"], 40u);
  EXPECT_DOUBLE_EQ(s.mct["mct_mean_s"].get<double>(), 1.75);
  EXPECT_DOUBLE_EQ(s.mct["mct_p50_s"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(s.mct["mct_p99_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s.mct["mct_p999_s"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s.mct["mct_max_s"].get<double>(), 4.5);
  // Half the minimum RTT plus the message and its headers at the rate: over 20 + 8.4 ms.
  const double ideal = s.mct["mct_ideal_s"].get<double>();
  EXPECT_GT(ideal, 0.020 + (1 << 20) * 8 / 1e9);
  EXPECT_LT(ideal, 0.021 + (1 << 20) * 8 / 1e9);
  const nlohmann::json end = SummaryEndJson(s, o);
  EXPECT_DOUBLE_EQ(end["mct_mean_s"].get<double>(), 1.75);
  EXPECT_THAT(SummaryText(s, o, 2), HasSubstr("message completion (40 messages): ideal"));
  o.messages = false;
  EXPECT_THAT(SummaryText(Summarize({a, b}, o), o, 2), Not(HasSubstr("message completion")));
}

}  // namespace
}  // namespace longhaul::perf
