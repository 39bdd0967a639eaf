// Tuned profiles: a TransportConfig as profile text (transport/profile/profile.h)
// with a provenance header saying where it came from, so a profile found on a host can
// be traced to the measurements and the command that made it:
//
//   # longhaul tuned profile
//   # command: longhaul-tune --link=tokyo-singapore --out=profiles/tokyo-singapore.profile
//   # version: longhaul 0.1.0
//   # date: 2026-11-29T20:30:00Z
//   # link: rate=100gbit rtt=58ms (p50 58ms, p99 58ms) loss=0.0001 burst=1.00 mtu=9000
//   # objective: goodput
//   # predicted: goodput 94.9 Gbit/s (model)
//   # checked: goodput 94.6 Gbit/s (simulator, bulk 8GiB on rate=100gbit,...)
//   # host: net.core.rmem_max >= ..., IP MTU >= 9000
//   segment=8894
//   ...
//   # end of longhaul tuned profile (28 keys)
//
// The end line lets a reader tell a complete profile from one cut short at a line
// boundary (a cut inside a line already fails to parse, naming the line):
// CheckTunedProfileComplete() says which line the text ends at.
//
// The header is comments, so every tool reads the profile with LoadProfile as usual.
// Pure functions on text, except LoadTunedProfile (reads a file through
// transport/profile/profile_file.h); thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/core/config.h"

namespace longhaul::tuner {

inline constexpr char kTunedProfileTitle[] = "longhaul tuned profile";

struct Provenance {
  std::vector<std::pair<std::string, std::string>> fields;  // in order of Add()

  // Adds "key: value"; newlines in the value become spaces (one header line per field).
  void Add(absl::string_view key, absl::string_view value);
  // The first value of `key`, or "" if absent.
  std::string Get(absl::string_view key) const;
};

// The profile text: the title and the provenance fields as comments, then the keys.
std::string FormatTunedProfile(const TransportConfig& config, const Provenance& provenance);

// The "key: value" comment lines of a profile's leading comment block (up to the first
// key=value line). Lines without "key: " are skipped. Never fails.
Provenance ParseProvenance(absl::string_view profile_text);

// For text that starts with the tuned-profile title: OK if its last non-blank line is
// the end line and the number of key=value lines matches it; otherwise InvalidArgument
// "SOURCE:LINE: truncated tuned profile: ..." naming the last line present. Text
// without the title (a hand-written profile) is OK.
absl::Status CheckTunedProfileComplete(absl::string_view text, absl::string_view source_name);

// CheckTunedProfileComplete() first (so a cut anywhere is reported with the line the
// text ends at, even where the cut value would still parse), then ParseProfile().
absl::StatusOr<TransportConfig> ParseTunedProfile(absl::string_view text,
                                                  const TransportConfig& base,
                                                  absl::string_view source_name);

// Reads the file (ReadProfileFile: NotFound naming the path if unreadable) and
// ParseTunedProfile()s it.
absl::StatusOr<TransportConfig> LoadTunedProfile(const std::string& path,
                                                 const TransportConfig& base);

// Current UTC time as 2026-11-29T20:30:00Z.
std::string UtcTimestamp();

}  // namespace longhaul::tuner
