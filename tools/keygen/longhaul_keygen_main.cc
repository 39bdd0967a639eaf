// longhaul-keygen: writes the key material of packet protection.
//
//   longhaul-keygen --out=PREFIX [--force]    a key pair: PREFIX.key (private, 0600) and
//                                             PREFIX.pub (public)
//   longhaul-keygen --psk=FILE [--force]      a 32-byte pre-shared key (0600)
//   longhaul-keygen --public_from=KEYFILE     prints the public key of a private key
//
// Keys come from the kernel's CSPRNG (getrandom). Files are created with O_EXCL: an
// existing one is never overwritten unless --force is given. Formats: docs/security.md
// and transport/crypto/key_files.h. Exit status: 0 done, 1 an error (a file exists or
// cannot be written or read), 2 bad flags.
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "tools/common/tool_flags.h"
#include "transport/crypto/key_files.h"
#include "transport/crypto/primitives.h"

DEFINE_string(out, "",
              "write a key pair: PREFIX.key (the private key, mode 0600) and PREFIX.pub (the "
              "public key, for the peer's --peer_key)");
DEFINE_string(psk, "",
              "write a pre-shared key (32 random bytes as 64 hex digits, mode 0600) to FILE, "
              "for --psk_file on both sides");
DEFINE_string(public_from, "", "print the public key of the private key file KEYFILE");
DEFINE_bool(force, false, "--out, --psk: replace files that exist");

namespace longhaul {
namespace {

constexpr ToolUsage kUsage("longhaul-keygen");
const std::vector<std::string> kFlagDirs = {"tools/keygen/"};

void PrintHelp() {
  std::cout
      << "longhaul-keygen: keys for longhaul's packet protection\n\n"
         "usage: longhaul-keygen --out=PREFIX [--force]   key pair PREFIX.key, PREFIX.pub\n"
         "       longhaul-keygen --psk=FILE [--force]     pre-shared key\n"
         "       longhaul-keygen --public_from=KEYFILE    print a private key's public key\n\n"
         "Each side of a connection holds its own key pair (--key=PREFIX.key) and the other\n"
         "side's public key (--peer_key=FILE; a server's file may list many, one per line,\n"
         "with '#' comments and a label after the key), or both hold one pre-shared key\n"
         "(--psk_file=FILE; `openssl rand -hex 32 > FILE` makes one too). Keys come from\n"
         "getrandom; files are never overwritten without --force. Exit status: 0 done,\n"
         "1 an error, 2 bad flags. docs/security.md.\n\nflags:\n";
  PrintToolFlags(std::cout, kFlagDirs);
}

int Error(const std::string& message) {
  std::cerr << "longhaul-keygen: error - " << message << std::endl;
  return 1;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::string ExistsMessage(const std::string& path) {
  return absl::StrCat(path, " exists; not overwritten (--force replaces it)");
}

int WritePair(const std::string& prefix) {
  const std::string key = prefix + ".key", pub = prefix + ".pub";
  if (!FLAGS_force) {
    for (const std::string& p : {key, pub}) {
      if (Exists(p)) return Error(ExistsMessage(p));
    }
  }
  absl::StatusOr<crypto::KeyPair> pair = crypto::GenerateKeyPair();
  if (!pair.ok()) return Error(std::string(pair.status().message()));
  absl::Status s = crypto::WriteKeyFile(key, crypto::KeyFileText(pair->private_key),
                                        crypto::KeyFileMode::kSecret, FLAGS_force);
  crypto::Wipe(pair->private_key);
  if (absl::IsAlreadyExists(s)) return Error(ExistsMessage(key));
  if (!s.ok()) return Error(std::string(s.message()));
  s = crypto::WriteKeyFile(pub, crypto::KeyFileText(pair->public_key), crypto::KeyFileMode::kPublic,
                           FLAGS_force);
  if (!s.ok()) {
    unlink(key.c_str());  // no private key without its public half
    return Error(absl::IsAlreadyExists(s) ? ExistsMessage(pub) : std::string(s.message()));
  }
  std::cout << "wrote " << key << " (private key, mode 0600) and " << pub << " (public key)\n"
            << "public key: " << crypto::ToHex(pair->public_key) << "\n"
            << "this side: --key=" << key << "; the peer: --peer_key=" << pub
            << " (or a line of its list)" << std::endl;
  return 0;
}

int WritePsk(const std::string& path) {
  if (!FLAGS_force && Exists(path)) return Error(ExistsMessage(path));
  absl::StatusOr<crypto::Key32> psk = crypto::GeneratePsk();
  if (!psk.ok()) return Error(std::string(psk.status().message()));
  absl::Status s = crypto::WriteKeyFile(path, crypto::KeyFileText(*psk),
                                        crypto::KeyFileMode::kSecret, FLAGS_force);
  crypto::Wipe(*psk);
  if (absl::IsAlreadyExists(s)) return Error(ExistsMessage(path));
  if (!s.ok()) return Error(std::string(s.message()));
  std::cout << "wrote " << path << " (pre-shared key, mode 0600): give it to both sides with "
            << "--psk_file=" << path << std::endl;
  return 0;
}

int PrintPublic(const std::string& path) {
  absl::StatusOr<crypto::KeyPair> pair = crypto::ReadPrivateKeyFile(path);
  if (!pair.ok()) return Error(std::string(pair.status().message()));
  std::cout << crypto::ToHex(pair->public_key) << std::endl;
  crypto::Wipe(pair->private_key);
  return 0;
}

int Main(int argc, char** argv) {
  InitTool(argc, argv, kFlagDirs, kUsage, PrintHelp);
  const int modes = !FLAGS_out.empty() + !FLAGS_psk.empty() + !FLAGS_public_from.empty();
  if (modes != 1) {
    kUsage.Fail("give exactly one of --out=PREFIX, --psk=FILE and --public_from=KEYFILE");
  }
  if (!FLAGS_public_from.empty()) {
    if (FLAGS_force) kUsage.Fail("--force applies to --out and --psk");
    return PrintPublic(FLAGS_public_from);
  }
  if (!FLAGS_out.empty()) return WritePair(FLAGS_out);
  return WritePsk(FLAGS_psk);
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) { return longhaul::Main(argc, argv); }
