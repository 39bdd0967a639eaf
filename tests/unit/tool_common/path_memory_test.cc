#include "tools/common/path_memory.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace longhaul {
namespace {

constexpr int64_t kNow = 1800000000;

PathRecord Record(double gbps, int64_t rtt_ms, int64_t saved) {
  return PathRecord{Bandwidth::Gbps(gbps), Duration::Milliseconds(rtt_ms), saved};
}

TEST(PathMemoryTest, SavesAndLoadsRecordsAndAMissingFileIsEmpty) {
  ::longhaul::testing::TempDir tmp("longhaul-paths");
  ASSERT_TRUE(tmp.ok());
  const std::string file = tmp.Path("cache/longhaul/paths");  // the directories do not exist
  absl::StatusOr<PathMemory> empty = PathMemory::Load(file);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->size(), 0u);
  PathMemory m(file);
  m.Remember("198.18.0.2:5201", Record(0.997, 58, kNow - 10));
  m.Remember("peer.example:7000", Record(9.5, 112, kNow - 20));
  ASSERT_TRUE(m.Save().ok());
  absl::StatusOr<PathMemory> back = PathMemory::Load(file);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  const std::optional<PathRecord> r = back->Find("198.18.0.2:5201", kNow);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rate, Bandwidth::BitsPerSecond(997000000));
  EXPECT_EQ(r->min_rtt, Duration::Milliseconds(58));
  EXPECT_EQ(r->saved_unix_s, kNow - 10);
  EXPECT_FALSE(back->Find("198.18.0.3:5201", kNow).has_value());
  // Nothing is left beside the file.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.Path("cache/longhaul"))) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST(PathMemoryTest, OldRecordsAreNotUsed) {
  PathMemory m("unused");
  m.Remember("a:1", Record(1, 58, kNow - PathMemory::kMaxAgeSeconds - 1));
  m.Remember("b:1", Record(1, 58, kNow - PathMemory::kMaxAgeSeconds));
  m.Remember("c:1", Record(1, 58, kNow + 60));  // from the future: a clock that stepped back
  EXPECT_FALSE(m.Find("a:1", kNow).has_value());
  EXPECT_TRUE(m.Find("b:1", kNow).has_value());
  EXPECT_FALSE(m.Find("c:1", kNow).has_value());
}

TEST(PathMemoryTest, MalformedLinesAreSkippedAndCounted) {
  const PathMemory m = PathMemory::Parse(
      "f", absl::StrCat("# comment\n\n", "good:1 1000000000 58000000 ", kNow, "\n",
                        "short:1 1000000000 58000000\n",         // a field missing
                        "neg:1 -5 58000000 1\n",                  // a negative rate
                        "rtt:1 1000000000 0 1\n",                 // no RTT
                        "text:1 fast 58000000 1\n",               // not a number
                        "huge:1 1e300 58000000 1\n",              // beyond any link
                        "extra:1 1000000000 58000000 1 more\n"));  // a field too many
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.skipped_lines(), 6u);
  EXPECT_TRUE(m.Find("good:1", kNow).has_value());
}

TEST(PathMemoryTest, ForgetsOnAZeroRateAndRefusesPeersThatWouldBreakTheFormat) {
  PathMemory m("unused");
  m.Remember("a:1", Record(1, 58, kNow));
  m.Remember("a:1", PathRecord{Bandwidth::Zero(), Duration::Milliseconds(58), kNow});
  EXPECT_EQ(m.size(), 0u);
  m.Remember("a b:1", Record(1, 58, kNow));
  m.Remember("#c:1", Record(1, 58, kNow));
  EXPECT_EQ(m.size(), 0u);
}

TEST(PathMemoryTest, KeepsTheNewestRecordsWhenFull) {
  PathMemory m("unused");
  for (size_t i = 0; i < PathMemory::kMaxRecords + 5; ++i) {
    m.Remember(absl::StrCat("p", i, ":1"), Record(1, 58, kNow - 100000 + static_cast<int64_t>(i)));
  }
  const PathMemory back = PathMemory::Parse("f", m.Format());
  EXPECT_EQ(back.size(), PathMemory::kMaxRecords);
  EXPECT_EQ(back.skipped_lines(), 0u);
  EXPECT_EQ(back.Find("p0:1", kNow - 98000).has_value(), false);  // among the oldest five
  EXPECT_TRUE(back.Find(absl::StrCat("p", PathMemory::kMaxRecords + 4, ":1"), kNow - 98000)
                  .has_value());
}

TEST(PathMemoryTest, AnUnwritableFileIsAnErrorNamingIt) {
  ::longhaul::testing::TempDir tmp("longhaul-paths");
  ASSERT_TRUE(tmp.ok());
  const std::string blocker = tmp.Write("not-a-dir", "x");
  PathMemory m(blocker + "/paths");
  m.Remember("a:1", Record(1, 58, kNow));
  const absl::Status st = m.Save();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(blocker), std::string::npos) << st;
  // LoadOrWarn on a directory: an empty memory, not a failure.
  EXPECT_EQ(PathMemory::LoadOrWarn(tmp.path()).size(), 0u);
}

TEST(PathMemoryTest, TheRecordOfConnectionsSumsTheirRatesUnlessOneCompeted) {
  ConnectionDebugState a, b;
  a.cc_bandwidth_estimate = Bandwidth::Mbps(400);
  a.min_rtt = Duration::Milliseconds(60);
  b.cc_bandwidth_estimate = Bandwidth::Mbps(500);
  b.min_rtt = Duration::Milliseconds(58);
  const PathRecord r = PathRecordOf({a, b}, kNow);
  EXPECT_EQ(r.rate, Bandwidth::Mbps(900));
  EXPECT_EQ(r.min_rtt, Duration::Milliseconds(58));
  EXPECT_EQ(r.saved_unix_s, kNow);
  // One of them shared the path with queue-building traffic: no record, and Remember
  // forgets what there was.
  b.cc_competed = true;
  PathMemory m("unused");
  m.Remember("p:1", r);
  m.Remember("p:1", PathRecordOf({a, b}, kNow));
  EXPECT_FALSE(m.Find("p:1", kNow).has_value());
  // Nothing measured (no RTT sample): no record either.
  EXPECT_TRUE(PathRecordOf({ConnectionDebugState{}}, kNow).rate.IsZero());
}

TEST(PathMemoryTest, ARecordSetsHalfItsRateOnlyForBbrWithoutAStartOfItsOwn) {
  const PathRecord r = Record(1, 58, kNow);
  TransportConfig c;
  c.cc = CongestionControl::kBbr;
  c.rate = Bandwidth::Zero();
  std::optional<Bandwidth> start = ApplyPathRecord(r, 1, &c);
  ASSERT_TRUE(start.has_value());
  EXPECT_EQ(*start, Bandwidth::Mbps(500));
  EXPECT_EQ(c.initial_rate, Bandwidth::Mbps(500));
  TransportConfig four;
  four.cc = CongestionControl::kBbr;
  four.rate = Bandwidth::Mbps(100);  // a cap
  EXPECT_EQ(ApplyPathRecord(Record(10, 58, kNow), 4, &four), Bandwidth::Mbps(100));
  TransportConfig split;
  split.cc = CongestionControl::kBbr;
  split.rate = Bandwidth::Zero();
  EXPECT_EQ(ApplyPathRecord(Record(10, 58, kNow), 4, &split), Bandwidth::Mbps(1250));
  TransportConfig fixed;
  fixed.cc = CongestionControl::kFixed;
  EXPECT_FALSE(ApplyPathRecord(r, 1, &fixed).has_value());
  EXPECT_TRUE(fixed.initial_rate.IsZero());
  TransportConfig own;
  own.cc = CongestionControl::kBbr;
  own.initial_rate = Bandwidth::Mbps(10);
  EXPECT_FALSE(ApplyPathRecord(r, 1, &own).has_value());
  EXPECT_EQ(own.initial_rate, Bandwidth::Mbps(10));
  TransportConfig floor;
  floor.cc = CongestionControl::kBbr;
  floor.rate_min = Bandwidth::Mbps(10);
  EXPECT_FALSE(ApplyPathRecord(r, 1, &floor).has_value());
}

}  // namespace
}  // namespace longhaul
