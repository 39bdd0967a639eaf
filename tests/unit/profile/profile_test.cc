#include "transport/profile/profile.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

void ExpectConfigEq(const TransportConfig& a, const TransportConfig& b) {
  EXPECT_EQ(a.segment, b.segment);
  EXPECT_EQ(a.window, b.window);
  EXPECT_EQ(a.recv_window, b.recv_window);
  EXPECT_EQ(a.max_inflight_messages, b.max_inflight_messages);
  EXPECT_EQ(a.flows, b.flows);
  EXPECT_EQ(a.cc, b.cc);
  EXPECT_EQ(a.rate.bps(), b.rate.bps());
  EXPECT_EQ(a.rate_min.bps(), b.rate_min.bps());
  EXPECT_EQ(a.initial_rate.bps(), b.initial_rate.bps());
  EXPECT_EQ(a.ecn, b.ecn);
  EXPECT_EQ(a.tail_protect, b.tail_protect);
  EXPECT_EQ(a.pacing_burst, b.pacing_burst);
  EXPECT_EQ(a.reorder_packets, b.reorder_packets);
  EXPECT_EQ(a.reorder_rtt_fraction, b.reorder_rtt_fraction);
  EXPECT_EQ(a.initial_rtt, b.initial_rtt);
  EXPECT_EQ(a.min_pto, b.min_pto);
  EXPECT_EQ(a.max_pto, b.max_pto);
  EXPECT_EQ(a.ack_every, b.ack_every);
  EXPECT_EQ(a.max_ack_delay, b.max_ack_delay);
  EXPECT_EQ(a.max_ack_ranges, b.max_ack_ranges);
  EXPECT_EQ(a.fec, b.fec);
  EXPECT_EQ(a.fec_k, b.fec_k);
  EXPECT_EQ(a.fec_m, b.fec_m);
  EXPECT_EQ(a.fec_interleave, b.fec_interleave);
  EXPECT_EQ(a.fec_flush, b.fec_flush);
  EXPECT_EQ(a.idle_timeout, b.idle_timeout);
  EXPECT_EQ(a.keepalive, b.keepalive);
  // Catches fields added to TransportConfig but not to this helper or to the profile.
  EXPECT_EQ(ProfileKeyValues(a), ProfileKeyValues(b));
}

// A base that differs from the defaults in every field, so a round trip that forgot a
// key would show.
TransportConfig OddBase() {
  TransportConfig c;
  c.segment = 1000;
  c.window = 3000000;
  c.recv_window = 5000000;
  c.max_inflight_messages = 3;
  c.flows = 7;
  c.cc = CongestionControl::kBbr;
  c.rate = Bandwidth::BitsPerSecond(123456789);
  c.initial_rate = Bandwidth::BitsPerSecond(98765);
  c.ecn = !TransportConfig().ecn;
  c.tail_protect = !TransportConfig().tail_protect;
  c.pacing_burst = Duration::Nanoseconds(1);
  c.reorder_packets = 2;
  c.reorder_rtt_fraction = 3.5;
  c.initial_rtt = Duration::Nanoseconds(7);
  c.min_pto = Duration::Nanoseconds(9);
  c.max_pto = Duration::Nanoseconds(11);
  c.ack_every = 13;
  c.max_ack_delay = Duration::Nanoseconds(15);
  c.max_ack_ranges = 17;
  c.fec = FecMode::kAuto;
  c.fec_k = 19;
  c.fec_m = 21;
  c.fec_interleave = 23;
  c.fec_flush = Duration::Nanoseconds(25);
  c.idle_timeout = Duration::Nanoseconds(27);
  c.keepalive = Duration::Nanoseconds(29);
  return c;
}

absl::StatusOr<TransportConfig> Parse(absl::string_view text) {
  return ParseProfile(text, TransportConfig(), "tokyo.profile");
}

// ---------------------------------------------------------------- round trips

TEST(ProfileRoundTripTest, Defaults) {
  const TransportConfig defaults;
  ASSERT_TRUE(defaults.Validate().ok());
  ASSERT_TRUE(OddBase().Validate().ok()) << OddBase().Validate();
  absl::StatusOr<TransportConfig> back =
      ParseProfile(FormatProfile(defaults, "defaults"), OddBase(), "defaults.profile");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectConfigEq(*back, defaults);
}

TEST(ProfileRoundTripTest, OddValuesOverDefaults) {
  absl::StatusOr<TransportConfig> back =
      ParseProfile(FormatProfile(OddBase(), ""), TransportConfig(), "odd.profile");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectConfigEq(*back, OddBase());
}

TransportConfig RandomValidConfig(Rng& rng) {
  TransportConfig c;
  c.segment = 64 + rng.UniformInt(TransportConfig::kMaxSegment - 64 + 1);
  c.window = 2 * c.segment + rng.UniformInt(TransportConfig::kMaxWindow - 2 * c.segment);
  c.recv_window = 2 * c.segment + rng.UniformInt(1ULL << 32);
  c.max_inflight_messages = 1 + static_cast<uint32_t>(rng.UniformInt(1u << 24));
  c.flows = 1 + static_cast<uint32_t>(rng.UniformInt(256));
  c.cc = rng.Bernoulli(0.5) ? CongestionControl::kBbr : CongestionControl::kFixed;
  // Whole, round and fractional rates.
  switch (rng.UniformInt(3)) {
    case 0:
      c.rate = Bandwidth::BitsPerSecond(1 + static_cast<double>(rng.UniformInt(10000000000000ULL)));
      break;
    case 1:
      c.rate = Bandwidth::Mbps(1 + static_cast<double>(rng.UniformInt(1000000)));
      break;
    default:
      c.rate = Bandwidth::BitsPerSecond(1 + rng.Uniform() * 1e12);
      break;
  }
  c.ecn = rng.Bernoulli(0.5);
  c.tail_protect = rng.Bernoulli(0.5);
  c.pacing_burst = Duration::Nanoseconds(static_cast<int64_t>(rng.UniformInt(100000001)));
  c.reorder_packets = 1 + static_cast<uint32_t>(rng.UniformInt(1u << 20));
  c.reorder_rtt_fraction = rng.Uniform() * 4;
  c.initial_rtt = Duration::Nanoseconds(1 + static_cast<int64_t>(rng.UniformInt(60000000000ULL)));
  c.min_pto = Duration::Microseconds(1 + static_cast<int64_t>(rng.UniformInt(1000000)));
  c.max_pto = c.min_pto + Duration::Milliseconds(static_cast<int64_t>(rng.UniformInt(100000)));
  c.ack_every = 1 + static_cast<uint32_t>(rng.UniformInt(65536));
  c.max_ack_delay = Duration::Nanoseconds(static_cast<int64_t>(rng.UniformInt(1000000001)));
  c.max_ack_ranges = 1 + static_cast<uint32_t>(rng.UniformInt(4096));
  c.fec = static_cast<FecMode>(rng.UniformInt(3));
  c.fec_k = 1 + static_cast<uint32_t>(rng.UniformInt(200));
  c.fec_m = 1 + static_cast<uint32_t>(rng.UniformInt(255 - c.fec_k));
  c.fec_interleave = 1 + static_cast<uint32_t>(rng.UniformInt(1024));
  c.fec_flush = Duration::Nanoseconds(static_cast<int64_t>(rng.UniformInt(1ULL << 40)));
  c.idle_timeout = Duration::Nanoseconds(1 + static_cast<int64_t>(rng.UniformInt(1ULL << 50)));
  c.keepalive = Duration::Nanoseconds(1 + static_cast<int64_t>(rng.UniformInt(1ULL << 40)));
  return c;
}

TEST(ProfileRoundTripTest, RandomValidConfigs) {
  Rng rng(2718);
  for (int i = 0; i < 500; ++i) {
    const TransportConfig c = RandomValidConfig(rng);
    ASSERT_TRUE(c.Validate().ok()) << "generator made an invalid config: " << c.Validate();
    const std::string text = FormatProfile(c, absl::StrCat("random config ", i));
    absl::StatusOr<TransportConfig> back = ParseProfile(text, OddBase(), "random.profile");
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
    ExpectConfigEq(*back, c);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << text;
      break;
    }
  }
}

// ---------------------------------------------------------------- keys

TEST(ProfileKeysTest, KeyValuesListEveryKeyButMtuInAFixedOrder) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : ProfileKeyValues(TransportConfig())) keys.push_back(k);
  EXPECT_THAT(
      keys, ::testing::ElementsAre(
                "segment", "window", "recv_window", "max_inflight_messages", "flows", "cc",
                "rate", "rate_min", "initial_rate",
                "cc_loss_threshold", "cc_compete", "cc_yield", "ecn", "pacing_burst", "tail_protect",
                "reorder_packets",
                "reorder_rtt_fraction", "initial_rtt", "min_pto", "max_pto", "ack_every",
                "max_ack_delay", "max_ack_ranges", "fec", "fec_k", "fec_m", "fec_interleave",
                "fec_flush", "fec_tail", "fec_max_overhead", "idle_timeout", "keepalive"));
  std::vector<std::string> all = ProfileKeys();
  keys.push_back("mtu");
  EXPECT_EQ(all, keys);
}

TEST(ProfileKeysTest, CanonicalValuesOfTheDefaults) {
  std::map<std::string, std::string> kv;
  for (const auto& [k, v] : ProfileKeyValues(TransportConfig())) kv[k] = v;
  EXPECT_EQ(kv["segment"], "8KiB");
  EXPECT_EQ(kv["window"], "1GiB");
  EXPECT_EQ(kv["recv_window"], "4GiB");
  EXPECT_EQ(kv["cc"], "fixed");
  EXPECT_EQ(kv["rate"], "1gbit");
  EXPECT_EQ(kv["pacing_burst"], "1ms");
  EXPECT_EQ(kv["reorder_rtt_fraction"], "0.125");
  EXPECT_EQ(kv["initial_rtt"], "100ms");
  EXPECT_EQ(kv["max_pto"], "10s");
  EXPECT_EQ(kv["fec"], "off");
  EXPECT_EQ(kv["fec_k"], "32");
  EXPECT_EQ(kv["fec_m"], "4");
  EXPECT_EQ(kv["idle_timeout"], "30s");
}

struct KeyCase {
  const char* line;
  std::function<bool(const TransportConfig&)> check;
};

TEST(ProfileKeysTest, EveryKeyInHumanUnits) {
  const KeyCase cases[] = {
      {"segment=9000", [](const TransportConfig& c) { return c.segment == 9000; }},
      {"segment = 16KiB", [](const TransportConfig& c) { return c.segment == 16384; }},
      {"window=725MB", [](const TransportConfig& c) { return c.window == 725000000; }},
      {"recv_window=4GiB", [](const TransportConfig& c) { return c.recv_window == (4ULL << 30); }},
      {"max_inflight_messages=1000",
       [](const TransportConfig& c) { return c.max_inflight_messages == 1000; }},
      {"flows=8", [](const TransportConfig& c) { return c.flows == 8; }},
      {"cc=bbr", [](const TransportConfig& c) { return c.cc == CongestionControl::kBbr; }},
      {"cc=BBR", [](const TransportConfig& c) { return c.cc == CongestionControl::kBbr; }},
      {"cc=fixed", [](const TransportConfig& c) { return c.cc == CongestionControl::kFixed; }},
      {"rate=10gbit", [](const TransportConfig& c) { return c.rate.bps() == 10e9; }},
      {"rate=800mbit", [](const TransportConfig& c) { return c.rate.bps() == 800e6; }},
      {"ecn=off", [](const TransportConfig& c) { return !c.ecn; }},
      {"ecn=true", [](const TransportConfig& c) { return c.ecn; }},
      {"pacing_burst=250us",
       [](const TransportConfig& c) { return c.pacing_burst == Duration::Microseconds(250); }},
      {"reorder_packets=3", [](const TransportConfig& c) { return c.reorder_packets == 3; }},
      {"reorder_rtt_fraction=0.25",
       [](const TransportConfig& c) { return c.reorder_rtt_fraction == 0.25; }},
      {"reorder_rtt_fraction=12.5%",
       [](const TransportConfig& c) { return c.reorder_rtt_fraction == 0.125; }},
      {"reorder_rtt_fraction=2",
       [](const TransportConfig& c) { return c.reorder_rtt_fraction == 2; }},
      {"initial_rtt=58ms",
       [](const TransportConfig& c) { return c.initial_rtt == Duration::Milliseconds(58); }},
      {"min_pto=1ms",
       [](const TransportConfig& c) { return c.min_pto == Duration::Milliseconds(1); }},
      {"max_pto=2min",
       [](const TransportConfig& c) { return c.max_pto == Duration::Seconds(120); }},
      {"ack_every=2", [](const TransportConfig& c) { return c.ack_every == 2; }},
      {"max_ack_delay=500us",
       [](const TransportConfig& c) { return c.max_ack_delay == Duration::Microseconds(500); }},
      {"max_ack_ranges=256", [](const TransportConfig& c) { return c.max_ack_ranges == 256; }},
      {"fec=off", [](const TransportConfig& c) { return c.fec == FecMode::kOff; }},
      {"fec=auto",
       [](const TransportConfig& c) {
         return c.fec == FecMode::kAuto && c.fec_k == 32 && c.fec_m == 4;
       }},
      {"fec=16,2",
       [](const TransportConfig& c) {
         return c.fec == FecMode::kFixed && c.fec_k == 16 && c.fec_m == 2;
       }},
      {"fec = 64 , 8",
       [](const TransportConfig& c) {
         return c.fec == FecMode::kFixed && c.fec_k == 64 && c.fec_m == 8;
       }},
      {"fec=fixed",
       [](const TransportConfig& c) {
         return c.fec == FecMode::kFixed && c.fec_k == 32 && c.fec_m == 4;
       }},
      {"fec_k=10", [](const TransportConfig& c) { return c.fec_k == 10; }},
      {"fec_m=3", [](const TransportConfig& c) { return c.fec_m == 3; }},
      {"fec_interleave=4", [](const TransportConfig& c) { return c.fec_interleave == 4; }},
      {"fec_flush=2ms",
       [](const TransportConfig& c) { return c.fec_flush == Duration::Milliseconds(2); }},
      {"idle_timeout=1min",
       [](const TransportConfig& c) { return c.idle_timeout == Duration::Seconds(60); }},
      {"keepalive=500ms",
       [](const TransportConfig& c) { return c.keepalive == Duration::Milliseconds(500); }},
      {"mtu=1500",
       [](const TransportConfig& c) { return c.segment == TransportConfig::SegmentForMtu(1500); }},
      {"mtu=9000",
       [](const TransportConfig& c) { return c.segment == TransportConfig::SegmentForMtu(9000); }},
  };
  for (const KeyCase& kc : cases) {
    absl::StatusOr<TransportConfig> c = Parse(kc.line);
    ASSERT_TRUE(c.ok()) << kc.line << ": " << c.status();
    EXPECT_TRUE(kc.check(*c)) << kc.line;
    // ApplyProfileKey does the same for the split key and value.
    std::vector<std::string> kv = absl::StrSplit(kc.line, absl::MaxSplits('=', 1));
    TransportConfig direct;
    ASSERT_TRUE(ApplyProfileKey(&direct, kv[0], kv[1]).ok()) << kc.line;
    EXPECT_TRUE(kc.check(direct)) << kc.line;
  }
}

TEST(ProfileKeysTest, MtuGivesDatagramsThatFit) {
  for (ByteCount mtu : {ByteCount{170}, ByteCount{576}, ByteCount{1280}, ByteCount{1500},
                        ByteCount{4200}, ByteCount{9000}, ByteCount{65535}}) {
    TransportConfig c;
    ASSERT_TRUE(ApplyProfileKey(&c, "mtu", absl::StrCat(mtu)).ok()) << mtu;
    EXPECT_LE(c.MaxDatagramSize() + 28, mtu) << mtu;
  }
}

// ---------------------------------------------------------------- errors

TEST(ProfileErrorsTest, UnknownKeyNamesTheLineAndTheKnownKeys) {
  absl::StatusOr<TransportConfig> c = Parse("# tuned\nwindow=1GiB\n\nfoo=3\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("tokyo.profile:4: unknown key 'foo' (known keys: segment, window, "));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("keepalive, mtu)"));
  // Keys are case-sensitive field names.
  EXPECT_THAT(std::string(Parse("Window=1GiB").status().message()),
              HasSubstr("tokyo.profile:1: unknown key 'Window'"));
}

TEST(ProfileErrorsTest, BadValueNamesTheLineKeyAndAcceptedForm) {
  struct Case {
    const char* line;
    const char* form;
  };
  const Case cases[] = {
      {"segment=lots", "expected a number"},
      {"window=12x", "use B, KB, KiB"},
      {"recv_window=-1", "expected a number"},
      {"max_inflight_messages=-1", "whole number"},
      {"flows=1.5", "whole number"},
      {"cc=cubic", "expected fixed or bbr"},
      {"rate=10GB", "use bit, kbit, mbit, gbit or tbit"},
      {"ecn=maybe", "true/false"},
      {"reorder_packets=many", "whole number"},
      {"reorder_rtt_fraction=-0.5", "non-negative number"},
      {"reorder_rtt_fraction=abc", "non-negative number"},
      {"initial_rtt=58mss", "use ns, us, ms, s or min"},
      {"min_pto=soon", "expected a number with a unit"},
      {"max_pto=5h", "use ns, us, ms, s or min"},
      {"ack_every=4294967296", "whole number"},
      {"max_ack_delay=-1ms", "expected a number with a unit"},
      {"max_ack_ranges=x", "whole number"},
      {"fec=on", "expected off, auto, or K,M"},
      {"fec=32", "expected off, auto, or K,M"},
      {"fec=32,4,2", "expected off, auto, or K,M"},
      {"fec=a,b", "expected off, auto, or K,M"},
      {"fec=-1,4", "expected off, auto, or K,M"},
      {"fec_k=1e3", "whole number"},
      {"fec_m=", "whole number"},
      {"fec_interleave=two", "whole number"},
      {"fec_flush=1 fortnight", "use ns, us, ms, s or min"},
      {"idle_timeout=", "expected a number with a unit"},
      {"keepalive=5 s s", "use ns, us, ms, s or min"},
      {"mtu=100", "expected an IP MTU from 170 to 65536 bytes"},
      {"mtu=70000", "expected an IP MTU from 170 to 65536 bytes"},
      {"mtu=jumbo", "expected a number"},
  };
  for (const Case& c : cases) {
    const std::string text = absl::StrCat("# header\n\n", c.line, "\n");
    absl::StatusOr<TransportConfig> got = Parse(text);
    ASSERT_FALSE(got.ok()) << c.line;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    std::vector<std::string> kv = absl::StrSplit(c.line, absl::MaxSplits('=', 1));
    const std::string msg(got.status().message());
    EXPECT_THAT(msg, StartsWith(absl::StrCat("tokyo.profile:3: bad value '", kv[1], "' for '",
                                             kv[0], "': ")))
        << c.line;
    EXPECT_THAT(msg, HasSubstr(c.form)) << c.line;
  }
}

TEST(ProfileErrorsTest, ApplyProfileKeyErrors) {
  TransportConfig c;
  absl::Status s = ApplyProfileKey(&c, "window", "12x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("bad value '12x' for 'window': "));
  s = ApplyProfileKey(&c, "nope", "1");
  EXPECT_THAT(std::string(s.message()), StartsWith("unknown key 'nope' (known keys: segment,"));
  // A failed apply leaves the config untouched.
  const std::string before = FormatProfile(c, "");
  EXPECT_FALSE(ApplyProfileKey(&c, "fec", "32,x").ok());
  EXPECT_FALSE(ApplyProfileKey(&c, "mtu", "20").ok());
  EXPECT_EQ(FormatProfile(c, ""), before);
}

TEST(ProfileErrorsTest, LineWithoutEqualsNamesTheLine) {
  absl::StatusOr<TransportConfig> c = Parse("window=1GiB\nrate=10gbit\nsegm");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "tokyo.profile:3: expected key=value, got 'segm'");
  c = Parse("window 1GiB");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "tokyo.profile:1: expected key=value, got 'window 1GiB'");
  c = Parse("\n=5\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "tokyo.profile:2: missing key before '=' in '=5'");
}

TEST(ProfileErrorsTest, TruncatedFileErrorsAtTheCutLine) {
  // Cutting a valid profile inside a key (before its '=') or right after the '=' must
  // name the last line; cutting inside a value may still parse (a shorter value).
  const std::string full = FormatProfile(TransportConfig(), "truncation test");
  const std::vector<std::string> lines = absl::StrSplit(full, '\n');
  size_t offset = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) {
      offset += line.size() + 1;
      continue;
    }
    for (size_t cut : {size_t{1}, eq, eq + 1}) {
      const std::string text = full.substr(0, offset + cut);
      absl::StatusOr<TransportConfig> c = Parse(text);
      ASSERT_FALSE(c.ok()) << "accepted a profile cut to: ..." << line.substr(0, cut);
      EXPECT_THAT(std::string(c.status().message()),
                  StartsWith(absl::StrCat("tokyo.profile:", i + 1, ": ")))
          << c.status();
    }
    offset += line.size() + 1;
  }
}

TEST(ProfileErrorsTest, ValidationFailureNamesTheSourceAndField) {
  absl::StatusOr<TransportConfig> c = Parse("segment=32KiB\nwindow=32KiB\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("tokyo.profile: invalid configuration: window="));
  c = Parse("fec=200,100");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("tokyo.profile: invalid configuration: "));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("fec"));
  c = Parse("cc=fixed\nrate=0");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("rate"));
  // The same rate is fine for bbr (no cap).
  EXPECT_TRUE(Parse("cc=bbr\nrate=0").ok());
  // A floor above the cap.
  c = Parse("cc=bbr\nrate=1gbit\nrate_min=2gbit");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("rate_min"));
  absl::StatusOr<TransportConfig> bounded = Parse("cc=bbr\nrate=1050mbit\nrate_min=500mbit");
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(bounded->rate_min, Bandwidth::Mbps(500));
  // The first round trip's rate: zero (the initial packets only) to 10 Tbit/s, and not
  // bounded by `rate` (the cap still applies to the pacing).
  absl::StatusOr<TransportConfig> initial = Parse("cc=bbr\nrate=50mbit\ninitial_rate=0");
  ASSERT_TRUE(initial.ok()) << initial.status();
  EXPECT_TRUE(initial->initial_rate.IsZero());
  EXPECT_EQ(Parse("cc=bbr\nrate=50mbit\ninitial_rate=1gbit")->initial_rate, Bandwidth::Gbps(1));
  c = Parse("cc=bbr\ninitial_rate=20tbit");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("initial_rate"));
}

TEST(ProfileErrorsTest, MtuAndSegmentTogetherAreAmbiguous) {
  absl::StatusOr<TransportConfig> c = Parse("mtu=9000\nwindow=1GiB\nsegment=8KiB\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "tokyo.profile:3: 'mtu' and 'segment' are both set (lines 1 and 3); mtu derives "
            "segment, so keep one");
}

// ---------------------------------------------------------------- syntax

TEST(ProfileSyntaxTest, CommentsWhitespaceAndLineEndings) {
  const std::string text =
      "# a tuned profile\r\n"
      "   # indented comment\n"
      "\n"
      "\t\n"
      "  window =   512MiB   # trailing comment\r\n"
      "rate=5gbit#no space before the comment\n"
      "fec=8,2\n"
      "# last line without newline follows\n"
      "cc = bbr";
  absl::StatusOr<TransportConfig> c = Parse(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, 512ULL << 20);
  EXPECT_EQ(c->rate.bps(), 5e9);
  EXPECT_EQ(c->fec, FecMode::kFixed);
  EXPECT_EQ(c->fec_k, 8u);
  EXPECT_EQ(c->cc, CongestionControl::kBbr);
  // Untouched keys keep the base values.
  EXPECT_EQ(c->segment, TransportConfig().segment);
}

TEST(ProfileSyntaxTest, EmptyProfileIsTheValidatedBase) {
  absl::StatusOr<TransportConfig> c = ParseProfile("", OddBase(), "empty");
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectConfigEq(*c, OddBase());
  TransportConfig bad;
  bad.window = 1;
  c = ParseProfile("# nothing\n", bad, "empty");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith("empty: invalid configuration: window"));
}

TEST(ProfileSyntaxTest, LaterLinesOverrideEarlierOnes) {
  absl::StatusOr<TransportConfig> c = Parse("window=1GiB\nwindow=2GiB\nfec=16,2\nfec_k=20\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, 2ULL << 30);
  EXPECT_EQ(c->fec_k, 20u);
  EXPECT_EQ(c->fec_m, 2u);
}

TEST(FormatProfileTest, HeaderCommentLinesThenKeyValues) {
  const std::string text =
      FormatProfile(TransportConfig(), "tuned by longhaul-tune\nlink: tokyo\n\nrtt 58ms\n");
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[0], "# tuned by longhaul-tune");
  EXPECT_EQ(lines[1], "# link: tokyo");
  EXPECT_EQ(lines[2], "#");
  EXPECT_EQ(lines[3], "# rtt 58ms");
  EXPECT_EQ(lines[4], "segment=8KiB");
  EXPECT_EQ(lines.back(), "");  // ends with a newline
  const size_t kv = ProfileKeyValues(TransportConfig()).size();
  EXPECT_EQ(lines.size(), 4 + kv + 1);
  // No header: only key=value lines.
  const std::string bare = FormatProfile(TransportConfig(), "");
  EXPECT_THAT(bare, StartsWith("segment=8KiB\nwindow=1GiB\n"));
}

}  // namespace
}  // namespace longhaul
