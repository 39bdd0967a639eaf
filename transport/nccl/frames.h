// The plugin's framing inside longhaul messages. Every longhaul message the plugin sends
// starts with a 32-byte FrameHeader, except the payload of a kDataHead, which is the
// whole next message on the connection (longhaul delivers a connection's messages whole
// and in order, so a kDataHead and its payload are always adjacent).
//
// Layout (host byte order, like the handle: a job's machines share an architecture):
//
//   offset  size  field
//        0     4  magic 0x464e484c ("LHNF")
//        4     1  kind (FrameKind)
//        5     1  version (2; version 1 had no OPEN body and no REJECT reason)
//        6     2  reserved (zero)
//        8     4  comm: the send comm's id on its connection
//       12     4  tag (kData, kDataHead), RejectReason (kReject), else 0
//       16     8  value: payload bytes (kData, kDataHead), listen comm id (kOpen,
//                 kReject), bytes consumed in total (kCredit)
//       24     8  instance: the sending plugin instance (kOpen), else 0
//
// kData carries its payload right after the header, in the same message. kOpen carries
// a 16-byte body after the header (OpenBody: the connecting side's NCCL comm id, when
// the ABI gave it one, and flags):
//
//       32     8  comm_id (NCCL's commId of the connecting communicator; 0 without one)
//       40     8  flags (bit 0: comm_id is present; other bits zero)
//
// Pure functions; thread-safe. docs/nccl.md ("Framing").
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace longhaul::nccl {

inline constexpr uint32_t kFrameMagic = 0x464e484c;  // "LHNF"
inline constexpr uint8_t kFrameVersion = 2;

enum class FrameKind : uint8_t {
  kOpen = 1,      // sender -> receiver: a send comm `comm` opens to listen comm `value`
                  // (an OpenBody follows the header)
  kData = 2,      // sender -> receiver: `value` payload bytes with `tag` follow
  kCredit = 3,    // receiver -> sender: comm `comm` has consumed `value` bytes in total
  kClose = 4,     // sender -> receiver: send comm `comm` closed
  kReject = 5,    // receiver -> sender: comm `comm` is refused or ended; `tag` says why
                  // (RejectReason), `value` names the listen comm
  kDataHead = 6,  // sender -> receiver: the next message is `value` payload bytes with
                  // `tag` (large messages, sent in place from NCCL's buffer)
};

// Why a receiver refused (or ended) a comm: the `tag` of a kReject. A sender that gets a
// reason it does not know reports it by number.
enum class RejectReason : int32_t {
  kNoListen = 0,           // no listen comm with that id (never was, or closed)
  kOtherCommunicator = 1,  // the OPEN's comm id is not the listen comm's
  kBoundToOtherPeer = 2,   // the listen comm is bound to the peer that opened it first
  kTooManyPending = 3,     // the listen comm already has kMaxPendingOpens waiting
  kCreditExceeded = 4,     // the sender sent beyond the credit the receiver granted
  kMalformed = 5,          // the OPEN was malformed (short body, unknown flags, comm id reused)
};
// A sentence for `reason` ("the listen comm does not exist (closed, or a wrong id)").
const char* RejectReasonText(int32_t reason);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint8_t kind = 0;  // a FrameKind; a receiver drops kinds it does not know
  uint8_t version = kFrameVersion;
  uint16_t reserved = 0;
  uint32_t comm = 0;
  int32_t tag = 0;
  uint64_t value = 0;
  uint64_t instance = 0;
};
inline constexpr size_t kFrameHeaderBytes = 32;
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes);
static_assert(offsetof(FrameHeader, kind) == 4 && offsetof(FrameHeader, version) == 5 &&
              offsetof(FrameHeader, comm) == 8 && offsetof(FrameHeader, tag) == 12 &&
              offsetof(FrameHeader, value) == 16 && offsetof(FrameHeader, instance) == 24);

// A header of `kind` with the current magic and version.
FrameHeader MakeFrameHeader(FrameKind kind, uint32_t comm, int32_t tag, uint64_t value,
                            uint64_t instance);

// Writes `h` into the kFrameHeaderBytes bytes at `out` (no alignment needed).
void EncodeFrameHeader(const FrameHeader& h, uint8_t* out);

// Reads the header at the start of the `size` bytes at `data`. InvalidArgument naming
// the problem when the message is shorter than a header or its magic or version is not
// the plugin's. The kind is not checked (see IsKnownFrameKind).
absl::StatusOr<FrameHeader> DecodeFrameHeader(const uint8_t* data, size_t size);

// Whether `kind` is one of FrameKind's values.
bool IsKnownFrameKind(uint8_t kind);

// The body of a kOpen, after its header.
struct OpenBody {
  bool has_comm_id = false;  // the ABI gave the connecting side a comm id (v11+)
  uint64_t comm_id = 0;      // 0 when !has_comm_id
};
inline constexpr size_t kOpenBodyBytes = 16;
inline constexpr size_t kOpenFrameBytes = kFrameHeaderBytes + kOpenBodyBytes;
inline constexpr uint64_t kOpenHasCommId = 1;

// Writes the kOpenBodyBytes of `b` at `out`.
void EncodeOpenBody(const OpenBody& b, uint8_t* out);
// Reads the body of a kOpen message of `size` bytes at `data` (the header included).
// InvalidArgument naming the problem when the message is not kOpenFrameBytes long, a
// flag other than bit 0 is set, or a comm id is given without its flag.
absl::StatusOr<OpenBody> DecodeOpenBody(const uint8_t* data, size_t size);

}  // namespace longhaul::nccl
