// Helpers shared by the wire unit tests: building datagrams into exactly-sized heap
// buffers (so AddressSanitizer flags any read past the end), crafting packets around
// hand-written frame bytes, and decoding every frame of a datagram.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/wire/packet.h"

namespace longhaul::wire::testing {

using Bytes = std::vector<uint8_t>;

// A header with every field set to a distinctive value.
PacketHeader SampleHeader(PacketType type = PacketType::kOneRtt);

// Writes header + whatever `frames` writes into a buffer of `capacity` bytes, finishes
// the packet, and returns exactly the datagram bytes.
Bytes BuildPacket(const PacketHeader& header, const std::function<void(PacketWriter&)>& frames,
                  size_t capacity = kMaxDatagramSize);

// A datagram made of SampleHeader(), the given raw frame bytes and a correct checksum.
// Lets tests feed frames the writer would never produce.
Bytes PacketFromFrameBytes(const Bytes& frame_bytes);

// Recomputes the trailing checksum after a test has edited the bytes before it.
void Reseal(Bytes& datagram);

// The frame bytes of a datagram (between header and checksum).
Bytes FrameBytes(const Bytes& datagram);

// Decodes every frame in [data, data + size). Returns the frames, or the first error.
// Fails the test if the reader does not advance on a successful Next().
absl::StatusOr<std::vector<Frame>> ReadAllFrames(const uint8_t* data, size_t size);

// ParsePacket + ReadAllFrames.
absl::StatusOr<std::vector<Frame>> DecodeDatagram(const Bytes& datagram);

// All ranges of an ACK frame, in iteration order.
std::vector<AckRange> Ranges(const AckFrame& ack);

// A deterministic byte pattern.
Bytes Pattern(size_t n, uint8_t seed);

}  // namespace longhaul::wire::testing
