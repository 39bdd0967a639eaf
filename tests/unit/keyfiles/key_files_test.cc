// Key files (transport/crypto/key_files.h): the formats, every error a user can meet
// (missing, open permissions, not a regular file, truncated, non-hex, empty lists),
// writing with O_EXCL and safe modes, fresh keys, and the choice of files turned into a
// SecurityConfig with messages in the user's names. Files live in a fresh temporary
// directory per test.
#include "transport/crypto/key_files.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace longhaul::crypto {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::longhaul::testing::ModeOf;
using ::longhaul::testing::ReadFile;

constexpr char kHexA[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr char kHexB[] = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

class KeyFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    return tmp_.Write(name, text, mode);
  }

  ::longhaul::testing::TempDir tmp_{"lh-keyfiles"};
  const std::string dir_ = tmp_.path();
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(KeyTextTest, OneKeyOnOneLine) {
  absl::StatusOr<Key32> k = ParseKeyText(absl::StrCat(kHexA, "\n"), "a.key");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(ToHex(*k), kHexA);
  EXPECT_EQ(KeyFileText(*k), absl::StrCat(kHexA, "\n"));
  // Upper case, CRLF, no newline, surrounding blanks: the same key.
  std::string upper = kHexA;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  for (const std::string& text :
       {upper + "\r\n", std::string(kHexA), absl::StrCat("  ", kHexA, " \n\n")}) {
    absl::StatusOr<Key32> same = ParseKeyText(text, "a.key");
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_EQ(*same, *k);
  }
}

TEST(KeyTextTest, BadContentNamesTheFileAndWhatIsWrong) {
  const std::string truncated = std::string(kHexA).substr(0, 40);
  EXPECT_EQ(Message(ParseKeyText("", "a.key").status()),
            "a.key: empty (a key file holds 64 hex digits, as longhaul-keygen writes them)");
  EXPECT_EQ(Message(ParseKeyText(truncated + "\n", "a.key").status()),
            "a.key:1: 40 hex digits, expected 64 (truncated?)");
  EXPECT_EQ(Message(ParseKeyText(absl::StrCat(kHexA, "00"), "a.key").status()),
            "a.key:1: 66 characters, expected 64 hex digits");
  std::string bad = kHexA;
  bad[6] = 'z';
  EXPECT_EQ(Message(ParseKeyText(bad, "a.key").status()),
            "a.key:1: column 7: 'z' is not a hex digit (a key is 64 hex digits)");
  bad[6] = '\x01';
  EXPECT_THAT(Message(ParseKeyText(bad, "a.key").status()), HasSubstr("byte 0x01"));
  EXPECT_THAT(Message(ParseKeyText("-----BEGIN PRIVATE KEY-----\nMC4C\n", "a.key").status()),
              HasSubstr("a PEM file"));
  EXPECT_EQ(Message(ParseKeyText(absl::StrCat(kHexA, "\n", kHexB, "\n"), "a.key").status()),
            "a.key:2: more than one line (a key file holds one key on one line)");
  // A key split over two lines is reported as the truncated first line.
  EXPECT_EQ(
      Message(
          ParseKeyText(truncated + "\n" + "0123456789abcdef0123456789abcdef", "a.key").status()),
      "a.key:1: 40 hex digits, expected 64 (truncated?)");
  EXPECT_THAT(Message(ParseKeyText(absl::StrCat(kHexA, " rank-1"), "a.key").status()),
              HasSubstr("a.key:1: text after the key"));
  for (const absl::Status& s : {ParseKeyText("", "a").status(), ParseKeyText("x", "a").status()}) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  }
}

TEST(PeerKeyTextTest, CommentsBlankLinesAndLabels) {
  const std::string text = absl::StrCat("# the ranks of job 7\n\n", kHexA, "   rank-0 (tokyo)\r\n",
                                        "  ", kHexB, "\t# no label, a comment\n\n# end\n");
  absl::StatusOr<std::vector<PeerKey>> keys = ParsePeerKeyText(text, "allowed");
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ(ToHex((*keys)[0].key), kHexA);
  EXPECT_EQ((*keys)[0].label, "rank-0 (tokyo)");
  EXPECT_EQ((*keys)[0].line, 3);
  EXPECT_EQ(ToHex((*keys)[1].key), kHexB);
  EXPECT_EQ((*keys)[1].label, "");
  EXPECT_EQ((*keys)[1].line, 4);
  EXPECT_EQ(PeerKeyLabel(*keys, (*keys)[0].key), "rank-0 (tokyo)");
  EXPECT_EQ(PeerKeyLabel(*keys, Key32{}), "");
  // A one-key public file is a list of one.
  ASSERT_TRUE(ParsePeerKeyText(absl::StrCat(kHexA, "\n"), "a.pub").ok());
}

TEST(PeerKeyTextTest, ErrorsNameTheLine) {
  EXPECT_EQ(Message(ParsePeerKeyText("# nobody\n\n", "allowed").status()),
            "allowed: no public keys (only comments and blank lines); list one key (64 hex "
            "digits) per line");
  EXPECT_EQ(Message(ParsePeerKeyText("", "allowed").status()),
            "allowed: no public keys (only comments and blank lines); list one key (64 hex "
            "digits) per line");
  EXPECT_EQ(Message(ParsePeerKeyText(absl::StrCat(kHexA, "\n# x\n", kHexB, "0 rank-2\n"), "allowed")
                        .status()),
            "allowed:3: 65 characters, expected 64 hex digits");
  EXPECT_EQ(Message(ParsePeerKeyText(absl::StrCat(kHexA, " a\n", kHexB, "\n", kHexA, " again\n"),
                                     "allowed")
                        .status()),
            "allowed:3: the key of line 1 again");
  EXPECT_THAT(Message(ParsePeerKeyText("rank-1 0123\n", "allowed").status()),
              StartsWith("allowed:1: column 1: 'r' is not a hex digit"));
}

TEST_F(KeyFilesTest, ReadsWhatKeygenWrites) {
  absl::StatusOr<KeyPair> pair = GenerateKeyPair();
  ASSERT_TRUE(pair.ok()) << pair.status();
  const std::string key = dir_ + "/a.key", pub = dir_ + "/a.pub";
  ASSERT_TRUE(WriteKeyFile(key, KeyFileText(pair->private_key), KeyFileMode::kSecret, false).ok());
  ASSERT_TRUE(WriteKeyFile(pub, KeyFileText(pair->public_key), KeyFileMode::kPublic, false).ok());
  EXPECT_EQ(ModeOf(key), 0600u);
  absl::StatusOr<KeyPair> back = ReadPrivateKeyFile(key);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->public_key, pair->public_key);
  absl::StatusOr<Key32> p = ReadPublicKeyFile(pub);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, pair->public_key);
  absl::StatusOr<std::vector<PeerKey>> list = ReadPeerKeyFile(pub);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->at(0).key, pair->public_key);
  // `openssl rand -hex 32` output is a pre-shared key file.
  const std::string psk = Write("psk", absl::StrCat(kHexB, "\n"));
  absl::StatusOr<Key32> k = ReadPskFile(psk);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(ToHex(*k), kHexB);
}

TEST_F(KeyFilesTest, FileErrorsNameTheFile) {
  const std::string missing = dir_ + "/nothing.key";
  absl::Status s = ReadPrivateKeyFile(missing).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(Message(s), missing + ": no such file");
  EXPECT_TRUE(absl::IsNotFound(ReadPeerKeyFile(missing).status()));
  EXPECT_TRUE(absl::IsNotFound(ReadPskFile(missing).status()));

  const std::string open = Write("open.key", absl::StrCat(kHexA, "\n"), 0644);
  s = ReadPrivateKeyFile(open).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(Message(s), open + " is readable by others (mode 0644): chmod 600 " + open);
  const std::string group = Write("group.psk", absl::StrCat(kHexA, "\n"), 0640);
  EXPECT_EQ(Message(ReadPskFile(group).status()),
            group + " is readable by its group (mode 0640): chmod 600 " + group);
  const std::string writable = Write("w.key", absl::StrCat(kHexA, "\n"), 0602);
  EXPECT_THAT(Message(ReadPrivateKeyFile(writable).status()),
              HasSubstr("is writable by others (mode 0602)"));
  // Public keys may be world-readable; 0400 secrets are fine.
  EXPECT_TRUE(ReadPeerKeyFile(open).ok());
  EXPECT_TRUE(ReadPskFile(Write("ro.psk", absl::StrCat(kHexA, "\n"), 0400)).ok());

  s = ReadPeerKeyFile(dir_).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(Message(s), dir_ + " is not a regular file (a directory)");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(Message(ReadPskFile(fifo).status()), fifo + " is not a regular file (a pipe)");

  const std::string truncated = Write("t.key", std::string(kHexA).substr(0, 63) + "\n");
  EXPECT_EQ(Message(ReadPrivateKeyFile(truncated).status()),
            truncated + ":1: 63 hex digits, expected 64 (truncated?)");
  const std::string empty = Write("e.key", "");
  EXPECT_THAT(Message(ReadPrivateKeyFile(empty).status()), StartsWith(empty + ": empty"));
  const std::string big = Write("big", std::string(kMaxKeyFileBytes + 1, '#'), 0644);
  EXPECT_THAT(Message(ReadPeerKeyFile(big).status()), HasSubstr("is larger than"));
}

// An error about a secret file names the column of a bad character, never the character
// (the rest of the line may be a real secret in another format); a public one shows it.
TEST_F(KeyFilesTest, SecretFileErrorsDoNotEchoTheirContents) {
  const std::string secret = std::string(6, 'a') + "Q" + std::string(57, 'b') + "\n";
  const std::string key = Write("q.key", secret);
  const std::string psk = Write("q.psk", secret);
  const std::pair<std::string, absl::Status> errors[] = {{key, ReadPrivateKeyFile(key).status()},
                                                         {psk, ReadPskFile(psk).status()}};
  for (const auto& [path, s] : errors) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    ASSERT_THAT(Message(s), StartsWith(path));
    const std::string after_path = Message(s).substr(path.size());
    EXPECT_EQ(after_path, ":1: column 7: a character is not a hex digit (a key is 64 hex digits)");
  }
  const std::string pub = Write("q.pub", secret, 0644);
  EXPECT_THAT(Message(ReadPublicKeyFile(pub).status()), HasSubstr("column 7: 'Q' is not"));
}

TEST_F(KeyFilesTest, WritingRefusesToOverwriteUnlessAskedAndKeepsSecretsPrivate) {
  const mode_t old = umask(0);  // a careless umask: secrets are still 0600
  const std::string key = dir_ + "/x.key";
  ASSERT_TRUE(WriteKeyFile(key, "one\n", KeyFileMode::kSecret, false).ok());
  EXPECT_EQ(ModeOf(key), 0600u);
  absl::Status s = WriteKeyFile(key, "two\n", KeyFileMode::kSecret, false);
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_EQ(Message(s), key + " exists");
  EXPECT_EQ(ReadFile(key), "one\n");
  ASSERT_TRUE(WriteKeyFile(key, "two\n", KeyFileMode::kSecret, true).ok());
  EXPECT_EQ(ReadFile(key), "two\n");
  EXPECT_EQ(ModeOf(key), 0600u);
  const std::string pub = dir_ + "/x.pub";
  ASSERT_TRUE(WriteKeyFile(pub, "p\n", KeyFileMode::kPublic, false).ok());
  EXPECT_EQ(ModeOf(pub), 0644u);
  umask(022);
  ASSERT_TRUE(WriteKeyFile(pub, "q\n", KeyFileMode::kPublic, true).ok());
  EXPECT_EQ(ModeOf(pub), 0644u);
  umask(old);
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);
  EXPECT_FALSE(WriteKeyFile(dir_ + "/no/such/dir/k", "x", KeyFileMode::kSecret, false).ok());
}

TEST(FreshKeysTest, DrawnFromTheKernel) {
  absl::StatusOr<KeyPair> a = GenerateKeyPair(), b = GenerateKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->private_key, b->private_key);
  EXPECT_EQ(KeyPairFromPrivate(a->private_key)->public_key, a->public_key);
  absl::StatusOr<Key32> p = GeneratePsk(), q = GeneratePsk();
  ASSERT_TRUE(p.ok() && q.ok());
  EXPECT_NE(*p, *q);
  Key32 e{};
  SystemEntropySource()(e);
  EXPECT_NE(e, Key32{});
}

class LoadKeysTest : public KeyFilesTest {
 protected:
  void SetUp() override {
    KeyFilesTest::SetUp();
    absl::StatusOr<KeyPair> a = GenerateKeyPair();
    ASSERT_TRUE(a.ok());
    pair_ = *a;
    key_ = Write("a.key", KeyFileText(pair_.private_key));
    peers_ = Write("allowed", absl::StrCat(kHexA, " rank-1\n", kHexB, " rank-2\n"), 0644);
    psk_ = Write("psk", absl::StrCat(kHexB, "\n"));
  }
  static KeyChoice Choice(std::string key, std::string peer, std::string psk,
                          std::optional<bool> insecure = std::nullopt) {
    KeyChoice c;
    c.key.path = std::move(key);
    c.peer_key.path = std::move(peer);
    c.psk_file.path = std::move(psk);
    c.insecure = insecure;
    return c;
  }
  KeyPair pair_;
  std::string key_, peers_, psk_;
};

TEST_F(LoadKeysTest, EachModeFromItsFiles) {
  absl::StatusOr<LoadedKeys> ik = LoadKeys(Choice(key_, peers_, ""));
  ASSERT_TRUE(ik.ok()) << ik.status();
  EXPECT_EQ(ik->security.mode(), endpoint::SecurityMode::kStaticKeys);
  EXPECT_EQ(ik->security.key->public_key, pair_.public_key);
  ASSERT_EQ(ik->security.peer_keys.size(), 2u);
  EXPECT_EQ(ToHex(ik->security.peer_keys[1]), kHexB);
  EXPECT_EQ(ik->peers[1].label, "rank-2");
  EXPECT_EQ(ik->peer_key_path, peers_);
  EXPECT_FALSE(ik->security.entropy) << "the driver sets the entropy source";

  absl::StatusOr<LoadedKeys> ikpsk = LoadKeys(Choice(key_, peers_, psk_));
  ASSERT_TRUE(ikpsk.ok()) << ikpsk.status();
  EXPECT_EQ(ikpsk->security.mode(), endpoint::SecurityMode::kStaticKeysPsk);
  absl::StatusOr<LoadedKeys> psk = LoadKeys(Choice("", "", psk_));
  ASSERT_TRUE(psk.ok()) << psk.status();
  EXPECT_EQ(psk->security.mode(), endpoint::SecurityMode::kPsk);
  EXPECT_EQ(ToHex(*psk->security.psk), kHexB);
  absl::StatusOr<LoadedKeys> plain = LoadKeys(Choice("", "", "", true));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->security.insecure);
  EXPECT_TRUE(plain->security.Validate().ok());
}

TEST_F(LoadKeysTest, ContradictoryChoicesInTheUsersNames) {
  EXPECT_EQ(Message(LoadKeys(Choice("", "", "")).status()),
            "no keys: give --key and --peer_key, or --psk_file, or --insecure for plaintext");
  EXPECT_EQ(Message(LoadKeys(Choice("", "", "", false)).status()),
            "no keys: give --key and --peer_key, or --psk_file, or --insecure for plaintext");
  EXPECT_EQ(Message(LoadKeys(Choice(key_, "", psk_, true)).status()),
            "--insecure (plaintext) was chosen together with keys (--key, --psk_file): choose "
            "one");
  EXPECT_EQ(Message(LoadKeys(Choice(key_, "", "")).status()),
            "--key was given without --peer_key (a client needs the server's public key, a "
            "server the keys of the clients it allows)");
  EXPECT_EQ(Message(LoadKeys(Choice(key_, "", psk_)).status()),
            "--key was given without --peer_key (a client needs the server's public key, a "
            "server the keys of the clients it allows)");
  EXPECT_EQ(Message(LoadKeys(Choice("", peers_, "")).status()),
            "--peer_key was given without --key (this side's own private key)");
  // The plugin's names.
  KeyChoiceNames env;
  env.key = "NCCL_LONGHAUL_KEY";
  env.peer_key = "NCCL_LONGHAUL_PEER_KEY";
  env.psk_file = "NCCL_LONGHAUL_PSK_FILE";
  env.insecure = "NCCL_LONGHAUL_INSECURE=1";
  EXPECT_EQ(Message(LoadKeys(Choice("", "", ""), env).status()),
            "no keys: give NCCL_LONGHAUL_KEY and NCCL_LONGHAUL_PEER_KEY, or "
            "NCCL_LONGHAUL_PSK_FILE, or NCCL_LONGHAUL_INSECURE=1 for plaintext");
  // A setting's own source wins (a profile's key).
  KeyChoice from_profile = Choice("", "", psk_, true);
  from_profile.insecure_source = "insecure=true in profile p.profile";
  EXPECT_EQ(Message(LoadKeys(from_profile).status()),
            "insecure=true in profile p.profile (plaintext) was chosen together with keys "
            "(--psk_file): choose one");
  for (const KeyChoice& c : {Choice("", "", ""), Choice(key_, "", "")}) {
    EXPECT_TRUE(absl::IsInvalidArgument(LoadKeys(c).status()));
  }
}

TEST_F(LoadKeysTest, FileErrorsCarryTheSettingsName) {
  const std::string open = Write("open.key", KeyFileText(pair_.private_key), 0644);
  EXPECT_EQ(Message(LoadKeys(Choice(open, peers_, "")).status()),
            "--key: " + open + " is readable by others (mode 0644): chmod 600 " + open);
  KeyChoice c = Choice(key_, dir_ + "/none", "");
  c.peer_key.source = "peer_key in profile p.profile";
  absl::Status s = LoadKeys(c).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(Message(s), "peer_key in profile p.profile: " + dir_ + "/none: no such file");
  const std::string empty_list = Write("empty", "# no one yet\n", 0644);
  EXPECT_THAT(Message(LoadKeys(Choice(key_, empty_list, "")).status()),
              StartsWith("--peer_key: " + empty_list + ": no public keys"));
  const std::string short_psk = Write("short.psk", "abcd\n");
  EXPECT_EQ(Message(LoadKeys(Choice("", "", short_psk)).status()),
            "--psk_file: " + short_psk + ":1: 4 hex digits, expected 64 (truncated?)");
}

TEST(OverrideKeyChoiceTest, SettingBySettingAndTheExplicitModeWins) {
  KeyChoice profile;
  profile.key = {"p.key", "key in profile p"};
  profile.peer_key = {"p.pub", "peer_key in profile p"};
  KeyChoice flags;
  flags.peer_key = {"other.pub", "--peer_key"};
  KeyChoice out = OverrideKeyChoice(profile, flags);
  EXPECT_EQ(out.key.path, "p.key");
  EXPECT_EQ(out.peer_key.path, "other.pub");
  EXPECT_EQ(out.peer_key.source, "--peer_key");

  KeyChoice plaintext;
  plaintext.insecure = true;
  out = OverrideKeyChoice(profile, plaintext);
  EXPECT_TRUE(out.key.path.empty());
  EXPECT_TRUE(out.peer_key.path.empty());
  EXPECT_TRUE(out.insecure.value_or(false));

  KeyChoice insecure_profile;
  insecure_profile.insecure = true;
  insecure_profile.insecure_source = "insecure in profile p";
  KeyChoice psk;
  psk.psk_file = {"k.psk", "--psk_file"};
  out = OverrideKeyChoice(insecure_profile, psk);
  EXPECT_FALSE(out.insecure.has_value());
  EXPECT_EQ(out.psk_file.path, "k.psk");
  // Both on the same side stay a contradiction for LoadKeys to report.
  psk.insecure = true;
  out = OverrideKeyChoice({}, psk);
  EXPECT_TRUE(out.insecure.value_or(false));
  EXPECT_EQ(out.psk_file.path, "k.psk");
}

}  // namespace
}  // namespace longhaul::crypto
