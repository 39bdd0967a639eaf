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

}  // namespace

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
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
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
