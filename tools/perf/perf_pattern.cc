#include "tools/perf/perf_pattern.h"

#include <cstring>
#include <mutex>

#include "absl/strings/str_format.h"
#include "transport/base/rng.h"

namespace longhaul::perf {
namespace {

void StoreLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

Pattern::Pattern(size_t max_message) : max_message_(max_message) {
  bytes_.resize(kPeriod + max_message + 8);
  Rng rng(0x6c6f6e676861756cULL);  // fixed: both ends build the same bytes
  for (size_t i = 0; i + 8 <= bytes_.size(); i += 8) StoreLe64(&bytes_[i], rng.Next());
  // The control magic must never appear where a data message could start (anywhere).
  for (size_t i = 0; i + sizeof(kControlMagic) <= bytes_.size(); ++i) {
    if (bytes_[i] == kControlMagic[0] &&
        std::memcmp(&bytes_[i], kControlMagic, sizeof(kControlMagic)) == 0) {
      bytes_[i] ^= 0x80;
    }
  }
}

std::string Pattern::Verify(uint64_t message_id, uint32_t stream, const uint8_t* data, size_t size,
                            bool with_header, int64_t* send_time_ns) const {
  if (size > max_message_) {
    return absl::StrFormat("message %d: %d bytes, larger than the test's %d-byte messages",
                           message_id, size, max_message_);
  }
  const uint8_t* expect = For(message_id, stream);
  size_t start = 0;
  if (with_header) {
    if (size < kMessageHeaderSize) {
      return absl::StrFormat("message %d: %d bytes, shorter than its header", message_id, size);
    }
    if (LoadLe64(data) != HeaderTag(message_id)) {
      return absl::StrFormat("message %d: header names message %d", message_id,
                             LoadLe64(data) ^ HeaderTag(0));
    }
    if (send_time_ns != nullptr) *send_time_ns = static_cast<int64_t>(LoadLe64(data + 8));
    start = kMessageHeaderSize;
  }
  if (size > start && std::memcmp(data + start, expect + start, size - start) != 0) {
    size_t i = start;
    while (i < size && data[i] == expect[i]) ++i;
    size_t bad = 0;
    for (size_t j = i; j < size; ++j) bad += data[j] != expect[j];
    return absl::StrFormat(
        "message %d: %d of %d bytes differ, first at offset %d (expected 0x%02x, got 0x%02x)",
        message_id, bad, size, i, expect[i], data[i]);
  }
  return "";
}

void Pattern::Fill(uint64_t message_id, uint32_t stream, int64_t send_time_ns, uint8_t* out,
                   size_t size) const {
  const uint8_t* src = For(message_id, stream);
  if (size >= kMessageHeaderSize) {
    StampHeader(message_id, send_time_ns, out);
    std::memcpy(out + kMessageHeaderSize, src + kMessageHeaderSize, size - kMessageHeaderSize);
  } else {
    std::memcpy(out, src, size);
  }
}

void Pattern::StampHeader(uint64_t message_id, int64_t send_time_ns, uint8_t* out) {
  StoreLe64(out, HeaderTag(message_id));
  StoreLe64(out + 8, static_cast<uint64_t>(send_time_ns));
}

int64_t Pattern::HeaderSendTimeNs(const uint8_t* data) {
  return static_cast<int64_t>(LoadLe64(data + 8));
}

std::shared_ptr<const Pattern> PatternFor(size_t max_message) {
  // Only the largest pattern is kept (older ones live while tests still use them), so a
  // stream of requests for ever larger messages cannot pile up memory.
  static std::mutex mu;
  static std::shared_ptr<const Pattern> largest;
  std::lock_guard<std::mutex> l(mu);
  if (largest && largest->max_message() >= max_message) return largest;
  largest = std::make_shared<const Pattern>(max_message);
  return largest;
}

}  // namespace longhaul::perf
