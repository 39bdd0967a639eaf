// Fuzz target for profile files (transport/profile/profile.h,
// profile_file.h): the text a user or the tuner writes and every tool and the
// NCCL plugin reads. The input is the file's text; it goes through the same
// steps as LoadProfileFile (split off the security keys, parse the rest over a
// base), and on its own through ParseProfile. Invariants (each aborts when it
// fails):
//   - errors are non-empty and start with the source name ("fuzz.profile..."),
//   as the
//     header promises;
//   - splitting off the security keys keeps the line count (line numbers of
//   later errors
//     stay the file's), a set file setting is non-empty and resolved against
//     the directory, and the split never changes whether the rest parses;
//   - what parses is Validate()d, and FormatProfile of it parses back to the
//   same
//     key/value pairs, over the default base and over a different base
//     (ProfileKeyValues is "every key": parsing them over any base reproduces
//     the config);
//   - each canonical key=value pair applies on its own (ApplyProfileKey accepts
//   what it
//     prints).
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON (clang), and replayed as
// an ordinary test (profile_fuzz_replay_test) over tests/fuzz/corpus/profile.

#include "absl/strings/string_view.h"
#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "tests/fuzz/fuzz_check.h"
#include "transport/core/config.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"

namespace longhaul {
namespace {

constexpr absl::string_view kSource = "fuzz.profile";

// A base that differs from the default in many keys, so a formatted profile
// that left a key out would not reproduce the config over it.
const TransportConfig &OtherBase() {
  static const TransportConfig *base = [] {
    absl::StatusOr<TransportConfig> c =
        ParseProfile("window=64MiB\nrecv_window=96MiB\ncc=fixed\nrate="
                     "1gbit\nfec=16,2\necn=on\n"
                     "initial_rtt=80ms\nflows=3\nreorder_packets=7\nack_every="
                     "4\nkeepalive=2s\n",
                     TransportConfig{}, "base");
    LH_FUZZ_CHECK(c.ok());
    return new TransportConfig(*c);
  }();
  return *base;
}

void CheckRoundTrip(const TransportConfig &config, absl::string_view header) {
  LH_FUZZ_CHECK(config.Validate().ok());
  const auto kv = ProfileKeyValues(config);
  LH_FUZZ_CHECK(!kv.empty());
  const std::string text = FormatProfile(config, header);
  static const TransportConfig kDefault;
  for (const TransportConfig *base : {&kDefault, &OtherBase()}) {
    absl::StatusOr<TransportConfig> again =
        ParseProfile(text, *base, "formatted");
    if (!again.ok()) {
      std::fprintf(stderr, "formatted profile does not parse: %s\n--\n%s--\n",
                   std::string(again.status().message()).c_str(), text.c_str());
    }
    LH_FUZZ_CHECK(again.ok());
    LH_FUZZ_CHECK(ProfileKeyValues(*again) == kv);
  }
  for (const auto &[key, value] : kv) {
    TransportConfig c = OtherBase();
    LH_FUZZ_CHECK(ApplyProfileKey(&c, key, value).ok());
  }
}

size_t Lines(absl::string_view s) {
  return 1 + std::count(s.begin(), s.end(), '\n');
}

} // namespace
} // namespace longhaul

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace longhaul;
  if (size > kMaxProfileFileBytes)
    return 0; // LoadProfileFile refuses these unread
  const absl::string_view text = fuzz::AsText(data, size);

  absl::StatusOr<TransportConfig> direct =
      ParseProfile(text, TransportConfig{}, kSource);
  if (!direct.ok())
    fuzz::CheckUserError(direct.status(), kSource);

  std::string rest;
  absl::StatusOr<ProfileSecurity> sec =
      SplitProfileSecurity(text, kSource, "/etc/lh", &rest);
  if (!sec.ok()) {
    fuzz::CheckUserError(sec.status(), kSource);
  } else {
    LH_FUZZ_CHECK(Lines(rest) == Lines(text));
    for (const ProfileSetting *s :
         {&sec->key, &sec->peer_key, &sec->psk_file}) {
      if (!s->set())
        continue;
      LH_FUZZ_CHECK(!s->value.empty());
      LH_FUZZ_CHECK(absl::StartsWith(s->value, "/"));
      LH_FUZZ_CHECK(absl::StartsWith(s->where, kSource));
      LH_FUZZ_CHECK(s->value.find('#') == std::string::npos);
    }
    LH_FUZZ_CHECK(sec->insecure.has_value() == !sec->insecure_where.empty());
    absl::StatusOr<TransportConfig> loaded =
        ParseProfile(rest, TransportConfig{}, kSource);
    if (!loaded.ok()) {
      fuzz::CheckUserError(loaded.status(), kSource);
    } else {
      // Without security keys the split changes nothing.
      if (!sec->any())
        LH_FUZZ_CHECK(direct.ok());
      CheckRoundTrip(*loaded,
                     text.substr(0, std::min<size_t>(text.find('\n'), 80)));
    }
    if (!sec->any())
      LH_FUZZ_CHECK(rest == text);
  }
  if (direct.ok())
    CheckRoundTrip(*direct, "");
  return 0;
}
