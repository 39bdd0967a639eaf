// The architecture as a test: every #include "..." in transport/, tuner/ and tools/ must
// follow an arrow of docs/layers.txt. A failure names the file, the line, the arrow and,
// where the table gives one, why that arrow is not allowed.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/layering/layering_check.h"

namespace longhaul::layering {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kDirs = {"transport", "tuner", "tools"};

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

LayerTable ProjectTable() {
  const std::string text = ReadFile(std::filesystem::path(LONGHAUL_SOURCE_DIR) / "docs/layers.txt");
  EXPECT_FALSE(text.empty()) << "docs/layers.txt is missing";
  absl::StatusOr<LayerTable> t = ParseLayerTable(text);
  EXPECT_TRUE(t.ok()) << "docs/layers.txt: " << t.status();
  return t.ok() ? *t : LayerTable{};
}

TEST(Layering, EveryIncludeFollowsAnAllowedArrow) {
  const LayerTable t = ProjectTable();
  const CheckResult r = CheckTree(t, LONGHAUL_SOURCE_DIR, kDirs);
  EXPECT_GT(r.files, 150u);  // the walk found the tree
  EXPECT_GT(r.includes, 300u);
  for (const std::string& f : r.unowned) {
    ADD_FAILURE() << f << " belongs to no layer: add its folder to docs/layers.txt";
  }
  for (const Violation& v : r.violations) ADD_FAILURE() << v.ToString();
}

TEST(Layering, SansIoLayersReadNoClock) {
  const LayerTable t = ProjectTable();
  // The library's sans-IO layers, as docs/architecture.md names them.
  for (const char* l : {"base", "wire", "fec", "core", "profile", "crypto", "endpoint", "sim"}) {
    EXPECT_TRUE(t.sans_io.contains(l)) << "docs/layers.txt: " << l << " is not marked sansio";
  }
  const CheckResult r = CheckTree(t, LONGHAUL_SOURCE_DIR, kDirs);
  for (const ClockViolation& c : r.clock_reads) ADD_FAILURE() << c.ToString();
}

TEST(Layering, EveryLayerPathExists) {
  const LayerTable t = ProjectTable();
  for (const LayerTable::Layer& l : t.layers) {
    std::string p = l.path;
    if (p.ends_with("/*")) p = p.substr(0, p.size() - 2);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(LONGHAUL_SOURCE_DIR) / p))
        << "layer " << l.name << ": " << p << " does not exist";
  }
}

// The checker itself, on a small tree of its own.
class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("layering_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
  }
  std::filesystem::path root_;
};

constexpr char kTable[] = R"(
# a comment
layer base  transport/base
layer clock transport/base/clock.h
layer core  transport/core
layer udp   transport/drivers/udp
layer tools/* tools/*
layer tools/common tools/common
allow core -> base
allow udp -> core base clock
allow tools/* -> tools/common core
allow tools/common -> core
deny core -> udp: the core is sans-IO
deny core -> clock: the core never reads a clock
deny tools/* -> tools/*: tools share code through tools/common
)";

TEST_F(CheckerTest, AcceptsAllowedArrowsAndReportsTheRest) {
  absl::StatusOr<LayerTable> t = ParseLayerTable(kTable);
  ASSERT_TRUE(t.ok()) << t.status();
  Write("transport/base/units.h", "#pragma once\n");
  Write("transport/core/connection.cc",
        "#include \"transport/base/units.h\"\n#include <vector>\n#include \"absl/x.h\"\n");
  Write("transport/drivers/udp/driver.cc", "#include \"transport/core/connection.h\"\n");
  Write("tools/perf/main.cc", "#include \"tools/common/flags.h\"\n#include \"tools/perf/x.h\"\n");
  Write("tools/common/flags.h", "#include \"transport/core/config.h\"\n");
  CheckResult ok = CheckTree(*t, root_.string(), {"transport", "tools"});
  EXPECT_TRUE(ok.violations.empty()) << ok.violations[0].ToString();
  EXPECT_TRUE(ok.unowned.empty());
  EXPECT_EQ(ok.files, 5u);

  // An inverted arrow, a tool reaching into another tool, a base that reaches up, and a
  // file no layer owns.
  Write("transport/core/bad.cc", "#include \"transport/drivers/udp/driver.h\"\n");
  Write("tools/sim/main.cc", "// x\n  #  include \"tools/perf/x.h\"\n");
  Write("transport/base/up.h", "#include \"transport/core/connection.h\"\n");
  Write("transport/stray/thing.cc", "\n");
  Write("transport/core/timer.cc", "#include \"transport/base/clock.h\"\n");
  CheckResult bad = CheckTree(*t, root_.string(), {"transport", "tools"});
  ASSERT_EQ(bad.violations.size(), 4u);
  EXPECT_EQ(bad.violations[0].file, "tools/sim/main.cc");
  EXPECT_EQ(bad.violations[0].line, 2);
  EXPECT_THAT(bad.violations[0].ToString(), HasSubstr("tools/sim -> tools/perf"));
  EXPECT_THAT(bad.violations[0].ToString(), HasSubstr("tools share code through tools/common"));
  EXPECT_EQ(bad.violations[1].file, "transport/base/up.h");
  EXPECT_THAT(bad.violations[1].ToString(), HasSubstr("base -> core is not an allowed arrow"));
  EXPECT_EQ(bad.violations[2].file, "transport/core/bad.cc");
  EXPECT_THAT(bad.violations[2].ToString(), HasSubstr("(the core is sans-IO)"));
  EXPECT_THAT(bad.violations[3].ToString(),
              HasSubstr("core -> clock is not an allowed arrow (the core never reads a clock)"));
  EXPECT_EQ(bad.unowned, std::vector<std::string>{"transport/stray/thing.cc"});
}

TEST(ClockReads, CodeOnly) {
  const std::string code = R"cc(// steady_clock in a comment, time(nullptr) too
#include <chrono>
/* system_clock::now()
   clock_gettime(CLOCK_MONOTONIC, &ts) */
const char* kHelp = "gettimeofday() and time(0) in a string";
const char* kRaw = R"x(getrusage(RUSAGE_SELF, &u) "quoted")x";
constexpr int64_t kBillion = 1'000'000'000;
char q = '"'; char a = '\''; Duration d = Duration::Seconds(1);
Time time() const; Time t = conn.time(); x->time(); Link::time(); set_time(0); runtime(0);
auto now = std::chrono::steady_clock::now();
clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); gettimeofday(&tv, nullptr);
getrusage(RUSAGE_SELF, &u); std::time(nullptr); time(nullptr); ::time(&t0); std::clock();
auto w = high_resolution_clock::now() + system_clock::now().time_since_epoch();
)cc";
  const std::string stripped = StripCommentsAndLiterals(code);
  EXPECT_EQ(stripped.size(), code.size());
  EXPECT_EQ(std::count(stripped.begin(), stripped.end(), '\n'),
            std::count(code.begin(), code.end(), '\n'));
  std::vector<std::string> found;
  for (const ClockRead& c : FindClockReads(stripped)) {
    found.push_back(absl::StrCat(c.line, ":", c.what));
  }
  EXPECT_THAT(found,
              ::testing::ElementsAre("10:steady_clock", "11:clock_gettime", "11:gettimeofday",
                                     "12:getrusage", "12:time()", "12:time()", "12:clock()",
                                     "12:time()", "13:high_resolution_clock", "13:system_clock"));
}

TEST_F(CheckerTest, ReportsClockReadsInSansIoLayersOnly) {
  absl::StatusOr<LayerTable> t = ParseLayerTable(std::string(kTable) + "sansio core base\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->sans_io, (std::set<std::string>{"core", "base"}));
  const std::string read = "auto t = std::chrono::steady_clock::now();\n";
  Write("transport/core/timer.cc", "// steady_clock, in words only\n\n" + read);
  Write("transport/base/units.h", "#pragma once\n" + read);
  Write("transport/base/clock.h", read);         // the clock layer: an edge
  Write("transport/drivers/udp/loop.cc", read);  // a driver: an edge
  CheckResult r = CheckTree(*t, root_.string(), {"transport"});
  EXPECT_TRUE(r.violations.empty());
  ASSERT_EQ(r.clock_reads.size(), 2u);
  EXPECT_EQ(r.clock_reads[0].ToString(),
            "transport/base/units.h:2: reads a clock (steady_clock) but layer base is sans-IO: "
            "time comes in from the caller");
  EXPECT_EQ(r.clock_reads[1].ToString(),
            "transport/core/timer.cc:3: reads a clock (steady_clock) but layer core is sans-IO: "
            "time comes in from the caller (the core never reads a clock)");
}

TEST(LayerTable, BadTablesNameTheLine) {
  EXPECT_THAT(std::string(ParseLayerTable("layer a x\nfrob a\n").status().message()),
              HasSubstr("line 2: unknown keyword"));
  EXPECT_THAT(std::string(ParseLayerTable("layer a x\nallow a -> b\n").status().message()),
              HasSubstr("unknown layer b"));
  EXPECT_THAT(std::string(ParseLayerTable("layer a x\nlayer b y\ndeny a -> b\n").status().message()),
              HasSubstr("line 3: deny needs a reason"));
  EXPECT_THAT(
      std::string(
          ParseLayerTable("layer a x\nlayer b y\nallow a -> b\ndeny a -> b: no\n").status().message()),
      HasSubstr("both allowed and denied"));
  EXPECT_FALSE(ParseLayerTable("layer a/* x\n").ok());
  EXPECT_FALSE(ParseLayerTable("layer a/* x/* y/*\n").ok());
  EXPECT_TRUE(ParseLayerTable("layer a x y/z.h\n").ok());
  EXPECT_FALSE(ParseLayerTable("layer a x\nlayer a y\n").ok());
  EXPECT_TRUE(ParseLayerTable("# nothing\n\n").ok());
  EXPECT_THAT(std::string(ParseLayerTable("layer a x\nsansio a b\n").status().message()),
              HasSubstr("line 2: unknown layer b"));
  EXPECT_FALSE(ParseLayerTable("layer a x\nsansio\n").ok());
}

TEST(LayerTable, PatternLayersNameTheirFolders) {
  absl::StatusOr<LayerTable> t = ParseLayerTable(kTable);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(LayerOf(*t, "tools/perf/perf_main.cc"), "tools/perf");
  EXPECT_EQ(LayerOf(*t, "transport/base/clock.h"), "clock");
  EXPECT_EQ(LayerOf(*t, "transport/base/units.h"), "base");
  EXPECT_EQ(LayerOf(*t, "tools/common/flags.h"), "tools/common");
  EXPECT_EQ(LayerOf(*t, "tools/main.sh"), "");
  EXPECT_EQ(LayerOf(*t, "transport/core/fec/x.h"), "core");
  EXPECT_EQ(LayerOf(*t, "transport/drivers/udp/x.h"), "udp");
  EXPECT_EQ(LayerOf(*t, "transport/drivers/verbs/x.h"), "");
  EXPECT_EQ(RuleName(*t, "tools/perf"), "tools/*");
  EXPECT_EQ(RuleName(*t, "tools/common"), "tools/common");
}

}  // namespace
}  // namespace longhaul::layering
