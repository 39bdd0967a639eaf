#include "transport/nccl/settings.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/key_files.h"
#include "tests/support/temp_dir.h"
#include "transport/api/endpoint.h"
#include "transport/base/parse.h"
#include "transport/crypto/key_files.h"
#include "transport/nccl/runtime.h"
#include "transport/profile/profile.h"

namespace longhaul::nccl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// An environment (NAME=VALUE strings, NULL-terminated) that ReadSettings reads like
// `environ`.
class Env {
 public:
  Env(std::initializer_list<std::string> entries) : entries_(entries) {}
  const char* const* envp() {
    ptrs_.clear();
    for (const std::string& e : entries_) ptrs_.push_back(e.c_str());
    ptrs_.push_back(nullptr);
    return ptrs_.data();
  }

 private:
  std::vector<std::string> entries_;
  std::vector<const char*> ptrs_;
};

absl::StatusOr<Settings> Read(std::initializer_list<std::string> entries) {
  Env env(entries);
  return ReadSettings(env.envp());
}

Settings MustRead(std::initializer_list<std::string> entries) {
  absl::StatusOr<Settings> s = Read(entries);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Settings{};
}

std::string ReadError(std::initializer_list<std::string> entries) {
  absl::StatusOr<Settings> s = Read(entries);
  EXPECT_FALSE(s.ok());
  if (s.ok()) return "";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  return std::string(s.status().message());
}

class TempProfile {
 public:
  explicit TempProfile(const std::string& text) {
    char tmpl[] = "/tmp/nccl-settings-test-XXXXXX";
    int fd = mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
    path_ = tmpl;
    std::ofstream(path_) << text;
  }
  ~TempProfile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(NcclSettingsTest, DefaultsWithAnEmptyEnvironment) {
  const Settings s = MustRead({});
  EXPECT_EQ(s.profile_path, "");
  EXPECT_EQ(s.ifname, "");
  EXPECT_EQ(s.ifname_variable, "");
  EXPECT_EQ(s.copy_max, uint64_t{1} << 20);
  EXPECT_EQ(s.linger, Duration::Seconds(5));
  EXPECT_EQ(s.connect_timeout, Duration::Seconds(20));
  EXPECT_EQ(s.spin, EndpointOptions{}.spin) << "the endpoint's default";
  EXPECT_EQ(s.port, 0);
  EXPECT_FALSE(s.rate_given);
  EXPECT_FALSE(s.rtt_given);
  EXPECT_EQ(s.key_path, "");
  EXPECT_FALSE(s.insecure.has_value());
  EXPECT_FALSE(s.profile_security.any());
  // TransportConfig defaults (1 Gbit/s, 100 ms): 2 x BDP = 25 MB, inside [16 MiB, 1 GiB].
  EXPECT_EQ(s.credit, 25000000u);
  EXPECT_EQ(s.credit, DefaultCredit(TransportConfig{}));
  EXPECT_EQ(s.config.rate.bps(), TransportConfig{}.rate.bps());
  EXPECT_EQ(s.engines, 1u) << "one engine unless asked";
  EXPECT_TRUE(s.engine_cpus.empty());
}

TEST(NcclSettingsTest, DefaultCreditIsTwoBdpsWithinBounds) {
  TransportConfig c;
  c.rate = Bandwidth::Gbps(1);
  c.initial_rtt = Duration::Milliseconds(1);
  EXPECT_EQ(DefaultCredit(c), uint64_t{16} << 20) << "floor";
  c.rate = Bandwidth::Gbps(100);
  c.initial_rtt = Duration::Milliseconds(150);
  EXPECT_EQ(DefaultCredit(c), uint64_t{1} << 30) << "ceiling";
  c.rate = Bandwidth::Gbps(10);
  c.initial_rtt = Duration::Milliseconds(58);
  EXPECT_EQ(DefaultCredit(c), 145000000u);
}

// One value per plugin key, and what it sets. The table and this list must agree: a key
// added to the table without a test here fails EveryKeyOfTheTableIsCoveredHere.
struct KeyCase {
  std::string value;
  std::function<void(const Settings&)> check;
};

std::map<std::string, KeyCase> KeyCases(const std::string& profile_path) {
  return {
      {"IFNAME",
       {"=eth0,ib",
        [](const Settings& s) {
          EXPECT_EQ(s.ifname, "=eth0,ib");
          EXPECT_EQ(s.ifname_variable, "NCCL_LONGHAUL_IFNAME");
        }}},
      {"PROFILE",
       {profile_path,
        [profile_path](const Settings& s) {
          EXPECT_EQ(s.profile_path, profile_path);
          EXPECT_EQ(s.config.rate, Bandwidth::Gbps(2));
          EXPECT_EQ(s.config.initial_rtt, Duration::Milliseconds(58));
          EXPECT_TRUE(s.rate_given);
          EXPECT_TRUE(s.rtt_given);
          EXPECT_EQ(s.credit, 29000000u) << "2 x 250 MB/s x 58 ms";
        }}},
      {"CREDIT", {"3MiB", [](const Settings& s) { EXPECT_EQ(s.credit, uint64_t{3} << 20); }}},
      {"COPY_MAX", {"0", [](const Settings& s) { EXPECT_EQ(s.copy_max, 0u); }}},
      {"LINGER",
       {"300ms", [](const Settings& s) { EXPECT_EQ(s.linger, Duration::Milliseconds(300)); }}},
      {"CONNECT_TIMEOUT",
       {"1s", [](const Settings& s) { EXPECT_EQ(s.connect_timeout, Duration::Seconds(1)); }}},
      {"PORT", {"4242", [](const Settings& s) { EXPECT_EQ(s.port, 4242); }}},
      {"SPIN", {"0", [](const Settings& s) { EXPECT_EQ(s.spin, Duration::Zero()); }}},
      {"SEND_QUANTUM",
       {"128KiB", [](const Settings& s) { EXPECT_EQ(s.send_quantum, uint64_t{128} << 10); }}},
      {"ADVERTISE",
       {"198.18.0.9:4000", [](const Settings& s) { EXPECT_EQ(s.advertise, "198.18.0.9:4000"); }}},
      {"KEY", {"/keys/r0.key", [](const Settings& s) { EXPECT_EQ(s.key_path, "/keys/r0.key"); }}},
      {"PEER_KEY",
       {"/keys/ranks.pub",
        [](const Settings& s) { EXPECT_EQ(s.peer_key_path, "/keys/ranks.pub"); }}},
      {"PSK_FILE",
       {"/keys/job.psk", [](const Settings& s) { EXPECT_EQ(s.psk_path, "/keys/job.psk"); }}},
      {"INSECURE",
       {"1", [](const Settings& s) { EXPECT_EQ(s.insecure, std::optional<bool>(true)); }}},
      {"DATAPATH", {"verbs", [](const Settings& s) { EXPECT_EQ(s.datapath, "verbs"); }}},
      // ud: the value that parses alone (uc needs DATAPATH=verbs: QpTypeUcNeedsVerbs).
      {"QP_TYPE", {"ud", [](const Settings& s) { EXPECT_EQ(s.qp_type, "ud"); }}},
      // Auto: the one value that goes with DATAPATH=verbs in EveryKeyAtOnce.
      {"ENGINES", {"0", [](const Settings& s) { EXPECT_EQ(s.engines, 0u); }}},
      {"ENGINE_CPUS",
       {"3,1,1023",
        [](const Settings& s) {
          EXPECT_EQ(s.engine_cpus, (std::vector<int>{3, 1, 1023}));
        }}},
  };
}

TEST(NcclSettingsTest, EveryKeyOfTheTableIsParsed) {
  TempProfile profile("rate=2gbit\ninitial_rtt=58ms\n");
  const auto cases = KeyCases(profile.path());
  for (const SettingSpec& spec : PluginSettingSpecs()) {
    SCOPED_TRACE(std::string(spec.key));
    auto it = cases.find(std::string(spec.key));
    ASSERT_NE(it, cases.end()) << "no test value for NCCL_LONGHAUL_" << spec.key;
    const Settings s = MustRead({absl::StrCat("NCCL_LONGHAUL_", spec.key, "=", it->second.value)});
    it->second.check(s);
  }
}

TEST(NcclSettingsTest, DatapathIsUdpByDefaultAndNamesTheChoicesWhenWrong) {
  EXPECT_EQ(MustRead({}).datapath, "udp");
  const std::string err = ReadError({"NCCL_LONGHAUL_DATAPATH=rdma"});
  EXPECT_THAT(err, StartsWith("NCCL_LONGHAUL_DATAPATH=rdma: expected a datapath (udp, verbs)"));
  EXPECT_THAT(err, HasSubstr("unknown datapath 'rdma' (udp, verbs)"));
}

TEST(NcclSettingsTest, QpTypeUcNeedsVerbsAndNamesTheChoicesWhenWrong) {
  EXPECT_EQ(MustRead({}).qp_type, "ud");
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_DATAPATH=verbs", "NCCL_LONGHAUL_QP_TYPE=uc"}).qp_type, "uc");
  EXPECT_THAT(ReadError({"NCCL_LONGHAUL_QP_TYPE=uc"}),
              HasSubstr("NCCL_LONGHAUL_QP_TYPE=uc needs NCCL_LONGHAUL_DATAPATH=verbs"));
  const std::string err = ReadError({"NCCL_LONGHAUL_QP_TYPE=rc"});
  EXPECT_THAT(err, StartsWith("NCCL_LONGHAUL_QP_TYPE=rc: expected a queue pair type (ud, uc)"));
  EXPECT_THAT(err, HasSubstr("unknown qp_type 'rc' (ud, uc)"));
}

TEST(NcclSettingsTest, EveryKeyOfTheTableIsCoveredHere) {
  std::set<std::string> keys;
  for (const SettingSpec& spec : PluginSettingSpecs()) {
    EXPECT_TRUE(keys.insert(std::string(spec.key)).second) << "duplicate " << spec.key;
    EXPECT_NE(FindPluginSetting(spec.key), nullptr);
  }
  std::set<std::string> tested;
  for (const auto& [key, c] : KeyCases("")) tested.insert(key);
  EXPECT_EQ(keys, tested);
}

TEST(NcclSettingsTest, EveryKeyAtOnce) {
  TempProfile profile("rate=2gbit\ninitial_rtt=58ms\n");
  const auto cases = KeyCases(profile.path());
  std::vector<std::string> entries;
  for (const auto& [key, c] : cases)
    entries.push_back(absl::StrCat("NCCL_LONGHAUL_", key, "=", c.value));
  std::vector<const char*> envp;
  for (const std::string& e : entries) envp.push_back(e.c_str());
  envp.push_back(nullptr);
  absl::StatusOr<Settings> s = ReadSettings(envp.data());
  ASSERT_TRUE(s.ok()) << s.status();
  for (const auto& [key, c] : cases) {
    if (key == "PROFILE") {
      EXPECT_EQ(s->profile_path, profile.path());  // its credit is overridden by CREDIT
      continue;
    }
    SCOPED_TRACE(key);
    c.check(*s);
  }
}

TEST(NcclSettingsTest, EveryDefaultParsesAndEverySpecIsDocumented) {
  for (const SettingSpec& spec : PluginSettingSpecs()) {
    SCOPED_TRACE(std::string(spec.key));
    EXPECT_FALSE(spec.doc.empty());
    EXPECT_FALSE(spec.default_value.empty() && spec.default_doc.empty())
        << "the docs need a default";
    if (!spec.default_value.empty()) {
      Settings s;
      EXPECT_TRUE(ApplySetting(spec, spec.default_value, &s).ok());
    }
    EXPECT_LE(spec.min, spec.max);
  }
}

// Bounds are inclusive, and one step outside is refused with the variable, the value and
// the accepted range in the message.
TEST(NcclSettingsTest, BoundsAreInclusiveAndOutsideIsRefusedNamingTheVariable) {
  for (const SettingSpec& spec : PluginSettingSpecs()) {
    if (spec.type != SettingType::kSize && spec.type != SettingType::kDuration &&
        spec.type != SettingType::kPort && spec.type != SettingType::kCount &&
        spec.type != SettingType::kCpuList) {
      continue;
    }
    SCOPED_TRACE(std::string(spec.key));
    auto text = [&](int64_t v) {
      return spec.type == SettingType::kDuration ? absl::StrCat(v, "ns") : absl::StrCat(v);
    };
    const std::string var = absl::StrCat("NCCL_LONGHAUL_", spec.key);
    Settings s;
    EXPECT_TRUE(ApplySetting(spec, text(spec.min), &s).ok());
    EXPECT_TRUE(ApplySetting(spec, text(spec.max), &s).ok());
    for (int64_t outside : {spec.min - 1, spec.max + 1}) {
      const std::string v = text(outside);
      const std::string err = ReadError({absl::StrCat(var, "=", v)});
      EXPECT_THAT(err, StartsWith(absl::StrCat(var, "=", v, ": expected a ")));
      EXPECT_THAT(err, HasSubstr(SettingTypeText(spec)));
    }
  }
}

TEST(NcclSettingsTest, TheRangesAreTheDocumentedOnes) {
  auto type_of = [](absl::string_view key) { return SettingTypeText(*FindPluginSetting(key)); };
  EXPECT_EQ(type_of("CREDIT"), "size in [64KiB, 64GiB]");
  EXPECT_EQ(type_of("COPY_MAX"), "size in [0, 1GiB]");
  EXPECT_EQ(type_of("LINGER"), "duration in [0, 600s]");
  EXPECT_EQ(type_of("CONNECT_TIMEOUT"), "duration in [100ms, 600s]");
  EXPECT_EQ(type_of("SPIN"), "duration in [0, 10ms]");
  EXPECT_EQ(type_of("SEND_QUANTUM"), "size in [0, 1MiB]");
  EXPECT_EQ(type_of("PORT"), "port in [0, 65535]");
  EXPECT_EQ(type_of("IFNAME"), "interface list");
  EXPECT_EQ(type_of("PROFILE"), "path");
  EXPECT_EQ(type_of("ADVERTISE"), "numeric address:port");
  EXPECT_EQ(type_of("ENGINES"), absl::StrCat("count in [0, ", kMaxEngines, "]"));
  EXPECT_EQ(type_of("ENGINE_CPUS"), "CPU list (numbers in [0, 1023])");
}

TEST(NcclSettingsTest, EnginesAreCountedAndCheckedAgainstTheDatapath) {
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_ENGINES=2"}).engines, 2u);
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_ENGINES=64"}).engines, 64u);
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_ENGINES=1", "NCCL_LONGHAUL_DATAPATH=verbs"}).engines, 1u);
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_ENGINE_CPUS=5"}).engine_cpus, std::vector<int>{5});
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_ENGINE_CPUS=6,0-2"}).engine_cpus,
            std::vector<int>({6, 0, 1, 2}));
  const char* kRange = "expected a count in [0, 64]";
  for (const char* bad : {"65", "-1", "two", "2x", "1.5"}) {
    const std::string v = absl::StrCat("NCCL_LONGHAUL_ENGINES=", bad);
    EXPECT_EQ(ReadError({v}), absl::StrCat(v, ": ", kRange));
  }
  EXPECT_EQ(ReadError({"NCCL_LONGHAUL_ENGINES=2", "NCCL_LONGHAUL_DATAPATH=verbs"}),
            "NCCL_LONGHAUL_ENGINES=2: more than one engine needs NCCL_LONGHAUL_DATAPATH=udp "
            "(the verbs datapath runs one engine)");
  for (const char* bad : {"1,,2", "1,", "-3", "1024", "cpu0", "1;2"}) {
    const std::string v = absl::StrCat("NCCL_LONGHAUL_ENGINE_CPUS=", bad);
    const std::string err = ReadError({v});
    EXPECT_THAT(err, StartsWith(absl::StrCat(v, ": expected a CPU list (numbers in [0, 1023]) (")));
    EXPECT_THAT(err, HasSubstr(absl::StrCat("in '", bad, "'")));  // the parser names the item
  }
}

// Each of a peer's lanes is paced at its share of the rate: together they keep to it.
TEST(NcclSettingsTest, LaneConfigSplitsTheRateAmongTheLanes) {
  TransportConfig c;
  c.rate = Bandwidth::Gbps(10);
  c.rate_min = Bandwidth::Gbps(2);
  c.initial_rate = Bandwidth::Gbps(4);
  const TransportConfig one = LaneConfig(c, 1);
  EXPECT_EQ(FormatProfile(one, ""), FormatProfile(c, ""));
  const TransportConfig four = LaneConfig(c, 4);
  EXPECT_EQ(four.rate, Bandwidth::Mbps(2500));
  EXPECT_EQ(four.rate_min, Bandwidth::Mbps(500));
  EXPECT_EQ(four.initial_rate, Bandwidth::Gbps(1));
  EXPECT_TRUE(four.Validate().ok()) << four.Validate();
  TransportConfig rest = four;  // everything else is the configuration's
  rest.rate = c.rate;
  rest.rate_min = c.rate_min;
  rest.initial_rate = c.initial_rate;
  EXPECT_EQ(FormatProfile(rest, ""), FormatProfile(c, ""));
  c.rate = Bandwidth::Zero();  // no cap stays no cap
  c.rate_min = Bandwidth::Zero();
  EXPECT_TRUE(LaneConfig(c, 3).rate.IsZero());
}

TEST(NcclSettingsTest, BadValuesNameTheVariableAndTheReason) {
  // Each bad setting and its error: the whole of it where `whole`, else how it starts.
  struct BadValue {
    const char* setting;
    const char* error;
    bool whole;
  };
  const BadValue cases[] = {
      {"NCCL_LONGHAUL_CREDIT=1k", "NCCL_LONGHAUL_CREDIT=1k: expected a size in [64KiB, 64GiB]",
       true},
      {"NCCL_LONGHAUL_CREDIT=lots",
       "NCCL_LONGHAUL_CREDIT=lots: expected a size in [64KiB, 64GiB] (", false},
      {"NCCL_LONGHAUL_COPY_MAX=2GiB", "NCCL_LONGHAUL_COPY_MAX=2GiB: expected a size in [0, 1GiB]",
       false},
      {"NCCL_LONGHAUL_LINGER=soon",
       "NCCL_LONGHAUL_LINGER=soon: expected a duration in [0, 600s] (", false},
      {"NCCL_LONGHAUL_LINGER=-1s", "NCCL_LONGHAUL_LINGER=-1s: expected a duration", false},
      {"NCCL_LONGHAUL_CONNECT_TIMEOUT=10ms",
       "NCCL_LONGHAUL_CONNECT_TIMEOUT=10ms: expected a duration in [100ms, ", false},
      {"NCCL_LONGHAUL_SPIN=1s", "NCCL_LONGHAUL_SPIN=1s: expected a duration in [0, 10ms]", false},
      {"NCCL_LONGHAUL_PORT=70000", "NCCL_LONGHAUL_PORT=70000: expected a port in [0, 65535]",
       true},
      {"NCCL_LONGHAUL_PORT=http", "NCCL_LONGHAUL_PORT=http: expected a port in [0, 65535]", true},
      {"NCCL_LONGHAUL_PORT=-1", "NCCL_LONGHAUL_PORT=-1: expected a port in [0, 65535]", true},
  };
  for (const BadValue& c : cases) {
    if (c.whole) {
      EXPECT_EQ(ReadError({c.setting}), c.error);
    } else {
      EXPECT_THAT(ReadError({c.setting}), StartsWith(c.error));
    }
  }
}

TEST(NcclSettingsTest, AdvertisedAddressesAreNumericWithAPort) {
  EXPECT_EQ(MustRead({}).advertise, "");
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_ADVERTISE=[::1]:65535"}).advertise, "[::1]:65535");
  absl::StatusOr<AddressPort> a = ParseAddressPort("127.0.0.1:1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "127.0.0.1");
  EXPECT_EQ(a->port, 1);
  a = ParseAddressPort("[fe80::1]:5000");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "fe80::1");
  EXPECT_EQ(a->port, 5000);
  const std::string var = "NCCL_LONGHAUL_ADVERTISE=";
  EXPECT_EQ(ReadError({var + "localhost:5000"}),
            var +
                "localhost:5000: expected a numeric address:port ('localhost' is not a "
                "numeric IPv4 address or a bracketed IPv6 address)");
  EXPECT_EQ(ReadError({var + "127.0.0.1"}),
            var + "127.0.0.1: expected a numeric address:port (no port in '127.0.0.1')");
  EXPECT_THAT(ReadError({var + "127.0.0.1:0"}), HasSubstr("port '0' is not in [1, 65535]"));
  EXPECT_THAT(ReadError({var + "127.0.0.1:65536"}), HasSubstr("is not in [1, 65535]"));
  EXPECT_THAT(ReadError({var + "::1:5000"}), HasSubstr("'::1' is not a numeric IPv4"));
  EXPECT_THAT(ReadError({var + "[127.0.0.1]:5000"}), HasSubstr("is not a numeric IPv4"));
}

TEST(NcclSettingsTest, AnEmptyValueIsUnsetAndTheFirstOfANameCounts) {
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_LINGER="}).linger, Duration::Seconds(5));
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_IFNAME="}).ifname, "");
  EXPECT_EQ(MustRead({"NCCL_LONGHAUL_LINGER=1s", "NCCL_LONGHAUL_LINGER=2s"}).linger,
            Duration::Seconds(1));
  // A variable whose name only starts like a key is another variable.
  EXPECT_THAT(ReadError({"NCCL_LONGHAUL_PORTS=1"}), StartsWith("NCCL_LONGHAUL_PORTS=1: "));
  EXPECT_EQ(MustRead({"OTHER=1", "NCCL_LONGHAUL", "NCCL_LONGHAUL_PORT=9"}).port, 9);
}

TEST(NcclSettingsTest, UnknownKeysAreRefusedNamingTheVariable) {
  const std::string err = ReadError({"NCCL_LONGHAUL_BOGUS=1"});
  EXPECT_THAT(err, StartsWith("NCCL_LONGHAUL_BOGUS=1: unknown key 'bogus' (known keys: "));
  EXPECT_THAT(err, HasSubstr("window"));
  // Plugin keys are upper case; a lower-case one is an (unknown) profile key.
  EXPECT_THAT(ReadError({"NCCL_LONGHAUL_credit=1MiB"}),
              StartsWith("NCCL_LONGHAUL_credit=1MiB: unknown key 'credit'"));
}

TEST(NcclSettingsTest, ProfileKeysApplyInEnvironmentOrder) {
  Settings s = MustRead({"NCCL_LONGHAUL_RATE=1gbit", "NCCL_LONGHAUL_RATE=3gbit"});
  EXPECT_EQ(s.config.rate, Bandwidth::Gbps(3));
  EXPECT_TRUE(s.rate_given);
  EXPECT_FALSE(s.rtt_given);
  s = MustRead(
      {"NCCL_LONGHAUL_INITIAL_RTT=58ms", "NCCL_LONGHAUL_FEC=auto", "NCCL_LONGHAUL_MTU=9000"});
  EXPECT_TRUE(s.rtt_given);
  EXPECT_FALSE(s.rate_given);
  EXPECT_EQ(s.config.initial_rtt, Duration::Milliseconds(58));
  EXPECT_EQ(s.config.fec, FecMode::kAuto);
  EXPECT_EQ(s.credit, DefaultCredit(s.config));
  EXPECT_THAT(ReadError({"NCCL_LONGHAUL_FEC=bogus"}),
              StartsWith("NCCL_LONGHAUL_FEC=bogus: bad value 'bogus' for 'fec'"));
}

TEST(NcclSettingsTest, KeysOverrideTheProfile) {
  TempProfile profile("rate=2gbit\nfec=off\n");
  const Settings s =
      MustRead({"NCCL_LONGHAUL_FEC=auto", absl::StrCat("NCCL_LONGHAUL_PROFILE=", profile.path())});
  EXPECT_EQ(s.config.rate, Bandwidth::Gbps(2));
  EXPECT_EQ(s.config.fec, FecMode::kAuto) << "the key, though listed before the profile";
  EXPECT_TRUE(s.rate_given);
  EXPECT_FALSE(s.rtt_given) << "the profile kept the default RTT";
}

TEST(NcclSettingsTest, ABadProfileNamesTheVariable) {
  EXPECT_THAT(ReadError({"NCCL_LONGHAUL_PROFILE=/nonexistent/x.profile"}),
              StartsWith("NCCL_LONGHAUL_PROFILE: "));
  TempProfile bad("window=12x\n");
  const std::string err = ReadError({absl::StrCat("NCCL_LONGHAUL_PROFILE=", bad.path())});
  EXPECT_THAT(err, StartsWith("NCCL_LONGHAUL_PROFILE: "));
  EXPECT_THAT(err, HasSubstr("window"));
}

TEST(NcclSettingsTest, AnInvalidConfigurationIsRefused) {
  // Fixed-rate pacing needs a rate.
  EXPECT_THAT(ReadError({"NCCL_LONGHAUL_CC=fixed", "NCCL_LONGHAUL_RATE=0"}),
              StartsWith("longhaul configuration from the environment: "));
}

TEST(NcclSettingsTest, InterfaceListFallsBackToNcclSocketIfname) {
  Settings s = MustRead({"NCCL_SOCKET_IFNAME=^docker"});
  EXPECT_EQ(s.ifname, "^docker");
  EXPECT_EQ(s.ifname_variable, "NCCL_SOCKET_IFNAME");
  s = MustRead({"NCCL_SOCKET_IFNAME=^docker", "NCCL_LONGHAUL_IFNAME=eth"});
  EXPECT_EQ(s.ifname, "eth");
  EXPECT_EQ(s.ifname_variable, "NCCL_LONGHAUL_IFNAME");
  s = MustRead({"NCCL_SOCKET_IFNAME="});
  EXPECT_EQ(s.ifname, "");
  EXPECT_EQ(s.ifname_variable, "");
}

// docs/nccl.md lists the settings as PluginSettingsMarkdown() renders them, between two
// marker lines. On a mismatch, paste the block the failure prints into the docs.
TEST(NcclSettingsTest, DocsListTheTable) {
  const std::string path = std::string(LONGHAUL_SOURCE_DIR) + "/docs/nccl.md";
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string begin_marker = "<!-- settings table: begin";
  const std::string end_marker = "<!-- settings table: end -->";
  const size_t b = doc.find(begin_marker);
  ASSERT_NE(b, std::string::npos) << path << " has no line starting " << begin_marker;
  const size_t body = doc.find('\n', b);
  ASSERT_NE(body, std::string::npos);
  const size_t e = doc.find(end_marker, body);
  ASSERT_NE(e, std::string::npos) << path << " has no " << end_marker;
  // Blank lines around the table do not count (markdown wants one before the comment).
  const absl::string_view listed =
      absl::StripAsciiWhitespace(absl::string_view(doc).substr(body + 1, e - body - 1));
  EXPECT_EQ(listed, absl::StripAsciiWhitespace(PluginSettingsMarkdown()))
      << "docs/nccl.md's settings table differs from the code's; the block should read:\n"
      << PluginSettingsMarkdown();
}

TEST(NcclSettingsTest, MarkdownHasOneRowPerSetting) {
  const std::string md = PluginSettingsMarkdown();
  EXPECT_THAT(md, StartsWith("| variable | type | default | meaning |\n| --- |"));
  size_t rows = 0;
  for (char c : md) rows += c == '\n';
  EXPECT_EQ(rows, 2 + PluginSettingSpecs().size());
  for (const SettingSpec& spec : PluginSettingSpecs()) {
    EXPECT_THAT(md, HasSubstr(absl::StrCat("| `NCCL_LONGHAUL_", spec.key, "` | ")));
  }
  EXPECT_THAT(md, HasSubstr("| `NCCL_LONGHAUL_LINGER` | duration in [0, 600s] | `5s` | "));
}

// ---- packet protection ----

class PluginKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    key_ = tmp_.Path("r0.key");
    public_key_ = ::longhaul::testing::WritePrivateKey(key_);
    peers_ = tmp_.Write("ranks.pub", crypto::ToHex(public_key_) + " rank-0\n");
    psk_ = tmp_.Path("job.psk");
    ::longhaul::testing::WritePsk(psk_);
    ASSERT_FALSE(HasFailure());
  }

  absl::StatusOr<crypto::LoadedKeys> Keys(std::initializer_list<std::string> entries) {
    absl::StatusOr<Settings> s = Read(entries);
    if (!s.ok()) return s.status();
    return LoadPluginKeys(*s);
  }
  std::string KeysError(std::initializer_list<std::string> entries) {
    absl::StatusOr<crypto::LoadedKeys> k = Keys(entries);
    EXPECT_FALSE(k.ok());
    if (k.ok()) return "";
    EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition) << k.status();
    return std::string(k.status().message());
  }

  ::longhaul::testing::TempDir tmp_{"nccl-keys-test"};
  const std::string dir_ = tmp_.path();
  std::string key_, peers_, psk_;
  crypto::Key32 public_key_;
};

TEST_F(PluginKeysTest, EveryModeFromTheVariables) {
  absl::StatusOr<crypto::LoadedKeys> k = Keys({"NCCL_LONGHAUL_INSECURE=1"});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->security.insecure);
  k = Keys({"NCCL_LONGHAUL_PSK_FILE=" + psk_});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->security.mode(), endpoint::SecurityMode::kPsk);
  k = Keys({"NCCL_LONGHAUL_KEY=" + key_, "NCCL_LONGHAUL_PEER_KEY=" + peers_});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->security.mode(), endpoint::SecurityMode::kStaticKeys);
  EXPECT_EQ(k->security.key->public_key, public_key_);
  EXPECT_EQ(k->peers.at(0).label, "rank-0");
  k = Keys({"NCCL_LONGHAUL_KEY=" + key_, "NCCL_LONGHAUL_PEER_KEY=" + peers_,
            "NCCL_LONGHAUL_PSK_FILE=" + psk_});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->security.mode(), endpoint::SecurityMode::kStaticKeysPsk);
}

TEST_F(PluginKeysTest, NoChoiceAndContradictionsNameTheVariables) {
  const std::string none =
      "no keys: give NCCL_LONGHAUL_KEY and NCCL_LONGHAUL_PEER_KEY, or NCCL_LONGHAUL_PSK_FILE, or "
      "NCCL_LONGHAUL_INSECURE=1 for plaintext";
  EXPECT_EQ(KeysError({}), none);
  EXPECT_EQ(KeysError({"NCCL_LONGHAUL_INSECURE=0"}), none);
  EXPECT_EQ(KeysError({"NCCL_LONGHAUL_INSECURE="}), none) << "an empty value is unset";
  EXPECT_EQ(ReadError({"NCCL_LONGHAUL_INSECURE=true"}),
            "NCCL_LONGHAUL_INSECURE=true: expected a 0 or 1");
  EXPECT_EQ(KeysError({"NCCL_LONGHAUL_INSECURE=1", "NCCL_LONGHAUL_PSK_FILE=" + psk_}),
            "NCCL_LONGHAUL_INSECURE=1 (plaintext) was chosen together with keys "
            "(NCCL_LONGHAUL_PSK_FILE): choose one");
  EXPECT_EQ(KeysError({"NCCL_LONGHAUL_PEER_KEY=" + peers_}),
            "NCCL_LONGHAUL_PEER_KEY was given without NCCL_LONGHAUL_KEY (this side's own private "
            "key)");
  chmod(key_.c_str(), 0640);
  EXPECT_EQ(
      KeysError({"NCCL_LONGHAUL_KEY=" + key_, "NCCL_LONGHAUL_PEER_KEY=" + peers_}),
      "NCCL_LONGHAUL_KEY: " + key_ + " is readable by its group (mode 0640): chmod 600 " + key_);
}

TEST_F(PluginKeysTest, TheProfileChoosesAndTheVariablesOverride) {
  TempProfile psk_profile("rate=2gbit\npsk_file=" + psk_ + "\n");
  absl::StatusOr<crypto::LoadedKeys> k = Keys({"NCCL_LONGHAUL_PROFILE=" + psk_profile.path()});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->security.mode(), endpoint::SecurityMode::kPsk);
  // INSECURE=1 drops the profile's key files; a key variable the profile's insecure.
  k = Keys({"NCCL_LONGHAUL_PROFILE=" + psk_profile.path(), "NCCL_LONGHAUL_INSECURE=1"});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->security.insecure);
  TempProfile plain("insecure=true\n");
  k = Keys({"NCCL_LONGHAUL_PROFILE=" + plain.path(), "NCCL_LONGHAUL_PSK_FILE=" + psk_});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->security.mode(), endpoint::SecurityMode::kPsk);
  k = Keys({"NCCL_LONGHAUL_PROFILE=" + psk_profile.path(), "NCCL_LONGHAUL_KEY=" + key_,
            "NCCL_LONGHAUL_PEER_KEY=" + peers_});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->security.mode(), endpoint::SecurityMode::kStaticKeysPsk);
  // A profile's file that is missing is named with its line.
  TempProfile broken("key=" + dir_ + "/none.key\npeer_key=" + peers_ + "\n");
  EXPECT_EQ(
      KeysError({"NCCL_LONGHAUL_PROFILE=" + broken.path()}),
      "key (" + broken.path() + ":1, NCCL_LONGHAUL_PROFILE): " + dir_ + "/none.key: no such file");
  // Its transport keys still apply; the security keys never reach the core's parser.
  absl::StatusOr<Settings> s = Read({"NCCL_LONGHAUL_PROFILE=" + psk_profile.path()});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->config.rate, Bandwidth::Gbps(2));
  EXPECT_EQ(s->profile_security.psk_file.value, psk_);
}

}  // namespace
}  // namespace longhaul::nccl
