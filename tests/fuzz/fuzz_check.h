// Helpers shared by the fuzz bodies (wire_fuzz, handshake_fuzz, bridge_frame_fuzz,
// profile_fuzz, link_spec_fuzz, nccl_frames_fuzz, key_files_fuzz): an invariant
// check that aborts (so libFuzzer and the replay tests both report it as a crash,
// with the failed condition on stderr), and a text view of the input. Header-only; the bodies
// build both into libFuzzer binaries (clang) and into ordinary gtest replay
// tests (any compiler).
#pragma once

#include "absl/strings/string_view.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"

#define LH_FUZZ_CHECK(cond)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,    \
                   #cond);                                                     \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

namespace longhaul::fuzz {

inline absl::string_view AsText(const uint8_t *data, size_t size) {
  return absl::string_view(reinterpret_cast<const char *>(data), size);
}

// An error a user will read: not OK, and says something. With `prefix`, it
// names the source first (the file name, "FILE:LINE: ..."), as every text
// parser here promises.
inline void CheckUserError(const absl::Status &s,
                           absl::string_view prefix = {}) {
  LH_FUZZ_CHECK(!s.ok());
  LH_FUZZ_CHECK(!s.message().empty());
  if (!prefix.empty())
    LH_FUZZ_CHECK(s.message().substr(0, prefix.size()) == prefix);
}

} // namespace longhaul::fuzz
