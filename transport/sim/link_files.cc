#include "transport/sim/link_files.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transport/base/status.h"

namespace longhaul::sim {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("link spec: cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::string> FindNamedLink(const std::string& name,
                                          absl::Span<const std::string> search_dirs) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name, ec)) return name;
  if (name.find('/') == std::string::npos) {
    for (const std::string& dir : search_dirs) {
      std::string path = absl::StrCat(dir, "/", name, ".link");
      if (std::filesystem::is_regular_file(path, ec)) return path;
    }
  }
  std::vector<std::string> names = ListNamedLinks(search_dirs);
  return absl::InvalidArgumentError(absl::StrCat(
      "link spec: unknown link '", name, "': not a file, and no ", name, ".link in [",
      absl::StrJoin(search_dirs, ", "),
      "]; named links: ", names.empty() ? std::string("(none found)") : absl::StrJoin(names, ", "),
      "; or give keys: rate=10gbit,rtt=58ms,..."));
}

}  // namespace

std::vector<std::string> DefaultLinkSearchDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LONGHAUL_PROFILES_DIR"); env != nullptr && *env) {
    dirs.push_back(absl::StrCat(env, "/links"));
  }
  // An installed tool's own share/longhaul (the package's) before the checkout it was
  // built from (which a build tree's tools use: build/share does not exist).
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::filesystem::path p(std::string(exe, static_cast<size_t>(n)));
    dirs.push_back((p.parent_path() / ".." / "share" / "longhaul" / "profiles" / "links")
                       .lexically_normal()
                       .string());
  }
#ifdef LONGHAUL_SOURCE_DIR
  dirs.push_back(absl::StrCat(LONGHAUL_SOURCE_DIR, "/profiles/links"));
#endif
  return dirs;
}

std::vector<std::string> ListNamedLinks(absl::Span<const std::string> search_dirs) {
  std::vector<std::string> names;
  for (const std::string& dir : search_dirs) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".link") names.push_back(it->path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

absl::StatusOr<NamedLink> ReadNamedLink(absl::string_view name,
                                        absl::Span<const std::string> search_dirs) {
  LH_ASSIGN_OR_RETURN(std::string path, FindNamedLink(std::string(name), search_dirs));
  LH_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return NamedLink{std::move(text), std::move(path)};
}

LinkResolver LinkFileResolver(std::vector<std::string> search_dirs) {
  return
      [dirs = std::move(search_dirs)](absl::string_view name) { return ReadNamedLink(name, dirs); };
}

absl::StatusOr<LinkSpec> LoadLinkSpec(absl::string_view text,
                                      absl::Span<const std::string> search_dirs) {
  return ParseLinkSpec(text, LinkFileResolver({search_dirs.begin(), search_dirs.end()}));
}

absl::StatusOr<LinkSpec> LoadLinkSpec(absl::string_view text) {
  return ParseLinkSpec(text, LinkFileResolver(DefaultLinkSearchDirs()));
}

std::string LinkSpecHelp() {
  const std::vector<std::string> names = ListNamedLinks(DefaultLinkSearchDirs());
  return absl::StrCat("named links: ", names.empty() ? "(none found)" : absl::StrJoin(names, ", "),
                      "\nlink keys: ", absl::StrJoin(LinkSpecKeys(), ", "), "\n");
}

}  // namespace longhaul::sim
