// Fuzz target for longhaul's key files (transport/crypto/key_files.h): the
// private key, public key and pre-shared key files (one key: ParseKeyText) and
// the list of peer keys a server allows (ParsePeerKeyText), as a user writes
// them or `longhaul-keygen` does. The whole input is the file's text, given to
// both parsers.
//
// Invariants (each aborts when it fails):
//   - errors are non-empty and name the file first ("fuzz.key:1: ...", "peers:
//   ...");
//   - a key that parses is written back (KeyFileText, also upper-cased and with
//   CRLF) to
//     text that parses to the same key, and the same text read as a list of
//     peer keys is that one key without a label; as a private key it yields a
//     key pair whose derivation is stable and whose public key round-trips too;
//   - a list that parses is non-empty, without a repeated key, its lines
//   increasing and
//     within the text, its labels trimmed and without '#' or a newline; written
//     back one
//     "<hex> <label>" per line it parses to the same keys and labels, and
//     PeerKeyLabel finds each key's label.
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON (clang), and replayed as
// an ordinary test (key_files_fuzz_replay_test) over
// tests/fuzz/corpus/key_files.

#include "absl/strings/string_view.h"
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/fuzz/fuzz_check.h"
#include "transport/crypto/key_files.h"

namespace longhaul::crypto {
namespace {

void CheckKey(absl::string_view text) {
  absl::StatusOr<Key32> k = ParseKeyText(text, "fuzz.key");
  if (!k.ok()) {
    fuzz::CheckUserError(k.status(), "fuzz.key");
    LH_FUZZ_CHECK(k.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  const std::string written = KeyFileText(*k);
  LH_FUZZ_CHECK(written.size() == 65 && written.back() == '\n');
  for (const std::string &t :
       {written, absl::AsciiStrToUpper(written),
        absl::StrReplaceAll(written, {{"\n", "\r\n"}})}) {
    absl::StatusOr<Key32> again = ParseKeyText(t, "again.key");
    LH_FUZZ_CHECK(again.ok() && *again == *k);
  }
  absl::StatusOr<std::vector<PeerKey>> list = ParsePeerKeyText(text, "as-list");
  LH_FUZZ_CHECK(list.ok() && list->size() == 1);
  LH_FUZZ_CHECK((*list)[0].key == *k && (*list)[0].label.empty());
  absl::StatusOr<KeyPair> pair = KeyPairFromPrivate(*k);
  if (pair.ok()) {
    // The derivation is a function of the key (X25519 clamps it, so the stored
    // private key may differ from the file's bytes, but deriving again gives
    // the same pair).
    absl::StatusOr<KeyPair> again = KeyPairFromPrivate(pair->private_key);
    LH_FUZZ_CHECK(again.ok() && again->public_key == pair->public_key);
    absl::StatusOr<Key32> pub =
        ParseKeyText(KeyFileText(pair->public_key), "pub");
    LH_FUZZ_CHECK(pub.ok() && *pub == pair->public_key);
  }
}

void CheckPeers(absl::string_view text) {
  absl::StatusOr<std::vector<PeerKey>> peers = ParsePeerKeyText(text, "peers");
  if (!peers.ok()) {
    fuzz::CheckUserError(peers.status(), "peers");
    LH_FUZZ_CHECK(peers.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  LH_FUZZ_CHECK(!peers->empty());
  const int lines =
      1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  std::string written = "# written back\n";
  for (size_t i = 0; i < peers->size(); ++i) {
    const PeerKey &p = (*peers)[i];
    LH_FUZZ_CHECK(p.line >= 1 && p.line <= lines);
    if (i > 0)
      LH_FUZZ_CHECK((*peers)[i - 1].line < p.line);
    for (size_t j = 0; j < i; ++j)
      LH_FUZZ_CHECK((*peers)[j].key != p.key);
    LH_FUZZ_CHECK(p.label.find_first_of("#\n") == std::string::npos);
    LH_FUZZ_CHECK(absl::StripAsciiWhitespace(p.label) == p.label);
    LH_FUZZ_CHECK(PeerKeyLabel(*peers, p.key) == p.label);
    std::string line = KeyFileText(p.key);
    line.pop_back();
    if (!p.label.empty())
      absl::StrAppend(&line, "\t", p.label);
    absl::StrAppend(&written, line, "\n");
  }
  absl::StatusOr<std::vector<PeerKey>> again =
      ParsePeerKeyText(written, "written");
  LH_FUZZ_CHECK(again.ok() && again->size() == peers->size());
  for (size_t i = 0; i < peers->size(); ++i) {
    LH_FUZZ_CHECK((*again)[i].key == (*peers)[i].key);
    LH_FUZZ_CHECK((*again)[i].label == (*peers)[i].label);
    LH_FUZZ_CHECK((*again)[i].line == static_cast<int>(i) + 2);
  }
}

} // namespace
} // namespace longhaul::crypto

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Key files are bounded at kMaxKeyFileBytes; a few KiB reach every path here.
  if (size > 65536)
    return 0;
  const absl::string_view text = longhaul::fuzz::AsText(data, size);
  longhaul::crypto::CheckKey(text);
  longhaul::crypto::CheckPeers(text);
  return 0;
}
