#include "tools/bridge/bridge_config.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transport/base/status.h"
#include "transport/net/socket_address.h"

namespace longhaul::bridge {

absl::Status CheckForwardName(absl::string_view name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward name '", name, "' must have 1 to 64 characters"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "forward name '", name, "' may contain only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

absl::Status AddForward(Forward f, std::vector<Forward>* all) {
  for (const Forward& g : *all) {
    if (g.name == f.name) {
      return absl::InvalidArgumentError(absl::StrCat(f.origin, ": forward '", f.name,
                                                     "' is already defined at ", g.origin));
    }
  }
  all->push_back(std::move(f));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Forward>> ParseForwards(absl::string_view text,
                                                   absl::string_view source) {
  std::vector<Forward> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const std::string where = absl::StrCat(source, ":", line_no);
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected 'NAME ADDRESS:PORT', got '", line, "'"));
    }
    if (absl::Status s = CheckForwardName(words[0]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    }
    absl::StatusOr<net::HostPort> hp = net::SplitHostPort(words[1]);
    if (!hp.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", hp.status().message()));
    if (hp->port == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": port 0 in '", words[1], "': give a port"));
    }
    Forward f{std::string(words[0]), hp->host, hp->port, where};
    LH_RETURN_IF_ERROR(AddForward(std::move(f), &out));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no forwards (one a line: NAME ADDRESS:PORT)"));
  }
  return out;
}

}  // namespace longhaul::bridge
