// The probe protocol: small UDP messages between the prober (longhaul-probe,
// longhaul-tune --target) and a responder (longhaul-probe --server, or embedded in
// longhaul-perf's server). Independent of the transport's wire format: the first byte is
// kProbeMagic (0xB7), never longhaul's version byte (0x01), so one socket can serve
// both (dispatch on byte 0). docs/tuning.md, "Probe protocol", is the reference.
//
// Every message starts with a 16-byte header (network byte order):
//   0  u8   magic     0xB7
//   1  u8   version   kProbeVersion (1)
//   2  u8   type      ProbeType
//   3  u8   flags     kFlagEcho on DATA: the responder answers it like an ECHO
//   4  u32  session   chosen by the prober (random, non-zero)
//   8  u64  seq       request id (HELLO, ECHO, REPORT_REQ) or packet sequence (DATA)
// then a type-specific body, then padding (zeros) up to the size the prober chose.
//
//   HELLO       p->r  u32 version_max                  opens or refreshes the session
//   HELLO_ACK   r->p  u32 version, u32 max_trains, u64 max_trace_packets
//   ECHO        p->r  u64 send_ns (prober clock)       RTT and path-MTU probes (padded)
//   ECHO_REPLY  r->p  u64 send_ns, u32 size_received, u64 hold_ns   always small;
//                     hold_ns = time the request spent in the responder
//   DATA        p->r  u32 train, u32 flags2 (bit 0: trace), u64 send_ns   trains (padded)
//   REPORT_REQ  p->r  u32 train, u64 packets_sent      asks for a train's receipt
//   REPORT      r->p  u32 train, TrainReport fields    what the responder saw
//   BYE         p->r  (none)                           ends the session
//   ERROR       r->p  u16 code, u16 length, text       refusal (table full, bad version)
//
// Decoding is bounds-checked: malformed input is an error status, never read past its
// end. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace longhaul::tuner::probe {

inline constexpr uint8_t kProbeMagic = 0xB7;
inline constexpr uint8_t kProbeVersion = 1;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kMaxDatagram = 65507;  // largest IPv4 UDP payload
// IPv4 + UDP headers: a datagram's wire size is its payload plus this.
inline constexpr size_t kIpUdpOverhead = 28;

enum class ProbeType : uint8_t {
  kHello = 1,
  kHelloAck = 2,
  kEcho = 3,
  kEchoReply = 4,
  kData = 5,
  kReportReq = 6,
  kReport = 7,
  kBye = 8,
  kError = 9,
};
const char* ProbeTypeName(ProbeType t);

inline constexpr uint8_t kFlagEcho = 0x01;
inline constexpr uint32_t kDataTrace = 0x01;  // DATA flags2: record the loss/reorder trace

enum class ProbeError : uint16_t {
  kBadVersion = 1,
  kSessionsFull = 2,
  kTrainsFull = 3,
  kUnknownTrain = 4,
};

struct ProbeHeader {
  ProbeType type = ProbeType::kHello;
  uint8_t flags = 0;
  uint32_t session = 0;
  uint64_t seq = 0;
};

// What the responder saw of one train (times on the responder's clock, as spans).
struct TrainReport {
  uint32_t train = 0;
  uint64_t packets = 0;           // distinct packets received
  uint64_t wire_bytes = 0;        // their wire bytes (payload + 28)
  uint64_t first_wire_bytes = 0;  // of the first arrival
  uint64_t span_ns = 0;           // last arrival - first arrival
  uint64_t fit_rate_bps = 0;      // least-squares delivery rate (TrainReceipt::FittedRate)
  uint64_t duplicates = 0;
  uint64_t rx_drops = 0;          // datagrams the responder's socket dropped meanwhile
  // Trace trains only (else 0): over sequence numbers [0, packets_sent).
  uint64_t reordered = 0;
  uint64_t max_extent_packets = 0;
  uint64_t max_late_ns = 0;
  uint64_t trace_packets = 0;  // = packets_sent, capped at the responder's limit
  uint64_t lost = 0;
  uint64_t bursts = 0;
  uint64_t n0x = 0, n01 = 0, n1x = 0, n11 = 0;
  uint64_t n1x1 = 0, n111 = 0, triples = 0;
};

struct ProbeMessage {
  ProbeHeader header;
  // HELLO / HELLO_ACK
  uint32_t version = 0;
  uint32_t max_trains = 0;
  uint64_t max_trace_packets = 0;
  // ECHO / ECHO_REPLY / DATA
  uint64_t send_ns = 0;
  uint32_t size_received = 0;
  uint64_t hold_ns = 0;
  // DATA / REPORT_REQ / REPORT
  uint32_t train = 0;
  uint32_t data_flags = 0;
  uint64_t packets_sent = 0;
  TrainReport report;
  // ERROR
  uint16_t error_code = 0;
  std::string error_text;
};

// True if the datagram claims to be a probe message (byte 0 is the magic).
// The responder never answers with more than 3x the request's bytes (its sources are
// not validated), so a REPORT_REQ (whose REPORT is 180 bytes) is padded to this size.
inline constexpr size_t kReportReqPaddedSize = 64;

inline bool IsProbeDatagram(std::span<const uint8_t> d) { return !d.empty() && d[0] == kProbeMagic; }

// Encodes `m` into `out` (resized), padded with zeros to at least `pad_to` bytes.
// InvalidArgument if pad_to exceeds kMaxDatagram.
absl::Status EncodeProbe(const ProbeMessage& m, size_t pad_to, std::vector<uint8_t>* out);
// Minimum encoded size of a message of `type` (header + body).
size_t ProbeBodySize(ProbeType type, size_t error_text_length = 0);

// Decodes a datagram. InvalidArgument naming the problem for a bad magic, an unknown
// version or type, or a truncated body; trailing padding is ignored.
absl::StatusOr<ProbeMessage> DecodeProbe(std::span<const uint8_t> d);

}  // namespace longhaul::tuner::probe
