// longhaul-bridge's pure code (tools/bridge/bridge_frames.h, bridge_config.h,
// bridge_metrics.h): every frame type round-trips through the encoder and DecodeFrame,
// every malformed message is refused with a message naming the problem; forwards files
// parse (comments, blanks, tabs) and their errors name FILE:LINE; the metrics text is
// the Prometheus text format (HELP and TYPE for each family, escaped label values).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_frames.h"
#include "tools/bridge/bridge_metrics.h"

namespace longhaul::bridge {
namespace {

using ::testing::HasSubstr;

using Bytes = std::vector<uint8_t>;

Bytes ToBytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

absl::StatusOr<Frame> Decode(const Bytes& b) { return DecodeFrame(std::span<const uint8_t>(b)); }

// A 17-byte header with any type byte, stream and value, plus `body` bytes of 'x'.
Bytes RawFrame(uint8_t type, uint64_t stream, uint64_t value, size_t body = 0) {
  Bytes b(kFrameHeaderSize + body, 'x');
  WriteFrameHeader(static_cast<FrameType>(type), stream, value, b.data());
  return b;
}

// ---------------------------------------------------------------- frames: layout

TEST(BridgeFramesTest, HeaderLayoutIsBigEndian) {
  Bytes b(kFrameHeaderSize);
  WriteFrameHeader(FrameType::kData, 0x0102030405060708ULL, 0x1112131415161718ULL, b.data());
  const Bytes want = {2,    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
  EXPECT_EQ(b, want);
  // EncodeFrame writes the same header, then the body.
  const std::string e = EncodeFrame(FrameType::kReset, 0x0102030405060708ULL, 4, "why");
  ASSERT_EQ(e.size(), kFrameHeaderSize + 3);
  EXPECT_EQ(static_cast<uint8_t>(e[0]), 4);
  EXPECT_EQ(static_cast<uint8_t>(e[1]), 0x01);
  EXPECT_EQ(static_cast<uint8_t>(e[8]), 0x08);
  EXPECT_EQ(static_cast<uint8_t>(e[16]), 4);
  EXPECT_EQ(e.substr(kFrameHeaderSize), "why");
}

TEST(BridgeFramesTest, TypeAndResetCodeNames) {
  EXPECT_STREQ(FrameTypeName(FrameType::kOpen), "OPEN");
  EXPECT_STREQ(FrameTypeName(FrameType::kData), "DATA");
  EXPECT_STREQ(FrameTypeName(FrameType::kFin), "FIN");
  EXPECT_STREQ(FrameTypeName(FrameType::kReset), "RESET");
  EXPECT_STREQ(FrameTypeName(FrameType::kWindow), "WINDOW");
  EXPECT_STREQ(FrameTypeName(FrameType::kGoAway), "GOAWAY");
  EXPECT_STREQ(FrameTypeName(static_cast<FrameType>(9)), "unknown");
  EXPECT_STREQ(ResetCodeName(ResetCode::kAborted), "aborted");
  EXPECT_STREQ(ResetCodeName(ResetCode::kTargetRefused), "target_refused");
  EXPECT_STREQ(ResetCodeName(ResetCode::kTargetUnreachable), "target_unreachable");
  EXPECT_STREQ(ResetCodeName(ResetCode::kUnknownForward), "unknown_forward");
  EXPECT_STREQ(ResetCodeName(ResetCode::kDraining), "draining");
  EXPECT_STREQ(ResetCodeName(ResetCode::kLimit), "limit");
  EXPECT_STREQ(ResetCodeName(ResetCode::kSessionLost), "session_lost");
  // A code from a newer peer still gets a label (the metrics use it).
  EXPECT_STREQ(ResetCodeName(static_cast<ResetCode>(99)), "other");
}

// ---------------------------------------------------------------- frames: round trips

struct RoundTripCase {
  FrameType type;
  uint64_t stream;
  uint64_t value;
  std::string body;
};

TEST(BridgeFramesTest, EveryTypeRoundTripsThroughEncodeFrame) {
  const std::vector<RoundTripCase> cases = {
      {FrameType::kOpen, 1, 256 * 1024, "default"},
      {FrameType::kOpen, ~0ULL, ~0ULL, std::string(kMaxForwardName, 'n')},
      {FrameType::kFin, 7, 1, ""},
      {FrameType::kFin, 7, ~0ULL, ""},
      {FrameType::kReset, 3, static_cast<uint64_t>(ResetCode::kTargetRefused),
       "target 127.0.0.1:9: Connection refused"},
      {FrameType::kReset, 3, 0, ""},
      {FrameType::kReset, 3, 12345, std::string(kMaxReason, 'r')},
      {FrameType::kWindow, 9, 32ULL << 20, ""},
      {FrameType::kWindow, 9, 0, ""},
      {FrameType::kGoAway, 0, 0, "server bridge is shutting down"},
      {FrameType::kGoAway, 0, 0, ""},
      {FrameType::kGoAway, 0, 0, std::string(kMaxReason, 'g')},
  };
  for (const RoundTripCase& c : cases) {
    SCOPED_TRACE(absl::StrCat(FrameTypeName(c.type), " stream=", c.stream, " value=", c.value,
                              " body=", c.body.size()));
    const Bytes b = ToBytes(EncodeFrame(c.type, c.stream, c.value, c.body));
    ASSERT_EQ(b.size(), kFrameHeaderSize + c.body.size());
    absl::StatusOr<Frame> f = Decode(b);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->type, c.type);
    EXPECT_EQ(f->stream, c.stream);
    EXPECT_EQ(f->value, c.value);
    EXPECT_EQ(f->text(), c.body);
    // The body is a view into the message, not a copy.
    EXPECT_EQ(f->body.data(), b.data() + kFrameHeaderSize);
  }
}

TEST(BridgeFramesTest, DataRoundTripsThroughWriteFrameHeader) {
  for (size_t payload : {size_t{0}, size_t{1}, size_t{1000}, size_t{64 * 1024}}) {
    SCOPED_TRACE(payload);
    Bytes b(kFrameHeaderSize + payload);
    for (size_t i = 0; i < payload; ++i) b[kFrameHeaderSize + i] = static_cast<uint8_t>(i * 7);
    WriteFrameHeader(FrameType::kData, 42, 5, b.data());
    absl::StatusOr<Frame> f = Decode(b);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->type, FrameType::kData);
    EXPECT_EQ(f->stream, 42u);
    EXPECT_EQ(f->value, 5u);
    ASSERT_EQ(f->body.size(), payload);
    EXPECT_TRUE(std::equal(f->body.begin(), f->body.end(), b.begin() + kFrameHeaderSize));
  }
}

TEST(BridgeFramesTest, EncodeFrameCutsBodiesToTheLimits) {
  absl::StatusOr<Frame> open =
      Decode(ToBytes(EncodeFrame(FrameType::kOpen, 1, 1, std::string(300, 'a'))));
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->body.size(), kMaxForwardName);
  for (FrameType t : {FrameType::kReset, FrameType::kGoAway}) {
    const uint64_t stream = t == FrameType::kGoAway ? 0 : 1;
    absl::StatusOr<Frame> f = Decode(ToBytes(EncodeFrame(t, stream, 1, std::string(5000, 'z'))));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->body.size(), kMaxReason);
  }
}

// ---------------------------------------------------------------- frames: refusals

void ExpectRefused(const Bytes& b, const std::string& message) {
  absl::StatusOr<Frame> f = Decode(b);
  ASSERT_FALSE(f.ok()) << "decoded a malformed frame of " << b.size() << " bytes";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.status().message(), message);
}

TEST(BridgeFramesTest, RefusesAnEmptyMessage) {
  ExpectRefused({}, "malformed bridge frame: empty message");
}

TEST(BridgeFramesTest, RefusesUnknownTypes) {
  for (int t : {0, 7, 8, 0x80, 0xFF}) {
    SCOPED_TRACE(t);
    ExpectRefused(RawFrame(static_cast<uint8_t>(t), 1, 1),
                  absl::StrCat("malformed bridge frame: unknown type ", t));
    // Even a lone type byte is refused for its type first.
    ExpectRefused(Bytes{static_cast<uint8_t>(t)},
                  absl::StrCat("malformed bridge frame: unknown type ", t));
  }
}

TEST(BridgeFramesTest, RefusesATruncatedHeaderOfEveryType) {
  for (int t = 1; t <= 6; ++t) {
    const Bytes whole = ToBytes(EncodeFrame(static_cast<FrameType>(t), t == 6 ? 0 : 1, 1, "n"));
    for (size_t n = 1; n < kFrameHeaderSize; ++n) {
      SCOPED_TRACE(absl::StrCat("type ", t, " size ", n));
      ExpectRefused(Bytes(whole.begin(), whole.begin() + n),
                    absl::StrCat("malformed bridge ", FrameTypeName(static_cast<FrameType>(t)),
                                 " frame: truncated header (", n, " of 17 bytes)"));
    }
  }
}

TEST(BridgeFramesTest, RefusesStreamZeroWhereAStreamIsNeeded) {
  for (FrameType t : {FrameType::kOpen, FrameType::kData, FrameType::kFin, FrameType::kReset,
                      FrameType::kWindow}) {
    SCOPED_TRACE(FrameTypeName(t));
    ExpectRefused(
        ToBytes(EncodeFrame(t, 0, 1, t == FrameType::kOpen ? "default" : "")),
        absl::StrCat("malformed bridge ", FrameTypeName(t), " frame: stream 0 is not a stream"));
  }
}

TEST(BridgeFramesTest, RefusesGoAwayWithAStream) {
  ExpectRefused(ToBytes(EncodeFrame(FrameType::kGoAway, 1, 0, "bye")),
                "malformed bridge GOAWAY frame: stream must be 0");
  ExpectRefused(ToBytes(EncodeFrame(FrameType::kGoAway, ~0ULL, 0)),
                "malformed bridge GOAWAY frame: stream must be 0");
}

TEST(BridgeFramesTest, RefusesOpenWithoutANameOrWithANameTooLong) {
  ExpectRefused(ToBytes(EncodeFrame(FrameType::kOpen, 1, 1)),
                "malformed bridge OPEN frame: no forward name");
  ExpectRefused(RawFrame(1, 1, 1, kMaxForwardName + 1),
                "malformed bridge OPEN frame: forward name too long");
  ExpectRefused(RawFrame(1, 1, 1, 4000), "malformed bridge OPEN frame: forward name too long");
  // The limit itself is fine.
  EXPECT_TRUE(Decode(RawFrame(1, 1, 1, kMaxForwardName)).ok());
}

TEST(BridgeFramesTest, RefusesSequenceZeroOnDataAndFin) {
  ExpectRefused(RawFrame(2, 1, 0, 10),
                "malformed bridge DATA frame: sequence number 0 belongs to OPEN");
  ExpectRefused(RawFrame(2, 1, 0),
                "malformed bridge DATA frame: sequence number 0 belongs to OPEN");
  ExpectRefused(RawFrame(3, 1, 0), "malformed bridge FIN frame: sequence number 0 belongs to OPEN");
}

TEST(BridgeFramesTest, RefusesABodyOnFinAndWindow) {
  for (size_t body : {size_t{1}, size_t{100}}) {
    ExpectRefused(RawFrame(3, 1, 1, body), "malformed bridge FIN frame: unexpected body");
    ExpectRefused(RawFrame(5, 1, 1, body), "malformed bridge WINDOW frame: unexpected body");
  }
}

TEST(BridgeFramesTest, RefusesAReasonTooLong) {
  ExpectRefused(RawFrame(4, 1, 1, kMaxReason + 1), "malformed bridge RESET frame: reason too long");
  ExpectRefused(RawFrame(6, 0, 0, kMaxReason + 1),
                "malformed bridge GOAWAY frame: reason too long");
  EXPECT_TRUE(Decode(RawFrame(4, 1, 1, kMaxReason)).ok());
  EXPECT_TRUE(Decode(RawFrame(6, 0, 0, kMaxReason)).ok());
}

// ---------------------------------------------------------------- forwards files

TEST(BridgeForwardsTest, ParsesCommentsBlanksAndTabs) {
  const std::string text =
      "# forwards of the test\n"
      "\n"
      "db 127.0.0.1:5432\n"
      "   \t  \n"
      "\tweb\t\t10.0.0.1:80   # the web tier\n"
      "  cache   [::1]:6379\r\n"
      "a.b_c-9 localhost:1#no space before the comment\n"
      "# the end";
  absl::StatusOr<std::vector<Forward>> f = ParseForwards(text, "site.fwd");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->size(), 4u);
  EXPECT_EQ((*f)[0].name, "db");
  EXPECT_EQ((*f)[0].host, "127.0.0.1");
  EXPECT_EQ((*f)[0].port, 5432);
  EXPECT_EQ((*f)[0].origin, "site.fwd:3");
  EXPECT_EQ((*f)[1].name, "web");
  EXPECT_EQ((*f)[1].host, "10.0.0.1");
  EXPECT_EQ((*f)[1].port, 80);
  EXPECT_EQ((*f)[1].origin, "site.fwd:5");
  EXPECT_EQ((*f)[2].name, "cache");
  EXPECT_EQ((*f)[2].host, "::1");
  EXPECT_EQ((*f)[2].port, 6379);
  EXPECT_EQ((*f)[2].origin, "site.fwd:6");
  EXPECT_EQ((*f)[3].name, "a.b_c-9");
  EXPECT_EQ((*f)[3].host, "localhost");
  EXPECT_EQ((*f)[3].port, 1);
  EXPECT_EQ((*f)[3].origin, "site.fwd:7");
}

TEST(BridgeForwardsTest, NameLimits) {
  EXPECT_TRUE(CheckForwardName("x").ok());
  EXPECT_TRUE(CheckForwardName(std::string(64, 'n')).ok());
  EXPECT_THAT(CheckForwardName("").message(), HasSubstr("must have 1 to 64 characters"));
  EXPECT_THAT(CheckForwardName(std::string(65, 'n')).message(),
              HasSubstr("must have 1 to 64 characters"));
  for (const char* bad : {"a/b", "a b", "é", "a:b", "a\"b"}) {
    absl::Status s = CheckForwardName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("forward name '", bad, "'")));
  }
}

struct ForwardsErrorCase {
  std::string text;
  std::string message;  // exact
};

TEST(BridgeForwardsTest, ErrorsNameFileAndLine) {
  const std::vector<ForwardsErrorCase> cases = {
      {"ok 127.0.0.1:1\nlonely\n", "f.fwd:2: expected 'NAME ADDRESS:PORT', got 'lonely'"},
      {"a 127.0.0.1:1 extra", "f.fwd:1: expected 'NAME ADDRESS:PORT', got 'a 127.0.0.1:1 extra'"},
      {"\n\n  a\t127.0.0.1:1\tb  # c\n",
       "f.fwd:3: expected 'NAME ADDRESS:PORT', got 'a\t127.0.0.1:1\tb'"},
      {"a/b 127.0.0.1:1",
       "f.fwd:1: forward name 'a/b' may contain only letters, digits, '.', '_' and '-'"},
      {absl::StrCat(std::string(65, 'n'), " 127.0.0.1:1"),
       absl::StrCat("f.fwd:1: forward name '", std::string(65, 'n'),
                    "' must have 1 to 64 characters")},
      {"db nohost",
       "f.fwd:1: bad address 'nohost': missing ':PORT' (expected HOST:PORT, e.g. 127.0.0.1:5201 "
       "or [::1]:5201)"},
      {"db 127.0.0.1:99999",
       "f.fwd:1: bad address '127.0.0.1:99999': port must be a number in 0..65535 (expected "
       "HOST:PORT, e.g. 127.0.0.1:5201 or [::1]:5201)"},
      {"db ::1:80",
       "f.fwd:1: bad address '::1:80': IPv6 addresses need brackets (expected HOST:PORT, e.g. "
       "127.0.0.1:5201 or [::1]:5201)"},
      {"# x\ndb 127.0.0.1:0", "f.fwd:2: port 0 in '127.0.0.1:0': give a port"},
      {"x 127.0.0.1:1\ndb 127.0.0.1:2\n\n# more\ndb 127.0.0.1:3\n",
       "f.fwd:5: forward 'db' is already defined at f.fwd:2"},
      {"", "f.fwd: no forwards (one a line: NAME ADDRESS:PORT)"},
      {"# only comments\n\n   \n", "f.fwd: no forwards (one a line: NAME ADDRESS:PORT)"},
  };
  for (const ForwardsErrorCase& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<std::vector<Forward>> f = ParseForwards(c.text, "f.fwd");
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(), c.message);
  }
}

TEST(BridgeForwardsTest, AddForwardNamesBothPlaces) {
  std::vector<Forward> all = {{"default", "127.0.0.1", 80, "--target"}};
  absl::Status s = AddForward({"default", "127.0.0.1", 81, "x.fwd:4"}, &all);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x.fwd:4: forward 'default' is already defined at --target");
  EXPECT_EQ(all.size(), 1u);
  EXPECT_TRUE(AddForward({"other", "127.0.0.1", 81, "x.fwd:5"}, &all).ok());
  EXPECT_EQ(all.size(), 2u);
}

// ---------------------------------------------------------------- metrics text

// One parsed sample line: name{labels} value.
struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values
  double value = 0;
};

bool NameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

// Parses a sample line of the Prometheus text format (0.0.4) strictly: a metric name,
// optional labels (name="value" separated by commas, values escaping only \\, \" and
// \n), one space, a float (Go ParseFloat syntax: what strtod takes, plus Inf/NaN), no
// timestamp. Returns false with `why` on anything else.
bool ParseSampleLine(const std::string& line, Sample* out, std::string* why) {
  size_t i = 0;
  while (i < line.size() && NameChar(line[i], i == 0)) ++i;
  if (i == 0) return *why = "no metric name", false;
  out->name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      size_t start = i;
      while (i < line.size() && NameChar(line[i], i == start) && line[i] != ':') ++i;
      if (i == start) return *why = "no label name", false;
      std::string lname = line.substr(start, i - start);
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
        return *why = "label without =\"", false;
      }
      i += 2;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\n') return *why = "raw newline in a label value", false;
        if (c == '\\') {
          if (i >= line.size()) return *why = "dangling backslash", false;
          const char e = line[i++];
          if (e == '\\')
            value += '\\';
          else if (e == '"')
            value += '"';
          else if (e == 'n')
            value += '\n';
          else
            return *why = absl::StrCat("bad escape \\", std::string(1, e)), false;
        } else {
          value += c;
        }
      }
      if (!closed) return *why = "unterminated label value", false;
      out->labels.emplace_back(lname, value);
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      return *why = "labels not closed by }", false;
    }
  }
  if (i >= line.size() || line[i] != ' ') return *why = "no space before the value", false;
  ++i;
  const std::string v = line.substr(i);
  if (v.empty() || v.find(' ') != std::string::npos)
    return *why = "value missing or extra field", false;
  if (v == "+Inf" || v == "Inf") {
    out->value = INFINITY;
    return true;
  }
  if (v == "-Inf") {
    out->value = -INFINITY;
    return true;
  }
  if (v == "NaN") {
    out->value = NAN;
    return true;
  }
  char* end = nullptr;
  out->value = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size()) return *why = "value is not a number", false;
  return true;
}

struct Exposition {
  std::map<std::string, std::string> help;  // family -> help text
  std::map<std::string, std::string> type;  // family -> counter|gauge
  std::vector<Sample> samples;
};

// Checks the whole text and returns what it holds: every line is a HELP, a TYPE or a
// sample; a family's HELP and TYPE come once each, before its samples; no series twice.
Exposition CheckExposition(const std::string& text) {
  Exposition e;
  EXPECT_TRUE(absl::EndsWith(text, "\n"));
  std::set<std::string> series;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  int n = 0;
  for (const std::string& line : lines) {
    ++n;
    SCOPED_TRACE(absl::StrCat("line ", n, ": ", line));
    EXPECT_FALSE(line.empty());
    if (absl::StartsWith(line, "#")) {
      std::vector<std::string> w = absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (w.size() < 4) {
        ADD_FAILURE() << "comment with fewer than 4 fields";
        continue;
      }
      Sample dummy;
      std::string why;
      EXPECT_TRUE(ParseSampleLine(w[2] + " 0", &dummy, &why)) << why;
      if (w[1] == "HELP") {
        EXPECT_EQ(e.help.count(w[2]), 0u) << "HELP twice";
        EXPECT_FALSE(w[3].empty());
        EXPECT_EQ(w[3].find('\\'), std::string::npos);
        e.help[w[2]] = w[3];
      } else if (w[1] == "TYPE") {
        EXPECT_EQ(e.type.count(w[2]), 0u) << "TYPE twice";
        EXPECT_TRUE(w[3] == "counter" || w[3] == "gauge") << w[3];
        EXPECT_EQ(e.help.count(w[2]), 1u) << "TYPE before HELP";
        e.type[w[2]] = w[3];
      } else {
        ADD_FAILURE() << "comment that is neither HELP nor TYPE";
      }
      continue;
    }
    Sample s;
    std::string why;
    if (!ParseSampleLine(line, &s, &why)) {
      ADD_FAILURE() << "not a sample line: " << why;
      continue;
    }
    EXPECT_EQ(e.type.count(s.name), 1u) << "sample before its TYPE";
    EXPECT_EQ(e.help.count(s.name), 1u) << "sample before its HELP";
    if (e.type[s.name] == "counter") {
      EXPECT_TRUE(absl::EndsWith(s.name, "_total")) << "a counter's name ends in _total";
      EXPECT_GE(s.value, 0);
    }
    EXPECT_TRUE(absl::StartsWith(s.name, "longhaul_bridge_"));
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) absl::StrAppend(&key, "|", k, "=", v);
    EXPECT_TRUE(series.insert(key).second) << "series twice";
    e.samples.push_back(std::move(s));
  }
  return e;
}

const Sample* Find(const Exposition& e, const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& labels = {}) {
  for (const Sample& s : e.samples) {
    if (s.name == name && s.labels == labels) return &s;
  }
  return nullptr;
}

// The checker itself refuses what the format does not allow (so the tests above can fail).
TEST(BridgeMetricsTest, TheLineCheckerRefusesBadLines) {
  for (const char* bad : {"x{a=\"b} 1", "x{a=b} 1", "x{a=\"b\"} ", "x 1 2", "x{a=\"\\q\"} 1",
                          "1x 1", "x{a=\"b\"", "x  1", "x{a=\"b\",} 1", "x one"}) {
    Sample s;
    std::string why;
    EXPECT_FALSE(ParseSampleLine(bad, &s, &why)) << bad;
  }
  Sample s;
  std::string why;
  ASSERT_TRUE(ParseSampleLine("x_total{a=\"q\\\"\\n\\\\\",b=\"\"} 2.5e3", &s, &why)) << why;
  EXPECT_EQ(s.name, "x_total");
  ASSERT_EQ(s.labels.size(), 2u);
  EXPECT_EQ(s.labels[0].second, "q\"\n\\");
  EXPECT_EQ(s.labels[1].second, "");
  EXPECT_EQ(s.value, 2500);
}

const std::vector<std::string> kFamilies = {"info",
                                            "uptime_seconds",
                                            "streams_open",
                                            "streams_opened_total",
                                            "streams_completed_total",
                                            "streams_reset_total",
                                            "tcp_received_bytes_total",
                                            "tcp_sent_bytes_total",
                                            "sessions_open",
                                            "sessions_opened_total",
                                            "reconnects_total",
                                            "connect_failures_total",
                                            "protocol_errors_total",
                                            "target_connect_failures_total",
                                            "refused_total",
                                            "memory_charged_bytes",
                                            "memory_limit_bytes",
                                            "targets_open",
                                            "client_keys",
                                            "session_streams_open",
                                            "session_rtt_seconds",
                                            "session_min_rtt_seconds",
                                            "session_pacing_rate_bits_per_second",
                                            "session_sent_data_bytes_total",
                                            "session_received_data_bytes_total",
                                            "session_packets_sent_total",
                                            "session_packets_lost_total",
                                            "session_packets_retransmitted_total",
                                            "session_fec_recovered_packets_total",
                                            "session_fec_repair_packets_sent_total",
                                            "session_peer_loss_ratio"};

TEST(BridgeMetricsTest, EmptyBridgeHasEveryFamily) {
  const Exposition e = CheckExposition(FormatMetrics("server", 0, Metrics{}, {}));
  for (const std::string& f : kFamilies) {
    const std::string name = "longhaul_bridge_" + f;
    EXPECT_EQ(e.help.count(name), 1u) << name;
    EXPECT_EQ(e.type.count(name), 1u) << name;
  }
  EXPECT_EQ(e.help.size(), kFamilies.size());
  const Sample* info = Find(e, "longhaul_bridge_info", {{"mode", "server"}});
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->value, 1);
  ASSERT_NE(Find(e, "longhaul_bridge_sessions_open"), nullptr);
  EXPECT_EQ(Find(e, "longhaul_bridge_sessions_open")->value, 0);
  // No session, no reset: those families have no samples.
  for (const Sample& s : e.samples) {
    EXPECT_FALSE(absl::StartsWith(s.name, "longhaul_bridge_session_")) << s.name;
    EXPECT_NE(s.name, "longhaul_bridge_streams_reset_total");
    EXPECT_NE(s.name, "longhaul_bridge_refused_total");
  }
}

TEST(BridgeMetricsTest, RefusalsByReasonAndBudgetGauges) {
  Metrics m;
  m.refused["memory"] = 3;
  m.refused["not_opened"] = 1;
  m.memory_charged = 1234;
  m.memory_limit = 4096;
  m.targets_open = 7;
  m.client_keys = 2;
  const Exposition e = CheckExposition(FormatMetrics("server", 1, m, {}));
  const Sample* mem = Find(e, "longhaul_bridge_refused_total", {{"reason", "memory"}});
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->value, 3);
  const Sample* no = Find(e, "longhaul_bridge_refused_total", {{"reason", "not_opened"}});
  ASSERT_NE(no, nullptr);
  EXPECT_EQ(no->value, 1);
  EXPECT_EQ(Find(e, "longhaul_bridge_memory_charged_bytes")->value, 1234);
  EXPECT_EQ(Find(e, "longhaul_bridge_memory_limit_bytes")->value, 4096);
  EXPECT_EQ(Find(e, "longhaul_bridge_targets_open")->value, 7);
  EXPECT_EQ(Find(e, "longhaul_bridge_client_keys")->value, 2);
}

TEST(BridgeMetricsTest, CountersSessionsAndEscapedLabels) {
  Metrics m;
  m.streams_opened = 12;
  m.streams_completed = 9;
  m.streams_reset[{"target_refused", "peer"}] = 1;
  m.streams_reset[{"aborted", "local"}] = 2;
  m.streams_reset[{"we\"ird\\reason\nx", "local"}] = 3;
  m.bytes_from_tcp = 1ULL << 40;
  m.bytes_to_tcp = 123456789;
  m.sessions_opened = 3;
  m.reconnects = 2;
  m.connect_failures = 5;
  m.protocol_errors = 1;
  m.target_connect_failures = 4;
  std::vector<SessionSnapshot> sessions(2);
  sessions[0].peer = "127.0.0.1:4000";
  sessions[0].connection = "0";
  sessions[0].engine = 1;
  sessions[0].streams_open = 2;
  sessions[0].stats.packets_sent = 1000;
  sessions[0].stats.data_bytes_sent = 5000;
  sessions[0].debug.srtt = Duration::Milliseconds(58);
  sessions[0].debug.pacing_rate = Bandwidth::Gbps(10);
  sessions[0].debug.peer_loss_rate = 0.001;
  sessions[1].peer = "odd \"peer\"\\\nname";
  sessions[1].connection = "1";
  sessions[1].streams_open = 1;
  const Exposition e = CheckExposition(FormatMetrics("cli\"ent\\\n", 1.5, m, sessions));

  auto value = [&](const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& labels = {}) {
    const Sample* s = Find(e, "longhaul_bridge_" + name, labels);
    EXPECT_NE(s, nullptr) << name;
    return s == nullptr ? -1.0 : s->value;
  };
  EXPECT_EQ(value("info", {{"mode", "cli\"ent\\\n"}}), 1);
  EXPECT_EQ(value("uptime_seconds"), 1.5);
  EXPECT_EQ(value("streams_open"), 3);  // over the sessions
  EXPECT_EQ(value("streams_opened_total"), 12);
  EXPECT_EQ(value("streams_completed_total"), 9);
  EXPECT_EQ(value("streams_reset_total", {{"reason", "target_refused"}, {"by", "peer"}}), 1);
  EXPECT_EQ(value("streams_reset_total", {{"reason", "aborted"}, {"by", "local"}}), 2);
  EXPECT_EQ(value("streams_reset_total", {{"reason", "we\"ird\\reason\nx"}, {"by", "local"}}), 3);
  EXPECT_EQ(value("tcp_received_bytes_total"), static_cast<double>(1ULL << 40));
  EXPECT_EQ(value("tcp_sent_bytes_total"), 123456789);
  EXPECT_EQ(value("sessions_open"), 2);
  EXPECT_EQ(value("sessions_opened_total"), 3);
  EXPECT_EQ(value("reconnects_total"), 2);
  EXPECT_EQ(value("connect_failures_total"), 5);
  EXPECT_EQ(value("protocol_errors_total"), 1);
  EXPECT_EQ(value("target_connect_failures_total"), 4);
  const std::vector<std::pair<std::string, std::string>> p0 = {
      {"peer", "127.0.0.1:4000"}, {"connection", "0"}, {"engine", "1"}};
  const std::vector<std::pair<std::string, std::string>> p1 = {
      {"peer", "odd \"peer\"\\\nname"}, {"connection", "1"}, {"engine", "0"}};
  EXPECT_EQ(value("session_streams_open", p0), 2);
  EXPECT_EQ(value("session_streams_open", p1), 1);
  EXPECT_DOUBLE_EQ(value("session_rtt_seconds", p0), 0.058);
  EXPECT_EQ(value("session_pacing_rate_bits_per_second", p0), 1e10);
  EXPECT_EQ(value("session_sent_data_bytes_total", p0), 5000);
  EXPECT_EQ(value("session_packets_sent_total", p0), 1000);
  EXPECT_EQ(value("session_peer_loss_ratio", p0), 0.001);
  // Every per-session family has one sample per session.
  for (const std::string& f : kFamilies) {
    if (!absl::StartsWith(f, "session_")) continue;
    int n = 0;
    for (const Sample& s : e.samples) n += s.name == "longhaul_bridge_" + f;
    EXPECT_EQ(n, 2) << f;
  }
}

TEST(BridgeMetricsTest, LabelEscapingIsExact) {
  Metrics m;
  m.streams_reset[{"a\\b", "c\"d"}] = 1;
  m.streams_reset[{"e\nf", "g"}] = 1;
  const std::string text = FormatMetrics("server", 0, m, {});
  EXPECT_THAT(
      text, HasSubstr("longhaul_bridge_streams_reset_total{reason=\"a\\\\b\",by=\"c\\\"d\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("longhaul_bridge_streams_reset_total{reason=\"e\\nf\",by=\"g\"} 1\n"));
  CheckExposition(text);
}

// Engines (--engines) and connections (--connections): one sample per engine, labelled
// by its index, and the client's connection count; neither family without them.
TEST(BridgeMetricsTest, PerEngineSeriesAndConnections) {
  Metrics m;
  m.connections_configured = 2;
  std::vector<EngineSnapshot> engines(2);
  engines[0] = {.connections = 1, .bytes_sent = 1000, .bytes_received = 2000, .cpu_s = 0.5};
  engines[1] = {.connections = 3, .bytes_sent = 7, .bytes_received = 9, .cpu_s = 1.25};
  const Exposition e = CheckExposition(FormatMetrics("client", 1, m, {}, engines));
  auto value = [&](const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& labels = {}) {
    const Sample* s = Find(e, "longhaul_bridge_" + name, labels);
    EXPECT_NE(s, nullptr) << name;
    return s == nullptr ? -1.0 : s->value;
  };
  EXPECT_EQ(value("engines"), 2);
  EXPECT_EQ(value("connections_configured"), 2);
  EXPECT_EQ(value("engine_connections", {{"engine", "0"}}), 1);
  EXPECT_EQ(value("engine_connections", {{"engine", "1"}}), 3);
  EXPECT_EQ(value("engine_sent_bytes_total", {{"engine", "0"}}), 1000);
  EXPECT_EQ(value("engine_received_bytes_total", {{"engine", "0"}}), 2000);
  EXPECT_EQ(value("engine_sent_bytes_total", {{"engine", "1"}}), 7);
  EXPECT_EQ(value("engine_received_bytes_total", {{"engine", "1"}}), 9);
  EXPECT_EQ(value("engine_cpu_seconds_total", {{"engine", "0"}}), 0.5);
  EXPECT_EQ(value("engine_cpu_seconds_total", {{"engine", "1"}}), 1.25);
  const Exposition none = CheckExposition(FormatMetrics("server", 1, Metrics{}, {}));
  for (const Sample& s : none.samples) {
    EXPECT_FALSE(absl::StartsWith(s.name, "longhaul_bridge_engine")) << s.name;
    EXPECT_NE(s.name, "longhaul_bridge_connections_configured");
  }
}

}  // namespace
}  // namespace longhaul::bridge
