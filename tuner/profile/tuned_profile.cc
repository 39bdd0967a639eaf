#include "tuner/profile/tuned_profile.h"

#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transport/core/profile/profile.h"

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

std::string FormatTunedProfile(const TransportConfig& config, const Provenance& provenance) {
  std::string header = kTunedProfileTitle;
  for (const auto& [k, v] : provenance.fields) absl::StrAppend(&header, "\n", k, ": ", v);
  return FormatProfile(config, header);
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
