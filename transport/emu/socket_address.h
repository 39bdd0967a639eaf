// SocketAddress: an IPv4 or IPv6 UDP/TCP endpoint (address + port) as a value, parsed from
// and formatted to "127.0.0.1:5201" / "[::1]:5201", hashable so it can key a map.
//
// Thread-safety: a value type.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace longhaul::emu {

class SocketAddress {
 public:
  SocketAddress() = default;

  // "A.B.C.D:PORT" or "[IPV6]:PORT" with a numeric address and PORT in 0..65535.
  // Errors name the text and the expected form.
  static absl::StatusOr<SocketAddress> Parse(absl::string_view text);
  // From a kernel sockaddr (AF_INET or AF_INET6); anything else gives an empty address.
  static SocketAddress FromSockaddr(const sockaddr* sa, socklen_t len);
  // The local address a socket is bound to.
  static absl::StatusOr<SocketAddress> OfSocket(int fd);

  bool empty() const { return len_ == 0; }
  int family() const { return len_ == 0 ? AF_UNSPEC : storage_.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  bool is_loopback() const;

  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t sockaddr_len() const { return len_; }

  // "127.0.0.1:5201" or "[::1]:5201"; "" when empty.
  std::string ToString() const;

  bool operator==(const SocketAddress& o) const;
  bool operator!=(const SocketAddress& o) const { return !(*this == o); }

  template <typename H>
  friend H AbslHashValue(H h, const SocketAddress& a) {
    if (a.family() == AF_INET) {
      const auto* s = reinterpret_cast<const sockaddr_in*>(&a.storage_);
      return H::combine(std::move(h), 4, s->sin_addr.s_addr, s->sin_port);
    }
    if (a.family() == AF_INET6) {
      const auto* s = reinterpret_cast<const sockaddr_in6*>(&a.storage_);
      uint64_t hi, lo;
      std::memcpy(&hi, s->sin6_addr.s6_addr, 8);
      std::memcpy(&lo, s->sin6_addr.s6_addr + 8, 8);
      return H::combine(std::move(h), 6, hi, lo, s->sin6_port, s->sin6_scope_id);
    }
    return H::combine(std::move(h), 0);
  }

 private:
  sockaddr_storage storage_{};
  socklen_t len_ = 0;
};

}  // namespace longhaul::emu
