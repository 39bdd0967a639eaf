// Named links on disk (transport/sim/link_files.h): finding and reading NAME.link.
#include "transport/sim/link_files.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::sim {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> SourceDirs() {
  return {std::string(LONGHAUL_SOURCE_DIR) + "/profiles/links"};
}

class LinkFilesTest : public ::testing::Test {
 protected:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("link_files_test_" + std::to_string(getpid()));
  void SetUp() override {
    std::filesystem::create_directories(dir_);
    unsetenv("LONGHAUL_PROFILES_DIR");
  }
  void TearDown() override {
    unsetenv("LONGHAUL_PROFILES_DIR");
    std::filesystem::remove_all(dir_);
  }
  void Write(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
};

TEST_F(LinkFilesTest, ShippedLinksParse) {
  absl::StatusOr<LinkSpec> ts = LoadLinkSpec("tokyo-singapore,loss=1e-3", SourceDirs());
  ASSERT_TRUE(ts.ok()) << ts.status();
  EXPECT_EQ(ts->rate.bps(), 100e9);
  EXPECT_EQ(ts->rtt, Duration::Milliseconds(58));
  EXPECT_DOUBLE_EQ(ts->loss, 1e-3);
  std::vector<std::string> names = ListNamedLinks(SourceDirs());
  EXPECT_GE(names.size(), 5u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& n : names) {
    absl::StatusOr<LinkSpec> s = LoadLinkSpec(n, SourceDirs());
    EXPECT_TRUE(s.ok()) << n << ": " << s.status();
  }
}

TEST_F(LinkFilesTest, DefaultSearchDirsFindTheSourceTree) {
  absl::StatusOr<LinkSpec> s = LoadLinkSpec("ts-1g");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rate.bps(), 1e9);
  const std::vector<std::string> dirs = DefaultLinkSearchDirs();
  EXPECT_NE(std::find(dirs.begin(), dirs.end(), SourceDirs()[0]), dirs.end());
}

TEST_F(LinkFilesTest, ProfilesDirFromTheEnvironmentComesFirst) {
  Write(dir_ / "links" / "ts-1g.link", "rate=3gbit,rtt=7ms\n");
  setenv("LONGHAUL_PROFILES_DIR", dir_.c_str(), 1);
  const std::vector<std::string> dirs = DefaultLinkSearchDirs();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs[0], (dir_ / "links").string());
  absl::StatusOr<LinkSpec> s = LoadLinkSpec("ts-1g");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rate.bps(), 3e9);
}

TEST_F(LinkFilesTest, FileByPathWithCommentsAndNesting) {
  Write(dir_ / "base.link", "# a comment line\nrate=2gbit   # trailing comment\n\nrtt=10ms\n");
  Write(dir_ / "derived.link", "base\nloss=0.5%\n");
  const std::vector<std::string> dirs = {dir_.string()};
  absl::StatusOr<LinkSpec> s = LoadLinkSpec("derived,rtt=20ms", dirs);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rate.bps(), 2e9);
  EXPECT_EQ(s->rtt, Duration::Milliseconds(20));
  EXPECT_DOUBLE_EQ(s->loss, 0.005);
  // A path needs no search directory.
  absl::StatusOr<LinkSpec> p = LoadLinkSpec((dir_ / "base.link").string(), {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rtt, Duration::Milliseconds(10));
  absl::StatusOr<NamedLink> named = ReadNamedLink("derived", dirs);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->origin, (dir_ / "derived.link").string());
  EXPECT_EQ(named->text, "base\nloss=0.5%\n");
}

TEST_F(LinkFilesTest, TheFirstDirectoryWins) {
  Write(dir_ / "a" / "x.link", "rate=1gbit");
  Write(dir_ / "b" / "x.link", "rate=2gbit");
  Write(dir_ / "b" / "y.link", "rate=3gbit");
  const std::vector<std::string> dirs = {(dir_ / "a").string(), (dir_ / "b").string()};
  EXPECT_EQ(LoadLinkSpec("x", dirs)->rate.bps(), 1e9);
  EXPECT_EQ(LoadLinkSpec("y", dirs)->rate.bps(), 3e9);
  EXPECT_EQ(ListNamedLinks(dirs), (std::vector<std::string>{"x", "y"}));
}

TEST_F(LinkFilesTest, ErrorsNameTheFileOrWhatWasSearched) {
  Write(dir_ / "bad.link", "rate=1gbit\nbogus\n");
  const std::vector<std::string> dirs = {dir_.string(), SourceDirs()[0]};
  absl::StatusOr<LinkSpec> bad = LoadLinkSpec("bad", dirs);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'bogus' is not key=value"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr(absl::StrCat("(in ", (dir_ / "bad.link").string(), ")")));

  absl::StatusOr<LinkSpec> unknown = LoadLinkSpec("no-such-link,loss=0", dirs);
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status()));
  EXPECT_EQ(unknown.status().message(),
            absl::StrCat("link spec: unknown link 'no-such-link': not a file, and no "
                         "no-such-link.link in [",
                         dirs[0], ", ", dirs[1],
                         "]; named links: ", absl::StrJoin(ListNamedLinks(dirs), ", "),
                         "; or give keys: rate=10gbit,rtt=58ms,..."));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("bad, "));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr(", tokyo-singapore, "));
  // A name with a '/' is a path only.
  EXPECT_THAT(std::string(LoadLinkSpec("sub/ts-1g", SourceDirs()).status().message()),
              HasSubstr("unknown link 'sub/ts-1g'"));
  EXPECT_THAT(std::string(LoadLinkSpec("x", {}).status().message()),
              HasSubstr("no x.link in []; named links: (none found)"));
}

TEST_F(LinkFilesTest, HelpNamesTheLinksAndTheKeys) {
  const std::string help = LinkSpecHelp();
  EXPECT_THAT(help, HasSubstr("named links: "));
  EXPECT_THAT(help, HasSubstr("tokyo-singapore"));
  EXPECT_THAT(help, HasSubstr("\nlink keys: rate, rtt,"));
}

}  // namespace
}  // namespace longhaul::sim
