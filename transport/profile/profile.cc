#include "transport/profile/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "transport/base/parse.h"

namespace longhaul {
namespace {

// The smallest IP MTU whose datagrams hold a 64-byte segment (the smallest allowed):
// below it SegmentForMtu() cannot honour the MTU.
ByteCount MinMtu() {
  constexpr ByteCount kIpUdpHeaders = 28;
  TransportConfig c;
  c.segment = 64;
  return c.MaxDatagramSize() + kIpUdpHeaders;
}
constexpr ByteCount kMaxMtu = 65536;  // loopback; IPv4 total length tops out at 65535

absl::Status BadValue(absl::string_view key, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad value '", value, "' for '", key, "': ", why));
}

// ---- value parsers (text -> field) and formatters (field -> canonical text) ----

absl::Status SetSize(absl::string_view key, absl::string_view value, ByteCount* out) {
  absl::StatusOr<ByteCount> v = ParseByteCount(value);
  if (!v.ok()) return BadValue(key, value, v.status().message());
  *out = *v;
  return absl::OkStatus();
}

absl::Status SetDuration(absl::string_view key, absl::string_view value, Duration* out) {
  absl::StatusOr<Duration> v = ParseDuration(value);
  if (!v.ok()) return BadValue(key, value, v.status().message());
  *out = *v;
  return absl::OkStatus();
}

absl::Status SetRate(absl::string_view key, absl::string_view value, Bandwidth* out) {
  absl::StatusOr<Bandwidth> v = ParseBandwidth(value);
  if (!v.ok()) return BadValue(key, value, v.status().message());
  *out = *v;
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ParseU32(absl::string_view text) {
  absl::StatusOr<int64_t> v = ParseInteger(text);
  if (!v.ok() || *v < 0 || *v > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("expected a whole number from 0 to 4294967295");
  }
  return static_cast<uint32_t>(*v);
}

absl::Status SetU32(absl::string_view key, absl::string_view value, uint32_t* out) {
  absl::StatusOr<uint32_t> v = ParseU32(value);
  if (!v.ok()) return BadValue(key, value, v.status().message());
  *out = *v;
  return absl::OkStatus();
}

absl::Status SetBool(absl::string_view key, absl::string_view value, bool* out) {
  absl::StatusOr<bool> v = ParseBool(value);
  if (!v.ok()) return BadValue(key, value, v.status().message());
  *out = *v;
  return absl::OkStatus();
}

// A non-negative real number, optionally a percentage ("0.125", "12.5%").
absl::Status SetNumber(absl::string_view key, absl::string_view value, double* out) {
  absl::string_view t = absl::StripAsciiWhitespace(value);
  double scale = 1;
  if (!t.empty() && t.back() == '%') {
    t = absl::StripTrailingAsciiWhitespace(t.substr(0, t.size() - 1));
    scale = 0.01;
  }
  double v;
  if (t.empty() || !absl::ascii_isdigit(t.front()) || !absl::SimpleAtod(t, &v) ||
      !std::isfinite(v)) {
    return BadValue(key, value, "expected a non-negative number like 0.125 or 12.5%");
  }
  *out = v * scale;
  return absl::OkStatus();
}

// The shortest decimal that parses back to exactly `v`.
std::string FormatNumber(double v) {
  for (int precision = 1; precision < 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, v);
    double back;
    if (absl::SimpleAtod(text, &back) && back == v) return text;
  }
  return absl::StrFormat("%.17g", v);
}

absl::Status SetCc(absl::string_view key, absl::string_view value, CongestionControl* out) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v == "fixed")
    *out = CongestionControl::kFixed;
  else if (v == "bbr")
    *out = CongestionControl::kBbr;
  else
    return BadValue(key, value, "expected fixed or bbr");
  return absl::OkStatus();
}

absl::Status SetFec(absl::string_view key, absl::string_view value, TransportConfig* c) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v == "off") {
    c->fec = FecMode::kOff;
    return absl::OkStatus();
  }
  if (v == "auto") {
    c->fec = FecMode::kAuto;
    return absl::OkStatus();
  }
  if (v == "fixed") {
    c->fec = FecMode::kFixed;
    return absl::OkStatus();
  }
  const char* kForm = "expected off, auto, or K,M (data and parity packets per block, e.g. 32,4)";
  std::vector<absl::string_view> parts = absl::StrSplit(v, ',');
  if (parts.size() != 2) return BadValue(key, value, kForm);
  absl::StatusOr<uint32_t> k = ParseU32(parts[0]);
  absl::StatusOr<uint32_t> m = ParseU32(parts[1]);
  if (!k.ok() || !m.ok()) return BadValue(key, value, kForm);
  c->fec = FecMode::kFixed;
  c->fec_k = *k;
  c->fec_m = *m;
  return absl::OkStatus();
}

std::string FormatFec(const TransportConfig& c) {
  switch (c.fec) {
    case FecMode::kOff:
      return "off";
    case FecMode::kAuto:
      return "auto";
    case FecMode::kFixed:
      return absl::StrCat(c.fec_k, ",", c.fec_m);
  }
  return "off";
}

absl::Status SetMtu(absl::string_view key, absl::string_view value, TransportConfig* c) {
  absl::StatusOr<ByteCount> mtu = ParseByteCount(value);
  if (!mtu.ok()) return BadValue(key, value, mtu.status().message());
  if (*mtu < MinMtu() || *mtu > kMaxMtu) {
    return BadValue(key, value,
                    absl::StrCat("expected an IP MTU from ", MinMtu(), " to ", kMaxMtu, " bytes"));
  }
  c->segment = TransportConfig::SegmentForMtu(*mtu);
  return absl::OkStatus();
}

// ---- the key table ----

struct KeySpec {
  const char* name;
  std::function<absl::Status(TransportConfig*, absl::string_view key, absl::string_view value)> set;
  std::function<std::string(const TransportConfig&)> get;  // null: not listed (mtu)
  ProfileValueKind kind = ProfileValueKind::kChoice;
};

// Keys whose value is one field of a common type.
KeySpec SizeKey(const char* name, ByteCount TransportConfig::*field) {
  return {name,
          [field](TransportConfig* c, absl::string_view k, absl::string_view v) {
            return SetSize(k, v, &(c->*field));
          },
          [field](const TransportConfig& c) { return FormatByteCount(c.*field); },
          ProfileValueKind::kSize};
}

KeySpec DurationKey(const char* name, Duration TransportConfig::*field) {
  return {name,
          [field](TransportConfig* c, absl::string_view k, absl::string_view v) {
            return SetDuration(k, v, &(c->*field));
          },
          [field](const TransportConfig& c) { return FormatDuration(c.*field); },
          ProfileValueKind::kDuration};
}

KeySpec U32Key(const char* name, uint32_t TransportConfig::*field) {
  return {name,
          [field](TransportConfig* c, absl::string_view k, absl::string_view v) {
            return SetU32(k, v, &(c->*field));
          },
          [field](const TransportConfig& c) { return absl::StrCat(c.*field); },
          ProfileValueKind::kInteger};
}

KeySpec RateKey(const char* name, Bandwidth TransportConfig::*field) {
  return {name,
          [field](TransportConfig* c, absl::string_view k, absl::string_view v) {
            return SetRate(k, v, &(c->*field));
          },
          [field](const TransportConfig& c) { return FormatBandwidth(c.*field); },
          ProfileValueKind::kRate};
}

KeySpec BoolKey(const char* name, bool TransportConfig::*field) {
  return {name,
          [field](TransportConfig* c, absl::string_view k, absl::string_view v) {
            return SetBool(k, v, &(c->*field));
          },
          [field](const TransportConfig& c) { return std::string(c.*field ? "true" : "false"); },
          ProfileValueKind::kBool};
}

KeySpec NumberKey(const char* name, double TransportConfig::*field) {
  return {name,
          [field](TransportConfig* c, absl::string_view k, absl::string_view v) {
            return SetNumber(k, v, &(c->*field));
          },
          [field](const TransportConfig& c) { return FormatNumber(c.*field); },
          ProfileValueKind::kNumber};
}

const std::vector<KeySpec>& Keys() {
  // A plain static (destroyed at exit or when a plugin holding this code is unloaded),
  // so repeated dlopen/dlclose of the NCCL plugin does not leak it.
  static const std::vector<KeySpec> kKeys{
      SizeKey("segment", &TransportConfig::segment),
      SizeKey("window", &TransportConfig::window),
      SizeKey("recv_window", &TransportConfig::recv_window),
      U32Key("max_inflight_messages", &TransportConfig::max_inflight_messages),
      U32Key("flows", &TransportConfig::flows),
      KeySpec{"cc",
              [](TransportConfig* c, absl::string_view k, absl::string_view v) {
                return SetCc(k, v, &c->cc);
              },
              [](const TransportConfig& c) { return std::string(CongestionControlName(c.cc)); }},
      RateKey("rate", &TransportConfig::rate),
      RateKey("rate_min", &TransportConfig::rate_min),
      RateKey("initial_rate", &TransportConfig::initial_rate),
      NumberKey("cc_loss_threshold", &TransportConfig::cc_loss_threshold),
      BoolKey("cc_compete", &TransportConfig::cc_compete),
      BoolKey("cc_yield", &TransportConfig::cc_yield),
      BoolKey("ecn", &TransportConfig::ecn),
      DurationKey("pacing_burst", &TransportConfig::pacing_burst),
      BoolKey("tail_protect", &TransportConfig::tail_protect),
      U32Key("reorder_packets", &TransportConfig::reorder_packets),
      NumberKey("reorder_rtt_fraction", &TransportConfig::reorder_rtt_fraction),
      DurationKey("initial_rtt", &TransportConfig::initial_rtt),
      DurationKey("min_pto", &TransportConfig::min_pto),
      DurationKey("max_pto", &TransportConfig::max_pto),
      U32Key("ack_every", &TransportConfig::ack_every),
      DurationKey("max_ack_delay", &TransportConfig::max_ack_delay),
      U32Key("max_ack_ranges", &TransportConfig::max_ack_ranges),
      KeySpec{"fec",
              [](TransportConfig* c, absl::string_view k,
                 absl::string_view v) { return SetFec(k, v, c); },
              FormatFec},
      U32Key("fec_k", &TransportConfig::fec_k),
      U32Key("fec_m", &TransportConfig::fec_m),
      U32Key("fec_interleave", &TransportConfig::fec_interleave),
      DurationKey("fec_flush", &TransportConfig::fec_flush),
      NumberKey("fec_tail", &TransportConfig::fec_tail),
      NumberKey("fec_max_overhead", &TransportConfig::fec_max_overhead),
      DurationKey("idle_timeout", &TransportConfig::idle_timeout),
      DurationKey("keepalive", &TransportConfig::keepalive),
      KeySpec{"mtu",
              [](TransportConfig* c, absl::string_view k,
                 absl::string_view v) { return SetMtu(k, v, c); },
              nullptr, ProfileValueKind::kSize},
  };
  return kKeys;
}

}  // namespace

std::vector<std::string> ProfileKeys() {
  std::vector<std::string> out;
  for (const KeySpec& k : Keys()) out.push_back(k.name);
  return out;
}

std::optional<ProfileValueKind> ProfileKeyKind(absl::string_view key) {
  for (const KeySpec& k : Keys()) {
    if (key == k.name) return k.kind;
  }
  return std::nullopt;
}

absl::Status ApplyProfileKey(TransportConfig* config, absl::string_view key,
                             absl::string_view value) {
  key = absl::StripAsciiWhitespace(key);
  for (const KeySpec& k : Keys()) {
    if (key == k.name) return k.set(config, key, absl::StripAsciiWhitespace(value));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown key '", key, "' (known keys: ", absl::StrJoin(ProfileKeys(), ", "), ")"));
}

absl::StatusOr<TransportConfig> ParseProfile(absl::string_view text, const TransportConfig& base,
                                             absl::string_view source_name) {
  TransportConfig config = base;
  int line_number = 0;
  int mtu_line = 0, segment_line = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    // Values never contain '#', so everything after one is a comment.
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);  // also drops a '\r' of CRLF files
    if (line.empty()) continue;
    auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ":", line_number, ": ", what));
    };
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return error(absl::StrCat("expected key=value, got '", line, "'"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    if (key.empty()) return error(absl::StrCat("missing key before '=' in '", line, "'"));
    if (absl::Status s = ApplyProfileKey(&config, key, value); !s.ok()) return error(s.message());
    if (key == "mtu") mtu_line = line_number;
    if (key == "segment") segment_line = line_number;
    if (mtu_line != 0 && segment_line != 0) {
      return error(absl::StrCat(
          "'mtu' and 'segment' are both set (lines ", std::min(mtu_line, segment_line), " and ",
          std::max(mtu_line, segment_line), "); mtu derives segment, so keep one"));
    }
  }
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": invalid configuration: ", s.message()));
  }
  return config;
}

std::vector<std::pair<std::string, std::string>> ProfileKeyValues(const TransportConfig& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const KeySpec& k : Keys()) {
    if (k.get) out.emplace_back(k.name, k.get(config));
  }
  return out;
}

std::string FormatProfile(const TransportConfig& config, absl::string_view header_comment) {
  std::string out;
  header_comment = absl::StripTrailingAsciiWhitespace(header_comment);
  if (!header_comment.empty()) {
    for (absl::string_view line : absl::StrSplit(header_comment, '\n')) {
      line = absl::StripTrailingAsciiWhitespace(line);
      absl::StrAppend(&out, line.empty() ? "#" : absl::StrCat("# ", line), "\n");
    }
  }
  for (const auto& [key, value] : ProfileKeyValues(config)) {
    absl::StrAppend(&out, key, "=", value, "\n");
  }
  return out;
}

}  // namespace longhaul
