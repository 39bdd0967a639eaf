#include "tuner/profile/tuned_profile.h"

#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transport/base/status.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"

namespace longhaul::tuner {

void Provenance::Add(absl::string_view key, absl::string_view value) {
  std::string v = absl::StrReplaceAll(value, {{"\r", " "}, {"\n", " "}});
  fields.emplace_back(std::string(key), std::move(v));
}

std::string Provenance::Get(absl::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return v;
  }
  return "";
}

namespace {
constexpr char kEndPrefix[] = "# end of longhaul tuned profile (";
}  // namespace

std::string FormatTunedProfile(const TransportConfig& config, const Provenance& provenance) {
  std::string header = kTunedProfileTitle;
  for (const auto& [k, v] : provenance.fields) absl::StrAppend(&header, "\n", k, ": ", v);
  std::string text = FormatProfile(config, header);
  absl::StrAppend(&text, kEndPrefix, ProfileKeyValues(config).size(), " keys)\n");
  return text;
}

absl::Status CheckTunedProfileComplete(absl::string_view text, absl::string_view source) {
  int line_number = 0, last_line = 0, keys = 0, lines = 0;
  bool titled = false, ended = false, title_prefix = false;
  int declared = -1;
  const std::string title = absl::StrCat("# ", kTunedProfileTitle);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty()) continue;
    last_line = line_number;
    if (++lines == 1) {
      titled = t == title;
      // The title itself cut short: nothing else can follow it.
      title_prefix = !titled && absl::StartsWith(title, t);
    }
    ended = false;
    if (absl::StartsWith(t, kEndPrefix)) {
      absl::string_view rest = t.substr(sizeof(kEndPrefix) - 1);
      const size_t sp = rest.find(' ');
      int n = 0;
      if (sp != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, sp), &n) &&
          rest.substr(sp) == " keys)") {
        declared = n;
        ended = true;
      }
      continue;
    }
    if (t[0] != '#') ++keys;
  }
  if (title_prefix && lines == 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", last_line, ": truncated tuned profile: it ends inside its title line"));
  }
  if (!titled) return absl::OkStatus();
  if (!ended) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", last_line, ": truncated tuned profile: it ends at line ", last_line,
        " without its end line (", kEndPrefix, "N keys)); regenerate it with longhaul-tune"));
  }
  if (declared != keys) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", last_line, ": tuned profile has ", keys, " key lines but its end line says ",
        declared));
  }
  return absl::OkStatus();
}

absl::StatusOr<TransportConfig> ParseTunedProfile(absl::string_view text,
                                                  const TransportConfig& base,
                                                  absl::string_view source_name) {
  LH_RETURN_IF_ERROR(CheckTunedProfileComplete(text, source_name));
  return ParseProfile(text, base, source_name);
}

absl::StatusOr<TransportConfig> LoadTunedProfile(const std::string& path,
                                                 const TransportConfig& base) {
  LH_ASSIGN_OR_RETURN(std::string text, ReadProfileFile(path));
  return ParseTunedProfile(text, base, path);
}

Provenance ParseProvenance(absl::string_view text) {
  Provenance p;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!absl::ConsumePrefix(&line, "#")) break;  // the first key=value line ends the header
    line = absl::StripLeadingAsciiWhitespace(line);
    const size_t colon = line.find(": ");
    if (colon == absl::string_view::npos || colon == 0) continue;
    absl::string_view key = line.substr(0, colon);
    if (key.find(' ') != absl::string_view::npos) continue;  // prose, not a field
    p.fields.emplace_back(std::string(key), std::string(line.substr(colon + 2)));
  }
  return p;
}

std::string UtcTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace longhaul::tuner
