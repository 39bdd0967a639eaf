#include "tests/support/key_files.h"

#include "absl/status/statusor.h"
#include "transport/crypto/key_files.h"
#include "gtest/gtest.h"

namespace longhaul::testing {
namespace {

void Write(const std::string &path, const crypto::Key32 &key,
           crypto::KeyFileMode mode) {
  const absl::Status s =
      crypto::WriteKeyFile(path, crypto::KeyFileText(key), mode, false);
  EXPECT_TRUE(s.ok()) << path << ": " << s;
}

} // namespace

crypto::KeyPair WriteKeyPair(const std::string &prefix) {
  absl::StatusOr<crypto::KeyPair> pair = crypto::GenerateKeyPair();
  EXPECT_TRUE(pair.ok()) << pair.status();
  if (!pair.ok())
    return {};
  Write(prefix + ".key", pair->private_key, crypto::KeyFileMode::kSecret);
  Write(prefix + ".pub", pair->public_key, crypto::KeyFileMode::kPublic);
  return *pair;
}

crypto::Key32 WritePrivateKey(const std::string &path) {
  absl::StatusOr<crypto::KeyPair> pair = crypto::GenerateKeyPair();
  EXPECT_TRUE(pair.ok()) << pair.status();
  if (!pair.ok())
    return {};
  Write(path, pair->private_key, crypto::KeyFileMode::kSecret);
  return pair->public_key;
}

crypto::Key32 WritePsk(const std::string &path) {
  absl::StatusOr<crypto::Key32> k = crypto::GeneratePsk();
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok())
    return {};
  Write(path, *k, crypto::KeyFileMode::kSecret);
  return *k;
}

} // namespace longhaul::testing
