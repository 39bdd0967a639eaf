// PeerAddress: where a datagram came from or goes to, as the sans-IO endpoint sees it: an
// opaque, driver-defined byte string (at most kMaxSize bytes). The UDP driver writes the
// address family, IP address and port (net::SocketAddress::Identity); a verbs driver would
// write the GID and queue pair number. The endpoint only compares, hashes and copies
// addresses, binds cookies to their bytes, and asks the driver's formatter to print them
// (EndpointConfig::format_address). A value type; thread-compatible.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/hash/hash.h"
#include "glog/logging.h"

namespace longhaul::endpoint {

// A driver's local port: a socket, a queue pair. Chosen by the driver (any value but
// kNoLocal); the endpoint only compares them and names them in what it asks the driver
// to send.
using LocalId = uint32_t;
inline constexpr LocalId kNoLocal = 0;

class PeerAddress {
 public:
  static constexpr size_t kMaxSize = 32;

  PeerAddress() = default;
  // CHECKs that `bytes` fits (drivers build addresses; they never come off the wire).
  explicit PeerAddress(std::span<const uint8_t> bytes) {
    CHECK_LE(bytes.size(), kMaxSize) << "peer address too long";
    size_ = static_cast<uint8_t>(bytes.size());
    std::copy(bytes.begin(), bytes.end(), bytes_.begin());
  }

  std::span<const uint8_t> bytes() const { return {bytes_.data(), size_}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  bool operator==(const PeerAddress& o) const {
    return size_ == o.size_ && std::equal(bytes_.begin(), bytes_.begin() + size_, o.bytes_.begin());
  }
  bool operator!=(const PeerAddress& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const PeerAddress& a) {
    return H::combine(H::combine_contiguous(std::move(h), a.bytes_.data(), a.size_), a.size_);
  }

 private:
  std::array<uint8_t, kMaxSize> bytes_{};
  uint8_t size_ = 0;
};

// Lower-case hex of the bytes ("7f000001:9c40" style is the driver's business; this is
// the fallback when no formatter is configured).
std::string HexAddress(const PeerAddress& a);

}  // namespace longhaul::endpoint
