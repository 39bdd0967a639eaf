// Transitional: force-included into longhaul-nccl-bench by tools/CMakeLists.txt, which
// is not yet moved to the file-reading edges: it calls LoadProfile (now in
// profile_file.h) and the one-argument ParseLinkSpec(text) that looked named links up in
// the default directories (now LoadLinkSpec in link_files.h). Delete this header and the
// block in tools/CMakeLists.txt once tools/nccl_bench includes those headers, links
// longhaul_profile_file and longhaul_link_files, and calls sim::LoadLinkSpec.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/core/profile/profile_file.h"
#include "transport/sim/link_files.h"
#include "transport/sim/link_spec.h"

namespace longhaul::sim {

// What ParseLinkSpec(text) used to do: named links from DefaultLinkSearchDirs().
inline absl::StatusOr<LinkSpec> ParseLinkSpec(absl::string_view text) { return LoadLinkSpec(text); }

}  // namespace longhaul::sim
