#include "transport/base/file_trust.h"
#include "transport/profile/profile_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/profile/profile.h"

namespace longhaul {

absl::StatusOr<std::string> ReadProfileFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot read profile '", path, "': ", std::strerror(errno)));
  }
  // A profile decides how (and, with key lines, whether securely) the process talks:
  // nobody else may be able to change it (transport/base/file_trust.h).
  if (absl::Status trusted = CheckTrustedFile(fileno(f), path, FileTrust::kTrust); !trusted.ok()) {
    std::fclose(f);
    return trusted;
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

absl::StatusOr<ProfileSecurity> SplitProfileSecurity(absl::string_view text,
                                                     absl::string_view source_name,
                                                     const std::string& directory,
                                                     std::string* rest) {
  ProfileSecurity out;
  rest->clear();
  int line_number = 0;
  bool first = true;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (!first) rest->push_back('\n');
    first = false;
    // Lines are applied in order as in ParseProfile: a later one overrides an earlier one.
    absl::string_view line = raw;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    const size_t eq = line.find('=');
    const absl::string_view key =
        eq == absl::string_view::npos ? line : absl::StripAsciiWhitespace(line.substr(0, eq));
    ProfileSetting* file = key == "key"        ? &out.key
                           : key == "peer_key" ? &out.peer_key
                           : key == "psk_file" ? &out.psk_file
                                               : nullptr;
    if (file == nullptr && key != "insecure") {
      rest->append(raw.data(), raw.size());  // the core's parser takes (and checks) it
      continue;
    }
    const std::string where = absl::StrCat(source_name, ":", line_number);
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected ", key, "=value"));
    }
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    if (file == nullptr) {
      absl::StatusOr<bool> b = ParseBool(value);
      if (!b.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": bad value '", value,
                                                       "' for 'insecure': ", b.status().message()));
      }
      out.insecure = *b;
      out.insecure_where = where;
      continue;
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' needs a file"));
    }
    file->value = value.front() == '/' || directory.empty()
                      ? std::string(value)
                      : absl::StrCat(directory, directory.back() == '/' ? "" : "/", value);
    file->where = where;
  }
  return out;
}

absl::StatusOr<LoadedProfile> LoadProfileFile(const std::string& path,
                                              const TransportConfig& base) {
  LH_ASSIGN_OR_RETURN(std::string text, ReadProfileFile(path));
  const size_t slash = path.rfind('/');
  const std::string directory =
      slash == std::string::npos ? "" : path.substr(0, slash == 0 ? 1 : slash);
  std::string rest;
  LoadedProfile out;
  LH_ASSIGN_OR_RETURN(out.security, SplitProfileSecurity(text, path, directory, &rest));
  LH_ASSIGN_OR_RETURN(out.config, ParseProfile(rest, base, path));
  return out;
}

absl::StatusOr<TransportConfig> LoadProfile(const std::string& path, const TransportConfig& base) {
  LH_ASSIGN_OR_RETURN(LoadedProfile loaded, LoadProfileFile(path, base));
  return loaded.config;
}

}  // namespace longhaul
