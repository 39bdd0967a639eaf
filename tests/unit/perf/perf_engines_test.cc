// longhaul-perf's per-engine report: connections counted on the engine each ran on, the
// engines' counters carried over, the JSON's field names and the text lines (none for a
// single engine).
#include "tools/perf/perf_engines.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::perf {
namespace {

using ::testing::HasSubstr;

std::vector<EndpointStats> TwoEngines() {
  std::vector<EndpointStats> per(2);
  per[0].bytes_sent = 1000;
  per[0].bytes_received = 20;
  per[0].datagrams_sent = 10;
  per[0].datagrams_received = 2;
  per[0].cpu_s = 1.5;
  per[1].bytes_sent = 3000;
  per[1].bytes_received = 40;
  per[1].datagrams_sent = 30;
  per[1].datagrams_received = 4;
  per[1].cpu_s = 0.25;
  return per;
}

TEST(PerfEnginesTest, ConnectionsCountOnTheirEngineAndCountersCarryOver) {
  // Connections on engines 0, 1, 1 and one on an engine past the list (counted nowhere).
  const std::vector<EngineReport> r = EngineReports(TwoEngines(), {0, 1, 1, 7});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].index, 0u);
  EXPECT_EQ(r[1].index, 1u);
  EXPECT_EQ(r[0].connections, 1u);
  EXPECT_EQ(r[1].connections, 2u);
  EXPECT_EQ(r[1].bytes_sent, 3000u);
  EXPECT_EQ(r[1].bytes_received, 40u);
  EXPECT_EQ(r[1].datagrams_sent, 30u);
  EXPECT_EQ(r[1].datagrams_received, 4u);
  EXPECT_DOUBLE_EQ(r[0].cpu_s, 1.5);
}

TEST(PerfEnginesTest, JsonHasOneObjectPerEngine) {
  const nlohmann::json j = EnginesJson(EngineReports(TwoEngines(), {0, 1}));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const char* k : {"index", "connections", "bytes_sent", "bytes_received", "datagrams_sent",
                        "datagrams_received", "cpu_s"}) {
    EXPECT_TRUE(j[1].contains(k)) << k;
  }
  EXPECT_EQ(j[1]["index"], 1);
  EXPECT_EQ(j[1]["connections"], 1);
  EXPECT_EQ(j[0]["bytes_sent"], 1000);
  EXPECT_DOUBLE_EQ(j[1]["cpu_s"].get<double>(), 0.25);
  EXPECT_TRUE(EnginesJson({}).is_array());
}

TEST(PerfEnginesTest, TextLinesOnlyWithSeveralEngines) {
  const std::vector<std::string> lines = EngineLines(EngineReports(TwoEngines(), {0, 1, 1}));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("[E0]"));
  EXPECT_THAT(lines[1], HasSubstr("[E1]  2 connection(s)"));
  EXPECT_THAT(lines[1], HasSubstr("(30 datagrams)"));
  EXPECT_THAT(lines[1], HasSubstr("cpu 0.25 s"));
  std::vector<EndpointStats> one(1);
  EXPECT_TRUE(EngineLines(EngineReports(one, {0})).empty());
}

}  // namespace
}  // namespace longhaul::perf
