#include "tools/common/transport_flags.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"
#include "tools/common/path_memory.h"
#include "transport/profile/profile.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Every test runs under a FlagSaver, so flags (and their set/unset state) are restored.
class TransportFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }

  void Set(const char* name, const std::string& value) {
    ASSERT_FALSE(gflags::SetCommandLineOption(name, value.c_str()).empty())
        << "gflags rejected --" << name << "=" << value;
  }
  std::string WriteProfile(const std::string& text) { return tmp_.Write("test.profile", text); }

  gflags::FlagSaver saver_;
  ::longhaul::testing::TempDir tmp_{"longhaul-flags"};
  const std::filesystem::path dir_ = tmp_.path();
};

TEST_F(TransportFlagsTest, NoFlagsGivesTheDefaults) {
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ProfileKeyValues(*c), ProfileKeyValues(TransportConfig()));
  EXPECT_FALSE(TransportFlagWasSet("window"));
  EXPECT_FALSE(TransportFlagWasSet("profile"));
}

TEST_F(TransportFlagsTest, FlagDefaultsShowTheConfigDefaults) {
  EXPECT_EQ(gflags::GetCommandLineFlagInfoOrDie("window").default_value, "1GiB");
  EXPECT_EQ(gflags::GetCommandLineFlagInfoOrDie("initial_rtt").default_value, "100ms");
  EXPECT_EQ(gflags::GetCommandLineFlagInfoOrDie("fec").default_value, "off");
  EXPECT_EQ(gflags::GetCommandLineFlagInfoOrDie("ack_every").default_value,
            absl::StrCat(TransportConfig().ack_every));
}

TEST_F(TransportFlagsTest, PrecedenceDefaultsThenProfileThenExplicitFlags) {
  Set("profile", WriteProfile("window=512MiB\nrate=5gbit\ncc=bbr\nack_every=8\n"));
  Set("rate", "20gbit");
  // Explicitly given with the default's value: still overrides the profile.
  Set("window", "1GiB");
  Set("ack_every", "4");
  EXPECT_TRUE(TransportFlagWasSet("window"));
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, 1ULL << 30);                          // flag over profile
  EXPECT_EQ(c->rate.bps(), 20e9);                            // flag over profile
  EXPECT_EQ(c->ack_every, 4u);                               // typed flag over profile
  EXPECT_EQ(c->cc, CongestionControl::kBbr);                 // profile over default
  EXPECT_EQ(c->initial_rtt, TransportConfig().initial_rtt);  // default
}

TEST_F(TransportFlagsTest, EveryTransportFlagReachesItsField) {
  struct Case {
    const char* flag;
    const char* value;
    std::function<bool(const TransportConfig&)> check;
  };
  const Case cases[] = {
      {"segment", "16KiB", [](const TransportConfig& c) { return c.segment == 16384; }},
      {"mtu", "9000",
       [](const TransportConfig& c) { return c.segment == TransportConfig::SegmentForMtu(9000); }},
      {"window", "2GiB", [](const TransportConfig& c) { return c.window == (2ULL << 30); }},
      {"recv_window", "4GiB",
       [](const TransportConfig& c) { return c.recv_window == (4ULL << 30); }},
      {"max_inflight_messages", "1000",
       [](const TransportConfig& c) { return c.max_inflight_messages == 1000; }},
      {"flows", "4", [](const TransportConfig& c) { return c.flows == 4; }},
      {"cc", "bbr", [](const TransportConfig& c) { return c.cc == CongestionControl::kBbr; }},
      {"rate", "10gbit", [](const TransportConfig& c) { return c.rate.bps() == 10e9; }},
      {"ecn", "false", [](const TransportConfig& c) { return !c.ecn; }},
      {"cc_compete", "false", [](const TransportConfig& c) { return !c.cc_compete; }},
      {"cc_yield", "true", [](const TransportConfig& c) { return c.cc_yield; }},
      {"pacing_burst", "50us",
       [](const TransportConfig& c) { return c.pacing_burst == Duration::Microseconds(50); }},
      {"reorder_packets", "5", [](const TransportConfig& c) { return c.reorder_packets == 5; }},
      {"reorder_rtt_fraction", "0.1",
       [](const TransportConfig& c) { return c.reorder_rtt_fraction == 0.1; }},
      {"initial_rtt", "58ms",
       [](const TransportConfig& c) { return c.initial_rtt == Duration::Milliseconds(58); }},
      {"min_pto", "2ms",
       [](const TransportConfig& c) { return c.min_pto == Duration::Milliseconds(2); }},
      {"max_pto", "20s",
       [](const TransportConfig& c) { return c.max_pto == Duration::Seconds(20); }},
      {"ack_every", "16", [](const TransportConfig& c) { return c.ack_every == 16; }},
      {"max_ack_delay", "2ms",
       [](const TransportConfig& c) { return c.max_ack_delay == Duration::Milliseconds(2); }},
      {"max_ack_ranges", "64", [](const TransportConfig& c) { return c.max_ack_ranges == 64; }},
      {"fec", "16,4",
       [](const TransportConfig& c) {
         return c.fec == FecMode::kFixed && c.fec_k == 16 && c.fec_m == 4;
       }},
      {"fec_interleave", "8", [](const TransportConfig& c) { return c.fec_interleave == 8; }},
      {"fec_flush", "3ms",
       [](const TransportConfig& c) { return c.fec_flush == Duration::Milliseconds(3); }},
      {"idle_timeout", "1min",
       [](const TransportConfig& c) { return c.idle_timeout == Duration::Seconds(60); }},
      {"keepalive", "2s",
       [](const TransportConfig& c) { return c.keepalive == Duration::Seconds(2); }},
  };
  for (const Case& tc : cases) {
    gflags::FlagSaver per_case;
    Set(tc.flag, tc.value);
    EXPECT_TRUE(TransportFlagWasSet(tc.flag));
    absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
    ASSERT_TRUE(c.ok()) << tc.flag << ": " << c.status();
    EXPECT_TRUE(tc.check(*c)) << "--" << tc.flag << "=" << tc.value;
  }
}

TEST_F(TransportFlagsTest, BadFlagValueNamesTheFlag) {
  Set("window", "12x");
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("--window=12x: bad value '12x' for 'window': "));
}

TEST_F(TransportFlagsTest, BadCcAndFecNameTheFlag) {
  Set("cc", "reno");
  EXPECT_THAT(std::string(TransportConfigFromFlags().status().message()),
              StartsWith("--cc=reno: bad value 'reno' for 'cc': expected fixed or bbr"));
  gflags::FlagSaver inner;
  Set("cc", "bbr");
  Set("fec", "lots");
  EXPECT_THAT(std::string(TransportConfigFromFlags().status().message()),
              StartsWith("--fec=lots: "));
}

TEST_F(TransportFlagsTest, TypedFlagsRejectGarbageAtParseTime) {
  // gflags itself refuses non-numbers for integer flags.
  EXPECT_TRUE(gflags::SetCommandLineOption("flows", "many").empty());
  EXPECT_FALSE(TransportFlagWasSet("flows"));
}

TEST_F(TransportFlagsTest, InvalidCombinationFailsValidation) {
  Set("segment", "32KiB");
  Set("window", "32KiB");
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("window="));
  EXPECT_THAT(std::string(c.status().message()), StartsWith("invalid transport configuration"));
}

TEST_F(TransportFlagsTest, ProfileErrorsNameTheProfile) {
  const std::string path = WriteProfile("window=1GiB\nbogus=1\n");
  Set("profile", path);
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith(absl::StrCat("--profile: ", path, ":2: unknown key 'bogus'")));
}

TEST_F(TransportFlagsTest, MissingProfileIsNotFound) {
  const std::string path = (dir_ / "absent.profile").string();
  Set("profile", path);
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(path));
}

TEST_F(TransportFlagsTest, MtuFlagOverridesProfileSegmentButNotTogetherWithSegmentFlag) {
  Set("profile", WriteProfile("segment=4KiB\n"));
  Set("mtu", "1500");
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->segment, TransportConfig::SegmentForMtu(1500));
  Set("segment", "2KiB");
  c = TransportConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("--mtu and --segment"));
}

// The tools' rate default (ApplyToolRateDefault): what TransportConfigFromFlags gives,
// then the default applied.
TransportConfig ToolConfig() {
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  EXPECT_TRUE(c.ok()) << c.status();
  TransportConfig config = c.ok() ? *c : TransportConfig();
  ApplyToolRateDefault(&config);
  return config;
}

TEST_F(TransportFlagsTest, ToolsRunBbrWithNoCapWhenNothingGivesTheRate) {
  const TransportConfig c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kBbr);
  EXPECT_TRUE(c.rate.IsZero());
  // A profile that sets neither cc nor rate leaves the default to congestion control too.
  Set("profile", WriteProfile("window=256MiB\nfec=auto\n"));
  const TransportConfig p = ToolConfig();
  EXPECT_EQ(p.cc, CongestionControl::kBbr);
  EXPECT_TRUE(p.rate.IsZero());
  EXPECT_EQ(p.window, ByteCount{256} << 20);
}

TEST_F(TransportFlagsTest, RateFlagAloneKeepsTheFixedController) {
  Set("rate", "10gbit");
  const TransportConfig c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kFixed);
  EXPECT_EQ(c.rate, Bandwidth::Gbps(10));
}

TEST_F(TransportFlagsTest, ProfileThatSetsTheRateKeepsItsController) {
  Set("profile", WriteProfile("cc=fixed\nrate=3gbit\n"));
  TransportConfig c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kFixed);
  EXPECT_EQ(c.rate, Bandwidth::Gbps(3));
  // A rate without a controller in the profile: the fixed controller at that rate.
  Set("profile", WriteProfile("rate=700mbit\n"));
  c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kFixed);
  EXPECT_EQ(c.rate, Bandwidth::Mbps(700));
  // A profile's bbr with its cap keeps the cap.
  Set("profile", WriteProfile("cc=bbr\nrate=40gbit\n"));
  c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kBbr);
  EXPECT_EQ(c.rate, Bandwidth::Gbps(40));
}

TEST_F(TransportFlagsTest, BbrWithoutAGivenRateHasNoCap) {
  Set("cc", "bbr");
  TransportConfig c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kBbr);
  EXPECT_TRUE(c.rate.IsZero());  // not the 1gbit default: that would cap a faster link
  Set("rate", "2gbit");
  c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kBbr);
  EXPECT_EQ(c.rate, Bandwidth::Gbps(2));
}

TEST_F(TransportFlagsTest, FixedControllerAskedForKeepsTheDefaultRate) {
  Set("cc", "fixed");
  const TransportConfig c = ToolConfig();
  EXPECT_EQ(c.cc, CongestionControl::kFixed);
  EXPECT_EQ(c.rate, TransportConfig().rate);
}

TEST_F(TransportFlagsTest, GivenSettingsSeeFlagsAndProfileKeys) {
  GivenSettings g = GivenTransportSettings();
  EXPECT_FALSE(g.cc || g.rate || g.segment);
  Set("profile", WriteProfile("mtu=9000\ncc=bbr\n"));
  g = GivenTransportSettings();
  EXPECT_TRUE(g.cc);
  EXPECT_FALSE(g.rate);
  EXPECT_TRUE(g.segment);
  Set("rate", "1gbit");  // the default's value, given explicitly
  EXPECT_TRUE(GivenTransportSettings().rate);
  EXPECT_FALSE(g.initial_rate || g.rate_min);
  Set("profile", WriteProfile("rate=1mbit\nrate_min=0\n"));  // set, to the default
  g = GivenTransportSettings();
  EXPECT_TRUE(g.rate_min);
  EXPECT_FALSE(g.initial_rate);
  EXPECT_FALSE(PathMemoryMayApply());
  Set("profile", "");
  EXPECT_TRUE(PathMemoryMayApply());
  Set("initial_rate", "100mbit");
  EXPECT_TRUE(GivenTransportSettings().initial_rate);
  EXPECT_FALSE(PathMemoryMayApply());
}

TEST_F(TransportFlagsTest, PathMemoryFileFollowsTheFlagAndTheCacheDirectory) {
  Set("path_memory", "off");
  EXPECT_EQ(PathMemoryFileFromFlags(), "");
  Set("path_memory", "/x/paths");
  EXPECT_EQ(PathMemoryFileFromFlags(), "/x/paths");
  Set("path_memory", "auto");
  const char* home = std::getenv("HOME");
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const std::string f = PathMemoryFileFromFlags();
  if (cache != nullptr && cache[0] == '/') {
    EXPECT_EQ(f, absl::StrCat(cache, "/longhaul/paths"));
  } else if (home != nullptr && home[0] == '/') {
    EXPECT_EQ(f, absl::StrCat(home, "/.cache/longhaul/paths"));
  } else {
    EXPECT_EQ(f, "");
  }
}

TEST_F(TransportFlagsTest, JsonHasEveryKeyAndNumericForms) {
  TransportConfig config;
  config.window = 725000000;
  config.rate = Bandwidth::Gbps(100);
  config.fec = FecMode::kFixed;
  config.fec_k = 16;
  config.fec_m = 2;
  const nlohmann::json j = TransportConfigToJson(config);
  for (const auto& [key, value] : ProfileKeyValues(config)) {
    ASSERT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["window"].get<std::string>(), "725000000");
  EXPECT_EQ(j["segment"].get<std::string>(), "8KiB");
  EXPECT_EQ(j["window_bytes"].get<uint64_t>(), 725000000u);
  EXPECT_EQ(j["rate"].get<std::string>(), "100gbit");
  EXPECT_EQ(j["rate_bps"].get<double>(), 100e9);
  EXPECT_EQ(j["fec"].get<std::string>(), "16,2");
  EXPECT_EQ(j["fec_k"].get<int>(), 16);
  EXPECT_EQ(j["ack_every"].get<int>(), static_cast<int>(config.ack_every));
  EXPECT_EQ(j["ecn"].get<bool>(), config.ecn);
  EXPECT_EQ(j["cc_compete"].get<bool>(), config.cc_compete);
  EXPECT_EQ(j["cc_yield"].get<bool>(), config.cc_yield);
  EXPECT_EQ(j["initial_rtt_ns"].get<int64_t>(), config.initial_rtt.ns());
  EXPECT_EQ(j["max_datagram_bytes"].get<uint64_t>(), config.MaxDatagramSize());
}

// InitTool parses and removes flags, keeps positional arguments, and sends logs to
// stderr. (It initialises glog, which may happen once per process: one test only.)
TEST_F(TransportFlagsTest, InitToolParsesFlagsAndKeepsArguments) {
  std::string a0 = "longhaul-test", a1 = "--window=3GiB", a2 = "positional", a3 = "--flows=2";
  char* args[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
  int argc = 4;
  char** argv = args;
  InitTool(&argc, &argv, "longhaul-test [flags] ARG");
  ASSERT_EQ(argc, 2);
  EXPECT_STREQ(argv[1], "positional");
  EXPECT_TRUE(FLAGS_logtostderr);
  EXPECT_EQ(gflags::ProgramUsage(), std::string("longhaul-test [flags] ARG"));
  absl::StatusOr<TransportConfig> c = TransportConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, 3ULL << 30);
  EXPECT_EQ(c->flows, 2u);
}

}  // namespace
}  // namespace longhaul
