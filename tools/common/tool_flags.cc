#include "tools/common/tool_flags.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "longhaul/version.h"

namespace longhaul {

bool IsToolFlag(const gflags::CommandLineFlagInfo& f, const std::vector<std::string>& dirs) {
  return std::any_of(dirs.begin(), dirs.end(),
                     [&](const std::string& d) { return absl::StrContains(f.filename, d); });
}

absl::StatusOr<ToolFlagAction> ParseToolFlags(int argc, char** argv, const ToolFlagOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "--helpfull" || arg == "-help") {
      return ToolFlagAction::kHelp;
    }
    if (arg == "--version" || (o.version_flag && arg == "-v")) return ToolFlagAction::kVersion;
    if (arg.size() < 2 || arg[0] != '-') {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    const bool long_form = arg[1] == '-';
    const std::string body = arg.substr(long_form ? 2 : 1);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const std::string as_typed = absl::StrCat(long_form ? "--" : "-", name);
    if (!long_form && o.short_name) {
      if (const char* l = o.short_name(name)) name = l;
    }
    gflags::CommandLineFlagInfo info;
    bool known = gflags::GetCommandLineFlagInfo(name.c_str(), &info);
    if (!known && !has_value && absl::StartsWith(name, "no")) {
      gflags::CommandLineFlagInfo neg;
      if (gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &neg) && neg.type == "bool") {
        name = name.substr(2);
        value = "false";
        has_value = true;
        known = true;
        info = neg;
      }
    }
    const bool allowed =
        known && (IsToolFlag(info, o.dirs) || std::find(o.always_allowed.begin(),
                                                        o.always_allowed.end(),
                                                        name) != o.always_allowed.end());
    if (!allowed) return absl::InvalidArgumentError(absl::StrCat("unknown flag '", as_typed, "'"));
    if (!has_value) {
      if (info.type == "bool") {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag '--", name, "' needs a value"));
      }
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad value '", value, "' for --", name, " (a ", info.type, ")"));
    }
  }
  return ToolFlagAction::kRun;
}

std::string ToolUsage::Message(absl::string_view message) const {
  return absl::StrCat(tool_, ": ", message, "\n(see ", tool_, " --help)\n");
}

void ToolUsage::Fail(absl::string_view message) const {
  std::cerr << Message(message);
  std::exit(kUsageExitStatus);
}

namespace {

void InitToolLogging(const char* argv0) {
  if (gflags::GetCommandLineFlagInfoOrDie("logtostderr").is_default) FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv0);
  google::InstallFailureSignalHandler();
}

}  // namespace

void InitTool(int argc, char** argv, const ToolFlagOptions& o, const char* tool,
              const std::function<void()>& print_help) {
  ParseToolFlagsOrExit(argc, argv, o, tool, print_help);
  InitToolLogging(argv[0]);
}

void InitTool(int argc, char** argv, const std::vector<std::string>& dirs, const ToolUsage& usage,
              const std::function<void()>& print_help) {
  ToolFlagOptions o;
  o.dirs = dirs;
  InitTool(argc, argv, o, usage.tool(), print_help);
}

void InitTool(int* argc, char*** argv, const char* usage) {
  const std::string program = std::filesystem::path((*argv)[0]).filename().string();
  ExitIfVersionRequested(*argc, *argv, program.c_str());
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(argc, argv, /*remove_flags=*/true);
  InitToolLogging((*argv)[0]);
}

void ParseToolFlagsOrExit(int argc, char** argv, const ToolFlagOptions& o, const char* tool,
                          const std::function<void()>& print_help) {
  absl::StatusOr<ToolFlagAction> a = ParseToolFlags(argc, argv, o);
  if (!a.ok()) ToolUsage(tool).Fail(a.status().message());
  if (*a == ToolFlagAction::kHelp) {
    print_help();
    std::cout << FormatFlagHelp("version", "print the version line and exit");
    std::exit(0);
  }
  if (*a == ToolFlagAction::kVersion) {
    std::cout << VersionLine(tool) << "\n";
    std::exit(0);
  }
}

void ExitIfVersionRequested(int argc, char** argv, const char* tool) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--version" || arg == "-version") {
      std::cout << VersionLine(tool) << "\n";
      std::exit(0);
    }
  }
}

std::string FormatFlagHelp(absl::string_view name, absl::string_view text) {
  std::string out;
  std::string line = absl::StrCat("  --", name);
  if (line.size() >= kFlagHelpIndent) {
    // No room for a gap before the text column: the text starts on the next line.
    absl::StrAppend(&out, line, "\n");
    line.clear();
  }
  line.resize(kFlagHelpIndent, ' ');
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > kFlagHelpIndent && line.size() + 1 + word.size() > kFlagHelpWidth) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(kFlagHelpIndent, ' ');
    }
    if (line.size() > kFlagHelpIndent) line += ' ';
    absl::StrAppend(&line, word);
  }
  absl::StrAppend(&out, line, "\n");
  return out;
}

void PrintToolFlags(std::ostream& out, const std::vector<std::string>& dirs) {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  for (const auto& f : flags) {
    if (!IsToolFlag(f, dirs)) continue;
    out << FormatFlagHelp(
        f.name, absl::StrCat(f.description, " (default: ",
                             f.default_value.empty() ? "unset" : f.default_value, ")"));
  }
}

}  // namespace longhaul
