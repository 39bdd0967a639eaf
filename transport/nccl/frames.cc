#include "transport/nccl/frames.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace longhaul::nccl {

FrameHeader MakeFrameHeader(FrameKind kind, uint32_t comm, int32_t tag, uint64_t value,
                            uint64_t instance) {
  FrameHeader h;
  h.kind = static_cast<uint8_t>(kind);
  h.comm = comm;
  h.tag = tag;
  h.value = value;
  h.instance = instance;
  return h;
}

void EncodeFrameHeader(const FrameHeader& h, uint8_t* out) {
  std::memcpy(out, &h, kFrameHeaderBytes);
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(const uint8_t* data, size_t size) {
  if (data == nullptr || size < kFrameHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", data == nullptr ? 0 : size,
                                                   " bytes is shorter than a frame header (",
                                                   kFrameHeaderBytes, " bytes)"));
  }
  FrameHeader h;
  std::memcpy(&h, data, kFrameHeaderBytes);
  if (h.magic != kFrameMagic) {
    return absl::InvalidArgumentError(absl::StrCat("frame magic 0x", absl::Hex(h.magic),
                                                   " is not the plugin's (0x",
                                                   absl::Hex(kFrameMagic), ")"));
  }
  if (h.version != kFrameVersion) {
    return absl::InvalidArgumentError(absl::StrCat("frame version ", static_cast<int>(h.version),
                                                   " is not the plugin's (",
                                                   static_cast<int>(kFrameVersion), ")"));
  }
  return h;
}

const char* RejectReasonText(int32_t reason) {
  switch (static_cast<RejectReason>(reason)) {
    case RejectReason::kNoListen:
      return "the listen comm does not exist (closed, or a wrong listen id)";
    case RejectReason::kOtherCommunicator:
      return "the listen comm belongs to another NCCL communicator";
    case RejectReason::kBoundToOtherPeer:
      return "the listen comm is bound to another peer (the one that opened it first)";
    case RejectReason::kTooManyPending:
      return "the listen comm has too many OPENs waiting for accept";
    case RejectReason::kCreditExceeded:
      return "the sender exceeded the receive credit it was granted";
    case RejectReason::kMalformed:
      return "the OPEN was malformed";
  }
  return "an unknown reason";
}

void EncodeOpenBody(const OpenBody& b, uint8_t* out) {
  const uint64_t comm_id = b.has_comm_id ? b.comm_id : 0;
  const uint64_t flags = b.has_comm_id ? kOpenHasCommId : 0;
  std::memcpy(out, &comm_id, 8);
  std::memcpy(out + 8, &flags, 8);
}

absl::StatusOr<OpenBody> DecodeOpenBody(const uint8_t* data, size_t size) {
  if (data == nullptr || size != kOpenFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("an OPEN of ", data == nullptr ? 0 : size,
                                                   " bytes (expected ", kOpenFrameBytes, ")"));
  }
  uint64_t comm_id, flags;
  std::memcpy(&comm_id, data + kFrameHeaderBytes, 8);
  std::memcpy(&flags, data + kFrameHeaderBytes + 8, 8);
  if ((flags & ~kOpenHasCommId) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("an OPEN with unknown flags 0x", absl::Hex(flags), " (known: 0x1)"));
  }
  OpenBody b;
  b.has_comm_id = (flags & kOpenHasCommId) != 0;
  if (!b.has_comm_id && comm_id != 0) {
    return absl::InvalidArgumentError("an OPEN with a comm id but without its flag");
  }
  b.comm_id = comm_id;
  return b;
}

bool IsKnownFrameKind(uint8_t kind) {
  switch (static_cast<FrameKind>(kind)) {
    case FrameKind::kOpen:
    case FrameKind::kData:
    case FrameKind::kCredit:
    case FrameKind::kClose:
    case FrameKind::kReject:
    case FrameKind::kDataHead:
      return true;
  }
  return false;
}

}  // namespace longhaul::nccl
