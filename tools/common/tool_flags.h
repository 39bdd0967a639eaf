// Command-line parsing shared by the tools' main()s: gflags holds the flags, but a bad
// command line must end with exit status 2 and a message naming the flag, not gflags'
// own exit(1). Tool-layer code; not thread-safe (call from main()).
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "gflags/gflags.h"

namespace longhaul {

// Exit status of every tool for a bad command line (flags, values, specs).
inline constexpr int kUsageExitStatus = 2;

// A tool's usage errors, the same in every main(): Fail() prints "TOOL: message" and
// "(see TOOL --help)" on stderr and exits with kUsageExitStatus; Or() unwraps a parsed
// flag value or fails naming the flag. `tool` must outlive the object (a literal).
//
//   constexpr ToolUsage kUsage("longhaul-sim");
//   const Duration d = kUsage.Or(ParseDuration(FLAGS_stagger), "stagger");
//   if (FLAGS_connections < 1) kUsage.Fail("--connections must be >= 1");
//   const bool payload = kUsage.Choice<bool>(FLAGS_payload, "payload",
//                                            {{"on", true}, {"off", false}});
class ToolUsage {
 public:
  explicit constexpr ToolUsage(const char* tool) : tool_(tool) {}

  const char* tool() const { return tool_; }
  // What Fail(message) prints: "TOOL: message\n(see TOOL --help)\n".
  std::string Message(absl::string_view message) const;
  [[noreturn]] void Fail(absl::string_view message) const;
  // *v, or Fail("--FLAG: <v's error message>").
  template <typename T>
  T Or(absl::StatusOr<T> v, absl::string_view flag) const {
    if (!v.ok()) Fail(absl::StrCat("--", flag, ": ", v.status().message()));
    return *std::move(v);
  }
  // The value that `text` names among `choices`, or Fail("--FLAG: unknown 'text' (NAME1,
  // NAME2, ...)") with the names in the order given.
  template <typename T>
  T Choice(absl::string_view text, absl::string_view flag,
           std::initializer_list<std::pair<absl::string_view, T>> choices) const {
    std::vector<absl::string_view> names;
    for (const auto& [name, value] : choices) {
      if (name == text) return value;
      names.push_back(name);
    }
    Fail(absl::StrCat("--", flag, ": unknown '", text, "' (", absl::StrJoin(names, ", "), ")"));
  }

 private:
  const char* tool_;
};

struct ToolFlagOptions {
  // Where the tool's flags are defined: a flag belongs to the tool when the path of its
  // source file contains one of these, a directory ("tools/perf/") or a file's path
  // without the extension ("tools/common/transport_flags"). Flags defined elsewhere
  // (gflags' and glog's own) are refused, except `always_allowed`.
  std::vector<std::string> dirs;
  std::vector<std::string> always_allowed = {"v", "vmodule", "logtostderr", "minloglevel",
                                             "stderrthreshold", "log_dir"};
  // Single-dash short forms ("s" -> "server"); may be empty.
  std::function<const char*(const std::string&)> short_name;
  // --version always asks for the version line (VersionLine); with this, -v does too
  // (iperf3's short form; glog's verbosity stays --v=N).
  bool version_flag = false;
};

enum class ToolFlagAction { kRun, kHelp, kVersion };

// Parses argv[1..]: --name=value, --name value, --bool, --nobool, -x (short forms).
// Returns what to do, or InvalidArgument naming the problem ("unknown flag '--frob'",
// "flag '--time' needs a value", "bad value 'x' for --port (a int32)", "unexpected
// argument 'foo'").
absl::StatusOr<ToolFlagAction> ParseToolFlags(int argc, char** argv, const ToolFlagOptions& o);

// ParseToolFlags for a tool's main(): on a bad command line fails as ToolUsage(tool)
// does (message, "(see TOOL --help)", exit status 2); --help calls `print_help`, adds
// the --version line and exits 0; --version prints VersionLine(tool) ("TOOL 0.1.0 (git REV, wire protocol 1)")
// and exits 0.
void ParseToolFlagsOrExit(int argc, char** argv, const ToolFlagOptions& o, const char* tool,
                          const std::function<void()>& print_help);

// The common start of every tool's main(), in one of two forms. Each parses the command
// line, then initialises glog with output to stderr (unless --logtostderr was given
// explicitly) and a failure signal handler. Call once, before starting threads.
//
// With the tool's own parser: ParseToolFlagsOrExit(argc, argv, o, tool, print_help)
// (exit status 2 on a bad command line, --help and --version exit 0).
void InitTool(int argc, char** argv, const ToolFlagOptions& o, const char* tool,
              const std::function<void()>& print_help);
// The same for a tool whose flags are all defined in `dirs`, with no short forms and no -v:
// ToolFlagOptions{.dirs = dirs} and usage.tool().
void InitTool(int argc, char** argv, const std::vector<std::string>& dirs, const ToolUsage& usage,
              const std::function<void()>& print_help);
// With gflags' parser: sets the usage text and parses the flags (removing them from
// argv); --version prints the version line (named after argv[0]'s file name) and exits 0.
void InitTool(int* argc, char*** argv, const char* usage);

// For main()s that parse with gflags or another library: when argv holds --version (or
// -version), prints VersionLine(tool) and exits 0; otherwise returns.
void ExitIfVersionRequested(int argc, char** argv, const char* tool);

// True when the flag was defined in one of `dirs`.
bool IsToolFlag(const gflags::CommandLineFlagInfo& f, const std::vector<std::string>& dirs);

// Columns of the flags' help lines.
inline constexpr size_t kFlagHelpIndent = 21;  // where the text starts
inline constexpr size_t kFlagHelpWidth = 80;   // lines end before this (long words aside)

// One flag's help: "  --name" padded to kFlagHelpIndent, then `text` word-wrapped at
// kFlagHelpWidth with continuation lines indented to the same column. A name that would
// leave no gap before that column gets a line of its own and the text starts below it.
std::string FormatFlagHelp(absl::string_view name, absl::string_view text);

// The tool's flags (defined in `dirs`) as FormatFlagHelp lines, sorted by gflags' order
// (by file, then name), each text being "description (default: value)".
void PrintToolFlags(std::ostream& out, const std::vector<std::string>& dirs);

}  // namespace longhaul
