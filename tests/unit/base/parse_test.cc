#include "transport/base/parse.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------- sizes

TEST(ParseByteCountTest, EveryUnit) {
  struct Case {
    const char* text;
    ByteCount bytes;
  };
  const Case cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"7B", 7},
      {"7b", 7},
      {"4k", 4000},
      {"4K", 4000},
      {"4KB", 4000},
      {"4kb", 4000},
      {"4Ki", 4096},
      {"4KiB", 4096},
      {"4kib", 4096},
      {"3M", 3000000},
      {"3MB", 3000000},
      {"3Mi", 3 << 20},
      {"3MiB", 3 << 20},
      {"2G", 2000000000},
      {"2GB", 2000000000},
      {"2Gi", 2ULL << 30},
      {"20GiB", 20ULL << 30},
      {"5T", 5000000000000ULL},
      {"5TB", 5000000000000ULL},
      {"5Ti", 5ULL << 40},
      {"5TiB", 5ULL << 40},
      {"1.5KiB", 1536},
      {"0.5k", 500},
      {"1e3", 1000},
      {"2.5e2KB", 250000},
      {"  64MiB  ", 64ULL << 20},
      {"64 MiB", 64ULL << 20},
      {"1.5", 2},  // rounded to whole bytes
  };
  for (const Case& c : cases) {
    absl::StatusOr<ByteCount> got = ParseByteCount(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.bytes) << c.text;
  }
}

TEST(ParseByteCountTest, LargeValuesAreExact) {
  EXPECT_EQ(*ParseByteCount("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*ParseByteCount("9007199254740993"), 9007199254740993ULL);  // 2^53 + 1
  EXPECT_EQ(*ParseByteCount("16777215TiB"), 16777215ULL << 40);
  // Between 2^63 and 2^64: must not wrap or saturate.
  EXPECT_EQ(*ParseByteCount("10000000TB"), 10000000000000000000ULL);
  EXPECT_EQ(*ParseByteCount("1e19"), 10000000000000000000ULL);
}

TEST(ParseByteCountTest, Errors) {
  for (const char* text : {"", "   ", "abc", "MiB", "-1", "-1KiB", ".", "1x", "12x", "1KiBB",
                           "1 K i B", "0x10", "inf", "nan", "1e400"}) {
    absl::StatusOr<ByteCount> got = ParseByteCount(text);
    ASSERT_FALSE(got.ok()) << "'" << text << "' parsed as " << *got;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(std::string("'") + text + "'"));
  }
  EXPECT_THAT(std::string(ParseByteCount("12x").status().message()),
              HasSubstr("use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB"));
  EXPECT_THAT(std::string(ParseByteCount("abc").status().message()),
              HasSubstr("expected a number with an optional unit"));
}

TEST(ParseByteCountTest, TooLarge) {
  for (const char* text : {"18446744073709551616", "16777216TiB", "2e19", "20000000TB"}) {
    absl::StatusOr<ByteCount> got = ParseByteCount(text);
    ASSERT_FALSE(got.ok()) << text << " parsed as " << *got;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("too large")) << text;
  }
}

TEST(FormatByteCountTest, CanonicalForms) {
  EXPECT_EQ(FormatByteCount(0), "0");
  EXPECT_EQ(FormatByteCount(1), "1");
  EXPECT_EQ(FormatByteCount(1000), "1000");
  EXPECT_EQ(FormatByteCount(1024), "1KiB");
  EXPECT_EQ(FormatByteCount(1536), "1536");
  EXPECT_EQ(FormatByteCount(8192), "8KiB");
  EXPECT_EQ(FormatByteCount(64ULL << 20), "64MiB");
  EXPECT_EQ(FormatByteCount(1ULL << 30), "1GiB");
  EXPECT_EQ(FormatByteCount(3ULL << 40), "3TiB");
  EXPECT_EQ(FormatByteCount(1025ULL << 30), "1025GiB");
}

TEST(FormatByteCountTest, RoundTrips) {
  Rng rng(3);
  const ByteCount fixed[] = {0,
                             1,
                             1023,
                             1024,
                             65536 - 512,
                             1ULL << 53,
                             (1ULL << 53) + 1,
                             std::numeric_limits<uint64_t>::max(),
                             1ULL << 63};
  for (ByteCount b : fixed) {
    absl::StatusOr<ByteCount> back = ParseByteCount(FormatByteCount(b));
    ASSERT_TRUE(back.ok()) << b << ": " << back.status();
    EXPECT_EQ(*back, b) << FormatByteCount(b);
  }
  for (int i = 0; i < 5000; ++i) {
    ByteCount b = rng.Next() >> rng.UniformInt(64);
    if (i % 2) b &= ~((1ULL << rng.UniformInt(41)) - 1);  // many multiples of powers of 2
    absl::StatusOr<ByteCount> back = ParseByteCount(FormatByteCount(b));
    ASSERT_TRUE(back.ok()) << b << ": " << back.status();
    ASSERT_EQ(*back, b) << FormatByteCount(b);
  }
}

// ---------------------------------------------------------------- durations

TEST(ParseDurationTest, EveryUnit) {
  struct Case {
    const char* text;
    int64_t ns;
  };
  const Case cases[] = {
      {"0", 0},
      {"2", 2000000000},
      {"2s", 2000000000},
      {"2sec", 2000000000},
      {"2S", 2000000000},
      {"58ms", 58000000},
      {"58MS", 58000000},
      {"300us", 300000},
      {"17ns", 17},
      {"2m", 120000000000},
      {"2min", 120000000000},
      {"1.5ms", 1500000},
      {"0.25s", 250000000},
      {"1e-3s", 1000000},
      {" 100 ms ", 100000000},
      {"0.4ns", 0},  // rounded to whole nanoseconds
  };
  for (const Case& c : cases) {
    absl::StatusOr<Duration> got = ParseDuration(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(got->ns(), c.ns) << c.text;
  }
}

TEST(ParseDurationTest, Errors) {
  for (const char* text : {"", "ms", "-1ms", "-0.5s", "5h", "5d", "5 m s", "fast", "1e400s"}) {
    absl::StatusOr<Duration> got = ParseDuration(text);
    ASSERT_FALSE(got.ok()) << "'" << text << "' parsed as " << got->ns();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(std::string("'") + text + "'"));
  }
  EXPECT_THAT(std::string(ParseDuration("5h").status().message()),
              HasSubstr("use ns, us, ms, s or min"));
  EXPECT_THAT(std::string(ParseDuration("ms").status().message()),
              HasSubstr("expected a number with a unit"));
}

TEST(ParseDurationTest, TooLong) {
  EXPECT_TRUE(ParseDuration("9000000000000000000ns").ok());
  for (const char* text :
       {"9000000000000000001ns", "1e10s", "300000000min", "18446744073709551615s"}) {
    absl::StatusOr<Duration> got = ParseDuration(text);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("too long")) << text;
  }
}

TEST(FormatDurationTest, CanonicalFormsRoundTrip) {
  EXPECT_EQ(FormatDuration(Duration::Zero()), "0ns");
  EXPECT_EQ(FormatDuration(Duration::Milliseconds(58)), "58ms");
  EXPECT_EQ(FormatDuration(Duration::Microseconds(1500)), "1500us");
  EXPECT_EQ(FormatDuration(Duration::Seconds(30)), "30s");
  EXPECT_EQ(FormatDuration(Duration::Nanoseconds(1234567)), "1234567ns");
  Rng rng(5);
  for (int i = 0; i < 5000; ++i) {
    int64_t ns = static_cast<int64_t>(rng.UniformInt(9000000000000000001ULL >> rng.UniformInt(60)));
    Duration d = Duration::Nanoseconds(ns);
    absl::StatusOr<Duration> back = ParseDuration(FormatDuration(d));
    ASSERT_TRUE(back.ok()) << ns << ": " << back.status();
    ASSERT_EQ(back->ns(), ns) << FormatDuration(d);
  }
}

// ---------------------------------------------------------------- rates

TEST(ParseBandwidthTest, EveryUnit) {
  struct Case {
    const char* text;
    double bps;
  };
  const Case cases[] = {
      {"0", 0},       {"1500", 1500},   {"1500bit", 1500}, {"1500bps", 1500},  {"5k", 5e3},
      {"5kbit", 5e3}, {"5kbps", 5e3},   {"800m", 800e6},   {"800mbit", 800e6}, {"800Mbps", 800e6},
      {"10g", 10e9},  {"10gbit", 10e9}, {"10Gbit", 10e9},  {"10gbps", 10e9},   {"100gbit", 100e9},
      {"2t", 2e12},   {"2tbit", 2e12},  {"2tbps", 2e12},   {"2.5gbit", 2.5e9}, {" 1 gbit ", 1e9},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Bandwidth> got = ParseBandwidth(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_DOUBLE_EQ(got->bps(), c.bps) << c.text;
  }
}

TEST(ParseBandwidthTest, Errors) {
  for (const char* text : {"", "gbit", "-1gbit", "10gb", "10GB/s", "10x", "fast", "1e400"}) {
    absl::StatusOr<Bandwidth> got = ParseBandwidth(text);
    ASSERT_FALSE(got.ok()) << "'" << text << "' parsed as " << got->bps();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(std::string("'") + text + "'"));
  }
  EXPECT_THAT(std::string(ParseBandwidth("10gb").status().message()),
              HasSubstr("use bit, kbit, mbit, gbit or tbit"));
}

TEST(FormatBandwidthTest, CanonicalFormsRoundTrip) {
  EXPECT_EQ(FormatBandwidth(Bandwidth::Zero()), "0bit");
  EXPECT_EQ(FormatBandwidth(Bandwidth::Gbps(100)), "100gbit");
  EXPECT_EQ(FormatBandwidth(Bandwidth::Gbps(9.5)), "9500mbit");
  EXPECT_EQ(FormatBandwidth(Bandwidth::Mbps(800)), "800mbit");
  EXPECT_EQ(FormatBandwidth(Bandwidth::BitsPerSecond(4e12)), "4tbit");
  EXPECT_EQ(FormatBandwidth(Bandwidth::BitsPerSecond(12345)), "12345bit");
  EXPECT_EQ(FormatBandwidth(Bandwidth::BitsPerSecond(2.5)), "2.5bit");
  Rng rng(11);
  for (int i = 0; i < 5000; ++i) {
    double bps = rng.Uniform() * 1e13;
    if (i % 3 == 0) bps = std::round(bps);
    if (i % 3 == 1) bps = std::round(bps / 1e6) * 1e6;
    Bandwidth b = Bandwidth::BitsPerSecond(bps);
    absl::StatusOr<Bandwidth> back = ParseBandwidth(FormatBandwidth(b));
    ASSERT_TRUE(back.ok()) << bps << ": " << back.status();
    ASSERT_EQ(back->bps(), bps) << FormatBandwidth(b);
  }
}

// ---------------------------------------------------------------- fractions, integers, bools

TEST(ParseFractionTest, ValuesAndErrors) {
  EXPECT_DOUBLE_EQ(*ParseFraction("0"), 0);
  EXPECT_DOUBLE_EQ(*ParseFraction("1"), 1);
  EXPECT_DOUBLE_EQ(*ParseFraction("0.001"), 0.001);
  EXPECT_DOUBLE_EQ(*ParseFraction("1e-3"), 0.001);
  EXPECT_DOUBLE_EQ(*ParseFraction("1E-6"), 1e-6);
  EXPECT_DOUBLE_EQ(*ParseFraction("0.1%"), 0.001);
  EXPECT_DOUBLE_EQ(*ParseFraction("100%"), 1);
  EXPECT_DOUBLE_EQ(*ParseFraction("50 %"), 0.5);
  for (const char* text : {"", "%", "abc", "0.1x", "1.5", "101%", "-0.1", "-1%"}) {
    absl::StatusOr<double> got = ParseFraction(text);
    ASSERT_FALSE(got.ok()) << "'" << text << "'";
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(std::string("'") + text + "'"));
  }
  EXPECT_THAT(std::string(ParseFraction("1.5").status().message()), HasSubstr("outside [0, 1]"));
  EXPECT_THAT(std::string(ParseFraction("0.1x").status().message()),
              HasSubstr("expected a probability"));
}

TEST(ParseIntegerTest, ValuesAndErrors) {
  EXPECT_EQ(*ParseInteger("0"), 0);
  EXPECT_EQ(*ParseInteger("42"), 42);
  EXPECT_EQ(*ParseInteger(" 42 "), 42);
  EXPECT_EQ(*ParseInteger("-7"), -7);
  EXPECT_EQ(*ParseInteger("9223372036854775807"), std::numeric_limits<int64_t>::max());
  for (const char* text : {"", "x", "4.5", "1e3", "12x", "9223372036854775808", "0x10"}) {
    absl::StatusOr<int64_t> got = ParseInteger(text);
    ASSERT_FALSE(got.ok()) << "'" << text << "'";
    EXPECT_EQ(got.status().message(), std::string("bad integer '") + text + "'");
  }
}

TEST(ParseBoolTest, ValuesAndErrors) {
  for (const char* t : {"1", "true", "TRUE", "yes", "Yes", "on", " on "}) {
    ASSERT_TRUE(ParseBool(t).ok()) << t;
    EXPECT_TRUE(*ParseBool(t)) << t;
  }
  for (const char* t : {"0", "false", "False", "no", "off"}) {
    ASSERT_TRUE(ParseBool(t).ok()) << t;
    EXPECT_FALSE(*ParseBool(t)) << t;
  }
  for (const char* t : {"", "2", "maybe", "y", "n"}) {
    absl::StatusOr<bool> got = ParseBool(t);
    ASSERT_FALSE(got.ok()) << t;
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("use true/false, yes/no, on/off or 1/0"));
  }
}

TEST(PrintableTextTest, NetworkTextCannotForgeLines) {
  EXPECT_EQ(PrintableText("server busy: 3 connections"), "server busy: 3 connections");
  EXPECT_EQ(PrintableText("no\nE1205 forged line"), "no\\x0aE1205 forged line");
  EXPECT_EQ(PrintableText(std::string("a\0b\x1b[2Jc\\d\xff", 11)),
            "a\\x00b\\x1b[2Jc\\\\d\\xff");
  EXPECT_EQ(PrintableText(""), "");
}

// CPU lists (--engine_cpus, NCCL_LONGHAUL_ENGINE_CPUS): numbers and ranges in order;
// every malformed item named.
TEST(ParseTest, CpuLists) {
  auto ok = [](const char* text) {
    absl::StatusOr<std::vector<int>> v = ParseCpuList(text);
    EXPECT_TRUE(v.ok()) << text << ": " << v.status();
    return v.ok() ? *v : std::vector<int>{};
  };
  EXPECT_EQ(ok("0"), std::vector<int>({0}));
  EXPECT_EQ(ok("3,1"), std::vector<int>({3, 1}));
  EXPECT_EQ(ok("0,2,4-6"), std::vector<int>({0, 2, 4, 5, 6}));
  EXPECT_EQ(ok("7-7,1023"), std::vector<int>({7, 1023}));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty CPU list"},
      {"0,,1", "empty item in '0,,1'"},
      {"1,", "empty item in '1,'"},
      {"x", "bad CPU 'x' in 'x'"},
      {"1, 2", "bad CPU ' 2' in '1, 2'"},
      {"-1", "bad CPU '-1' in '-1': CPUs are numbered from 0"},
      {"5-3", "range '5-3' in '5-3' runs backwards"},
      {"1-", "bad CPU '' in '1-'"},
      {"1-2-3", "bad CPU '2-3' in '1-2-3'"},
      {"1024", "CPU 1024 in '1024' is not below 1024"},
      {"99999", "bad CPU '99999'"},
      {"0-1023,0", "names more than 1024 CPUs"},
  };
  for (const auto& [text, want] : bad) {
    absl::StatusOr<std::vector<int>> v = ParseCpuList(text);
    ASSERT_FALSE(v.ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(want)) << text;
  }
}

}  // namespace
}  // namespace longhaul
