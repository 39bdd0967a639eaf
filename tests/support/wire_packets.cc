#include "tests/support/wire_packets.h"

#include <cstring>
#include <memory>

#include "transport/wire/crc32c.h"
#include "gtest/gtest.h"

namespace longhaul::testing {

using wire::AckFrame;
using wire::AckRange;
using wire::AckRangeIterator;
using wire::Frame;
using wire::FrameReader;
using wire::kChecksumSize;
using wire::kHeaderSize;
using wire::PacketHeader;
using wire::PacketType;
using wire::PacketView;
using wire::PacketWriter;

PacketHeader SampleHeader(PacketType type) {
  PacketHeader h;
  h.type = type;
  h.flow = 0xA1B2;
  h.connection_id = 0x0123456789ABCDEFULL;
  h.packet_number = 0xFEDCBA9876543210ULL;
  return h;
}

Bytes BuildPacket(const PacketHeader &header,
                  const std::function<void(PacketWriter &)> &frames,
                  size_t capacity) {
  Bytes buffer(capacity);
  PacketWriter w(buffer.data(), buffer.size());
  w.WriteHeader(header);
  frames(w);
  size_t n = w.Finish();
  buffer.resize(n);
  buffer.shrink_to_fit();
  return buffer;
}

Bytes PacketFromFrameBytes(const Bytes &frame_bytes) {
  Bytes d = BuildPacket(SampleHeader(), [](PacketWriter &) {});
  d.resize(kHeaderSize);
  d.insert(d.end(), frame_bytes.begin(), frame_bytes.end());
  d.resize(d.size() + kChecksumSize);
  Reseal(d);
  return d;
}

void Reseal(Bytes &d) {
  ASSERT_GE(d.size(), kChecksumSize);
  const size_t body = d.size() - kChecksumSize;
  uint32_t crc = wire::Crc32c(d.data(), body);
  for (int i = 0; i < 4; ++i)
    d[body + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
}

Bytes FrameBytes(const Bytes &d) {
  return Bytes(d.begin() + kHeaderSize, d.end() - kChecksumSize);
}

absl::StatusOr<std::vector<Frame>> ReadAllFrames(const uint8_t *data,
                                                 size_t size) {
  std::vector<Frame> out;
  FrameReader r(data, data + size);
  // Every successful Next() consumes at least one byte, so size + 1 calls
  // always suffice.
  for (size_t i = 0; i <= size; ++i) {
    const uint8_t *before = r.position();
    Frame f;
    absl::StatusOr<bool> more = r.Next(&f);
    if (!more.ok())
      return more.status();
    if (!*more)
      return out;
    EXPECT_GT(r.position(), before) << "FrameReader did not advance";
    EXPECT_LE(r.position(), data + size) << "FrameReader moved past the end";
    out.push_back(f);
  }
  ADD_FAILURE() << "FrameReader did not terminate within " << size + 1
                << " calls";
  return out;
}

absl::StatusOr<std::vector<Frame>> DecodeDatagram(const Bytes &d) {
  absl::StatusOr<PacketView> v = wire::ParsePacket(d);
  if (!v.ok())
    return v.status();
  return ReadAllFrames(v->frames,
                       static_cast<size_t>(v->frames_end - v->frames));
}

wire::DataFrame DataPiece(uint64_t id, uint64_t size, uint64_t off,
                          uint64_t len, uint64_t base, const uint8_t *data,
                          bool unordered) {
  wire::DataFrame f;
  f.message_id = id;
  f.message_length = size;
  f.offset = off;
  f.length = len;
  f.stream_base = base;
  f.payload = data;
  f.flags = (off + len == size ? wire::kDataFlagLast : 0) |
            (unordered ? wire::kDataFlagUnordered : 0);
  return f;
}

bool IsDataPacket(const Bytes &d) {
  absl::StatusOr<PacketView> v = wire::ParsePacket(d);
  if (!v.ok())
    return false;
  FrameReader r(*v);
  Frame f;
  while (true) {
    absl::StatusOr<bool> more = r.Next(&f);
    if (!more.ok() || !*more)
      return false;
    if (f.type == wire::FrameType::kData)
      return true;
  }
}

std::vector<AckRange> Ranges(const AckFrame &ack) {
  std::vector<AckRange> out;
  AckRangeIterator it(ack);
  AckRange r;
  // At most range_count + 1 ranges exist; bound the loop by that.
  for (uint64_t i = 0; i <= ack.range_count + 1 && it.Next(&r); ++i)
    out.push_back(r);
  return out;
}

} // namespace longhaul::testing
