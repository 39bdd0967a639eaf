// Engine steering: the classic BPF program that a server's SO_REUSEPORT group of
// listening sockets (one per engine, docs/architecture.md "Engines") runs on every
// datagram to pick the socket, and so the engine, that handles it:
//   - a longhaul packet (first byte wire::kVersion) of any type but Initial goes to the
//     engine named by the top byte of its connection id (wire byte 4: each engine's
//     endpoint chooses ids whose top byte is its index, EndpointConfig::engine);
//   - an Initial (a client's Hello) goes to engine (top 16 bits of the Hello's
//     client_cid) % engines: clients count their connections there (EndpointConfig::
//     client_id_tag, from a random start; 16 bits, so the count's wrap, rare, is the
//     only place two consecutive connections can share an engine of a group whose size
//     does not divide 65536), so one client's connections spread evenly,
//     and every Hello of one connection (a retried one, one with the cookie) reaches the
//     same engine; the cookie verifies on any engine anyway;
//   - anything else (the prober's datagrams keep per-train state, a truncated packet)
//     goes to engine 0.
// The program reads the UDP payload from offset 0 (the kernel pulls the UDP header
// first), its loads are big-endian, and it returns a slot in the group: sockets take
// slots in the order they join, so engine i binds i-th. Header protection flips only
// bit 7 of the type byte (the key phase), which the program masks. A load past the
// datagram's end returns 0 (engine 0). An index >= the group size (a forged id) makes
// the kernel fall back to its 4-tuple hash; it costs the engine that gets it nothing but
// a counter. Attaching needs no privilege.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace longhaul::udp {

// The program for a group of `engines` sockets (instructions in order).
std::vector<sock_filter> EngineSteeringProgram(uint32_t engines);

// Attaches the program to `fd`'s reuseport group of `engines` sockets
// (SO_ATTACH_REUSEPORT_CBPF; one socket of the group sets it for all). Errors:
// ErrnoStatus naming the option.
absl::Status AttachEngineSteering(int fd, uint32_t engines);

}  // namespace longhaul::udp
