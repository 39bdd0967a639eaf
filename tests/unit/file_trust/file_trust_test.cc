// Trust and secret files (transport/base/file_trust.h) through every reader that uses
// them: the allowed-keys list and a pinned key (key files), private keys and pre-shared
// keys (secrets), and profiles. Each is refused, naming the file, the problem and the
// fix, when group- or other-writable, owned by another user, in a directory others can
// write, or reached through a link to such a file; and each is read when it is fine.
#include "transport/base/file_trust.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"
#include "transport/core/config.h"
#include "transport/profile/profile_file.h"
#include "transport/crypto/key_files.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kHex[] = "3f2a9c0d1e2b4f5a3f2a9c0d1e2b4f5a3f2a9c0d1e2b4f5a3f2a9c0d1e2b4f5a";

// One kind of file and the reader that must check it.
struct Kind {
  const char* name;
  FileTrust trust;
  std::string text;
  std::function<absl::Status(const std::string&)> read;
};

std::vector<Kind> Kinds() {
  const std::string key = absl::StrCat(kHex, "\n");
  return {
      {"allowed keys", FileTrust::kTrust, absl::StrCat(kHex, " rank-1\n"),
       [](const std::string& p) { return crypto::ReadPeerKeyFile(p).status(); }},
      {"pinned key", FileTrust::kTrust, key,
       [](const std::string& p) { return crypto::ReadPublicKeyFile(p).status(); }},
      {"private key", FileTrust::kSecret, key,
       [](const std::string& p) { return crypto::ReadPrivateKeyFile(p).status(); }},
      {"pre-shared key", FileTrust::kSecret, key,
       [](const std::string& p) { return crypto::ReadPskFile(p).status(); }},
      {"profile", FileTrust::kTrust, "rate=1gbit\n",
       [](const std::string& p) { return ReadProfileFile(p).status(); }},
  };
}

class FileTrustTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    kind_ = Kinds()[GetParam()];
  }

  std::string Write(const fs::path& path, mode_t mode) {
    std::ofstream(path) << kind_.text;
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    return path.string();
  }
  mode_t Fine() const { return kind_.trust == FileTrust::kSecret ? 0600 : 0644; }
  std::string Refusal(const std::string& path) {
    absl::Status s = kind_.read(path);
    EXPECT_FALSE(s.ok()) << kind_.name << " " << path << " was accepted";
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    return std::string(s.message());
  }

  ::longhaul::testing::TempDir tmp_{"longhaul-trust"};
  const fs::path dir_ = tmp_.path();
  Kind kind_;
};

TEST_P(FileTrustTest, AFineFileIsRead) {
  const std::string p = Write(dir_ / "fine", Fine());
  EXPECT_TRUE(kind_.read(p).ok()) << kind_.read(p);
}

TEST_P(FileTrustTest, GroupWritableIsRefused) {
  const std::string p = Write(dir_ / "f", Fine() | S_IWGRP);
  const std::string fix = kind_.trust == FileTrust::kSecret ? "chmod 600 " : "chmod go-w ";
  EXPECT_THAT(Refusal(p), HasSubstr(absl::StrCat(p, " is writable by its group (mode 0",
                                                 kind_.trust == FileTrust::kSecret ? "620" : "664",
                                                 "): ", fix, p)));
}

TEST_P(FileTrustTest, OtherWritableIsRefused) {
  const std::string p = Write(dir_ / "f", Fine() | S_IWOTH);
  EXPECT_THAT(Refusal(p), HasSubstr(absl::StrCat(p, " is writable by others")));
}

TEST_P(FileTrustTest, AnotherOwnerIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string p = Write(dir_ / "f", Fine());
  ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0);
  EXPECT_THAT(Refusal(p), HasSubstr(absl::StrCat(p, " is owned by uid 65534, neither this user "
                                                 "(uid 0) nor root")));
  EXPECT_THAT(Refusal(p), HasSubstr(absl::StrCat("chown 0 ", p)));
}

TEST_P(FileTrustTest, ADirectoryOthersCanWriteIsRefusedUnlessSticky) {
  const fs::path open = dir_ / "open";
  fs::create_directory(open);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  const std::string p = Write(open / "f", Fine());
  EXPECT_THAT(Refusal(p), HasSubstr(absl::StrCat(p, ": its directory ", open.string(),
                                                 " is writable by others (mode 0777)")));
  ASSERT_EQ(chmod(open.c_str(), 0770), 0);
  EXPECT_THAT(Refusal(p), HasSubstr("is writable by its group (mode 0770)"));
  // Like /tmp: only a file's owner may remove or rename it there.
  ASSERT_EQ(chmod(open.c_str(), 01777), 0);
  EXPECT_TRUE(kind_.read(p).ok()) << kind_.read(p);
}

TEST_P(FileTrustTest, ALinkIsFollowedAndItsTargetChecked) {
  // A link to a fine file is fine (secret mounts in containers are links).
  const std::string target = Write(dir_ / "target", Fine());
  const fs::path link = dir_ / "link";
  fs::create_symlink(target, link);
  EXPECT_TRUE(kind_.read(link.string()).ok()) << kind_.read(link.string());
  // A link to a file others may change is refused.
  ASSERT_EQ(chmod(target.c_str(), Fine() | S_IWOTH), 0);
  EXPECT_THAT(Refusal(link.string()), HasSubstr("is writable by others"));
  ASSERT_EQ(chmod(target.c_str(), Fine()), 0);
  // So is a link to a file in a directory others can write...
  const fs::path open = dir_ / "open";
  fs::create_directory(open);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  const std::string exposed = Write(open / "f", Fine());
  const fs::path link2 = dir_ / "link2";
  fs::create_symlink(exposed, link2);
  EXPECT_THAT(Refusal(link2.string()), HasSubstr(absl::StrCat("its directory ", open.string())));
  // ...and a link in such a directory (anyone there could point it elsewhere).
  const fs::path link3 = open / "link3";
  fs::create_symlink(target, link3);
  EXPECT_THAT(Refusal(link3.string()), HasSubstr(absl::StrCat("its directory ", open.string())));
}

std::string KindName(const ::testing::TestParamInfo<size_t>& info) {
  std::string n = Kinds()[info.param].name;
  for (char& c : n) {
    if (c == ' ' || c == '-') c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(EveryKind, FileTrustTest, ::testing::Range<size_t>(0, 5), KindName);

// Secrets, and how a POSIX ACL is read instead of the group bits.
class SecretTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }
  std::string Psk(mode_t mode) {
    const std::string p = (dir_ / "link.psk").string();
    std::ofstream(p) << kHex << "\n";
    EXPECT_EQ(chmod(p.c_str(), mode), 0);
    return p;
  }
  // Sets the file's access ACL: owner rw, then `entries` ({tag, perm, id}), group
  // `group_perm`, mask r, other none (the kernel's xattr layout).
  bool SetAcl(const std::string& p, std::vector<std::array<uint32_t, 3>> entries,
              uint16_t group_perm) {
    std::vector<uint8_t> v(4);
    const uint32_t version = 2;
    std::memcpy(v.data(), &version, 4);
    auto add = [&](uint16_t tag, uint16_t perm, uint32_t id) {
      uint8_t e[8];
      std::memcpy(e, &tag, 2);
      std::memcpy(e + 2, &perm, 2);
      std::memcpy(e + 4, &id, 4);
      v.insert(v.end(), e, e + 8);
    };
    add(0x01, 6, 0xffffffff);
    for (const auto& [tag, perm, id] : entries) add(tag, perm, id);
    add(0x04, group_perm, 0xffffffff);
    add(0x10, 4, 0xffffffff);
    add(0x20, 0, 0xffffffff);
    return setxattr(p.c_str(), "system.posix_acl_access", v.data(), v.size(), 0) == 0;
  }
  ::longhaul::testing::TempDir tmp_{"longhaul-trust"};
  const fs::path dir_ = tmp_.path();
};

TEST_F(SecretTest, ReadableByGroupOrOthersIsRefused) {
  std::string p = Psk(0640);
  EXPECT_EQ(crypto::ReadPskFile(p).status().message(),
            absl::StrCat(p, " is readable by its group (mode 0640): chmod 600 ", p));
  p = Psk(0604);
  EXPECT_THAT(crypto::ReadPskFile(p).status().message(), HasSubstr("is readable by others"));
  p = Psk(0400);
  EXPECT_TRUE(crypto::ReadPskFile(p).ok()) << crypto::ReadPskFile(p).status();
}

TEST_F(SecretTest, AnAclIsJudgedByItsEntries) {
  // systemd's newer credentials: root-owned, an entry for the service's user, the group
  // bits showing the ACL's mask (0440). Here the service's user is this one.
  const std::string p = Psk(0600);
  if (!SetAcl(p, {{0x02, 4, static_cast<uint32_t>(geteuid())}}, 0)) {
    GTEST_SKIP() << "no POSIX ACLs on " << dir_ << ": " << std::strerror(errno);
  }
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // what `ls -l` shows
  EXPECT_TRUE(crypto::ReadPskFile(p).ok()) << crypto::ReadPskFile(p).status();
  // An entry for another user is a refusal, said as such.
  ASSERT_TRUE(SetAcl(p, {{0x02, 4, 65534}}, 0));
  EXPECT_THAT(crypto::ReadPskFile(p).status().message(),
              HasSubstr(absl::StrCat(p, " is readable by another user or group (its ACL) (mode "
                                     "0640): setfacl -b ", p, " && chmod 600 ", p)));
  // The owning group's entry counts unless that group is root's (changing groups needs
  // root).
  if (geteuid() != 0) return;
  ASSERT_TRUE(SetAcl(p, {}, 4));
  ASSERT_EQ(chown(p.c_str(), 0, 0), 0);
  EXPECT_TRUE(crypto::ReadPskFile(p).ok()) << crypto::ReadPskFile(p).status();
  ASSERT_EQ(chown(p.c_str(), 0, 100), 0);  // group "users"
  EXPECT_THAT(crypto::ReadPskFile(p).status().message(),
              HasSubstr("readable by another user or group (its ACL)"));
}

}  // namespace
}  // namespace longhaul
