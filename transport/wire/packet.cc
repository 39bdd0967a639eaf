#include "transport/wire/packet.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"
#include "transport/wire/crc32c.h"
#include "transport/wire/varint.h"

namespace longhaul::wire {
namespace {

inline void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
inline uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t GetU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

absl::Status Malformed(const char* frame, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", frame, " frame: ", what));
}

// Reads a varint or returns a malformed-frame error from the enclosing function.
#define LH_READ_VARINT(frame, field, out)                      \
  do {                                                         \
    size_t n_ = ReadVarint(p, end_, (out));                    \
    if (n_ == 0) return Malformed(frame, "truncated " field); \
    p += n_;                                                   \
  } while (0)

}  // namespace

size_t DataFrameHeaderSize(const DataFrame& f) {
  return 2 + VarintSize(f.message_id) + VarintSize(f.message_length) + VarintSize(f.offset) +
         VarintSize(f.stream_base) + VarintSize(f.length);
}

size_t FecRepairFrameHeaderSize(const FecRepairFrame& f) {
  return 1 + VarintSize(f.block_id) + 3 + VarintSize(f.length);
}

size_t DriverStateFrameSize(uint64_t sequence, size_t length) {
  return 1 + VarintSize(sequence) + VarintSize(length) + length;
}

// ---- AckRangeIterator ----

AckRangeIterator::AckRangeIterator(const AckFrame& ack) : ack_(ack), p_(ack.ranges) {}

bool AckRangeIterator::Next(AckRange* r) {
  if (first_) {
    first_ = false;
    r->high = ack_.largest;
    r->low = ack_.largest - ack_.first_range;
    next_high_ = r->low;
    return true;
  }
  if (emitted_ >= ack_.range_count) return false;
  // The parser validated every pair, so for a parsed frame these reads cannot fail or
  // underflow. A hand-built AckFrame whose range bytes do not match range_count ends the
  // iteration instead of reading uninitialised values.
  uint64_t gap = 0, len = 0;
  const size_t gap_bytes = ReadVarint(p_, ack_.ranges_end, &gap);
  if (gap_bytes == 0) return false;
  const size_t len_bytes = ReadVarint(p_ + gap_bytes, ack_.ranges_end, &len);
  if (len_bytes == 0) return false;
  p_ += gap_bytes + len_bytes;
  ++emitted_;
  r->high = next_high_ - gap - 2;
  r->low = r->high - len;
  next_high_ = r->low;
  return true;
}

// ---- PacketWriter ----

PacketWriter::PacketWriter(uint8_t* buffer, size_t capacity, Integrity integrity)
    : begin_(buffer),
      p_(buffer),
      limit_(buffer + capacity - TrailerSize(integrity)),
      integrity_(integrity) {
  CHECK_GE(capacity, kMinDatagramSize);
  CHECK_LE(capacity, kMaxDatagramSize);
}

void PacketWriter::PutPayload(const uint8_t* src, uint64_t n, const DataFrame* f) {
  if (src != nullptr && n > 0) {
    if (f != nullptr && defer_ && n >= kMinDeferredPayload &&
        deferred_count_ < kMaxDeferredPayloads) {
      deferred_[deferred_count_++] =
          DeferredPayload{src,          static_cast<uint32_t>(p_ - begin_),
                          static_cast<uint32_t>(n), f->region, f->message_id, f->offset,
                          f->message_length, f->placement_key};
    } else {
      std::memcpy(p_, src, n);
    }
  }
  p_ += n;
}

void PacketWriter::WriteHeader(const PacketHeader& h) {
  CHECK_EQ(p_, begin_) << "header must come first";
  begin_[0] = kVersion;
  begin_[1] = static_cast<uint8_t>(h.type);
  PutU16(begin_ + 2, h.flow);
  PutU64(begin_ + 4, h.connection_id);
  PutU64(begin_ + 12, h.packet_number);
  p_ = begin_ + kHeaderSize;
}

uint64_t StampBytes(uint64_t offset, uint64_t length, uint64_t message_length) {
  if (length == 0) return 0;
  const uint64_t first = (offset + kStampInterval - 1) / kStampInterval * kStampInterval;
  const uint64_t end = offset + length;
  if (first >= end) return 0;
  const uint64_t last = (end - 1) / kStampInterval * kStampInterval;
  const uint64_t count = (last - first) / kStampInterval + 1;
  return (count - 1) * kStampWidth + std::min(kStampWidth, message_length - last);
}

uint64_t StampTerm(uint64_t position, const uint8_t* stamp, uint64_t width) {
  uint64_t v = 0;
  if (width == kStampWidth) {
    std::memcpy(&v, stamp, sizeof(v));  // the byte order is the host's on both ends
  } else {
    for (uint64_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(stamp[i]) << (8 * i);
  }
  // splitmix64 finaliser of (position, value): a misplaced or altered stamp changes it.
  uint64_t x = v ^ (position * 0x9E3779B97F4A7C15ULL) ^ (width << 56);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t MessageStampDigest(const uint8_t* message, uint64_t message_length) {
  uint64_t sum = 0;
  // Stamps are a page apart, beyond the hardware prefetcher's reach: fetch ahead.
  constexpr uint64_t kAhead = 8 * kStampInterval;
  for (uint64_t p = 0; p < message_length && p < kAhead; p += kStampInterval) {
    __builtin_prefetch(message + p);
  }
  for (uint64_t p = 0; p < message_length; p += kStampInterval) {
    if (p + kAhead < message_length) __builtin_prefetch(message + p + kAhead);
    sum += StampTerm(p, message + p, std::min(kStampWidth, message_length - p));
  }
  return sum;
}

bool PacketWriter::AddElided(size_t n) {
  if (n > remaining()) return false;
  limit_ -= n;
  elided_ += n;
  return true;
}

uint8_t* PacketWriter::WriteData(const DataFrame& f) {
  // A frame already elided (a decoded one) is written as it is: its payload is stamps.
  const bool verbatim = f.elided();
  const bool elide = (elide_ || verbatim) && f.length > 0;
  size_t need = DataFrameHeaderSize(f) + f.length;
  if (need > remaining()) return nullptr;
  *p_++ = static_cast<uint8_t>(FrameType::kData);
  *p_++ = elide ? f.flags | kDataFlagElided : f.flags & ~kDataFlagElided;
  p_ += WriteVarint(p_, f.message_id);
  p_ += WriteVarint(p_, f.message_length);
  p_ += WriteVarint(p_, f.offset);
  p_ += WriteVarint(p_, f.stream_base);
  p_ += WriteVarint(p_, f.length);
  uint8_t* payload = p_;
  if (elide && verbatim) {
    const uint64_t stamps = StampBytes(f.offset, f.length, f.message_length);
    if (f.payload != nullptr) std::memcpy(p_, f.payload, stamps);
    p_ += stamps;
    limit_ -= f.length - stamps;
    elided_ += f.length - stamps;
    return payload;
  }
  if (elide) {
    const uint64_t stamps = StampBytes(f.offset, f.length, f.message_length);
    for (uint64_t q = (f.offset + kStampInterval - 1) / kStampInterval * kStampInterval;
         q < f.offset + f.length; q += kStampInterval) {
      const uint64_t width = std::min(kStampWidth, f.message_length - q);
      if (f.payload != nullptr) {
        std::memcpy(p_, f.payload + (q - f.offset), width);
      } else {
        std::memset(p_, 0, width);
      }
      p_ += width;
    }
    limit_ -= f.length - stamps;
    elided_ += f.length - stamps;
    // The next piece of a streamed message starts here: fetch its first stamp early (a
    // prefetch past the message's end is harmless).
    if (f.payload != nullptr) {
      const uint64_t end = f.offset + f.length;
      __builtin_prefetch(f.payload + ((end + kStampInterval - 1) / kStampInterval * kStampInterval - f.offset));
    }
    return payload;
  }
  PutPayload(f.payload, f.length, &f);
  return payload;
}

size_t PacketWriter::WriteAck(const AckFrame& ack, std::span<const AckRange> ranges,
                              size_t max_ranges) {
  if (ranges.empty() || max_ranges == 0) return 0;
  CHECK_EQ(ranges[0].high, ack.largest);
  const uint64_t first_range = ranges[0].high - ranges[0].low;
  // Fixed part; the range count is written last, so reserve its largest size (8 bytes
  // would allow 2^62 ranges; we never write more than 2^14, so 2 bytes suffice).
  size_t fixed = 1 + VarintSize(ack.largest) + VarintSize(ack.ack_delay_us) +
                 VarintSize(ack.max_stream) + VarintSize(ack.ecn_ect0) + VarintSize(ack.ecn_ce) +
                 2 + VarintSize(first_range);
  if (fixed > remaining()) return 0;
  if (max_ranges > (1u << 14)) max_ranges = 1u << 14;
  uint8_t* start = p_;
  *p_++ = static_cast<uint8_t>(FrameType::kAck);
  p_ += WriteVarint(p_, ack.largest);
  p_ += WriteVarint(p_, ack.ack_delay_us);
  p_ += WriteVarint(p_, ack.max_stream);
  p_ += WriteVarint(p_, ack.ecn_ect0);
  p_ += WriteVarint(p_, ack.ecn_ce);
  uint8_t* count_pos = p_;
  p_ += 2;
  p_ += WriteVarint(p_, first_range);
  size_t written = 1;
  PacketNumber prev_low = ranges[0].low;
  for (size_t i = 1; i < ranges.size() && written < max_ranges; ++i) {
    const AckRange& r = ranges[i];
    // Ranges must be descending and separated by at least one missing packet.
    CHECK_LT(r.high + 1, prev_low);
    CHECK_LE(r.low, r.high);
    uint64_t gap = prev_low - r.high - 2;
    uint64_t len = r.high - r.low;
    if (VarintSize(gap) + VarintSize(len) > remaining()) break;
    p_ += WriteVarint(p_, gap);
    p_ += WriteVarint(p_, len);
    prev_low = r.low;
    ++written;
  }
  uint64_t count = written - 1;
  count_pos[0] = static_cast<uint8_t>(0x40 | (count >> 8));
  count_pos[1] = static_cast<uint8_t>(count);
  (void)start;
  return written;
}

bool PacketWriter::WriteClose(uint64_t error_code, std::string_view reason) {
  if (reason.size() > 1024) reason = reason.substr(0, 1024);
  size_t need = 1 + VarintSize(error_code) + VarintSize(reason.size()) + reason.size();
  if (need > remaining()) return false;
  *p_++ = static_cast<uint8_t>(FrameType::kClose);
  p_ += WriteVarint(p_, error_code);
  p_ += WriteVarint(p_, reason.size());
  std::memcpy(p_, reason.data(), reason.size());
  p_ += reason.size();
  return true;
}

bool PacketWriter::WritePing() {
  if (remaining() < 1) return false;
  *p_++ = static_cast<uint8_t>(FrameType::kPing);
  return true;
}

bool PacketWriter::WritePadding(size_t n) {
  if (n > remaining()) return false;
  std::memset(p_, 0, n);
  p_ += n;
  return true;
}

bool PacketWriter::WriteFecSource(const FecSourceFrame& f) {
  if (kFecSourceFrameSize > remaining()) return false;
  *p_++ = static_cast<uint8_t>(FrameType::kFecSource);
  PutU64(p_, f.block_id);
  p_ += 8;
  *p_++ = f.index;
  *p_++ = f.k;
  *p_++ = f.m;
  return true;
}

uint8_t* PacketWriter::WriteFecRepair(const FecRepairFrame& f) {
  size_t need = FecRepairFrameHeaderSize(f) + f.length;
  if (need > remaining()) return nullptr;
  *p_++ = static_cast<uint8_t>(FrameType::kFecRepair);
  p_ += WriteVarint(p_, f.block_id);
  *p_++ = f.index;
  *p_++ = f.k;
  *p_++ = f.m;
  p_ += WriteVarint(p_, f.length);
  uint8_t* payload = p_;
  PutPayload(f.payload, f.length);
  return payload;
}

bool PacketWriter::WriteLossReport(const LossReportFrame& f) {
  size_t need = 1 + VarintSize(f.packets_received) + VarintSize(f.packets_missing) +
                VarintSize(f.loss_bursts);
  if (need > remaining()) return false;
  *p_++ = static_cast<uint8_t>(FrameType::kLossReport);
  p_ += WriteVarint(p_, f.packets_received);
  p_ += WriteVarint(p_, f.packets_missing);
  p_ += WriteVarint(p_, f.loss_bursts);
  return true;
}

bool PacketWriter::WriteHandshake(std::span<const uint8_t> body) {
  size_t need = 1 + VarintSize(body.size()) + body.size();
  if (need > remaining()) return false;
  *p_++ = static_cast<uint8_t>(FrameType::kHandshake);
  p_ += WriteVarint(p_, body.size());
  if (!body.empty()) std::memcpy(p_, body.data(), body.size());
  p_ += body.size();
  return true;
}

bool PacketWriter::WriteDriverState(uint64_t sequence, std::span<const uint8_t> bytes) {
  CHECK_LE(bytes.size(), kMaxDriverState);
  if (DriverStateFrameSize(sequence, bytes.size()) > remaining()) return false;
  *p_++ = static_cast<uint8_t>(FrameType::kDriverState);
  p_ += WriteVarint(p_, sequence);
  p_ += WriteVarint(p_, bytes.size());
  if (!bytes.empty()) std::memcpy(p_, bytes.data(), bytes.size());
  p_ += bytes.size();
  return true;
}

size_t PacketWriter::Finish() {
  const size_t len = size();
  if (integrity_ == Integrity::kSealed) {
    p_ += kSealTagSize;  // the endpoint writes the tag
    return len + kSealTagSize;
  }
  uint32_t crc = kCrc32cStart;
  const uint8_t* done = begin_;
  size_t kept = 0;  // by reference: left for the caller
  for (size_t i = 0; i < deferred_count_; ++i) {
    const DeferredPayload& d = deferred_[i];
    crc = Crc32cUpdate(crc, done, static_cast<size_t>(begin_ + d.offset - done));
    if (by_reference_ && d.region != 0) {
      crc = Crc32cUpdate(crc, d.source, d.length);
      deferred_[kept++] = d;
    } else {
      crc = Crc32cCopy(crc, begin_ + d.offset, d.source, d.length);
    }
    done = begin_ + d.offset + d.length;
  }
  deferred_count_ = kept;
  crc = Crc32cUpdate(crc, done, static_cast<size_t>(p_ - done));
  PutU32(p_, Crc32cFinish(crc));
  p_ += kChecksumSize;
  return len + kChecksumSize;
}

// ---- Parsing ----

namespace {

absl::Status CheckHeader(std::span<const uint8_t> d) {
  if (d.size() < kMinDatagramSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("datagram of ", d.size(), " bytes is shorter than the minimum packet (",
                     kMinDatagramSize, ")"));
  }
  if (d.size() > kMaxDatagramSize) {
    return absl::InvalidArgumentError(absl::StrCat("datagram of ", d.size(), " bytes is too long"));
  }
  if (d[0] != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported packet version ", d[0], " (this build speaks ", kVersion, ")"));
  }
  if (d[1] > static_cast<uint8_t>(PacketType::kHandshake) &&
      (d[1] & ~kKeyPhaseBit) != static_cast<uint8_t>(PacketType::kSealed)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown packet type ", d[1]));
  }
  return absl::OkStatus();
}

PacketHeader DecodeHeader(const uint8_t* p) {
  PacketHeader h;
  h.type = static_cast<PacketType>(p[1] > static_cast<uint8_t>(PacketType::kHandshake)
                                       ? p[1] & ~kKeyPhaseBit
                                       : p[1]);
  h.flow = GetU16(p + 2);
  h.connection_id = GetU64(p + 4);
  h.packet_number = GetU64(p + 12);
  return h;
}

}  // namespace

absl::StatusOr<PacketHeader> PeekHeader(std::span<const uint8_t> d) {
  LH_RETURN_IF_ERROR(CheckHeader(d));
  return DecodeHeader(d.data());
}

absl::StatusOr<PacketView> ParsePacket(std::span<const uint8_t> d) {
  LH_RETURN_IF_ERROR(CheckHeader(d));
  if ((d[1] & ~kKeyPhaseBit) == static_cast<uint8_t>(PacketType::kSealed)) {
    return absl::InvalidArgumentError(
        "sealed packet type 4 has no checksum: the endpoint opens it (ParseOpenedPacket)");
  }
  const size_t body = d.size() - kChecksumSize;
  uint32_t want = GetU32(d.data() + body);
  uint32_t got = Crc32c(d.data(), body);
  if (want != got) {
    return absl::DataLossError(absl::StrCat("packet checksum mismatch (", d.size(), " bytes)"));
  }
  PacketView v;
  v.header = DecodeHeader(d.data());
  v.frames = d.data() + kHeaderSize;
  v.frames_end = d.data() + body;
  return v;
}

absl::StatusOr<PacketView> ParseOpenedPacket(std::span<const uint8_t> d) {
  if (d.size() < kHeaderSize + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("opened packet of ", d.size(), " bytes has no frames"));
  }
  if (d.size() > kMaxDatagramSize) {
    return absl::InvalidArgumentError(absl::StrCat("packet of ", d.size(), " bytes is too long"));
  }
  if (d[0] != kVersion || d[1] != static_cast<uint8_t>(PacketType::kOneRtt)) {
    return absl::InvalidArgumentError("opened packet is not a version-1 1-RTT packet");
  }
  PacketView v;
  v.header = DecodeHeader(d.data());
  v.frames = d.data() + kHeaderSize;
  v.frames_end = d.data() + d.size();
  return v;
}

absl::StatusOr<bool> FrameReader::Next(Frame* f) {
  // Skip padding.
  while (p_ < end_ && *p_ == static_cast<uint8_t>(FrameType::kPadding)) ++p_;
  if (p_ >= end_) return false;
  const uint8_t* p = p_;
  uint8_t type = *p++;
  switch (static_cast<FrameType>(type)) {
    case FrameType::kData: {
      DataFrame& d = f->data;
      if (p >= end_) return Malformed("DATA", "truncated flags");
      d.flags = *p++;
      if (d.flags & ~kDataFlagsKnown) return Malformed("DATA", "unknown flag bits");
      LH_READ_VARINT("DATA", "message id", &d.message_id);
      LH_READ_VARINT("DATA", "message length", &d.message_length);
      LH_READ_VARINT("DATA", "offset", &d.offset);
      LH_READ_VARINT("DATA", "stream base", &d.stream_base);
      LH_READ_VARINT("DATA", "length", &d.length);
      if (d.offset > d.message_length || d.length > d.message_length - d.offset) {
        return Malformed("DATA", "piece lies outside the message");
      }
      const uint64_t carried = d.elided() ? StampBytes(d.offset, d.length, d.message_length)
                                          : d.length;
      if (d.elided() && d.length == 0) return Malformed("DATA", "elided flag on an empty piece");
      if (carried > static_cast<uint64_t>(end_ - p)) return Malformed("DATA", "payload runs past the packet");
      if (d.last() && d.offset + d.length != d.message_length) {
        return Malformed("DATA", "last piece does not end the message");
      }
      if (d.stream_base > kMaxVarint - d.message_length) {
        return Malformed("DATA", "stream offset overflows");
      }
      d.payload = p;
      p += carried;
      break;
    }
    case FrameType::kAck: {
      AckFrame& a = f->ack;
      LH_READ_VARINT("ACK", "largest", &a.largest);
      LH_READ_VARINT("ACK", "ack delay", &a.ack_delay_us);
      LH_READ_VARINT("ACK", "max stream", &a.max_stream);
      LH_READ_VARINT("ACK", "ECT(0) count", &a.ecn_ect0);
      LH_READ_VARINT("ACK", "CE count", &a.ecn_ce);
      LH_READ_VARINT("ACK", "range count", &a.range_count);
      LH_READ_VARINT("ACK", "first range", &a.first_range);
      if (a.first_range > a.largest) return Malformed("ACK", "first range below packet 0");
      a.ranges = p;
      uint64_t low = a.largest - a.first_range;
      for (uint64_t i = 0; i < a.range_count; ++i) {
        uint64_t gap, len;
        LH_READ_VARINT("ACK", "gap", &gap);
        LH_READ_VARINT("ACK", "range length", &len);
        // next high = low - gap - 2, next low = next high - len; both must be >= 0.
        if (low < 2 || gap > low - 2 || len > low - 2 - gap) {
          return Malformed("ACK", "range below packet 0");
        }
        low = low - gap - 2 - len;
      }
      a.ranges_end = p;
      break;
    }
    case FrameType::kClose: {
      uint64_t len;
      LH_READ_VARINT("CLOSE", "error code", &f->close.error_code);
      LH_READ_VARINT("CLOSE", "reason length", &len);
      if (len > static_cast<uint64_t>(end_ - p)) return Malformed("CLOSE", "reason runs past the packet");
      f->close.reason = std::string_view(reinterpret_cast<const char*>(p), len);
      p += len;
      break;
    }
    case FrameType::kPing:
      break;
    case FrameType::kFecRepair: {
      FecRepairFrame& r = f->fec_repair;
      LH_READ_VARINT("FEC_REPAIR", "block id", &r.block_id);
      if (end_ - p < 3) return Malformed("FEC_REPAIR", "truncated index/k/m");
      r.index = p[0];
      r.k = p[1];
      r.m = p[2];
      p += 3;
      if (r.k == 0 || r.m == 0 || r.index >= r.m || r.k + r.m > 255) {
        return Malformed("FEC_REPAIR", "bad k/m/index");
      }
      LH_READ_VARINT("FEC_REPAIR", "length", &r.length);
      if (r.length > static_cast<uint64_t>(end_ - p)) return Malformed("FEC_REPAIR", "shard runs past the packet");
      r.payload = p;
      p += r.length;
      break;
    }
    case FrameType::kFecSource: {
      FecSourceFrame& s = f->fec_source;
      if (end_ - p < 11) return Malformed("FEC_SOURCE", "truncated");
      s.block_id = GetU64(p);
      s.index = p[8];
      s.k = p[9];
      s.m = p[10];
      p += 11;
      if (s.k == 0 || s.index >= s.k || s.k + s.m > 255) return Malformed("FEC_SOURCE", "bad k/m/index");
      break;
    }
    case FrameType::kLossReport: {
      LossReportFrame& l = f->loss_report;
      LH_READ_VARINT("LOSS_REPORT", "received", &l.packets_received);
      LH_READ_VARINT("LOSS_REPORT", "missing", &l.packets_missing);
      LH_READ_VARINT("LOSS_REPORT", "bursts", &l.loss_bursts);
      break;
    }
    case FrameType::kHandshake: {
      uint64_t len;
      LH_READ_VARINT("HANDSHAKE", "length", &len);
      if (len > static_cast<uint64_t>(end_ - p)) return Malformed("HANDSHAKE", "body runs past the packet");
      f->handshake.body = std::span<const uint8_t>(p, len);
      p += len;
      break;
    }
    case FrameType::kDriverState: {
      uint64_t len;
      LH_READ_VARINT("DRIVER_STATE", "sequence", &f->driver_state.sequence);
      LH_READ_VARINT("DRIVER_STATE", "length", &len);
      if (len > kMaxDriverState) return Malformed("DRIVER_STATE", "state longer than 1024 bytes");
      if (len > static_cast<uint64_t>(end_ - p)) return Malformed("DRIVER_STATE", "state runs past the packet");
      f->driver_state.bytes = std::span<const uint8_t>(p, len);
      p += len;
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown frame type 0x", absl::Hex(type)));
  }
  f->type = static_cast<FrameType>(type);
  p_ = p;
  return true;
}

bool FindDataPayload(const uint8_t* begin, const uint8_t* known, const uint8_t* end,
                     DataFrame* f) {
  // Bytes past `known` are still ciphertext: a frame read from them is discarded (the
  // reader stays inside [begin, end) whatever it reads).
  FrameReader reader(begin, end);
  Frame frame;
  while (reader.position() < known) {
    absl::StatusOr<bool> more = reader.Next(&frame);
    if (!more.ok() || !*more) return false;
    if (frame.type == FrameType::kData) {
      if (frame.data.length == 0 || frame.data.payload > known) return false;
      *f = frame.data;
      return true;
    }
    if (frame.type == FrameType::kFecSource || reader.position() > known) return false;
  }
  return false;
}

}  // namespace longhaul::wire
