#include "tools/common/security_flags.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "transport/profile/profile_file.h"
#include "transport/crypto/primitives.h"
#include "transport/endpoint/security_config.h"

DEFINE_string(key, "",
              "this side's private key file (longhaul-keygen --out=PREFIX writes PREFIX.key, "
              "mode 0600)");
DEFINE_string(peer_key, "",
              "the peer's public key file: a client's holds the server's key; a server's "
              "lists the client keys it allows, one per line ('#' comments, a label after "
              "the key)");
DEFINE_string(psk_file, "",
              "a pre-shared key file (64 hex digits: longhaul-keygen --psk=FILE or openssl "
              "rand -hex 32), the same on both sides; with --key and --peer_key too, both "
              "must match");
DEFINE_bool(insecure, false,
            "no packet protection: plaintext packets with a CRC32C, readable and forgeable "
            "on the path (chosen explicitly; one of --key/--peer_key, --psk_file and "
            "--insecure is required)");
DECLARE_string(profile);

namespace longhaul {
namespace {

bool FlagWasSet(const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; }

crypto::KeyFileSetting FromProfile(const ProfileSetting& s, const char* key) {
  if (!s.set()) return {};
  return {s.value, absl::StrCat(key, " (", s.where, ")")};
}

std::string Short(const std::string& hex) { return hex.substr(0, 16) + "..."; }

std::string LabelOf(const ConnectionInfo& info, const crypto::LoadedKeys& keys) {
  absl::StatusOr<crypto::Key32> k = crypto::Key32FromHex(info.peer_key);
  return k.ok() ? crypto::PeerKeyLabel(keys.peers, *k) : "";
}

}  // namespace

absl::StatusOr<crypto::LoadedKeys> SecurityFromFlags() {
  crypto::KeyChoice profile;
  if (!FLAGS_profile.empty()) {
    absl::StatusOr<LoadedProfile> p = LoadProfileFile(FLAGS_profile, TransportConfig());
    if (!p.ok()) {
      return absl::Status(p.status().code(), absl::StrCat("--profile: ", p.status().message()));
    }
    profile.key = FromProfile(p->security.key, "key");
    profile.peer_key = FromProfile(p->security.peer_key, "peer_key");
    profile.psk_file = FromProfile(p->security.psk_file, "psk_file");
    profile.insecure = p->security.insecure;
    if (profile.insecure.has_value()) {
      profile.insecure_source = absl::StrCat("insecure (", p->security.insecure_where, ")");
    }
  }
  crypto::KeyChoice flags;
  if (!FLAGS_key.empty()) flags.key = {FLAGS_key, "--key"};
  if (!FLAGS_peer_key.empty()) flags.peer_key = {FLAGS_peer_key, "--peer_key"};
  if (!FLAGS_psk_file.empty()) flags.psk_file = {FLAGS_psk_file, "--psk_file"};
  if (FlagWasSet("insecure")) {
    flags.insecure = FLAGS_insecure;
    flags.insecure_source = "--insecure";
  }
  return crypto::LoadKeys(crypto::OverrideKeyChoice(profile, flags));
}

absl::StatusOr<crypto::LoadedKeys> ClientSecurityFromFlags() {
  absl::StatusOr<crypto::LoadedKeys> keys = SecurityFromFlags();
  if (keys.ok() && keys->security.key.has_value() && keys->peers.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer_key: ", keys->peer_key_path, " lists ", keys->peers.size(),
                     " keys; a client takes the server's public key alone"));
  }
  return keys;
}

nlohmann::json SecuritySettingsToJson(const crypto::LoadedKeys& keys) {
  const endpoint::SecurityConfig& s = keys.security;
  nlohmann::json j;
  j["mode"] = endpoint::SecurityModeName(s.mode());
  j["protected"] = !s.insecure;
  j["key"] = s.key ? nlohmann::json(crypto::ToHex(s.key->public_key)) : nlohmann::json(nullptr);
  j["peer_keys"] = s.peer_keys.size();
  j["peer_key_file"] =
      keys.peer_key_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(keys.peer_key_path);
  return j;
}

std::string SecuritySettingsLine(const crypto::LoadedKeys& keys) {
  const endpoint::SecurityConfig& s = keys.security;
  if (s.insecure) {
    return "security: insecure (plaintext): packets are neither encrypted nor authenticated";
  }
  std::string line = absl::StrCat("security: ", endpoint::SecurityModeName(s.mode()));
  if (s.key) absl::StrAppend(&line, ", key ", Short(crypto::ToHex(s.key->public_key)));
  if (!s.peer_keys.empty()) {
    absl::StrAppend(&line, ", ", s.peer_keys.size(),
                    s.peer_keys.size() == 1 ? " peer key" : " peer keys", " (", keys.peer_key_path,
                    ")");
  }
  return line;
}

nlohmann::json ConnectionSecurityToJson(const ConnectionInfo& info,
                                        const crypto::LoadedKeys& keys) {
  nlohmann::json j;
  j["mode"] = info.security;
  j["protected"] = !info.cipher.empty();
  j["cipher"] = info.cipher.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.cipher);
  j["peer_key"] = info.peer_key.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.peer_key);
  const std::string label = LabelOf(info, keys);
  j["peer_key_label"] = label.empty() ? nlohmann::json(nullptr) : nlohmann::json(label);
  return j;
}

std::string ConnectionSecurityText(const ConnectionInfo& info, const crypto::LoadedKeys& keys) {
  std::string text = info.security;
  if (info.cipher.empty()) {
    absl::StrAppend(&text, ": packets are neither encrypted nor authenticated");
  } else {
    absl::StrAppend(&text, ", ", info.cipher);
  }
  if (!info.peer_key.empty()) {
    absl::StrAppend(&text, ", peer key ", Short(info.peer_key));
    if (const std::string label = LabelOf(info, keys); !label.empty()) {
      absl::StrAppend(&text, " (", label, ")");
    }
  }
  return text;
}

}  // namespace longhaul
