// Splitting a UDP GRO buffer. With UDP_GRO the kernel may hand one recvmsg a run of
// datagrams from the same source coalesced back to back: every one `gso_size` bytes long
// except the last, which may be shorter. Pure; thread-safe.
#pragma once

#include <cstddef>

namespace longhaul::net {

struct GroSegment {
  size_t offset = 0;
  size_t length = 0;
};

// The datagrams in a received buffer of `len` bytes that the kernel reported with
// `gso_size` (0 when no UDP_GRO control message came: one datagram).
class GroSegments {
 public:
  GroSegments(size_t len, size_t gso_size)
      : len_(len), seg_(gso_size == 0 || gso_size >= len ? len : gso_size) {}
  // Number of datagrams (0 for an empty buffer).
  size_t count() const { return seg_ == 0 ? 0 : (len_ + seg_ - 1) / seg_; }
  GroSegment operator[](size_t i) const {
    size_t off = i * seg_;
    size_t n = len_ - off < seg_ ? len_ - off : seg_;
    return GroSegment{off, n};
  }

 private:
  size_t len_;
  size_t seg_;
};

}  // namespace longhaul::net
