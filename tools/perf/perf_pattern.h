// The payload longhaul-perf sends and verifies.
//
// Byte `o` of data message `m` (the connection's message id) of stream `s` is
// P[(m * 4099 + s * 524287) mod kPeriod + o], where P is a pseudo-random byte string
// from a fixed seed, kPeriod + the largest message long. Both ends build the same P, so
// the sender transmits straight from it (zero copy) and the receiver compares with
// memcmp; a corrupted, misplaced, reordered or truncated message does not match.
// Messages-workload messages start with a 16-byte header instead (message id tag and
// send time, for completion times); the rest follows the pattern.
//
// With --verify=off (TestRequest::verify false) nothing is checked: a bulk sender sends
// every message from the same place in the pattern (For(0, stream)), a messages-workload
// sender stamps the 16-byte header on zeros (no pattern copy), and the receiver reads
// only that header's send time.
//
// Control messages (test request, reports, results) start with kControlMagic, which the
// pattern never contains. Immutable after construction; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <vector>

namespace longhaul::perf {

inline constexpr uint8_t kControlMagic[8] = {'L', 'H', 'P', 'F', 'C', 'T', 'L', 1};
inline constexpr size_t kMessageHeaderSize = 16;  // messages workload

class Pattern {
 public:
  static constexpr size_t kPeriod = (size_t{1} << 20) + 4093;
  // A pattern for messages up to `max_message` bytes.
  explicit Pattern(size_t max_message);

  size_t max_message() const { return max_message_; }
  // Every byte a message may be sent from (For's results and max_message() after them).
  std::span<const uint8_t> bytes() const { return bytes_; }
  size_t Offset(uint64_t message_id, uint32_t stream) const {
    return static_cast<size_t>((message_id * 4099 + uint64_t{stream} * 524287) % kPeriod);
  }
  // Where message `m` of `stream` starts in the pattern (it is max_message() long).
  const uint8_t* For(uint64_t message_id, uint32_t stream) const {
    return bytes_.data() + Offset(message_id, stream);
  }
  // The tag in the first 8 bytes of a messages-workload message.
  static uint64_t HeaderTag(uint64_t message_id) { return message_id ^ 0x4c48505f44415441ULL; }

  // Checks a received data message. Returns "" when intact, else what differs.
  std::string Verify(uint64_t message_id, uint32_t stream, const uint8_t* data, size_t size,
                     bool with_header, int64_t* send_time_ns) const;

  // Fills `out` (size bytes) with a messages-workload message.
  void Fill(uint64_t message_id, uint32_t stream, int64_t send_time_ns, uint8_t* out,
            size_t size) const;

  // Writes a messages-workload header (tag and send time) into out[0, kMessageHeaderSize).
  static void StampHeader(uint64_t message_id, int64_t send_time_ns, uint8_t* out);
  // The send time in a messages-workload header (data holds at least kMessageHeaderSize).
  static int64_t HeaderSendTimeNs(const uint8_t* data);

 private:
  size_t max_message_;
  std::vector<uint8_t> bytes_;
};

// A shared pattern for messages up to at least `max_message` bytes.
std::shared_ptr<const Pattern> PatternFor(size_t max_message);

}  // namespace longhaul::perf
