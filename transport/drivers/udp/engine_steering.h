// Engine steering: the classic BPF program that a server's SO_REUSEPORT group of
// listening sockets (one per engine, docs/architecture.md "Engines") runs on every
// datagram to pick the socket, and so the engine, that handles it:
//   - a longhaul packet (first byte wire::kVersion) of any type but Initial goes to the
//     engine named by the top byte of its connection id (wire byte 4: each engine's
//     endpoint chooses ids whose top byte is its index, EndpointConfig::engine);
//   - an Initial (a client's Hello) returns an index past the group, so the kernel falls
//     back to its 4-tuple hash: Hellos spread over the engines, and a client's retried
//     Hello reaches the engine its first one did; the cookie verifies on any engine;
//   - anything else (the prober's datagrams keep per-train state, a truncated packet)
//     goes to engine 0.
// The program reads the UDP payload from offset 0 (the kernel pulls the UDP header
// first), its loads are big-endian, and it returns a slot in the group: sockets take
// slots in the order they join, so engine i binds i-th. Header protection flips only
// bit 7 of the type byte (the key phase), which the program masks. An index >= the group
// size (a forged id) falls back to the hash; it costs the engine that gets it nothing
// but a counter. Attaching needs no privilege.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "absl/status/status.h"

namespace longhaul::udp {

// The program (instructions in order).
std::vector<sock_filter> EngineSteeringProgram();

// Attaches the program to `fd`'s reuseport group (SO_ATTACH_REUSEPORT_CBPF; one socket
// of the group sets it for all). Errors: ErrnoStatus naming the option.
absl::Status AttachEngineSteering(int fd);

}  // namespace longhaul::udp
