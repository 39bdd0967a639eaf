// Profile files: reading a profile from disk, the edge around the pure parser of
// profile.h. Its own library (longhaul_profile_file), outside the core layer: the core
// parses text and never opens files; tools, the tuner, the tests and the NCCL plugin
// read files through here.
//
// Errors: NotFound naming the path when the file cannot be read ("cannot read profile
// 'ts.profile': No such file or directory"); InvalidArgument for a file over 1 MiB
// (profiles are a few hundred bytes); parse errors as ParseProfile, prefixed with the
// path and the line ("ts.profile:7: unknown key 'foo' (known keys: ...)").
// Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "transport/core/config.h"

namespace longhaul {

// Largest profile file ReadProfileFile accepts.
inline constexpr size_t kMaxProfileFileBytes = size_t{1} << 20;

// The text of the profile file at `path`.
[[nodiscard]] absl::StatusOr<std::string> ReadProfileFile(const std::string& path);

// Reads the file at `path` and parses it with ParseProfile over `base` (source name =
// path), Validate()d.
[[nodiscard]] absl::StatusOr<TransportConfig> LoadProfile(const std::string& path,
                                                          const TransportConfig& base);

}  // namespace longhaul
