// The bridge's stream protocol: what one longhaul message between two longhaul-bridge
// processes carries (docs/bridge.md section 3). Every message is one frame, sent
// unordered (SendBuffer::unordered): frames of different streams never wait for each
// other, and each stream puts its own frames back in order by their sequence numbers.
//
//   offset 0  u8   type      OPEN 1, DATA 2, FIN 3, RESET 4, WINDOW 5, GOAWAY 6
//          1  u64  stream    stream id (big-endian); 0 for GOAWAY
//          9  u64  value     OPEN: the opener's receive window for the stream (bytes);
//                            DATA, FIN: the frame's sequence number in its stream
//                            (OPEN is 0, then DATA 1, 2, ..., FIN last);
//                            RESET: the reason code; WINDOW: the highest DATA payload
//                            offset the receiver accepts (cumulative); GOAWAY: 0
//         17  ...  body      OPEN: the forward's name (1..255 bytes); DATA: payload
//                            (0.. bytes); RESET, GOAWAY: a reason (0..1024 bytes of
//                            text); FIN, WINDOW: nothing
//
// OPEN, DATA and FIN are sequenced; RESET, WINDOW and GOAWAY act on arrival (a WINDOW
// only ever raises the limit, so its order does not matter). Pure functions; no I/O.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace longhaul::bridge {

enum class FrameType : uint8_t {
  kOpen = 1,
  kData = 2,
  kFin = 3,
  kReset = 4,
  kWindow = 5,
  kGoAway = 6,
};
const char* FrameTypeName(FrameType t);

// Reason codes of RESET frames.
enum class ResetCode : uint64_t {
  kAborted = 1,            // the TCP connection was reset or failed on one side
  kTargetRefused = 2,      // the server could not connect: connection refused
  kTargetUnreachable = 3,  // the server could not connect: unreachable or timed out
  kUnknownForward = 4,     // the server has no forward of that name
  kDraining = 5,           // the server is shutting down and takes no new streams
  kLimit = 6,              // too many streams
  kSessionLost = 7,        // (local only) the longhaul connection ended
};
const char* ResetCodeName(ResetCode c);  // "aborted", "target_refused", ...

inline constexpr size_t kFrameHeaderSize = 17;
inline constexpr size_t kMaxForwardName = 255;
inline constexpr size_t kMaxReason = 1024;

struct Frame {
  FrameType type = FrameType::kData;
  uint64_t stream = 0;
  uint64_t value = 0;  // window, sequence number, reset code or max offset (see above)
  // Body: a view into the message (DATA payload, OPEN name, RESET/GOAWAY reason).
  std::span<const uint8_t> body;
  absl::string_view text() const {
    return {reinterpret_cast<const char*>(body.data()), body.size()};
  }
};

// Writes the 17-byte header at `out` (DATA: the payload follows in the same buffer).
void WriteFrameHeader(FrameType type, uint64_t stream, uint64_t value, uint8_t* out);
// A whole frame with a text body (OPEN's name, RESET's and GOAWAY's reason; cut to the
// limits above) or none.
std::string EncodeFrame(FrameType type, uint64_t stream, uint64_t value,
                        absl::string_view body = {});

// Decodes one message. InvalidArgument naming the problem for a short message, an
// unknown type, stream 0 where a stream is needed (or not 0 for GOAWAY), an OPEN without
// a name or with a name too long, a body where none belongs, a reason too long.
absl::StatusOr<Frame> DecodeFrame(std::span<const uint8_t> message);

}  // namespace longhaul::bridge
