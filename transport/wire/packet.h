// longhaul packet and frame encoding (version 1). docs/wire-format.md documents every
// field; keep the two in step.
//
//   header (20 bytes, network byte order)
//     0  u8   version            kVersion
//     1  u8   packet type        PacketType
//     2  u16  flow               index of the UDP flow the sender used (informational)
//     4  u64  connection id      chosen by the receiver of the packet
//     12 u64  packet number      never reused within a connection
//   frames ...                   until the checksum
//   trailer (4 bytes)
//     u32 CRC32C of every preceding byte of the datagram
//
// A sealed packet (type kSealed, bit 7 of the type byte the key phase) carries the frames
// encrypted and a 16-byte AEAD tag instead of the checksum; the sans-IO endpoint seals and
// opens it (transport/crypto/packet_protection.h). The core writes such packets in the
// kSealed integrity mode (the tag's room left at the end, no checksum) and reads them once
// opened (ParseOpenedPacket).
//
// Decoding is bounds-checked everywhere: malformed input yields an error status and is
// never read past its end. Nothing here allocates on the hot path; frames are views into
// the datagram and are valid as long as its bytes are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"

namespace longhaul::wire {

inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 20;
inline constexpr size_t kChecksumSize = 4;
inline constexpr size_t kPacketOverhead = kHeaderSize + kChecksumSize;
inline constexpr size_t kSealTagSize = 16;
// What a sealed packet adds over a checksummed one (the tag replaces the checksum).
inline constexpr size_t kSealExpansion = kSealTagSize - kChecksumSize;
inline constexpr uint8_t kKeyPhaseBit = 0x80;
// Largest datagram longhaul builds or accepts (64 KiB segments plus frame headers fit).
inline constexpr size_t kMaxDatagramSize = 65507;  // largest IPv4 UDP payload
inline constexpr size_t kMinDatagramSize = kPacketOverhead + 1;

enum class PacketType : uint8_t {
  kOneRtt = 0,     // established connection traffic
  kInitial = 1,    // client's first flight (handshake)
  kRetry = 2,      // server's stateless cookie challenge
  kHandshake = 3,  // server's accept / client's confirmation
  kSealed = 4,     // established connection traffic, AEAD-sealed (key phase in bit 7)
};

// How a packet's integrity is protected: the CRC32C trailer, or the endpoint's AEAD (the
// writer leaves kSealTagSize bytes for the tag and computes no checksum).
enum class Integrity : uint8_t { kCrc32c, kSealed };
inline constexpr size_t TrailerSize(Integrity i) {
  return i == Integrity::kCrc32c ? kChecksumSize : kSealTagSize;
}

enum class FrameType : uint8_t {
  kPadding = 0x00,
  kData = 0x01,
  kAck = 0x02,
  kClose = 0x03,
  kPing = 0x04,
  kFecRepair = 0x05,
  kFecSource = 0x06,
  kLossReport = 0x07,
  kHandshake = 0x08,
  kDriverState = 0x09,
};

struct PacketHeader {
  PacketType type = PacketType::kOneRtt;
  uint16_t flow = 0;
  uint64_t connection_id = 0;
  PacketNumber packet_number = 0;
};

// DATA: a contiguous piece of one message.
inline constexpr uint8_t kDataFlagLast = 0x01;       // piece ends the message
inline constexpr uint8_t kDataFlagUnordered = 0x02;  // message may be delivered out of order
// The payload is elided (TransportConfig::elide_payload, a simulator mode): the frame
// stands for `length` bytes but carries only stamps, 8-byte samples of the message at
// every multiple of kStampInterval inside the piece (StampBytes).
inline constexpr uint8_t kDataFlagElided = 0x04;
inline constexpr uint8_t kDataFlagsKnown = kDataFlagLast | kDataFlagUnordered | kDataFlagElided;
inline constexpr uint64_t kStampInterval = 4096;
inline constexpr uint64_t kStampWidth = 8;
struct DataFrame {
  uint8_t flags = 0;
  uint64_t message_id = 0;      // consecutive from 0 in submission order
  uint64_t message_length = 0;  // whole message, bytes
  uint64_t offset = 0;          // of this piece within the message
  uint64_t stream_base = 0;     // connection-wide byte offset of the message's first byte
  uint64_t length = 0;          // bytes of payload that follow
  const uint8_t* payload = nullptr;  // elided: the stamps (StampBytes of them)
  // Sender only, never encoded: the registration the payload's memory belongs to
  // (SendBuffer::region; 0: none). PacketWriter::set_payload_by_reference leaves such
  // payloads where they are.
  uint64_t region = 0;
  uint64_t placement_key = 0;  // sender only, never encoded: SendBuffer::placement_key
  bool last() const { return flags & kDataFlagLast; }
  bool unordered() const { return flags & kDataFlagUnordered; }
  bool elided() const { return flags & kDataFlagElided; }
};

// Elided payload. The stamps of the piece [offset, offset + length) of a message of
// `message_length` bytes: one per message position p in the piece with p a multiple of
// kStampInterval, holding the message's bytes [p, p + min(kStampWidth, message_length -
// p)) (a stamp may reach past the piece's end). StampBytes is their total size.
uint64_t StampBytes(uint64_t offset, uint64_t length, uint64_t message_length);
// Order-independent digest of stamps: the sum over a message's stamps of StampTerm. A
// receiver that accepts each position once reaches MessageStampDigest of the message.
uint64_t StampTerm(uint64_t position, const uint8_t* stamp, uint64_t width);
uint64_t MessageStampDigest(const uint8_t* message, uint64_t message_length);

// ACK: which packet numbers were received. Ranges are encoded from the largest down, as
// in QUIC: first_range packets below `largest` are also received, then (gap, length)
// pairs. Use AckRangeIterator to walk them as inclusive [low, high] ranges, descending.
struct AckFrame {
  PacketNumber largest = 0;
  uint64_t ack_delay_us = 0;   // time the receiver held `largest` before acking
  uint64_t max_stream = 0;     // flow-control credit: sender may send stream bytes < this
  uint64_t ecn_ect0 = 0;       // cumulative ECT(0)-marked packets received
  uint64_t ecn_ce = 0;         // cumulative CE-marked packets received
  uint64_t first_range = 0;
  uint64_t range_count = 0;    // additional (gap, length) pairs
  const uint8_t* ranges = nullptr;  // encoded pairs, validated by the parser
  const uint8_t* ranges_end = nullptr;
};

struct AckRange {
  PacketNumber low;
  PacketNumber high;
};

class AckRangeIterator {
 public:
  explicit AckRangeIterator(const AckFrame& ack);
  // Fills `r` with the next range (descending); false when there are no more.
  bool Next(AckRange* r);

 private:
  const AckFrame& ack_;
  const uint8_t* p_;
  uint64_t emitted_ = 0;
  PacketNumber next_high_ = 0;
  bool first_ = true;
};

struct CloseFrame {
  uint64_t error_code = 0;
  std::string_view reason;  // view into the datagram
};

// FEC repair symbol: parity shard `index` (0..m-1) of block `block_id`.
struct FecRepairFrame {
  uint64_t block_id = 0;
  uint8_t index = 0;
  uint8_t k = 0;
  uint8_t m = 0;
  uint64_t length = 0;  // shard bytes that follow
  const uint8_t* payload = nullptr;
};

// FEC source tag: this packet is data shard `index` (0..k-1) of block `block_id`. The
// shard is the packet's frames after this tag, zero-padded to the block's shard size.
struct FecSourceFrame {
  uint64_t block_id = 0;
  uint8_t index = 0;
  uint8_t k = 0;
  uint8_t m = 0;
};

// Receiver's loss statistics, used by the sender's FEC policy.
struct LossReportFrame {
  uint64_t packets_received = 0;  // cumulative
  uint64_t packets_missing = 0;   // cumulative, gaps never filled within the reorder window
  uint64_t loss_bursts = 0;       // cumulative count of runs of consecutive missing packets
};

struct HandshakeFrame {
  std::span<const uint8_t> body;  // opaque to the wire layer; interpreted by the driver
};

// DRIVER_STATE: the sending driver's latest state for its peer driver (a verbs driver's
// queue pair numbers, buffer keys, window grants), opaque to the transport. Each new
// state has a higher sequence; a receiver keeps the highest it has seen.
inline constexpr size_t kMaxDriverState = 1024;  // bytes; a longer frame is malformed
struct DriverStateFrame {
  uint64_t sequence = 0;
  std::span<const uint8_t> bytes;  // view into the datagram
};
// Encoded size of a DRIVER_STATE frame.
size_t DriverStateFrameSize(uint64_t sequence, size_t length);

struct Frame {
  FrameType type = FrameType::kPadding;
  DataFrame data;
  AckFrame ack;
  CloseFrame close;
  FecRepairFrame fec_repair;
  FecSourceFrame fec_source;
  LossReportFrame loss_report;
  HandshakeFrame handshake;
  DriverStateFrame driver_state;
};

// Encoded sizes, for planning what fits in a datagram.
size_t DataFrameHeaderSize(const DataFrame& f);
inline constexpr size_t kMaxDataFrameHeaderSize = 2 + 5 * 8;
inline constexpr size_t kFecSourceFrameSize = 1 + 8 + 3;
size_t FecRepairFrameHeaderSize(const FecRepairFrame& f);

// A payload the writer left for later (PacketWriter::set_defer_payload): `length` bytes
// from `source` belong at byte `offset` of the datagram.
struct DeferredPayload {
  const uint8_t* source = nullptr;
  uint32_t offset = 0;
  uint32_t length = 0;
  uint64_t region = 0;  // DataFrame::region of the payload's frame
  // The frame's message and where the payload starts in it (receive-side placement:
  // docs/rdma.md 7.15).
  uint64_t message_id = 0;
  uint64_t message_offset = 0;
  uint64_t message_length = 0;
  uint64_t placement_key = 0;  // DataFrame::placement_key
};
inline constexpr size_t kMaxDeferredPayloads = 4;
// Shorter payloads are copied at once (a deferral costs more than the copy).
inline constexpr size_t kMinDeferredPayload = 256;

// Builds one datagram in a caller-owned buffer. Usage: construct, WriteHeader, append
// frames while they fit, Finish. Every Write* returns false (writing nothing) when the
// frame does not fit in what remains.
class PacketWriter {
 public:
  PacketWriter(uint8_t* buffer, size_t capacity, Integrity integrity = Integrity::kCrc32c);

  void WriteHeader(const PacketHeader& h);
  // Bytes still available for frames (the checksum is already reserved).
  size_t remaining() const { return static_cast<size_t>(limit_ - p_); }
  size_t size() const { return static_cast<size_t>(p_ - begin_); }
  uint8_t* cursor() { return p_; }

  // Writes a DATA frame header and copies f.length bytes from f.payload (may be null to
  // leave the payload area for the caller to fill through the returned pointer). With
  // elision on (and f.length > 0) it writes the flag and the stamps instead; the elided
  // bytes still count against the capacity. A frame whose flags already say ELIDED (a
  // decoded one) is written as it is: f.payload holds its stamps.
  uint8_t* WriteData(const DataFrame& f);
  // Elided payload (TransportConfig::elide_payload): DATA frames carry stamps only.
  void set_elide_payload(bool on) { elide_ = on; }
  // Payload bytes elided so far: the datagram stands for size() + elided() bytes.
  size_t elided() const { return elided_; }
  // Counts `n` more elided bytes against the capacity (a repair frame standing for a
  // longer shard); false, counting nothing, if they do not fit.
  bool AddElided(size_t n);
  // Writes as many of the given descending, disjoint ranges as fit (at most max_ranges);
  // ranges[0].high must equal ack.largest. Returns the number of ranges written (0 if
  // not even the first fits).
  size_t WriteAck(const AckFrame& ack, std::span<const AckRange> ranges, size_t max_ranges);
  bool WriteClose(uint64_t error_code, std::string_view reason);
  bool WritePing();
  bool WritePadding(size_t n);
  bool WriteFecSource(const FecSourceFrame& f);
  uint8_t* WriteFecRepair(const FecRepairFrame& f);
  bool WriteLossReport(const LossReportFrame& f);
  bool WriteHandshake(std::span<const uint8_t> body);
  // bytes.size() must be at most kMaxDriverState (CHECK).
  bool WriteDriverState(uint64_t sequence, std::span<const uint8_t> bytes);

  // One pass over the payload: DATA payloads (up to kMaxDeferredPayloads of at least
  // kMinDeferredPayload bytes) are not copied by WriteData but noted, and Finish copies
  // them while it computes the checksum (kCrc32c). In kSealed mode Finish leaves them
  // to the sealer, which encrypts them from their source straight into the datagram
  // (crypto::PacketProtector::Seal): deferred() lists them, and until then the bytes at
  // their offsets are undefined. Nothing may read the frames before Finish (an FEC
  // encoder does: leave deferral off for such packets). Off by default.
  void set_defer_payload(bool on) { defer_ = on; }
  // Zero copy (kCrc32c only, with deferral on): Finish reads the deferred payloads whose
  // frame names a memory region (DataFrame::region != 0) for the checksum but copies
  // none of them; after Finish, deferred() lists those, whose bytes the caller sends from
  // their source (a NIC's gather list) or copies into place. The checksum covers them
  // as if they were in the datagram. Off by default.
  void set_payload_by_reference(bool on) { by_reference_ = on; }
  std::span<const DeferredPayload> deferred() const {
    return std::span<const DeferredPayload>(deferred_, deferred_count_);
  }

  // Appends the CRC32C (kCrc32c) or leaves the tag's room (kSealed), and returns the
  // datagram length.
  size_t Finish();

 private:
  uint8_t* begin_;
  uint8_t* p_;
  uint8_t* limit_;  // end of frame space (checksum and elided bytes reserved after it)
  Integrity integrity_;
  bool elide_ = false;
  size_t elided_ = 0;
  // Copies n bytes from src at the cursor (src null: leaves them) and advances, or, for a
  // DATA payload while deferring, notes it instead of copying. A repair shard is always
  // copied: its memory may go once the frame is written.
  // `f`: the DATA frame a deferrable payload belongs to (null: not deferrable).
  void PutPayload(const uint8_t* src, uint64_t n, const DataFrame* f = nullptr);

  bool defer_ = false;
  bool by_reference_ = false;
  size_t deferred_count_ = 0;
  DeferredPayload deferred_[kMaxDeferredPayloads];
};

// A parsed packet: header plus the frame bytes (checksum already verified).
struct PacketView {
  PacketHeader header;
  const uint8_t* frames = nullptr;
  const uint8_t* frames_end = nullptr;
};

// Checks length, version, type and checksum, and decodes the header. Errors:
// InvalidArgument (too short, unknown version/type) and DataLoss (checksum mismatch).
absl::StatusOr<PacketView> ParsePacket(std::span<const uint8_t> datagram);

// A packet the endpoint has opened (authenticated and decrypted): the header (type
// kOneRtt) and the frames, with neither checksum nor tag. Errors as ParsePacket's, minus
// the checksum.
absl::StatusOr<PacketView> ParseOpenedPacket(std::span<const uint8_t> datagram);

// One-pass open of a sealed packet (the endpoint decrypts its frames in pieces and opens
// a DATA payload straight into its final buffer): the frames run from `begin` to `end`,
// of which [begin, known) are decrypted. Finds the first DATA frame whose header lies in
// [begin, known), every frame before it whole in [begin, known) too, and returns it
// (f.payload: where its payload sits between `begin` and `end`, perhaps not decrypted
// yet). False when there is none, a frame before it reaches past `known`, a frame is
// malformed, or an FEC source tag comes first (the FEC decoder reads its shard from the
// packet). Nothing found may be trusted before the packet authenticates.
bool FindDataPayload(const uint8_t* begin, const uint8_t* known, const uint8_t* end,
                     DataFrame* f);
// Received payloads shorter than this are checked (or opened) in the packet and then
// copied, as before: placing them costs more than the copy.
inline constexpr uint64_t kMinPlacedPayload = 512;

// Reads only the header fields needed to route a datagram (connection id) without
// verifying the checksum. Fails on short input. For a sealed packet the type is kSealed
// and the packet number is still masked.
absl::StatusOr<PacketHeader> PeekHeader(std::span<const uint8_t> datagram);

// Iterates the frames of a packet. Next() returns true with `f` filled, false at the end,
// or an error for a malformed frame (after which iteration must stop).
class FrameReader {
 public:
  explicit FrameReader(const PacketView& v) : p_(v.frames), end_(v.frames_end) {}
  FrameReader(const uint8_t* begin, const uint8_t* end) : p_(begin), end_(end) {}
  absl::StatusOr<bool> Next(Frame* f);
  const uint8_t* position() const { return p_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace longhaul::wire
