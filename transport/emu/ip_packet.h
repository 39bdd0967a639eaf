// Helpers for whole IP packets (TUN mode): read the ECN codepoint and set CE in place.
//
// IPv4: the ECN field is the low two bits of the TOS byte; setting CE updates the header
// checksum incrementally (RFC 1624). IPv6: the low two bits of the traffic class; there is
// no header checksum. Transport checksums do not cover these bits (RFC 3168).
// Malformed or truncated packets are left untouched and reported as not ECN-capable.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::emu {

// ECN codepoints (RFC 3168).
inline constexpr uint8_t kEcnNotEct = 0;
inline constexpr uint8_t kEcnEct1 = 1;
inline constexpr uint8_t kEcnEct0 = 2;
inline constexpr uint8_t kEcnCe = 3;

// The ECN codepoint of an IPv4/IPv6 packet; kEcnNotEct for anything else.
uint8_t IpPacketEcn(const uint8_t* packet, size_t len);

// Sets CE on an ECN-capable (ECT(0), ECT(1) or already CE) IPv4/IPv6 packet, fixing the
// IPv4 header checksum. Returns false (and changes nothing) for Not-ECT or malformed
// packets: CE must never be set on a packet whose sender did not negotiate ECN.
bool SetIpPacketCe(uint8_t* packet, size_t len);

// The RFC 1071 Internet checksum of `len` bytes (for tests and header checks).
uint16_t InternetChecksum(const uint8_t* data, size_t len);

}  // namespace longhaul::emu
