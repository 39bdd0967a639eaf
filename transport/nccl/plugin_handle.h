// The connection handle of longhaul's NCCL net plugin: what listen() writes into NCCL's
// opaque 128-byte ncclNetHandle_t and connect() reads on the peer. It carries everything
// a connect needs: the listener's UDP address (or that of a relay in front of it,
// NCCL_LONGHAUL_ADVERTISE), the listen comm it names, the receive credit the receiver
// grants ahead, the plugin instance (to share one longhaul connection between the comms
// of a process pair), and, with static keys, the listener's X25519 public key, which the
// connecting rank authenticates it by (after checking that the key is one it allows,
// NCCL_LONGHAUL_PEER_KEY). The key is public: the handle travels through NCCL's
// bootstrap, which anyone on that network may read, and what it says is only trusted
// as far as the allowed keys say.
//
// The listen id is 64 bits from the system's randomness (getrandom), never sequential:
// a peer that holds an allowed key but cannot read the bootstrap cannot name a listen
// comm it was not given (docs/nccl.md, section 5, "Who can open a listen comm").
//
// Layout (little-endian host order; the handle never leaves the job's machines, which
// share an architecture):
//
//   offset  size  field
//        0     4  magic 0x314e484c ("LHN1")
//        4     2  version (3; version 2 had sequential listen ids and frames of version
//                 1, version 1 no key)
//        6     2  port (UDP, of the listener's longhaul endpoint)
//        8     8  instance (random id of the listening plugin instance)
//       16     8  listen_id (random id of the listen comm within that instance)
//       24     8  credit (bytes of unmatched data the receiver buffers per comm)
//       32    48  address (numeric IPv4/IPv6, NUL-terminated)
//       80    32  public_key (the listener's static key; zero without static keys)
//      112     1  flags (bit 0: public_key is present; other bits zero)
//      113    15  unused (zero)
//
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace longhaul::nccl {

inline constexpr uint32_t kHandleMagic = 0x314e484c;
inline constexpr uint16_t kHandleVersion = 3;
inline constexpr size_t kHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE

struct PluginHandle {
  std::string address;  // numeric
  uint16_t port = 0;
  uint64_t instance = 0;
  uint64_t listen_id = 0;
  uint64_t credit = 0;
  std::optional<std::array<uint8_t, 32>> public_key;  // the listener's, with static keys
};

// Writes `h` into the 128 bytes at `out` (the rest zeroed). InvalidArgument if the
// address does not fit.
absl::Status EncodeHandle(const PluginHandle& h, void* out);
// Reads a handle; InvalidArgument naming what is wrong (magic, version, address, port,
// flags).
absl::StatusOr<PluginHandle> DecodeHandle(const void* in);
// Rewrites the address and port a handle points to (for a relay such as longhaul-emu in
// front of the listener). Everything else stays.
absl::Status RedirectHandle(void* handle, const std::string& address, uint16_t port);

}  // namespace longhaul::nccl
