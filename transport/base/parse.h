// Parsers and formatters for human-readable quantities, shared by link specs, profiles
// and command-line tools so that "64MiB", "58ms" and "100gbit" mean the same everywhere.
//
//   sizes:      123, 4k/4KB (10^3), 4KiB/4Ki (2^10), M/MB, MiB, G/GB, GiB, T, TiB
//               (case-insensitive; "b"/"B" suffix optional)
//   durations:  ns, us, ms, s, m (minutes); a bare number is seconds
//   rates:      bit, kbit, mbit, gbit, tbit (also bps, kbps, mbps, gbps, tbps; decimal);
//               a bare number is bits per second
//   fractions:  0.001, 1e-3, 0.1% (percent suffix)
//
// Errors are absl::InvalidArgumentError naming the text and the accepted form.
#pragma once

#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "transport/base/units.h"

namespace longhaul {

absl::StatusOr<ByteCount> ParseByteCount(absl::string_view text);
absl::StatusOr<Duration> ParseDuration(absl::string_view text);
absl::StatusOr<Bandwidth> ParseBandwidth(absl::string_view text);
absl::StatusOr<double> ParseFraction(absl::string_view text);  // result in [0, 1]
absl::StatusOr<int64_t> ParseInteger(absl::string_view text);
absl::StatusOr<bool> ParseBool(absl::string_view text);  // true/false/1/0/yes/no/on/off

// A CPU list (engines' pinning: --engine_cpus, NCCL_LONGHAUL_ENGINE_CPUS):
// comma-separated CPU numbers and inclusive ranges, in the order given ("0,2,4-6" is
// 0 2 4 5 6); at most kMaxCpuListEntries CPUs, each below kMaxCpu. InvalidArgument naming
// the item otherwise ("bad CPU 'x' in '0,x'", "range '5-3' in '5-3' runs backwards",
// "empty item in '0,,1'").
inline constexpr int kMaxCpu = 1024;  // CPU_SETSIZE
inline constexpr size_t kMaxCpuListEntries = 1024;
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// Canonical forms accepted back by the parsers ("64MiB", "58ms", "100gbit").
std::string FormatByteCount(ByteCount bytes);
std::string FormatDuration(Duration d);
std::string FormatBandwidth(Bandwidth b);

// Text from the network made safe to log or show: printable ASCII stays as it is, a
// backslash becomes "\\", anything else (newlines, escapes, bytes >= 0x7f) "\xNN", so
// it cannot forge a log line or drive a terminal.
std::string PrintableText(absl::string_view text);

}  // namespace longhaul
