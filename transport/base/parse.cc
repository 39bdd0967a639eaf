#include "transport/base/parse.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longhaul {
namespace {

// Splits "12.5ms" into 12.5 and "ms". Fails when there is no leading number.
bool SplitNumber(absl::string_view text, double* value, std::string* suffix) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  while (i < t.size() && (absl::ascii_isdigit(t[i]) || t[i] == '.' || t[i] == '-' ||
                          t[i] == '+' ||
                          ((t[i] == 'e' || t[i] == 'E') && i + 1 < t.size() &&
                           (absl::ascii_isdigit(t[i + 1]) || t[i + 1] == '-' ||
                            t[i + 1] == '+')))) {
    ++i;
  }
  if (i == 0) return false;
  if (!absl::SimpleAtod(t.substr(0, i), value)) return false;
  if (!std::isfinite(*value)) return false;
  *suffix = absl::AsciiStrToLower(t.substr(i));
  return true;
}

}  // namespace

absl::StatusOr<ByteCount> ParseByteCount(absl::string_view text) {
  double v;
  std::string s;
  if (!SplitNumber(text, &v, &s) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size '", text, "': expected a number with an optional unit (4096, 64KiB, 1MB, 20GiB)"));
  }
  if (!s.empty() && s.back() == 'b') s.pop_back();
  double mult;
  if (s.empty()) mult = 1;
  else if (s == "k") mult = 1e3;
  else if (s == "ki") mult = 1024.0;
  else if (s == "m") mult = 1e6;
  else if (s == "mi") mult = 1024.0 * 1024;
  else if (s == "g") mult = 1e9;
  else if (s == "gi") mult = 1024.0 * 1024 * 1024;
  else if (s == "t") mult = 1e12;
  else if (s == "ti") mult = 1024.0 * 1024 * 1024 * 1024;
  else {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size unit in '", text, "': use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB"));
  }
  double bytes = v * mult;
  if (bytes > 1.8e19) return absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
  return static_cast<ByteCount>(std::llround(bytes));
}

absl::StatusOr<Duration> ParseDuration(absl::string_view text) {
  double v;
  std::string s;
  if (!SplitNumber(text, &v, &s) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad duration '", text, "': expected a number with a unit (300us, 58ms, 2s)"));
  }
  double ns;
  if (s.empty() || s == "s" || s == "sec") ns = v * 1e9;
  else if (s == "ms") ns = v * 1e6;
  else if (s == "us") ns = v * 1e3;
  else if (s == "ns") ns = v;
  else if (s == "m" || s == "min") ns = v * 60e9;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration unit in '", text, "': use ns, us, ms, s or min"));
  }
  if (ns > 9e18) return absl::InvalidArgumentError(absl::StrCat("duration '", text, "' is too long"));
  return Duration::Nanoseconds(static_cast<int64_t>(std::llround(ns)));
}

absl::StatusOr<Bandwidth> ParseBandwidth(absl::string_view text) {
  double v;
  std::string s;
  if (!SplitNumber(text, &v, &s) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad rate '", text, "': expected a number with a unit (800mbit, 10gbit, 100gbit)"));
  }
  double mult;
  if (s.empty() || s == "bit" || s == "bps") mult = 1;
  else if (s == "kbit" || s == "kbps" || s == "k") mult = 1e3;
  else if (s == "mbit" || s == "mbps" || s == "m") mult = 1e6;
  else if (s == "gbit" || s == "gbps" || s == "g") mult = 1e9;
  else if (s == "tbit" || s == "tbps" || s == "t") mult = 1e12;
  else {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad rate unit in '", text, "': use bit, kbit, mbit, gbit or tbit (bits per second)"));
  }
  return Bandwidth::BitsPerSecond(v * mult);
}

absl::StatusOr<double> ParseFraction(absl::string_view text) {
  double v;
  std::string s;
  if (!SplitNumber(text, &v, &s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad fraction '", text, "': expected a probability like 1e-3, 0.01 or 1%"));
  }
  if (s == "%") v /= 100;
  else if (!s.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad fraction '", text, "': expected a probability like 1e-3, 0.01 or 1%"));
  }
  if (v < 0 || v > 1) {
    return absl::InvalidArgumentError(absl::StrCat("fraction '", text, "' is outside [0, 1]"));
  }
  return v;
}

absl::StatusOr<int64_t> ParseInteger(absl::string_view text) {
  int64_t v;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("bad integer '", text, "'"));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("bad boolean '", text, "': use true/false, yes/no, on/off or 1/0"));
}

std::string FormatByteCount(ByteCount b) {
  if (b != 0 && b % (1ULL << 40) == 0) return absl::StrCat(b >> 40, "TiB");
  if (b != 0 && b % (1ULL << 30) == 0) return absl::StrCat(b >> 30, "GiB");
  if (b != 0 && b % (1ULL << 20) == 0) return absl::StrCat(b >> 20, "MiB");
  if (b != 0 && b % (1ULL << 10) == 0) return absl::StrCat(b >> 10, "KiB");
  return absl::StrCat(b);
}

std::string FormatDuration(Duration d) {
  int64_t ns = d.ns();
  if (ns != 0 && ns % 1000000000 == 0) return absl::StrCat(ns / 1000000000, "s");
  if (ns != 0 && ns % 1000000 == 0) return absl::StrCat(ns / 1000000, "ms");
  if (ns != 0 && ns % 1000 == 0) return absl::StrCat(ns / 1000, "us");
  return absl::StrCat(ns, "ns");
}

std::string FormatBandwidth(Bandwidth b) {
  double v = b.bps();
  auto whole = [](double x) { return x == std::floor(x); };
  if (v >= 1e12 && whole(v / 1e12)) return absl::StrFormat("%.0ftbit", v / 1e12);
  if (v >= 1e9 && whole(v / 1e9)) return absl::StrFormat("%.0fgbit", v / 1e9);
  if (v >= 1e6 && whole(v / 1e6)) return absl::StrFormat("%.0fmbit", v / 1e6);
  if (v >= 1e3 && whole(v / 1e3)) return absl::StrFormat("%.0fkbit", v / 1e3);
  return absl::StrFormat("%.0fbit", v);
}

}  // namespace longhaul
