// Key files: the edge between the user's files and endpoint::SecurityConfig. Reads and
// writes longhaul's key material, checks that secrets are private to their owner, draws
// fresh keys from the kernel (getrandom), and turns a user's choice of files (flags,
// environment variables, profile keys) into a SecurityConfig. Not sans-IO: it opens
// files; the endpoint and transport/crypto only ever see the bytes (docs/security.md).
//
// Formats (all text, lower- or upper-case hex; a final newline, CRLF too, is allowed):
//
//   private key   64 hex digits on one line: the 32-byte X25519 private key
//                 (`longhaul-keygen --out=PREFIX` writes PREFIX.key, mode 0600)
//   public key    64 hex digits on one line (PREFIX.pub)
//   peer keys     the keys a server allows (or a client's one server key): one public
//                 key per line, optionally followed by whitespace and a label
//                 ("<hex> rank-3"); '#' starts a comment (whole line or after a key);
//                 blank lines are ignored; at least one key, no key twice
//   pre-shared    64 hex digits on one line: 32 random bytes, as `openssl rand -hex 32`
//   key           or `longhaul-keygen --psk=FILE` prints them (mode 0600)
//
// Errors name the file (and the line, "FILE:3: ..."): NotFound when the file does not
// exist; PermissionDenied when it cannot be opened; FailedPrecondition when it is not a
// regular file or when a private key or pre-shared key is readable (or writable) by its
// group or others ("a.key is readable by others (mode 0644): chmod 600 a.key");
// InvalidArgument for truncated or non-hex content, extra lines, a PEM file, an empty or
// repeating list of peer keys, and for contradictory choices (LoadKeys).
// Thread-safe (no shared state); the functions block on file I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/crypto/primitives.h"
#include "transport/endpoint/security_config.h"

namespace longhaul::crypto {

// Largest key file read (a list of 10,000 peer keys with labels fits in 1 MiB).
inline constexpr size_t kMaxKeyFileBytes = size_t{4} << 20;

// One public key of a peer-key file, its label ("" when none) and its line (1-based).
struct PeerKey {
  Key32 key{};
  std::string label;
  int line = 0;
};

// ---- text (pure) ----

// "<64 hex digits>\n": what a key file holds.
std::string KeyFileText(const Key32& key);
// One key: exactly 64 hex digits on one line, whitespace around them ignored. `source`
// (the file name) prefixes errors: "a.key:1: 40 hex digits, expected 64 (truncated?)".
// With `secret`, an error names a bad character's column but never the character.
absl::StatusOr<Key32> ParseKeyText(absl::string_view text, absl::string_view source,
                                   bool secret = false);
// A peer-key list (see the header comment).
absl::StatusOr<std::vector<PeerKey>> ParsePeerKeyText(absl::string_view text,
                                                      absl::string_view source);

// ---- reading files ----

// A private key file; refuses one its group or others may read or write.
absl::StatusOr<KeyPair> ReadPrivateKeyFile(const std::string& path);
// A public key file holding exactly one key (`longhaul-keygen --out` writes one).
absl::StatusOr<Key32> ReadPublicKeyFile(const std::string& path);
// A peer-key list.
absl::StatusOr<std::vector<PeerKey>> ReadPeerKeyFile(const std::string& path);
// A pre-shared key file; refuses one its group or others may read or write.
absl::StatusOr<Key32> ReadPskFile(const std::string& path);

// ---- writing files ----

enum class KeyFileMode {
  kSecret,  // 0600: private keys and pre-shared keys
  kPublic,  // 0644 (less the umask): public keys
};
// Writes `text` to `path` with `mode`. Without `overwrite` the file is created with
// O_EXCL (AlreadyExists "FILE exists" when there is one); with it, the text goes to a
// temporary file beside it that is renamed over `path`, so a reader never sees a partly
// written key. Errors name the file and the system's reason.
absl::Status WriteKeyFile(const std::string& path, absl::string_view text, KeyFileMode mode,
                          bool overwrite);

// ---- fresh keys ----

// Fills `out` from the kernel's CSPRNG (getrandom). Internal when it fails.
absl::Status SystemRandom(std::span<uint8_t> out);
absl::StatusOr<KeyPair> GenerateKeyPair();
absl::StatusOr<Key32> GeneratePsk();
// The system entropy source as an endpoint::EntropySource (aborts if getrandom fails,
// which only a broken kernel does). Drivers set it themselves; tests and tools may use it.
endpoint::EntropySource SystemEntropySource();

// ---- a user's choice ----

// One file setting and how the user gave it, for messages: "--key",
// "NCCL_LONGHAUL_KEY", "key in profile tokyo.profile". An empty path: not given.
struct KeyFileSetting {
  std::string path;
  std::string source;
};

// What the user chose. Every field may be unset.
struct KeyChoice {
  KeyFileSetting key;       // this side's private key
  KeyFileSetting peer_key;  // the peer's public key, or the keys a server allows
  KeyFileSetting psk_file;  // a pre-shared key
  std::optional<bool> insecure;
  std::string insecure_source;
};

// How the user names the four settings on the channel they use most (flags, environment
// variables), for the messages about a setting that is missing.
struct KeyChoiceNames {
  std::string key = "--key";
  std::string peer_key = "--peer_key";
  std::string psk_file = "--psk_file";
  std::string insecure = "--insecure";
};

// `over` (flags, the environment) applied to `base` (a profile), setting by setting; and
// a choice of plaintext in `over` (insecure=true) drops base's key files, while a key file
// in `over` drops base's insecure=true: the more explicit source's choice of mode wins.
KeyChoice OverrideKeyChoice(const KeyChoice& base, const KeyChoice& over);

struct LoadedKeys {
  endpoint::SecurityConfig security;  // entropy unset: the driver fills it
  std::vector<PeerKey> peers;         // the peer-key file's keys, with labels and lines
  std::string peer_key_path;          // where they came from ("" when none)
};

// Reads the files `choice` names into a SecurityConfig. First the choice itself, with
// SecurityConfig::Validate's rules and messages in the user's names (InvalidArgument):
//   nothing          "no keys: give --key and --peer_key, or --psk_file, or --insecure
//                    for plaintext"
//   insecure + keys  "--insecure (plaintext) was chosen together with keys (--psk_file):
//                    choose one"
//   key alone        "--key was given without --peer_key (a client needs the server's
//                    public key, a server the keys of the clients it allows)"
//   peer keys alone  "--peer_key was given without --key (this side's own private key)"
// then each file, its errors prefixed with the setting's source ("--key: a.key is readable
// by others (mode 0644): chmod 600 a.key").
absl::StatusOr<LoadedKeys> LoadKeys(const KeyChoice& choice, const KeyChoiceNames& names = {});

// The label of `key` among `peers` ("" when it has none or is not there).
std::string PeerKeyLabel(const std::vector<PeerKey>& peers, const Key32& key);

}  // namespace longhaul::crypto
