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
//        5     1  version (1)
//        6     2  reserved (zero)
//        8     4  comm: the send comm's id on its connection
//       12     4  tag (kData, kDataHead)
//       16     8  value: payload bytes (kData, kDataHead), listen comm id (kOpen,
//                 kReject), bytes consumed in total (kCredit)
//       24     8  instance: the sending plugin instance (kOpen), else 0
//
// kData carries its payload right after the header, in the same message.
//
// Pure functions; thread-safe. docs/nccl.md ("Framing").
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace longhaul::nccl {

inline constexpr uint32_t kFrameMagic = 0x464e484c;  // "LHNF"
inline constexpr uint8_t kFrameVersion = 1;

enum class FrameKind : uint8_t {
  kOpen = 1,      // sender -> receiver: a send comm `comm` opens to listen comm `value`
  kData = 2,      // sender -> receiver: `value` payload bytes with `tag` follow
  kCredit = 3,    // receiver -> sender: comm `comm` has consumed `value` bytes in total
  kClose = 4,     // sender -> receiver: send comm `comm` closed
  kReject = 5,    // receiver -> sender: no listen comm `value` (closed): comm is refused
  kDataHead = 6,  // sender -> receiver: the next message is `value` payload bytes with
                  // `tag` (large messages, sent in place from NCCL's buffer)
};

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

}  // namespace longhaul::nccl
