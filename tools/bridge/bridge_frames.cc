#include "tools/bridge/bridge_frames.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace longhaul::bridge {
namespace {

void PutU64(uint64_t v, uint8_t* p) {
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

absl::Status Bad(FrameType t, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed bridge ", FrameTypeName(t), " frame: ", why));
}

}  // namespace

const char* FrameTypeName(FrameType t) {
  switch (t) {
    case FrameType::kOpen: return "OPEN";
    case FrameType::kData: return "DATA";
    case FrameType::kFin: return "FIN";
    case FrameType::kReset: return "RESET";
    case FrameType::kWindow: return "WINDOW";
    case FrameType::kGoAway: return "GOAWAY";
  }
  return "unknown";
}

const char* ResetCodeName(ResetCode c) {
  switch (c) {
    case ResetCode::kAborted: return "aborted";
    case ResetCode::kTargetRefused: return "target_refused";
    case ResetCode::kTargetUnreachable: return "target_unreachable";
    case ResetCode::kUnknownForward: return "unknown_forward";
    case ResetCode::kDraining: return "draining";
    case ResetCode::kLimit: return "limit";
    case ResetCode::kSessionLost: return "session_lost";
  }
  return "other";
}

void WriteFrameHeader(FrameType type, uint64_t stream, uint64_t value, uint8_t* out) {
  out[0] = static_cast<uint8_t>(type);
  PutU64(stream, out + 1);
  PutU64(value, out + 9);
}

std::string EncodeFrame(FrameType type, uint64_t stream, uint64_t value, absl::string_view body) {
  const size_t limit = type == FrameType::kOpen ? kMaxForwardName : kMaxReason;
  if (body.size() > limit) body = body.substr(0, limit);
  std::string out(kFrameHeaderSize + body.size(), '\0');
  WriteFrameHeader(type, stream, value, reinterpret_cast<uint8_t*>(out.data()));
  if (!body.empty()) std::memcpy(out.data() + kFrameHeaderSize, body.data(), body.size());
  return out;
}

absl::StatusOr<Frame> DecodeFrame(std::span<const uint8_t> m) {
  if (m.empty()) return absl::InvalidArgumentError("malformed bridge frame: empty message");
  const uint8_t type = m[0];
  if (type < 1 || type > 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed bridge frame: unknown type ", static_cast<int>(type)));
  }
  Frame f;
  f.type = static_cast<FrameType>(type);
  if (m.size() < kFrameHeaderSize) {
    return Bad(f.type, absl::StrCat("truncated header (", m.size(), " of ", kFrameHeaderSize,
                                    " bytes)"));
  }
  f.stream = GetU64(m.data() + 1);
  f.value = GetU64(m.data() + 9);
  f.body = m.subspan(kFrameHeaderSize);
  if (f.type == FrameType::kGoAway) {
    if (f.stream != 0) return Bad(f.type, "stream must be 0");
  } else if (f.stream == 0) {
    return Bad(f.type, "stream 0 is not a stream");
  }
  switch (f.type) {
    case FrameType::kOpen:
      if (f.body.empty()) return Bad(f.type, "no forward name");
      if (f.body.size() > kMaxForwardName) return Bad(f.type, "forward name too long");
      break;
    case FrameType::kData:
      if (f.value == 0) return Bad(f.type, "sequence number 0 belongs to OPEN");
      break;
    case FrameType::kFin:
      if (f.value == 0) return Bad(f.type, "sequence number 0 belongs to OPEN");
      [[fallthrough]];
    case FrameType::kWindow:
      if (!f.body.empty()) return Bad(f.type, "unexpected body");
      break;
    case FrameType::kReset:
    case FrameType::kGoAway:
      if (f.body.size() > kMaxReason) return Bad(f.type, "reason too long");
      break;
  }
  return f;
}

}  // namespace longhaul::bridge
