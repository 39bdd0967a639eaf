// Wire helpers for tests: building datagrams into exactly-sized heap buffers
// (so AddressSanitizer flags any read past the end), crafting packets around
// hand-written frame bytes, and decoding every frame of a datagram.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/pattern.h"
#include "transport/wire/packet.h"

namespace longhaul::testing {

// A header with every field set to a distinctive value.
wire::PacketHeader
SampleHeader(wire::PacketType type = wire::PacketType::kOneRtt);

// Writes header + whatever `frames` writes into a buffer of `capacity` bytes,
// finishes the packet, and returns exactly the datagram bytes.
Bytes BuildPacket(const wire::PacketHeader &header,
                  const std::function<void(wire::PacketWriter &)> &frames,
                  size_t capacity = wire::kMaxDatagramSize);

// A datagram made of SampleHeader(), the given raw frame bytes and a correct
// checksum. Lets tests feed frames the writer would never produce.
Bytes PacketFromFrameBytes(const Bytes &frame_bytes);

// Recomputes the trailing checksum after a test has edited the bytes before it.
void Reseal(Bytes &datagram);

// The frame bytes of a datagram (between header and checksum).
Bytes FrameBytes(const Bytes &datagram);

// Decodes every frame in [data, data + size). Returns the frames, or the first
// error. Fails the test if the reader does not advance on a successful Next().
absl::StatusOr<std::vector<wire::Frame>> ReadAllFrames(const uint8_t *data,
                                                       size_t size);

// ParsePacket + ReadAllFrames.
absl::StatusOr<std::vector<wire::Frame>> DecodeDatagram(const Bytes &datagram);

// A DATA frame carrying bytes [off, off + len) of message `id` (`size` bytes
// long, its first unit at stream offset `base`); kDataFlagLast on the last
// piece, kDataFlagUnordered when `unordered`.
wire::DataFrame DataPiece(uint64_t id, uint64_t size, uint64_t off,
                          uint64_t len, uint64_t base, const uint8_t *data,
                          bool unordered = false);

// Does the datagram parse and carry a DATA frame?
bool IsDataPacket(const Bytes &datagram);

// All ranges of an ACK frame, in iteration order.
std::vector<wire::AckRange> Ranges(const wire::AckFrame &ack);

} // namespace longhaul::testing
