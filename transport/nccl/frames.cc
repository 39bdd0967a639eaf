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
