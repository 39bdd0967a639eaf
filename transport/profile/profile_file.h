// Profile files: reading a profile from disk, the edge around the pure parser of
// profile.h. Its own library (longhaul_profile_file), outside the core layer: the core
// parses text and never opens files; tools, the tuner, the tests and the NCCL plugin
// read files through here.
//
// A profile file may also hold the tools' packet-protection settings (docs/security.md):
//
//   key=FILE        this side's private key          (--key, NCCL_LONGHAUL_KEY)
//   peer_key=FILE   the peer's public key(s)         (--peer_key, NCCL_LONGHAUL_PEER_KEY)
//   psk_file=FILE   a pre-shared key                 (--psk_file, NCCL_LONGHAUL_PSK_FILE)
//   insecure=BOOL   plaintext, chosen explicitly     (--insecure, NCCL_LONGHAUL_INSECURE)
//
// They are the edge's, not the transport's: split off here, never given to the core's
// parser, never part of a TransportConfig (so never sent to a peer in the handshake).
// A relative FILE is resolved against the profile's directory; FILE cannot contain '#'
// (a comment starts there). LoadProfileFile returns them; LoadProfile drops them, for
// the callers that run no endpoint (the simulator, the tuner's model).
//
// Errors: NotFound naming the path when the file cannot be read ("cannot read profile
// 'ts.profile': No such file or directory"); InvalidArgument for a file over 1 MiB
// (profiles are a few hundred bytes); parse errors as ParseProfile, prefixed with the
// path and the line ("ts.profile:7: unknown key 'foo' (known keys: ...)"), the
// security keys' too ("ts.profile:3: bad value 'maybe' for 'insecure': ...",
// "ts.profile:2: 'key' needs a file"); as for every key, a later line overrides.
// Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/core/config.h"

namespace longhaul {

// Largest profile file ReadProfileFile accepts.
inline constexpr size_t kMaxProfileFileBytes = size_t{1} << 20;

// The text of the profile file at `path`.
[[nodiscard]] absl::StatusOr<std::string> ReadProfileFile(const std::string& path);

// One packet-protection setting of a profile: its value (a path resolved against the
// profile's directory, or the boolean's text) and where it was set ("ts.profile:3");
// `where` is empty when the profile does not set it.
struct ProfileSetting {
  std::string value;
  std::string where;
  bool set() const { return !where.empty(); }
};
struct ProfileSecurity {
  ProfileSetting key, peer_key, psk_file;
  std::optional<bool> insecure;
  std::string insecure_where;
  bool any() const { return key.set() || peer_key.set() || psk_file.set() || insecure.has_value(); }
};

// Splits the security keys off `text` (`source_name` names the file in errors,
// `directory` resolves relative paths): returns them and sets `*rest` to the text with
// their lines blanked (the core's parser then reports the other lines' numbers as they
// are in the file).
[[nodiscard]] absl::StatusOr<ProfileSecurity> SplitProfileSecurity(absl::string_view text,
                                                                   absl::string_view source_name,
                                                                   const std::string& directory,
                                                                   std::string* rest);

struct LoadedProfile {
  TransportConfig config;
  ProfileSecurity security;
};
// Reads the file at `path`, splits off the security keys and parses the rest with
// ParseProfile over `base` (source name = path), Validate()d.
[[nodiscard]] absl::StatusOr<LoadedProfile> LoadProfileFile(const std::string& path,
                                                            const TransportConfig& base);

// LoadProfileFile's configuration (the security keys are accepted and dropped).
[[nodiscard]] absl::StatusOr<TransportConfig> LoadProfile(const std::string& path,
                                                          const TransportConfig& base);

}  // namespace longhaul
