// Fuzz target for the wire decoder.
//
// Each input is used three ways:
//   1. as a datagram: ParsePacket, then every frame and every ACK range;
//   2. as a datagram with its checksum recomputed, so mutations reach the frame parser
//      (a random mutation almost never keeps the CRC32C valid);
//   3. as raw frame bytes handed straight to FrameReader.
// Whatever decodes is checked against the documented invariants, re-encoded with
// PacketWriter, decoded again and compared (round-trip property), and re-encoded once
// more, which must reproduce the first encoding byte for byte (the writer's output is
// canonical). Any violation aborts, which libFuzzer reports as a crash.
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON under clang, and linked into the
// wire_fuzz_replay_test ctest (label fuzz) everywhere else.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transport/wire/crc32c.h"
#include "transport/wire/packet.h"
#include "transport/wire/varint.h"

namespace longhaul::wire {
namespace {

// The writer's documented limits, which a decoded frame may exceed.
constexpr size_t kMaxCloseReason = 1024;
constexpr size_t kMaxAckRanges = size_t{1} << 14;

struct Decoded {
  std::vector<Frame> frames;
  bool error = false;  // iteration stopped at a malformed frame
};

std::vector<AckRange> AllRanges(const AckFrame& ack) {
  std::vector<AckRange> out;
  AckRangeIterator it(ack);
  AckRange r;
  // At most range_count + 1 ranges; the bound keeps the loop finite whatever happens.
  for (uint64_t i = 0; i <= ack.range_count && it.Next(&r); ++i) out.push_back(r);
  LH_FUZZ_CHECK(!it.Next(&r));
  return out;
}

// Payload bytes a DATA frame carries: its length, or its stamps when elided.
uint64_t CarriedBytes(const DataFrame& d) {
  return d.elided() ? StampBytes(d.offset, d.length, d.message_length) : d.length;
}

void CheckFrameInvariants(const Frame& f, const uint8_t* begin, const uint8_t* end) {
  switch (f.type) {
    case FrameType::kData: {
      const DataFrame& d = f.data;
      LH_FUZZ_CHECK((d.flags & ~kDataFlagsKnown) == 0);
      LH_FUZZ_CHECK(d.offset <= d.message_length);
      LH_FUZZ_CHECK(d.length <= d.message_length - d.offset);
      LH_FUZZ_CHECK(!d.last() || d.offset + d.length == d.message_length);
      LH_FUZZ_CHECK(d.stream_base <= kMaxVarint - d.message_length);
      LH_FUZZ_CHECK(d.payload >= begin && d.payload <= end);
      LH_FUZZ_CHECK(!d.elided() || d.length > 0);
      LH_FUZZ_CHECK(CarriedBytes(d) <= static_cast<uint64_t>(end - d.payload));
      break;
    }
    case FrameType::kAck: {
      const AckFrame& a = f.ack;
      LH_FUZZ_CHECK(a.first_range <= a.largest);
      LH_FUZZ_CHECK(a.ranges >= begin && a.ranges <= a.ranges_end && a.ranges_end <= end);
      std::vector<AckRange> ranges = AllRanges(a);
      LH_FUZZ_CHECK(ranges.size() == a.range_count + 1);
      LH_FUZZ_CHECK(ranges[0].high == a.largest);
      for (size_t i = 0; i < ranges.size(); ++i) {
        LH_FUZZ_CHECK(ranges[i].low <= ranges[i].high);
        if (i > 0) LH_FUZZ_CHECK(ranges[i].high + 1 < ranges[i - 1].low);  // a gap between
      }
      break;
    }
    case FrameType::kClose: {
      const uint8_t* r = reinterpret_cast<const uint8_t*>(f.close.reason.data());
      LH_FUZZ_CHECK(f.close.reason.empty() || (r >= begin && r + f.close.reason.size() <= end));
      break;
    }
    case FrameType::kFecRepair: {
      const FecRepairFrame& r = f.fec_repair;
      LH_FUZZ_CHECK(r.k >= 1 && r.m >= 1 && r.index < r.m && r.k + r.m <= 255);
      LH_FUZZ_CHECK(r.payload >= begin && r.payload <= end);
      LH_FUZZ_CHECK(r.length <= static_cast<uint64_t>(end - r.payload));
      break;
    }
    case FrameType::kFecSource: {
      const FecSourceFrame& s = f.fec_source;
      LH_FUZZ_CHECK(s.k >= 1 && s.index < s.k && s.k + s.m <= 255);
      break;
    }
    case FrameType::kHandshake:
      LH_FUZZ_CHECK(f.handshake.body.empty() ||
                    (f.handshake.body.data() >= begin &&
                     f.handshake.body.data() + f.handshake.body.size() <= end));
      break;
    case FrameType::kDriverState:
      LH_FUZZ_CHECK(f.driver_state.bytes.size() <= kMaxDriverState);
      LH_FUZZ_CHECK(f.driver_state.bytes.empty() ||
                    (f.driver_state.bytes.data() >= begin &&
                     f.driver_state.bytes.data() + f.driver_state.bytes.size() <= end));
      break;
    case FrameType::kPing:
    case FrameType::kLossReport:
      break;
    case FrameType::kPadding:
      LH_FUZZ_CHECK(false && "padding is skipped, never returned");
  }
}

Decoded DecodeFrames(const uint8_t* begin, const uint8_t* end) {
  Decoded out;
  FrameReader reader(begin, end);
  const size_t size = static_cast<size_t>(end - begin);
  for (size_t i = 0; i <= size; ++i) {
    const uint8_t* before = reader.position();
    Frame f;
    absl::StatusOr<bool> more = reader.Next(&f);
    if (!more.ok()) {
      LH_FUZZ_CHECK(more.status().code() == absl::StatusCode::kInvalidArgument);
      out.error = true;
      return out;
    }
    if (!*more) {
      LH_FUZZ_CHECK(reader.position() == end);
      return out;
    }
    LH_FUZZ_CHECK(reader.position() > before && reader.position() <= end);
    CheckFrameInvariants(f, begin, end);
    out.frames.push_back(f);
  }
  LH_FUZZ_CHECK(false && "FrameReader did not terminate");
  return out;
}

bool SameBytes(const uint8_t* a, const uint8_t* b, uint64_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

// Field-by-field equality of a frame and its re-decoded copy, allowing for the writer's
// documented limits (CLOSE reasons cut to 1024 bytes, at most 2^14 ACK ranges).
void CheckSameFrame(const Frame& a, const Frame& b) {
  LH_FUZZ_CHECK(a.type == b.type);
  switch (a.type) {
    case FrameType::kData:
      LH_FUZZ_CHECK(a.data.flags == b.data.flags);
      LH_FUZZ_CHECK(a.data.message_id == b.data.message_id);
      LH_FUZZ_CHECK(a.data.message_length == b.data.message_length);
      LH_FUZZ_CHECK(a.data.offset == b.data.offset);
      LH_FUZZ_CHECK(a.data.stream_base == b.data.stream_base);
      LH_FUZZ_CHECK(a.data.length == b.data.length);
      LH_FUZZ_CHECK(SameBytes(a.data.payload, b.data.payload, CarriedBytes(a.data)));
      break;
    case FrameType::kAck: {
      LH_FUZZ_CHECK(a.ack.largest == b.ack.largest);
      LH_FUZZ_CHECK(a.ack.ack_delay_us == b.ack.ack_delay_us);
      LH_FUZZ_CHECK(a.ack.max_stream == b.ack.max_stream);
      LH_FUZZ_CHECK(a.ack.ecn_ect0 == b.ack.ecn_ect0);
      LH_FUZZ_CHECK(a.ack.ecn_ce == b.ack.ecn_ce);
      LH_FUZZ_CHECK(a.ack.first_range == b.ack.first_range);
      std::vector<AckRange> ra = AllRanges(a.ack), rb = AllRanges(b.ack);
      const size_t expect = ra.size() < kMaxAckRanges ? ra.size() : kMaxAckRanges;
      // The re-encoding may also have run out of room; it keeps the newest ranges.
      LH_FUZZ_CHECK(rb.size() >= 1 && rb.size() <= expect);
      for (size_t i = 0; i < rb.size(); ++i) {
        LH_FUZZ_CHECK(ra[i].low == rb[i].low && ra[i].high == rb[i].high);
      }
      break;
    }
    case FrameType::kClose: {
      LH_FUZZ_CHECK(a.close.error_code == b.close.error_code);
      const size_t n =
          a.close.reason.size() < kMaxCloseReason ? a.close.reason.size() : kMaxCloseReason;
      LH_FUZZ_CHECK(b.close.reason == a.close.reason.substr(0, n));
      break;
    }
    case FrameType::kFecRepair:
      LH_FUZZ_CHECK(a.fec_repair.block_id == b.fec_repair.block_id);
      LH_FUZZ_CHECK(a.fec_repair.index == b.fec_repair.index);
      LH_FUZZ_CHECK(a.fec_repair.k == b.fec_repair.k);
      LH_FUZZ_CHECK(a.fec_repair.m == b.fec_repair.m);
      LH_FUZZ_CHECK(a.fec_repair.length == b.fec_repair.length);
      LH_FUZZ_CHECK(SameBytes(a.fec_repair.payload, b.fec_repair.payload, a.fec_repair.length));
      break;
    case FrameType::kFecSource:
      LH_FUZZ_CHECK(a.fec_source.block_id == b.fec_source.block_id);
      LH_FUZZ_CHECK(a.fec_source.index == b.fec_source.index);
      LH_FUZZ_CHECK(a.fec_source.k == b.fec_source.k);
      LH_FUZZ_CHECK(a.fec_source.m == b.fec_source.m);
      break;
    case FrameType::kLossReport:
      LH_FUZZ_CHECK(a.loss_report.packets_received == b.loss_report.packets_received);
      LH_FUZZ_CHECK(a.loss_report.packets_missing == b.loss_report.packets_missing);
      LH_FUZZ_CHECK(a.loss_report.loss_bursts == b.loss_report.loss_bursts);
      break;
    case FrameType::kHandshake:
      LH_FUZZ_CHECK(a.handshake.body.size() == b.handshake.body.size());
      LH_FUZZ_CHECK(
          SameBytes(a.handshake.body.data(), b.handshake.body.data(), a.handshake.body.size()));
      break;
    case FrameType::kDriverState:
      LH_FUZZ_CHECK(a.driver_state.sequence == b.driver_state.sequence);
      LH_FUZZ_CHECK(a.driver_state.bytes.size() == b.driver_state.bytes.size());
      LH_FUZZ_CHECK(SameBytes(a.driver_state.bytes.data(), b.driver_state.bytes.data(),
                              a.driver_state.bytes.size()));
      break;
    case FrameType::kPing:
    case FrameType::kPadding:
      break;
  }
}

// Appends one frame; false when it does not fit (the writer then wrote nothing).
bool Encode(const Frame& f, PacketWriter& w) {
  const size_t before = w.size();
  bool ok = false;
  switch (f.type) {
    case FrameType::kData:
      ok = w.WriteData(f.data) != nullptr;
      break;
    case FrameType::kAck: {
      std::vector<AckRange> ranges = AllRanges(f.ack);
      ok = w.WriteAck(f.ack, ranges, ranges.size()) > 0;
      break;
    }
    case FrameType::kClose:
      ok = w.WriteClose(f.close.error_code, f.close.reason);
      break;
    case FrameType::kPing:
      ok = w.WritePing();
      break;
    case FrameType::kFecRepair:
      ok = w.WriteFecRepair(f.fec_repair) != nullptr;
      break;
    case FrameType::kFecSource:
      ok = w.WriteFecSource(f.fec_source);
      break;
    case FrameType::kLossReport:
      ok = w.WriteLossReport(f.loss_report);
      break;
    case FrameType::kHandshake:
      ok = w.WriteHandshake(f.handshake.body);
      break;
    case FrameType::kDriverState:
      ok = w.WriteDriverState(f.driver_state.sequence, f.driver_state.bytes);
      break;
    case FrameType::kPadding:
      ok = true;
      break;
  }
  if (!ok) LH_FUZZ_CHECK(w.size() == before);
  return ok;
}

struct Encoded {
  std::vector<uint8_t> bytes;
  size_t frames = 0;        // leading frames that fit
  bool added_ping = false;  // nothing fitted, so a PING keeps the packet valid
};

// Encodes as many of `frames` as fit into one datagram of the largest size.
Encoded EncodePacket(const PacketHeader& h, const std::vector<Frame>& frames) {
  Encoded out;
  out.bytes.assign(kMaxDatagramSize, 0);
  PacketWriter w(out.bytes.data(), out.bytes.size());
  w.WriteHeader(h);
  while (out.frames < frames.size() && Encode(frames[out.frames], w)) ++out.frames;
  if (w.size() == kHeaderSize) {  // a datagram needs at least one frame byte
    LH_FUZZ_CHECK(w.WritePing());
    out.added_ping = true;
  }
  out.bytes.resize(w.Finish());
  return out;
}

void CheckRoundTrip(const PacketHeader& h, const std::vector<Frame>& frames,
                    const uint8_t* original_header) {
  const Encoded first = EncodePacket(h, frames);
  // Re-encoding never grows a frame by more than the one byte of a non-minimal ACK
  // range count, so only the last frames of a nearly full datagram can be left out.
  if (!frames.empty()) LH_FUZZ_CHECK(first.frames >= 1);
  absl::StatusOr<PacketView> v = ParsePacket(first.bytes);
  LH_FUZZ_CHECK(v.ok());
  LH_FUZZ_CHECK(v->header.type == h.type && v->header.flow == h.flow &&
                v->header.connection_id == h.connection_id &&
                v->header.packet_number == h.packet_number);
  if (original_header != nullptr) {
    LH_FUZZ_CHECK(std::memcmp(first.bytes.data(), original_header, kHeaderSize) == 0);
  }
  const Decoded again = DecodeFrames(v->frames, v->frames_end);
  LH_FUZZ_CHECK(!again.error);
  if (first.added_ping) {
    LH_FUZZ_CHECK(again.frames.size() == 1 && again.frames[0].type == FrameType::kPing);
  } else {
    LH_FUZZ_CHECK(again.frames.size() == first.frames);
    for (size_t i = 0; i < first.frames; ++i) CheckSameFrame(frames[i], again.frames[i]);
  }
  // Canonical: encoding the decoded copy reproduces the first encoding exactly.
  const Encoded second = EncodePacket(h, again.frames);
  LH_FUZZ_CHECK(second.frames == again.frames.size());
  LH_FUZZ_CHECK(first.bytes == second.bytes);
}

void FuzzDatagram(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> d(data, size);
  absl::StatusOr<PacketHeader> peek = PeekHeader(d);
  absl::StatusOr<PacketView> view = ParsePacket(d);
  if (!view.ok()) {
    LH_FUZZ_CHECK(view.status().code() == absl::StatusCode::kInvalidArgument ||
                  view.status().code() == absl::StatusCode::kDataLoss);
    // Only the checksum separates the two, and the sealed type (no checksum to check).
    if (peek.ok() && peek->type != PacketType::kSealed) {
      LH_FUZZ_CHECK(view.status().code() == absl::StatusCode::kDataLoss);
    }
    // What the endpoint hands the core after opening a sealed packet: header and frames.
    absl::StatusOr<PacketView> opened = ParseOpenedPacket(d);
    if (opened.ok()) {
      LH_FUZZ_CHECK(opened->frames == data + kHeaderSize && opened->frames_end == data + size);
      DecodeFrames(opened->frames, opened->frames_end);
    }
    return;
  }
  LH_FUZZ_CHECK(peek.ok());
  LH_FUZZ_CHECK(peek->connection_id == view->header.connection_id);
  LH_FUZZ_CHECK(view->frames == data + kHeaderSize);
  LH_FUZZ_CHECK(view->frames_end == data + size - kChecksumSize);
  Decoded decoded = DecodeFrames(view->frames, view->frames_end);
  CheckRoundTrip(view->header, decoded.frames, data);
}

}  // namespace
}  // namespace longhaul::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace longhaul::wire;
  // 1. The input as received.
  FuzzDatagram(data, size);
  // 2. The same bytes with a valid checksum (and version), so the frame parser sees them.
  if (size >= kMinDatagramSize && size <= kMaxDatagramSize) {
    std::vector<uint8_t> sealed(data, data + size);
    sealed[0] = kVersion;
    const size_t body = size - kChecksumSize;
    const uint32_t crc = Crc32c(sealed.data(), body);
    for (int i = 0; i < 4; ++i) sealed[body + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
    FuzzDatagram(sealed.data(), sealed.size());
  }
  // 3. Raw frame bytes.
  if (size <= kMaxDatagramSize - kPacketOverhead) {
    Decoded decoded = DecodeFrames(data, data + size);
    PacketHeader h;
    h.connection_id = size;
    h.packet_number = 7;
    CheckRoundTrip(h, decoded.frames, nullptr);
  }
  return 0;
}
