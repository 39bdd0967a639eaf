#include "transport/base/parse.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "transport/base/status.h"

namespace longhaul {
namespace {

// Splits "12.5ms" into 12.5 and "ms" (lower-cased; whitespace between number and unit
// is allowed). `digits` is set when the number is a plain decimal integer, so callers can
// convert it exactly: doubles lose precision above 2^53, which would break the promise
// that Format*() output parses back to the same value. Fails when there is no leading
// number.
bool SplitNumber(absl::string_view text, double* value, std::string* suffix,
                 absl::string_view* digits = nullptr) {
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
  absl::string_view number = t.substr(0, i);
  if (!absl::SimpleAtod(number, value)) return false;
  if (!std::isfinite(*value)) return false;
  *suffix = absl::AsciiStrToLower(absl::StripLeadingAsciiWhitespace(t.substr(i)));
  if (digits != nullptr) {
    bool all_digits = true;
    for (char c : number) all_digits = all_digits && absl::ascii_isdigit(c);
    *digits = all_digits ? number : absl::string_view();
  }
  return true;
}

// Exact unsigned product of a decimal integer and a multiplier; false on overflow.
bool ExactProduct(absl::string_view digits, uint64_t mult, uint64_t* out) {
  uint64_t v;
  if (digits.empty() || !absl::SimpleAtoi(digits, &v)) return false;
  if (mult != 0 && v > std::numeric_limits<uint64_t>::max() / mult) return false;
  *out = v * mult;
  return true;
}

}  // namespace

absl::StatusOr<ByteCount> ParseByteCount(absl::string_view text) {
  double v;
  std::string s;
  absl::string_view digits;
  if (!SplitNumber(text, &v, &s, &digits) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size '", text, "': expected a number with an optional unit (4096, 64KiB, 1MB, 20GiB)"));
  }
  if (!s.empty() && s.back() == 'b') s.pop_back();
  uint64_t mult;
  if (s.empty()) mult = 1;
  else if (s == "k") mult = 1000;
  else if (s == "ki") mult = uint64_t{1} << 10;
  else if (s == "m") mult = 1000 * 1000;
  else if (s == "mi") mult = uint64_t{1} << 20;
  else if (s == "g") mult = uint64_t{1000} * 1000 * 1000;
  else if (s == "gi") mult = uint64_t{1} << 30;
  else if (s == "t") mult = uint64_t{1000} * 1000 * 1000 * 1000;
  else if (s == "ti") mult = uint64_t{1} << 40;
  else {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size unit in '", text, "': use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB"));
  }
  const absl::Status too_large =
      absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
  if (!digits.empty()) {
    uint64_t exact;
    if (!ExactProduct(digits, mult, &exact)) return too_large;
    return exact;
  }
  // Fractions and exponents: round to whole bytes. The bound keeps the conversion to
  // uint64_t defined (2^64 is exactly representable as a double).
  double bytes = std::round(v * static_cast<double>(mult));
  if (!(bytes < 18446744073709551616.0)) return too_large;
  return static_cast<ByteCount>(bytes);
}

absl::StatusOr<Duration> ParseDuration(absl::string_view text) {
  double v;
  std::string s;
  absl::string_view digits;
  if (!SplitNumber(text, &v, &s, &digits) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad duration '", text, "': expected a number with a unit (300us, 58ms, 2s)"));
  }
  uint64_t unit_ns;
  if (s.empty() || s == "s" || s == "sec") unit_ns = 1000000000;
  else if (s == "ms") unit_ns = 1000000;
  else if (s == "us") unit_ns = 1000;
  else if (s == "ns") unit_ns = 1;
  else if (s == "m" || s == "min") unit_ns = uint64_t{60} * 1000000000;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration unit in '", text, "': use ns, us, ms, s or min"));
  }
  // About 285 years; keeps clear of Duration::Infinite() and of int64 overflow.
  constexpr uint64_t kMaxNs = 9000000000000000000ULL;
  const absl::Status too_long =
      absl::InvalidArgumentError(absl::StrCat("duration '", text, "' is too long"));
  if (!digits.empty()) {
    uint64_t exact;
    if (!ExactProduct(digits, unit_ns, &exact) || exact > kMaxNs) return too_long;
    return Duration::Nanoseconds(static_cast<int64_t>(exact));
  }
  double ns = std::round(v * static_cast<double>(unit_ns));
  if (!(ns <= static_cast<double>(kMaxNs))) return too_long;
  return Duration::Nanoseconds(static_cast<int64_t>(ns));
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
  const double v = b.bps();
  // The largest unit that represents the rate exactly as a whole number.
  struct Unit {
    double scale;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{1e12, "tbit"}, {1e9, "gbit"}, {1e6, "mbit"}, {1e3, "kbit"}};
  for (const Unit& u : kUnits) {
    const double k = std::round(v / u.scale);
    if (k >= 1 && k * u.scale == v) return absl::StrFormat("%.0f%s", k, u.name);
  }
  if (v == std::round(v)) return absl::StrFormat("%.0fbit", v);
  // A fractional rate: the shortest decimal that parses back to the same double.
  for (int precision = 1; precision < 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, v);
    double back;
    if (absl::SimpleAtod(text, &back) && back == v) return absl::StrCat(text, "bit");
  }
  return absl::StrFormat("%.17gbit", v);
}

std::string PrintableText(absl::string_view text) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kHexDigits[c >> 4];
      out += kHexDigits[c & 15];
    }
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty CPU list");
  // One CPU number: decimal digits only (no sign, no spaces), below kMaxCpu.
  auto cpu = [&](absl::string_view item) -> absl::StatusOr<int> {
    if (item.empty() || item.size() > 4 ||
        !std::all_of(item.begin(), item.end(), [](char c) { return absl::ascii_isdigit(c); })) {
      return absl::InvalidArgumentError(absl::StrCat("bad CPU '", item, "' in '", text,
                                                     "' (a CPU number, or a range FIRST-LAST)"));
    }
    int n = 0;
    for (char c : item) n = n * 10 + (c - '0');
    if (n >= kMaxCpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU ", n, " in '", text, "' is not below ", kMaxCpu));
    }
    return n;
  };
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (item.empty()) return absl::InvalidArgumentError(absl::StrCat("empty item in '", text, "'"));
    if (item[0] == '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad CPU '", item, "' in '", text, "': CPUs are numbered from 0"));
    }
    const size_t dash = item.find('-');
    LH_ASSIGN_OR_RETURN(const int first, cpu(item.substr(0, dash)));
    int last = first;
    if (dash != absl::string_view::npos) {
      LH_ASSIGN_OR_RETURN(last, cpu(item.substr(dash + 1)));
      if (last < first) {
        return absl::InvalidArgumentError(
            absl::StrCat("range '", item, "' in '", text, "' runs backwards"));
      }
    }
    if (out.size() + static_cast<size_t>(last - first) + 1 > kMaxCpuListEntries) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' names more than ", kMaxCpuListEntries, " CPUs"));
    }
    for (int c = first; c <= last; ++c) out.push_back(c);
  }
  return out;
}

}  // namespace longhaul
