// Ecn: the ECN codepoint of a datagram (the two ECN bits of the IP header, RFC 3168).
//
// A plain value shared by the layers that carry a datagram: the core reads it on arrival
// (CE marks feed congestion control) and chooses it for what it sends, the sockets
// (transport/net) read and write it through control messages, and the simulator marks it
// at a congested link. It lives in base, below all of them, so that the sockets need no
// protocol headers for it.
#pragma once

#include <cstdint>

namespace longhaul {

// ECN codepoint of a datagram (IP header bits).
enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

}  // namespace longhaul
