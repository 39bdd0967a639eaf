// longhaul-keygen as a user runs it: a key pair with safe modes that the key-file reader
// accepts, a pre-shared key, the public key of a private key, existing files never
// overwritten without --force, and bad command lines (exit 2). Each test works in a fresh
// temporary directory; every run is bounded.
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/emu/emu_process.h"
#include "tests/support/temp_dir.h"
#include "transport/crypto/key_files.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;
using testing::ModeOf;
using testing::ReadFile;

struct KeygenRun {
  int status = -1;
  std::string out, err;
};

KeygenRun Keygen(std::vector<std::string> args) {
  absl::StatusOr<emu::testing::RunResult> r =
      emu::testing::RunToCompletion(LONGHAUL_KEYGEN_BIN, args, std::chrono::seconds(30));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {r->status, r->stdout_text, r->stderr_text};
}

class KeygenTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }
  testing::TempDir tmp_{"lh-keygen"};
  const std::string dir_ = tmp_.path();
};

TEST_F(KeygenTest, KeyPairThatTheReaderAccepts) {
  const std::string prefix = dir_ + "/server";
  KeygenRun r = Keygen({"--out=" + prefix});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ModeOf(prefix + ".key"), 0600u);
  EXPECT_EQ(ModeOf(prefix + ".pub") & 0600, 0600u);
  absl::StatusOr<crypto::KeyPair> pair = crypto::ReadPrivateKeyFile(prefix + ".key");
  ASSERT_TRUE(pair.ok()) << pair.status();
  absl::StatusOr<crypto::Key32> pub = crypto::ReadPublicKeyFile(prefix + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_EQ(*pub, pair->public_key);
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("public key: ", crypto::ToHex(*pub))));
  EXPECT_EQ(ReadFile(prefix + ".pub"), absl::StrCat(crypto::ToHex(*pub), "\n"));
  // --public_from prints the same public key, alone on its line.
  KeygenRun p = Keygen({"--public_from=" + prefix + ".key"});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_EQ(p.out, absl::StrCat(crypto::ToHex(*pub), "\n"));
  // Two runs give two different keys.
  ASSERT_EQ(Keygen({"--out=" + dir_ + "/other"}).status, 0);
  EXPECT_NE(ReadFile(dir_ + "/other.key"), ReadFile(prefix + ".key"));
}

TEST_F(KeygenTest, PreSharedKey) {
  const std::string psk = dir_ + "/link.psk";
  KeygenRun r = Keygen({"--psk=" + psk});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ModeOf(psk), 0600u);
  const std::string text = ReadFile(psk);
  EXPECT_EQ(text.size(), 65u);
  EXPECT_TRUE(crypto::ReadPskFile(psk).ok());
  EXPECT_THAT(r.out, HasSubstr("--psk_file=" + psk));
}

TEST_F(KeygenTest, NeverOverwritesWithoutForce) {
  const std::string prefix = dir_ + "/a";
  ASSERT_EQ(Keygen({"--out=" + prefix}).status, 0);
  const std::string key = ReadFile(prefix + ".key"), pub = ReadFile(prefix + ".pub");
  KeygenRun again = Keygen({"--out=" + prefix});
  EXPECT_EQ(again.status, 1);
  EXPECT_THAT(again.err, HasSubstr(prefix + ".key exists; not overwritten (--force replaces it)"));
  EXPECT_EQ(ReadFile(prefix + ".key"), key);
  // Only the .pub there: still refused, and no .key is left behind.
  std::filesystem::remove(prefix + ".key");
  KeygenRun pub_only = Keygen({"--out=" + prefix});
  EXPECT_EQ(pub_only.status, 1);
  EXPECT_THAT(pub_only.err, HasSubstr(prefix + ".pub exists"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".key"));
  // --force replaces both, safely.
  KeygenRun forced = Keygen({"--out=" + prefix, "--force"});
  ASSERT_EQ(forced.status, 0) << forced.err;
  EXPECT_NE(ReadFile(prefix + ".pub"), pub);
  EXPECT_EQ(ModeOf(prefix + ".key"), 0600u);
  const std::string psk = dir_ + "/p";
  ASSERT_EQ(Keygen({"--psk=" + psk}).status, 0);
  const std::string first = ReadFile(psk);
  EXPECT_EQ(Keygen({"--psk=" + psk}).status, 1);
  EXPECT_EQ(ReadFile(psk), first);
  ASSERT_EQ(Keygen({"--psk=" + psk, "--force"}).status, 0);
  EXPECT_NE(ReadFile(psk), first);
  EXPECT_EQ(ModeOf(psk), 0600u);
}

TEST_F(KeygenTest, ErrorsAndUsage) {
  KeygenRun none = Keygen({});
  EXPECT_EQ(none.status, 2);
  EXPECT_THAT(none.err, HasSubstr("give exactly one of --out=PREFIX, --psk=FILE and "
                                  "--public_from=KEYFILE"));
  EXPECT_EQ(Keygen({"--out=" + dir_ + "/x", "--psk=" + dir_ + "/y"}).status, 2);
  EXPECT_EQ(Keygen({"--frob"}).status, 2);
  EXPECT_EQ(Keygen({"--public_from=" + dir_ + "/x.key", "--force"}).status, 2);
  KeygenRun missing = Keygen({"--public_from=" + dir_ + "/nothing.key"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.err, HasSubstr(dir_ + "/nothing.key: no such file"));
  KeygenRun nodir = Keygen({"--out=" + dir_ + "/no/such/dir/k"});
  EXPECT_EQ(nodir.status, 1);
  EXPECT_THAT(nodir.err, HasSubstr("cannot create " + dir_ + "/no/such/dir/k.key"));
  KeygenRun help = Keygen({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_THAT(help.out, HasSubstr("--public_from"));
}

}  // namespace
}  // namespace longhaul
