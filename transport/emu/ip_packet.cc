#include "transport/emu/ip_packet.h"

namespace longhaul::emu {
namespace {

// Minimal sanity checks: enough bytes for the fixed header, a consistent IHL.
bool Ipv4HeaderOk(const uint8_t* p, size_t len) {
  if (len < 20 || (p[0] >> 4) != 4) return false;
  const size_t ihl = static_cast<size_t>(p[0] & 0x0f) * 4;
  return ihl >= 20 && ihl <= len;
}

bool Ipv6HeaderOk(const uint8_t* p, size_t len) { return len >= 40 && (p[0] >> 4) == 6; }

}  // namespace

uint8_t IpPacketEcn(const uint8_t* packet, size_t len) {
  if (packet == nullptr) return kEcnNotEct;
  if (Ipv4HeaderOk(packet, len)) return packet[1] & 0x03;
  if (Ipv6HeaderOk(packet, len)) return (packet[1] >> 4) & 0x03;
  return kEcnNotEct;
}

bool SetIpPacketCe(uint8_t* packet, size_t len) {
  if (packet == nullptr) return false;
  if (Ipv4HeaderOk(packet, len)) {
    if ((packet[1] & 0x03) == kEcnNotEct) return false;
    // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m = the 16-bit word holding the TOS byte.
    const uint16_t old_word = static_cast<uint16_t>((packet[0] << 8) | packet[1]);
    packet[1] |= kEcnCe;
    const uint16_t new_word = static_cast<uint16_t>((packet[0] << 8) | packet[1]);
    const uint16_t hc = static_cast<uint16_t>((packet[10] << 8) | packet[11]);
    uint32_t sum = static_cast<uint16_t>(~hc) + static_cast<uint16_t>(~old_word) + new_word;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    const uint16_t fixed = static_cast<uint16_t>(~sum);
    packet[10] = static_cast<uint8_t>(fixed >> 8);
    packet[11] = static_cast<uint8_t>(fixed & 0xff);
    return true;
  }
  if (Ipv6HeaderOk(packet, len)) {
    if (((packet[1] >> 4) & 0x03) == kEcnNotEct) return false;
    packet[1] |= kEcnCe << 4;
    return true;
  }
  return false;
}

uint16_t InternetChecksum(const uint8_t* data, size_t len) {
  uint32_t sum = 0;
  size_t i = 0;
  for (; i + 1 < len; i += 2) sum += static_cast<uint32_t>((data[i] << 8) | data[i + 1]);
  if (i < len) sum += static_cast<uint32_t>(data[i] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace longhaul::emu
