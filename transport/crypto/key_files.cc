// Files are opened once and checked through the descriptor (fstat), so what is checked
// is what is read. Secrets are refused when anyone but their owner may touch them, as
// ssh refuses a private key with open permissions: a key others can read is no longer a
// secret, one others can write may have been replaced.

#include "transport/crypto/key_files.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transport/base/file_trust.h"
#include "transport/base/status.h"

namespace longhaul::crypto {
namespace {

// Overwrites the characters of `text` (a secret's text) and empties it.
void WipeText(std::string* text) {
  Wipe(std::span<uint8_t>(reinterpret_cast<uint8_t*>(text->data()), text->size()));
  text->clear();
}

bool IsHex(char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }

// The 64 hex digits of one key in `token` (a line's first word), or why not.
// A secret's text is never echoed in an error: only the column of a bad character.
absl::StatusOr<Key32> ParseHexKey(absl::string_view token, absl::string_view where,
                                  bool secret = false) {
  if (absl::StartsWith(token, "-----BEGIN")) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": a PEM file; longhaul key files hold 64 hex digits (longhaul-keygen)"));
  }
  for (size_t i = 0; i < token.size() && i < 64; ++i) {
    if (!IsHex(token[i])) {
      const unsigned char c = static_cast<unsigned char>(token[i]);
      const std::string shown = secret                  ? std::string("a character")
                                : absl::ascii_isprint(c) ? absl::StrCat("'", std::string(1, token[i]), "'")
                                                         : absl::StrFormat("byte 0x%02x", c);
      return absl::InvalidArgumentError(absl::StrCat(where, ": column ", i + 1, ": ", shown,
                                                     " is not a hex digit (a key is 64 hex "
                                                     "digits)"));
    }
  }
  if (token.size() < 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", token.size(), " hex digits, expected 64 (truncated?)"));
  }
  if (token.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", token.size(), " characters, expected 64 hex digits"));
  }
  absl::StatusOr<Key32> k = Key32FromHex(std::string_view(token.data(), token.size()));
  if (!k.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", k.status().message()));
  return k;
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

// The contents of `path`, checked: a regular file, at most kMaxKeyFileBytes, and (secret)
// private to its owner.
absl::StatusOr<std::string> ReadKeyFileText(const std::string& path, bool secret) {
  if (path.empty()) return absl::InvalidArgumentError("no file name given");
  // O_NONBLOCK: a FIFO given by mistake must not block the open; it is refused below.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (err == EACCES) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot stat: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file (", FileKind(st.st_mode), ")"));
  }
  // Owner, mode and directory (transport/base/file_trust.h): secrets private, and every
  // key file (an allowed-keys list decides who may connect) changeable by nobody else.
  if (absl::Status trusted = CheckTrustedFile(fd, path, secret ? FileTrust::kSecret : FileTrust::kTrust);
      !trusted.ok()) {
    return trusted;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxKeyFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than ", kMaxKeyFileBytes, " bytes: not a key file"));
  }
  // Reserved for the whole file up front, so that no reallocation leaves a copy of a
  // secret behind; the read buffer, and the text on every error, are wiped (the caller
  // wipes the text it gets).
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size) + 1);
  char buf[4096];
  absl::Cleanup wipe_buf = [&buf] { Wipe(std::span<uint8_t>(reinterpret_cast<uint8_t*>(buf), sizeof(buf))); };
  absl::Cleanup wipe_text = [&text] { WipeText(&text); };
  while (text.size() <= kMaxKeyFileBytes) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": cannot read: ", std::strerror(errno)));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > text.capacity()) {
      // The file grew while being read: move to a larger block by hand, wiping the old.
      std::string larger;
      larger.reserve(2 * (text.size() + static_cast<size_t>(n)));
      larger.append(text);
      WipeText(&text);
      text.swap(larger);
    }
    text.append(buf, static_cast<size_t>(n));
  }
  if (text.size() > kMaxKeyFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than ", kMaxKeyFileBytes, " bytes: not a key file"));
  }
  std::move(wipe_text).Cancel();
  return text;
}

absl::Status WithSource(const absl::Status& s, absl::string_view source) {
  return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
}

absl::Status WriteAll(int fd, absl::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return absl::InternalError(std::strerror(errno));
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string KeyFileText(const Key32& key) { return absl::StrCat(ToHex(key), "\n"); }

absl::StatusOr<Key32> ParseKeyText(absl::string_view text, absl::string_view source,
                                   bool secret) {
  const absl::string_view body = absl::StripAsciiWhitespace(text);
  if (body.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": empty (a key file holds 64 hex digits, as longhaul-keygen writes them)"));
  }
  const size_t eol = body.find_first_of("\r\n");
  if (eol != absl::string_view::npos) {
    // The first line may still be the problem (a truncated key on two lines).
    LH_RETURN_IF_ERROR(ParseHexKey(absl::StripAsciiWhitespace(body.substr(0, eol)),
                                   absl::StrCat(source, ":1"), secret)
                           .status());
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":2: more than one line (a key file holds one key on one line)"));
  }
  if (const size_t space = body.find_first_of(" \t\v\f"); space != absl::string_view::npos) {
    LH_RETURN_IF_ERROR(
        ParseHexKey(body.substr(0, space), absl::StrCat(source, ":1"), secret).status());
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":1: text after the key (labels belong in a list of peer keys, not here)"));
  }
  return ParseHexKey(body, absl::StrCat(source, ":1"), secret);
}

absl::StatusOr<std::vector<PeerKey>> ParsePeerKeyText(absl::string_view text,
                                                      absl::string_view source) {
  std::vector<PeerKey> keys;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = absl::StripAsciiWhitespace(line);  // also a '\r' of CRLF files
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t\v\f");
    const absl::string_view token = line.substr(0, space);
    LH_ASSIGN_OR_RETURN(Key32 k, ParseHexKey(token, absl::StrCat(source, ":", line_number)));
    for (const PeerKey& earlier : keys) {
      if (earlier.key == k) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_number, ": the key of line ", earlier.line, " again"));
      }
    }
    PeerKey p;
    p.key = k;
    p.line = line_number;
    if (space != absl::string_view::npos) {
      p.label = std::string(absl::StripAsciiWhitespace(line.substr(space)));
    }
    keys.push_back(std::move(p));
  }
  if (keys.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": no public keys (only comments and blank lines); list one key "
                     "(64 hex digits) per line"));
  }
  return keys;
}

absl::StatusOr<KeyPair> ReadPrivateKeyFile(const std::string& path) {
  // By hand, not LH_ASSIGN_OR_RETURN: moving the text out would leave a short secret's bytes
  // in the StatusOr that WipeText never sees.
  absl::StatusOr<std::string> text = ReadKeyFileText(path, /*secret=*/true);
  if (!text.ok()) return text.status();
  absl::StatusOr<Key32> k = ParseKeyText(*text, path, /*secret=*/true);
  WipeText(&*text);
  if (!k.ok()) return k.status();
  absl::StatusOr<KeyPair> pair = KeyPairFromPrivate(*k);
  Wipe(*k);
  if (!pair.ok()) return WithSource(pair.status(), path);
  return pair;
}

absl::StatusOr<Key32> ReadPublicKeyFile(const std::string& path) {
  LH_ASSIGN_OR_RETURN(std::string text, ReadKeyFileText(path, /*secret=*/false));
  return ParseKeyText(text, path);
}

absl::StatusOr<std::vector<PeerKey>> ReadPeerKeyFile(const std::string& path) {
  LH_ASSIGN_OR_RETURN(std::string text, ReadKeyFileText(path, /*secret=*/false));
  return ParsePeerKeyText(text, path);
}

absl::StatusOr<Key32> ReadPskFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadKeyFileText(path, /*secret=*/true);  // by hand: as above
  if (!text.ok()) return text.status();
  absl::StatusOr<Key32> k = ParseKeyText(*text, path, /*secret=*/true);
  WipeText(&*text);
  return k;
}

absl::Status WriteKeyFile(const std::string& path, absl::string_view text, KeyFileMode mode,
                          bool overwrite) {
  if (path.empty()) return absl::InvalidArgumentError("no file name given");
  const mode_t bits = mode == KeyFileMode::kSecret ? 0600 : 0644;
  if (!overwrite) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, bits);
    if (fd < 0) {
      const int err = errno;
      if (err == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", path, ": ", std::strerror(err)));
    }
    // The umask may only have removed bits; a secret is exactly 0600 either way.
    absl::Status s = mode == KeyFileMode::kSecret && fchmod(fd, 0600) != 0
                         ? absl::InternalError(std::strerror(errno))
                         : WriteAll(fd, text);
    close(fd);
    if (!s.ok()) {
      unlink(path.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", s.message()));
    }
    return absl::OkStatus();
  }
  // A temporary file in the same directory (mkstemp creates it 0600), renamed over path.
  std::string tmp = absl::StrCat(path, ".tmp-XXXXXX");
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create a file in ", DirectoryOf(path), ": ", std::strerror(errno)));
  }
  absl::Status s = WriteAll(fd, text);
  if (s.ok() && mode == KeyFileMode::kPublic) {
    const mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, bits & ~mask) != 0) s = absl::InternalError(std::strerror(errno));
  }
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(std::strerror(errno));
  }
  if (!s.ok()) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status SystemRandom(std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyPair> GenerateKeyPair() {
  Key32 seed;
  LH_RETURN_IF_ERROR(SystemRandom(seed));
  absl::StatusOr<KeyPair> pair = KeyPairFromPrivate(seed);
  Wipe(seed);
  return pair;
}

absl::StatusOr<Key32> GeneratePsk() {
  Key32 k;
  LH_RETURN_IF_ERROR(SystemRandom(k));
  return k;
}

endpoint::EntropySource SystemEntropySource() {
  return [](std::span<uint8_t> out) {
    absl::Status s = SystemRandom(out);
    if (!s.ok()) {
      std::fprintf(stderr, "longhaul: %s\n", std::string(s.message()).c_str());
      std::abort();
    }
  };
}

KeyChoice OverrideKeyChoice(const KeyChoice& base, const KeyChoice& over) {
  KeyChoice out = base;
  const bool over_has_files =
      !over.key.path.empty() || !over.peer_key.path.empty() || !over.psk_file.path.empty();
  if (over.insecure.value_or(false)) {
    out.key = {};
    out.peer_key = {};
    out.psk_file = {};
  }
  if (over_has_files && out.insecure.value_or(false) && !over.insecure.has_value()) {
    out.insecure.reset();
    out.insecure_source.clear();
  }
  if (!over.key.path.empty()) out.key = over.key;
  if (!over.peer_key.path.empty()) out.peer_key = over.peer_key;
  if (!over.psk_file.path.empty()) out.psk_file = over.psk_file;
  if (over.insecure.has_value()) {
    out.insecure = over.insecure;
    out.insecure_source = over.insecure_source;
  }
  return out;
}

absl::StatusOr<LoadedKeys> LoadKeys(const KeyChoice& choice, const KeyChoiceNames& names) {
  auto name = [](const KeyFileSetting& s, const std::string& fallback) {
    return s.source.empty() ? fallback : s.source;
  };
  const std::string key_name = name(choice.key, names.key);
  const std::string peer_name = name(choice.peer_key, names.peer_key);
  const std::string psk_name = name(choice.psk_file, names.psk_file);
  const bool has_key = !choice.key.path.empty();
  const bool has_peer = !choice.peer_key.path.empty();
  const bool has_psk = !choice.psk_file.path.empty();
  if (choice.insecure.value_or(false)) {
    if (has_key || has_peer || has_psk) {
      std::vector<std::string> given;
      if (has_key) given.push_back(key_name);
      if (has_peer) given.push_back(peer_name);
      if (has_psk) given.push_back(psk_name);
      const std::string insecure_name =
          choice.insecure_source.empty() ? names.insecure : choice.insecure_source;
      return absl::InvalidArgumentError(absl::StrCat(insecure_name,
                                                     " (plaintext) was chosen together with keys (",
                                                     absl::StrJoin(given, ", "), "): choose one"));
    }
    LoadedKeys out;
    out.security = endpoint::SecurityConfig::Insecure();
    return out;
  }
  if (!has_key && !has_peer && !has_psk) {
    return absl::InvalidArgumentError(absl::StrCat("no keys: give ", names.key, " and ",
                                                   names.peer_key, ", or ", names.psk_file, ", or ",
                                                   names.insecure, " for plaintext"));
  }
  if (has_key && !has_peer) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_name, " was given without ", names.peer_key,
                     " (a client needs the server's public key, a server the keys of the "
                     "clients it allows)"));
  }
  if (!has_key && has_peer) {
    return absl::InvalidArgumentError(absl::StrCat(peer_name, " was given without ", names.key,
                                                   " (this side's own private key)"));
  }
  LoadedKeys out;
  if (has_key) {
    absl::StatusOr<KeyPair> pair = ReadPrivateKeyFile(choice.key.path);
    if (!pair.ok()) return WithSource(pair.status(), key_name);
    out.security.key = *pair;
    absl::StatusOr<std::vector<PeerKey>> peers = ReadPeerKeyFile(choice.peer_key.path);
    if (!peers.ok()) return WithSource(peers.status(), peer_name);
    out.peers = *std::move(peers);
    out.peer_key_path = choice.peer_key.path;
    for (const PeerKey& p : out.peers) out.security.peer_keys.push_back(p.key);
  }
  if (has_psk) {
    absl::StatusOr<Key32> psk = ReadPskFile(choice.psk_file.path);
    if (!psk.ok()) return WithSource(psk.status(), psk_name);
    out.security.psk = *psk;
  }
  // Whatever else SecurityConfig checks (the entropy source is the driver's to set).
  endpoint::SecurityConfig check = out.security;
  check.entropy = [](std::span<uint8_t>) {};
  if (absl::Status s = check.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  return out;
}

std::string PeerKeyLabel(const std::vector<PeerKey>& peers, const Key32& key) {
  for (const PeerKey& p : peers) {
    if (p.key == key) return p.label;
  }
  return "";
}

}  // namespace longhaul::crypto
