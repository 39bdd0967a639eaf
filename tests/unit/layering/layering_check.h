// The include-graph check behind layering_test: reads the layer table (docs/layers.txt),
// assigns every source file of a tree to a layer, and reports every #include "..." that
// crosses from one layer to another along an arrow the table does not allow.
//
// Table lines (everything after '#' is a comment):
//   layer NAME PATH...       files under each PATH (a folder, or one file) belong to
//                            NAME (a file named exactly wins, then the longest folder);
//                            NAME and a single PATH may end in "/*": each folder there
//                            is a layer of its own (tools/* makes tools/perf, ...)
//   allow NAME -> NAME...    files of the first layer may include the others' headers
//   deny NAME -> NAME: why   a tempting arrow that is not allowed, and why (reported
//                            with every violation of it)
//   sansio NAME...           those layers are sans-IO: besides the arrows, their files
//                            may not read a clock themselves (see FindClockReads)
// An arrow that is neither allowed nor denied is not allowed either.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace longhaul::layering {

struct LayerTable {
  struct Layer {
    std::string name;  // "core", or "tools/*"
    std::string path;  // "transport/core", or "tools/*"
  };
  std::vector<Layer> layers;
  std::map<std::string, std::set<std::string>> allowed;  // layer (or pattern) -> targets
  std::map<std::pair<std::string, std::string>, std::string> denied;  // arrow -> why
  std::set<std::string> sans_io;  // layers whose files may not read a clock
};

// Parses a table. Errors name the line: unknown keyword, a rule naming an unknown layer,
// an arrow both allowed and denied, a deny without a reason, a sansio line naming an
// unknown layer.
absl::StatusOr<LayerTable> ParseLayerTable(const std::string& text);

// The layer of a path relative to the tree's root ("transport/core/connection.cc"), or
// "" when no layer owns it. For a "/*" layer the result names the folder
// ("tools/perf"); RuleName() maps it back to the pattern its rules are written for.
std::string LayerOf(const LayerTable& t, const std::string& path);
std::string RuleName(const LayerTable& t, const std::string& layer);

struct Violation {
  std::string file;  // relative to the root
  int line = 0;
  std::string include;
  std::string from, to;  // layers
  std::string why;       // the deny reason, if the table gives one
  std::string ToString() const;
};

// `text` (C++ source) with every comment and every string and character literal turned
// into spaces; newlines are kept, so line numbers stay. Digit separators (1'000) are not
// literals.
std::string StripCommentsAndLiterals(const std::string& text);

// A clock read in code (comments and literals stripped): a <chrono> clock (steady_clock,
// system_clock, high_resolution_clock, utc_clock, tai_clock, gps_clock, file_clock),
// clock_gettime, gettimeofday, getrusage, timespec_get, std::clock(), or the C time()
// (std::time / ::time, or time(nullptr | NULL | 0 | &...)); a member or a function of
// another name that happens to be called time() is not one.
struct ClockRead {
  int line = 0;
  std::string what;  // the name read: "steady_clock", "clock_gettime", "time()"
};
std::vector<ClockRead> FindClockReads(const std::string& code);

// A clock read in a file of a sans-IO layer.
struct ClockViolation {
  std::string file;  // relative to the root
  int line = 0;
  std::string what;
  std::string layer;
  std::string why;  // the reason the table gives for denying `layer -> clock`, if any
  std::string ToString() const;
};

struct CheckResult {
  std::vector<Violation> violations;
  std::vector<ClockViolation> clock_reads;  // in files of sans-IO layers
  std::vector<std::string> unowned;         // source files no layer owns
  size_t files = 0;
  size_t includes = 0;  // project includes seen (across layers or not)
};

// Walks `dirs` (relative to `root`) for .h/.cc files and checks every project include
// (one whose first path component is one of `dirs`), and the code of every file of a
// sans-IO layer for clock reads.
CheckResult CheckTree(const LayerTable& t, const std::string& root,
                      const std::vector<std::string>& dirs);

}  // namespace longhaul::layering
