// Reading profile files (transport/profile/profile_file.h): the file edge around
// the pure parser.
#include "transport/profile/profile_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"
#include "transport/profile/profile.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ProfileFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }
  std::string Write(const std::string& name, const std::string& text) {
    return tmp_.Write(name, text);
  }
  ::longhaul::testing::TempDir tmp_{"longhaul-profile-file"};
  const std::filesystem::path dir_ = tmp_.path();
};

TransportConfig Tuned() {
  TransportConfig c;
  c.window = ByteCount{22} << 20;
  c.recv_window = ByteCount{23} << 20;
  c.rate = Bandwidth::Gbps(1);
  c.fec = FecMode::kFixed;
  c.fec_k = 16;
  c.fec_m = 2;
  c.pacing_burst = Duration::Milliseconds(2);
  return c;
}

TEST_F(ProfileFileTest, LoadProfileReadsAndParsesAFile) {
  const std::string path = Write("tokyo.profile", FormatProfile(Tuned(), "tuned for a test"));
  absl::StatusOr<TransportConfig> c = LoadProfile(path, TransportConfig());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ProfileKeyValues(*c), ProfileKeyValues(Tuned()));
}

TEST_F(ProfileFileTest, ReadProfileFileGivesTheTextUnchanged) {
  const std::string text = "# comment\r\nwindow=1GiB\r\n\r\nfec=32,4";
  absl::StatusOr<std::string> read = ReadProfileFile(Write("crlf.profile", text));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, text);
  // An empty file is an empty profile.
  read = ReadProfileFile(Write("empty.profile", ""));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST_F(ProfileFileTest, ErrorsNameThePathAndLine) {
  const std::string path = Write("bad.profile", "window=1GiB\nflows=lots\n");
  absl::StatusOr<TransportConfig> c = LoadProfile(path, TransportConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()),
              StartsWith(absl::StrCat(path, ":2: bad value 'lots' for 'flows'")));
}

TEST_F(ProfileFileTest, MissingOrUnreadableFileIsNotFound) {
  const std::string missing = (dir_ / "nope.profile").string();
  absl::StatusOr<TransportConfig> c = LoadProfile(missing, TransportConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.status().message(),
            absl::StrCat("cannot read profile '", missing, "': No such file or directory"));
  // A directory opens but cannot be read.
  absl::StatusOr<std::string> d = ReadProfileFile(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(dir_.string()));
}

TEST_F(ProfileFileTest, RefusesAFileOverTheLimit) {
  const std::string path = Write("huge.profile", std::string(kMaxProfileFileBytes + 1, '#'));
  absl::StatusOr<std::string> read = ReadProfileFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
  EXPECT_EQ(read.status().message(), absl::StrCat(path, ": profile is larger than 1048576 bytes"));
  // Exactly at the limit is still a profile (all comment).
  EXPECT_TRUE(
      LoadProfile(Write("big.profile", std::string(kMaxProfileFileBytes, '#')), TransportConfig())
          .ok());
}

TEST_F(ProfileFileTest, SecurityKeysAreSplitOffForTheEdge) {
  const std::string path = Write("keys.profile",
                                 "# tuned, with keys\n"
                                 "window=22MiB\n"
                                 "key = keys/server.key   # this side\n"
                                 "peer_key=/etc/longhaul/allowed\n"
                                 "rate=1gbit\n"
                                 "psk_file=link.psk\n"
                                 "insecure=no\n");
  absl::StatusOr<LoadedProfile> p = LoadProfileFile(path, TransportConfig());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config.window, ByteCount{22} << 20);
  EXPECT_EQ(p->config.rate, Bandwidth::Gbps(1));
  EXPECT_EQ(p->security.key.value, (dir_ / "keys/server.key").string());
  EXPECT_EQ(p->security.key.where, path + ":3");
  EXPECT_EQ(p->security.peer_key.value, "/etc/longhaul/allowed");
  EXPECT_EQ(p->security.psk_file.value, (dir_ / "link.psk").string());
  EXPECT_EQ(p->security.psk_file.where, path + ":6");
  ASSERT_TRUE(p->security.insecure.has_value());
  EXPECT_FALSE(*p->security.insecure);
  EXPECT_EQ(p->security.insecure_where, path + ":7");
  EXPECT_TRUE(p->security.any());
  // LoadProfile takes the same file and drops the keys; a profile without them has none.
  absl::StatusOr<TransportConfig> c = LoadProfile(path, TransportConfig());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ProfileKeyValues(*c), ProfileKeyValues(p->config));
  absl::StatusOr<LoadedProfile> plain =
      LoadProfileFile(Write("plain.profile", "window=1GiB\n"), TransportConfig());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->security.any());
  // The core's parser never sees them: it still rejects them as unknown keys.
  EXPECT_FALSE(ParseProfile("key=a.key\n", TransportConfig(), "text").ok());
}

TEST_F(ProfileFileTest, SecurityKeyErrorsNameTheLine) {
  auto error = [&](const std::string& text) {
    return std::string(LoadProfileFile(Write("bad.profile", text), TransportConfig())
                           .status()
                           .message());
  };
  const std::string bad = (dir_ / "bad.profile").string();
  EXPECT_THAT(error("window=1GiB\ninsecure=maybe\n"),
              StartsWith(bad + ":2: bad value 'maybe' for 'insecure': "));
  EXPECT_EQ(error("key=\n"), bad + ":1: 'key' needs a file");
  EXPECT_EQ(error("\npeer_key\n"), bad + ":2: expected peer_key=value");
  // Other lines keep their numbers in the core parser's errors.
  EXPECT_THAT(error("key=a.key\npsk_file=b\nwindow=12x\n"),
              StartsWith(bad + ":3: bad value '12x' for 'window'"));
  // A later line overrides, as for every key.
  absl::StatusOr<LoadedProfile> twice =
      LoadProfileFile(Write("twice.profile", "key=a\nkey=b\n"), TransportConfig());
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->security.key.value, (dir_ / "b").string());
}

}  // namespace
}  // namespace longhaul
