// Named links on disk: the edge around the pure link-spec parser (link_spec.h). Finds
// profiles/links/NAME.link (or a file given by path), reads it and hands the text to
// ParseLinkSpec, so longhaul-sim, longhaul-emu, longhaul-tune and the tests resolve a
// name the same way. Its own library (longhaul_link_files), outside the core layer: it
// reads the environment, the file system and /proc/self/exe.
//
// Lookup of NAME: a path to an existing file, else NAME.link in the first of the search
// directories that has it (a name with a '/' is only ever a path). The default
// directories, in order: $LONGHAUL_PROFILES_DIR/links, <exe dir>/../share/longhaul/
// profiles/links (an installed tool's), the source tree's profiles/links (compiled in).
//
// Errors: an unknown name is InvalidArgument listing the directories searched and the
// named links found there; an unreadable file is NotFound naming it; errors in a file's
// text are the parser's, followed by " (in PATH)". Thread-safe (no shared state; the
// environment is read at each call).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "transport/sim/link_spec.h"

namespace longhaul::sim {

// Where tools look for NAME.link (see above).
std::vector<std::string> DefaultLinkSearchDirs();

// Names of the *.link files in `search_dirs` (sorted, unique), for --help and errors.
std::vector<std::string> ListNamedLinks(absl::Span<const std::string> search_dirs);

// Finds and reads `name` as described above; origin = the file's path.
absl::StatusOr<NamedLink> ReadNamedLink(absl::string_view name,
                                        absl::Span<const std::string> search_dirs);

// A LinkResolver that reads named links from `search_dirs` (ReadNamedLink).
LinkResolver LinkFileResolver(std::vector<std::string> search_dirs);

// ParseLinkSpec with names read from `search_dirs`.
absl::StatusOr<LinkSpec> LoadLinkSpec(absl::string_view text,
                                      absl::Span<const std::string> search_dirs);
// Same, with DefaultLinkSearchDirs(): what a tool's --link=SPEC means.
absl::StatusOr<LinkSpec> LoadLinkSpec(absl::string_view text);

// Two lines for a tool's --help: "named links: a, b, ..." (DefaultLinkSearchDirs()) and
// "link keys: rate, rtt, ...".
std::string LinkSpecHelp();

}  // namespace longhaul::sim
