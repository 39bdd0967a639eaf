// One list of transport settings: the profile's key table (ProfileKeys()). Each key must
// also be a tool flag of the same name (TransportFlagNames(), less the documented
// exceptions), a key of the tools' JSON (TransportConfigToJson), named in profile.h's key
// comment and in docs/, listed among docs/simulator.md's transport flags, and settable as
// NCCL_LONGHAUL_<KEY> through the NCCL plugin. A setting added in one place and missing in
// another fails here, naming the key and the place.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/common/transport_flags.h"
#include "transport/base/parse.h"
#include "transport/core/config.h"
#include "transport/profile/profile.h"
#ifdef LONGHAUL_HAVE_NCCL_PLUGIN
#include "transport/nccl/settings.h"
#endif

namespace longhaul {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::filesystem::path(LONGHAUL_SOURCE_DIR) / relative);
  EXPECT_TRUE(in.good()) << "cannot read " << relative;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<std::string> CanonicalValue(const TransportConfig& c, const std::string& key) {
  for (const auto& [k, v] : ProfileKeyValues(c)) {
    if (k == key) return v;
  }
  return std::nullopt;
}

// A value of `key` other than its default that makes a valid configuration, found from
// the key's kind alone (so a new key needs nothing here).
std::optional<std::string> OtherValue(const std::string& key) {
  const TransportConfig defaults;
  const std::optional<ProfileValueKind> kind = ProfileKeyKind(key);
  if (!kind.has_value()) return std::nullopt;
  const std::optional<std::string> current = CanonicalValue(defaults, key);
  std::vector<std::string> candidates;
  switch (*kind) {
    case ProfileValueKind::kSize: {
      const uint64_t v = current ? ParseByteCount(*current).value() : 0;
      candidates = {absl::StrCat(v * 2), absl::StrCat(v / 2), "1500", "9000"};
      break;
    }
    case ProfileValueKind::kRate: {
      const double v = current ? ParseBandwidth(*current).value().bps() : 0;
      candidates = {FormatBandwidth(Bandwidth::BitsPerSecond(v * 2)),
                    FormatBandwidth(Bandwidth::BitsPerSecond(v / 2)), "1gbit"};
      break;
    }
    case ProfileValueKind::kDuration: {
      const int64_t v = current ? ParseDuration(*current).value().ns() : 0;
      candidates = {FormatDuration(Duration::Nanoseconds(v * 2)),
                    FormatDuration(Duration::Nanoseconds(v / 2)), "1ms"};
      break;
    }
    case ProfileValueKind::kInteger: {
      const int64_t v = current ? ParseInteger(*current).value() : 0;
      candidates = {absl::StrCat(v + 1), absl::StrCat(v - 1), absl::StrCat(v * 2)};
      break;
    }
    case ProfileValueKind::kBool:
      candidates = {"true", "false"};
      break;
    case ProfileValueKind::kNumber:
      candidates = {"0.5", "0.25", "0.125", "0.75"};
      break;
    case ProfileValueKind::kChoice:
      candidates = {"bbr", "fixed", "32,4", "auto", "off"};
      break;
  }
  for (const std::string& value : candidates) {
    TransportConfig c;
    if (!ApplyProfileKey(&c, key, value).ok() || !c.Validate().ok()) continue;
    if (FormatProfile(c, "") != FormatProfile(defaults, "")) return value;
  }
  return std::nullopt;
}

TEST(SettingsConsistencyTest, EveryKeyHasATestValue) {
  for (const std::string& key : ProfileKeys()) {
    EXPECT_TRUE(OtherValue(key).has_value()) << key << ": no valid non-default value found";
  }
}

TEST(SettingsConsistencyTest, EveryKeyIsAFlagOfTheSameName) {
  const std::vector<std::string> flags = TransportFlagNames();
  const std::vector<std::string> without = ProfileKeysWithoutFlag();
  for (const std::string& key : ProfileKeys()) {
    gflags::CommandLineFlagInfo info;
    const bool is_flag = gflags::GetCommandLineFlagInfo(key.c_str(), &info);
    if (Contains(without, key)) {
      EXPECT_FALSE(Contains(flags, key)) << key;
      continue;
    }
    EXPECT_TRUE(is_flag) << "profile key '" << key << "' has no --" << key
                         << " (tools/common/transport_flags.cc)";
    EXPECT_TRUE(Contains(flags, key)) << key << " is not in TransportFlagNames()";
    if (is_flag) {
      EXPECT_FALSE(info.description.empty()) << "--" << key << " has no help text";
    }
  }
  for (const std::string& flag : flags) {
    EXPECT_TRUE(Contains(ProfileKeys(), flag)) << "--" << flag << " is not a profile key";
  }
  // The documented order: the key table's, --mtu right after --segment.
  ASSERT_GE(flags.size(), 2u);
  EXPECT_EQ(flags[0], "segment");
  EXPECT_EQ(flags[1], "mtu");
}

TEST(SettingsConsistencyTest, FlagDefaultsAreTheConfigDefaults) {
  const TransportConfig defaults;
  for (const std::string& key : TransportFlagNames()) {
    if (key == "mtu") continue;  // no default: it only derives segment
    gflags::CommandLineFlagInfo info;
    ASSERT_TRUE(gflags::GetCommandLineFlagInfo(key.c_str(), &info)) << key;
    TransportConfig c;
    ASSERT_TRUE(ApplyProfileKey(&c, key, info.default_value).ok())
        << "--" << key << "'s default '" << info.default_value << "' is not a profile value";
    EXPECT_EQ(CanonicalValue(c, key), CanonicalValue(defaults, key)) << "--" << key;
  }
}

TEST(SettingsConsistencyTest, EveryFlagSetsItsKey) {
  for (const std::string& key : TransportFlagNames()) {
    const std::optional<std::string> value = OtherValue(key);
    ASSERT_TRUE(value.has_value()) << key;
    TransportConfig expected;
    ASSERT_TRUE(ApplyProfileKey(&expected, key, *value).ok()) << key;
    gflags::FlagSaver saver;
    ASSERT_FALSE(gflags::SetCommandLineOption(key.c_str(), value->c_str()).empty())
        << "--" << key << "=" << *value;
    absl::StatusOr<TransportConfig> got = TransportConfigFromFlags();
    ASSERT_TRUE(got.ok()) << "--" << key << "=" << *value << ": " << got.status();
    EXPECT_EQ(FormatProfile(*got, ""), FormatProfile(expected, "")) << "--" << key << "=" << *value;
  }
}

TEST(SettingsConsistencyTest, EveryKeyIsInTheJson) {
  const nlohmann::json j = TransportConfigToJson(TransportConfig());
  for (const std::string& key : ProfileKeys()) {
    if (key == "mtu") continue;  // derives segment; max_datagram_bytes stands for it
    EXPECT_TRUE(j.contains(key)) << "JSON params lack '" << key << "'";
    const std::optional<ProfileValueKind> kind = ProfileKeyKind(key);
    ASSERT_TRUE(kind.has_value()) << key;
    const char* suffix = *kind == ProfileValueKind::kSize       ? "_bytes"
                         : *kind == ProfileValueKind::kRate     ? "_bps"
                         : *kind == ProfileValueKind::kDuration ? "_ns"
                                                                : nullptr;
    if (suffix != nullptr) {
      EXPECT_TRUE(j.contains(key + suffix)) << "JSON params lack '" << key << suffix << "'";
    }
  }
  EXPECT_TRUE(j.contains("max_datagram_bytes"));
}

TEST(SettingsConsistencyTest, EveryKeyIsInProfileHeaderComment) {
  const std::string header = ReadSource("transport/profile/profile.h");
  const std::string comment = header.substr(0, header.find("#pragma once"));
  for (const std::string& key : ProfileKeys()) {
    EXPECT_NE(comment.find(key), std::string::npos)
        << "transport/profile/profile.h's key list lacks '" << key << "'";
  }
}

TEST(SettingsConsistencyTest, EveryKeyIsDocumented) {
  std::string docs;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(LONGHAUL_SOURCE_DIR) / "docs")) {
    if (entry.path().extension() != ".md") continue;
    docs += ReadSource(std::filesystem::relative(entry.path(), LONGHAUL_SOURCE_DIR).string());
  }
  for (const std::string& key : ProfileKeys()) {
    EXPECT_TRUE(docs.find(absl::StrCat("`", key, "`")) != std::string::npos ||
                docs.find(absl::StrCat("--", key)) != std::string::npos ||
                docs.find(absl::StrCat("`", key, "=")) != std::string::npos)
        << "no docs/*.md names '" << key << "'";
  }
}

TEST(SettingsConsistencyTest, SimulatorDocsListEveryFlag) {
  const std::string text = ReadSource("docs/simulator.md");
  const size_t begin = text.find("Transport flags are the shared ones");
  ASSERT_NE(begin, std::string::npos) << "docs/simulator.md: transport flag list not found";
  const size_t end = text.find("`--help`", begin);
  ASSERT_NE(end, std::string::npos);
  std::vector<std::string> listed;
  std::string word;
  std::istringstream in(text.substr(begin, end - begin));
  while (in >> word) {
    word.erase(std::remove_if(word.begin(), word.end(), [](char c) { return c == '`' || c == ';' || c == '(' || c == ')'; }),
               word.end());
    if (word.rfind("--", 0) == 0) listed.push_back(word.substr(2));
  }
  for (const std::string& flag : TransportFlagNames()) {
    EXPECT_TRUE(Contains(listed, flag))
        << "docs/simulator.md's transport flag list lacks --" << flag
        << " (listed: " << absl::StrJoin(listed, " ") << ")";
  }
}

#ifdef LONGHAUL_HAVE_NCCL_PLUGIN
absl::StatusOr<nccl::Settings> ReadEnv(const std::vector<std::string>& entries) {
  std::vector<const char*> envp;
  for (const std::string& e : entries) envp.push_back(e.c_str());
  envp.push_back(nullptr);
  return nccl::ReadSettings(envp.data());
}

TEST(SettingsConsistencyTest, EveryKeyIsAnNcclVariable) {
  absl::StatusOr<nccl::Settings> base = ReadEnv({});
  ASSERT_TRUE(base.ok()) << base.status();
  for (const std::string& key : ProfileKeys()) {
    const std::string variable = absl::StrCat(nccl::kSettingPrefix, absl::AsciiStrToUpper(key));
    EXPECT_EQ(nccl::FindPluginSetting(absl::AsciiStrToUpper(key)), nullptr)
        << variable << " is both a plugin setting and a profile key";
    const std::optional<std::string> value = OtherValue(key);
    ASSERT_TRUE(value.has_value()) << key;
    TransportConfig expected = base->config;
    ASSERT_TRUE(ApplyProfileKey(&expected, key, *value).ok()) << key;
    absl::StatusOr<nccl::Settings> got = ReadEnv({absl::StrCat(variable, "=", *value)});
    ASSERT_TRUE(got.ok()) << variable << "=" << *value << ": " << got.status();
    EXPECT_EQ(FormatProfile(got->config, ""), FormatProfile(expected, ""))
        << variable << "=" << *value;
  }
}

// The plugin settings longhaul-nccl-bench sets by key (tools/nccl_bench/parent.cc's
// PluginVariable) are in the plugin's table.
TEST(SettingsConsistencyTest, NcclBenchPluginKeysAreInThePluginTable) {
  for (const char* key :
       {"IFNAME", "PROFILE", "CREDIT", "SPIN", "KEY", "PEER_KEY", "PSK_FILE", "INSECURE"}) {
    EXPECT_NE(nccl::FindPluginSetting(key), nullptr) << key;
  }
}
#endif

}  // namespace
}  // namespace longhaul
