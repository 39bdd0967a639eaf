// What this build of longhaul is: for bug reports, logs and `--version`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "longhaul/export.h"

namespace longhaul {

// The project's version, "0.1.0" (MAJOR.MINOR.PATCH). The shared library's own ABI
// number (liblonghaul.so.0) is separate: it changes with every incompatible ABI change.
LONGHAUL_API std::string_view Version();
// The git revision the build came from ("a56d3d8", with "-dirty" when the tree had
// uncommitted changes), or "unknown" when it was built outside a git checkout without
// LONGHAUL_GIT_REVISION set.
LONGHAUL_API std::string_view GitRevision();
// The wire protocol version this build speaks (the first byte of every datagram).
LONGHAUL_API uint32_t WireVersion();
// One line for `--version`: "PROGRAM 0.1.0 (git a56d3d8, wire protocol 1)".
LONGHAUL_API std::string VersionLine(std::string_view program);

}  // namespace longhaul
