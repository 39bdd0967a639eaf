// Packet-protection flags of the tools that run longhaul endpoints (longhaul-perf),
// defined once here:
//
//   --key=FILE        this side's private key (longhaul-keygen --out=PREFIX: PREFIX.key)
//   --peer_key=FILE   the peer's public key: a client's, the server's key; a server's,
//                     the client keys it allows (one per line, '#' comments, a label)
//   --psk_file=FILE   a pre-shared key, the same file on both sides
//   --insecure        plaintext, chosen explicitly
//
// --profile's key, peer_key, psk_file and insecure settings come first; flags override
// them (transport/crypto/key_files.h, OverrideKeyChoice). Nothing chosen is a usage error.
// Also the JSON and text the tools print about the protection in use. Tool-layer code
// (gflags); not thread-safe: call from main() before starting threads.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "transport/crypto/key_files.h"
#include "transport/datapath/connection_handle.h"

namespace longhaul {

// The keys the command line chooses: --profile's security settings, then the flags.
// Errors as crypto::LoadKeys, in the flags' names: "no keys: give --key and --peer_key,
// or --psk_file, or --insecure for plaintext", "--key: a.key is readable by others (mode
// 0644): chmod 600 a.key", "key (p.profile:3): ..."; a missing --profile is NotFound.
[[nodiscard]] absl::StatusOr<crypto::LoadedKeys> SecurityFromFlags();
// SecurityFromFlags for a connecting side: with static keys, --peer_key must hold the
// server's public key alone (InvalidArgument "--peer_key: FILE lists N keys; a client
// takes the server's public key alone").
[[nodiscard]] absl::StatusOr<crypto::LoadedKeys> ClientSecurityFromFlags();

// This side's settings, for start lines and "listening" events: {"mode": "Noise IK
// (static keys)", "protected": true, "key": own public key (hex) or null, "peer_keys":
// how many, "peer_key_file": path or null}.
nlohmann::json SecuritySettingsToJson(const crypto::LoadedKeys& keys);
// One line: "security: Noise IK (static keys), key 3f2a9c0d1e2b4f5a..., 3 peer keys
// (allowed)"; "security: insecure (plaintext): packets are neither encrypted nor
// authenticated".
std::string SecuritySettingsLine(const crypto::LoadedKeys& keys);

// One connection's protection: {"mode": "Noise IK (static keys)", "protected": true,
// "cipher": "aes-256-gcm" or null, "peer_key": hex or null, "peer_key_label": the
// label of that key in `keys`' peer-key file, or null}.
nlohmann::json ConnectionSecurityToJson(const ConnectionInfo& info, const crypto::LoadedKeys& keys);
// "Noise IK (static keys), aes-256-gcm, peer key 3f2a9c0d1e2b4f5a... (rank-3)";
// "insecure (plaintext): packets are neither encrypted nor authenticated".
std::string ConnectionSecurityText(const ConnectionInfo& info, const crypto::LoadedKeys& keys);

}  // namespace longhaul
