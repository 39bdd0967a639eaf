#include "transport/core/profile/profile_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/core/profile/profile.h"

namespace longhaul {

absl::StatusOr<std::string> ReadProfileFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot read profile '", path, "': ", std::strerror(errno)));
  }
  std::string text;
  char buf[4096];
  // Refuse anything absurd rather than read forever.
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && text.size() <= kMaxProfileFileBytes) {
    text.append(buf, n);
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    return absl::NotFoundError(
        absl::StrCat("cannot read profile '", path, "': ", std::strerror(err)));
  }
  if (text.size() > kMaxProfileFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": profile is larger than ", kMaxProfileFileBytes, " bytes"));
  }
  return text;
}

absl::StatusOr<TransportConfig> LoadProfile(const std::string& path, const TransportConfig& base) {
  LH_ASSIGN_OR_RETURN(std::string text, ReadProfileFile(path));
  return ParseProfile(text, base, path);
}

}  // namespace longhaul
