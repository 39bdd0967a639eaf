#include "tests/unit/layering/layering_check.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace longhaul::layering {
namespace {

bool IsPattern(const std::string& s) { return absl::EndsWith(s, "/*"); }
std::string PatternBase(const std::string& s) { return s.substr(0, s.size() - 1); }  // "tools/"

bool IsIdent(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The identifier that ends just before `end` ("" if none).
std::string IdentBefore(const std::string& s, size_t end) {
  size_t b = end;
  while (b > 0 && IsIdent(s[b - 1])) --b;
  return s.substr(b, end - b);
}

}  // namespace

std::string StripCommentsAndLiterals(const std::string& text) {
  std::string out = text;
  const size_t n = text.size();
  auto blank = [&](size_t from, size_t to) {  // [from, to), newlines kept
    for (size_t k = from; k < to && k < n; ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      // A line comment ends at the newline (a backslash before it continues it).
      size_t j = i;
      while (j < n && !(text[j] == '\n' && (j == 0 || text[j - 1] != '\\'))) ++j;
      blank(i, j);
      i = j;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      const size_t end = text.find("*/", i + 2);
      const size_t j = end == std::string::npos ? n : end + 2;
      blank(i, j);
      i = j;
    } else if (c == '"') {
      const std::string prefix = IdentBefore(text, i);
      if (prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" || prefix == "LR") {
        // R"delim( ... )delim"
        const size_t open = text.find('(', i + 1);
        if (open == std::string::npos) {
          blank(i, n);
          break;
        }
        const std::string close = ")" + text.substr(i + 1, open - i - 1) + "\"";
        const size_t end = text.find(close, open + 1);
        const size_t j = end == std::string::npos ? n : end + close.size();
        blank(i, j);
        i = j;
        continue;
      }
      size_t j = i + 1;
      while (j < n && text[j] != '"' && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, n);
      blank(i, j);
      i = j;
    } else if (c == '\'') {
      // After an identifier character: a digit separator (1'000'000), or the prefix of a
      // character literal (u8'x', L'x'), whose content is harmless to keep.
      if (i > 0 && IsIdent(text[i - 1])) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < n && text[j] != '\'' && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, n);
      blank(i, j);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<ClockRead> FindClockReads(const std::string& code) {
  static const std::regex kNamed(
      R"re(\b(steady_clock|system_clock|high_resolution_clock|utc_clock|tai_clock|gps_clock|file_clock|clock_gettime|gettimeofday|getrusage|timespec_get)\b)re");
  // std::clock(), std::time(...) and ::time(...) (a global call), or time() with the
  // arguments only the C function takes; not a member (x.time(), p->time(), T::time()).
  static const std::regex kStdCall(R"re((^|[^\w:])(std\s*::\s*|::\s*)(time|clock)\s*\()re");
  static const std::regex kTimeCall(R"re((^|[^\w.:>])time\s*\(\s*(nullptr|NULL|0\s*\)|&))re");
  std::vector<ClockRead> out;
  int line = 0;
  for (absl::string_view raw : absl::StrSplit(code, '\n')) {
    ++line;
    const std::string l(raw);
    for (auto it = std::sregex_iterator(l.begin(), l.end(), kNamed); it != std::sregex_iterator();
         ++it) {
      out.push_back({line, (*it)[1]});
    }
    for (auto it = std::sregex_iterator(l.begin(), l.end(), kStdCall); it != std::sregex_iterator();
         ++it) {
      out.push_back({line, absl::StrCat((*it)[3].str(), "()")});
    }
    if (std::regex_search(l, kTimeCall)) out.push_back({line, "time()"});
  }
  return out;
}

std::string ClockViolation::ToString() const {
  return absl::StrCat(file, ":", line, ": reads a clock (", what, ") but layer ", layer,
                      " is sans-IO: time comes in from the caller",
                      why.empty() ? "" : absl::StrCat(" (", why, ")"));
}

std::string Violation::ToString() const {
  return absl::StrCat(file, ":", line, ": includes \"", include, "\": ", from, " -> ", to,
                      " is not an allowed arrow", why.empty() ? "" : absl::StrCat(" (", why, ")"));
}

absl::StatusOr<LayerTable> ParseLayerTable(const std::string& text) {
  LayerTable t;
  std::set<std::string> names;
  struct Rule {
    int line;
    bool allow;
    std::string from;
    std::vector<std::string> to;
    std::string why;
  };
  std::vector<Rule> rules;
  int n = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++n;
    std::string line(raw.substr(0, raw.find('#')));
    absl::StripAsciiWhitespace(&line);
    if (line.empty()) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    const std::string& kw = words[0];
    if (kw == "layer") {
      if (words.size() < 3) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", n, ": expected 'layer NAME PATH...'"));
      }
      if (!names.insert(words[1]).second) {
        return absl::InvalidArgumentError(absl::StrCat("line ", n, ": layer ", words[1], " twice"));
      }
      for (size_t i = 2; i < words.size(); ++i) {
        if (IsPattern(words[1]) != IsPattern(words[i]) || (IsPattern(words[1]) && words.size() > 3)) {
          return absl::InvalidArgumentError(
              absl::StrCat("line ", n, ": a pattern layer has one pattern path and name"));
        }
        t.layers.push_back({words[1], words[i]});
      }
      continue;
    }
    if (kw == "sansio") {
      if (words.size() < 2) {
        return absl::InvalidArgumentError(absl::StrCat("line ", n, ": expected 'sansio NAME...'"));
      }
      for (size_t i = 1; i < words.size(); ++i) {
        if (!names.contains(words[i])) {
          return absl::InvalidArgumentError(absl::StrCat("line ", n, ": unknown layer ", words[i]));
        }
        t.sans_io.insert(words[i]);
      }
      continue;
    }
    if (kw != "allow" && kw != "deny") {
      return absl::InvalidArgumentError(absl::StrCat("line ", n, ": unknown keyword '", kw, "'"));
    }
    // allow A -> B C ...   |   deny A -> B: why
    std::string rest(absl::StripPrefix(line, kw));
    std::string why;
    if (kw == "deny") {
      const size_t colon = rest.find(':');
      if (colon == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", n, ": deny needs a reason after ':'"));
      }
      why = std::string(absl::StripAsciiWhitespace(rest.substr(colon + 1)));
      rest = rest.substr(0, colon);
      if (why.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("line ", n, ": deny with an empty reason"));
      }
    }
    std::vector<std::string> parts = absl::StrSplit(rest, "->");
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("line ", n, ": expected 'A -> B'"));
    }
    Rule r{n, kw == "allow", std::string(absl::StripAsciiWhitespace(parts[0])), {}, why};
    r.to = absl::StrSplit(parts[1], ' ', absl::SkipWhitespace());
    if (r.to.empty() || (!r.allow && r.to.size() != 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", n, ": ", kw == "deny" ? "deny names one target" : "no target"));
    }
    rules.push_back(std::move(r));
  }
  for (const Rule& r : rules) {
    for (const std::string& name : std::vector<std::string>{r.from} ) {
      if (!names.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat("line ", r.line, ": unknown layer ", name));
      }
    }
    for (const std::string& to : r.to) {
      if (!names.contains(to)) {
        return absl::InvalidArgumentError(absl::StrCat("line ", r.line, ": unknown layer ", to));
      }
      if (r.allow) {
        t.allowed[r.from].insert(to);
      } else {
        t.denied[{r.from, to}] = r.why;
      }
    }
  }
  for (const auto& [arrow, why] : t.denied) {
    auto a = t.allowed.find(arrow.first);
    if (a != t.allowed.end() && a->second.contains(arrow.second)) {
      return absl::InvalidArgumentError(
          absl::StrCat(arrow.first, " -> ", arrow.second, " is both allowed and denied"));
    }
  }
  return t;
}

std::string LayerOf(const LayerTable& t, const std::string& path) {
  const LayerTable::Layer* best = nullptr;
  size_t best_len = 0;
  for (const LayerTable::Layer& l : t.layers) {
    if (l.path == path) return l.name;  // a file of its own
    const std::string prefix = IsPattern(l.path) ? PatternBase(l.path) : l.path + "/";
    if (!absl::StartsWith(path, prefix)) continue;
    if (IsPattern(l.path) && path.find('/', prefix.size()) == std::string::npos) continue;
    if (prefix.size() > best_len) {
      best = &l;
      best_len = prefix.size();
    }
  }
  if (best == nullptr) return "";
  if (!IsPattern(best->path)) return best->name;
  const std::string base = PatternBase(best->path);
  const size_t end = path.find('/', base.size());
  return PatternBase(best->name) + path.substr(base.size(), end - base.size());
}

std::string RuleName(const LayerTable& t, const std::string& layer) {
  for (const LayerTable::Layer& l : t.layers) {
    if (l.name == layer) return layer;
  }
  for (const LayerTable::Layer& l : t.layers) {
    if (!IsPattern(l.name)) continue;
    const std::string base = PatternBase(l.name);
    if (absl::StartsWith(layer, base) && layer.find('/', base.size()) == std::string::npos) {
      return l.name;
    }
  }
  return layer;
}

CheckResult CheckTree(const LayerTable& t, const std::string& root,
                      const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  CheckResult out;
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> files;
  for (const std::string& d : dirs) {
    if (!fs::exists(fs::path(root) / d)) continue;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(root) / d)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cc") continue;
      files.push_back(fs::relative(e.path(), root).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    ++out.files;
    const std::string from = LayerOf(t, f);
    if (from.empty()) {
      out.unowned.push_back(f);
      continue;
    }
    const std::string from_rule = RuleName(t, from);
    std::ifstream in(fs::path(root) / f);
    std::stringstream text;
    text << in.rdbuf();
    if (t.sans_io.contains(from_rule)) {
      auto d = t.denied.find({from_rule, "clock"});
      const std::string why = d != t.denied.end() ? d->second : "";
      for (const ClockRead& c : FindClockReads(StripCommentsAndLiterals(text.str()))) {
        out.clock_reads.push_back({f, c.line, c.what, from, why});
      }
    }
    int n = 0;
    for (absl::string_view raw : absl::StrSplit(text.str(), '\n')) {
      const std::string line(raw);
      ++n;
      std::smatch m;
      if (!std::regex_search(line, m, kInclude)) continue;
      const std::string inc = m[1];
      const std::string first = inc.substr(0, inc.find('/'));
      if (std::find(dirs.begin(), dirs.end(), first) == dirs.end()) continue;
      ++out.includes;
      const std::string to = LayerOf(t, inc);
      if (to == from) continue;
      const std::string to_rule = RuleName(t, to);
      auto a = t.allowed.find(from_rule);
      if (!to.empty() && a != t.allowed.end() && a->second.contains(to_rule) &&
          !(from_rule == to_rule && from != to)) {
        continue;  // a pattern's folders never include each other
      }
      Violation v{f, n, inc, from, to.empty() ? "(no layer)" : to, ""};
      auto d = t.denied.find({from_rule, to_rule});
      if (d != t.denied.end()) v.why = d->second;
      out.violations.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace longhaul::layering
