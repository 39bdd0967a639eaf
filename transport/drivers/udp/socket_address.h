// SocketAddress: an IPv4 or IPv6 address and port as the socket calls want them
// (sockaddr_storage), with parsing, printing, comparison and hashing. A value type.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace longhaul::udp {

class SocketAddress {
 public:
  SocketAddress() { std::memset(&storage_, 0, sizeof(storage_)); }

  // A numeric IPv4 ("127.0.0.1") or IPv6 ("::1") address and a port. Errors:
  // InvalidArgument naming the text.
  static absl::StatusOr<SocketAddress> FromNumeric(absl::string_view ip, uint16_t port);
  // From a kernel-filled sockaddr (recvmsg, getsockname); len as the kernel returned it.
  static SocketAddress FromSockaddr(const sockaddr* sa, socklen_t len);

  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* mutable_sockaddr() { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t len() const { return len_; }
  int family() const { return storage_.ss_family; }
  bool valid() const { return len_ > 0; }
  uint16_t port() const;
  void set_port(uint16_t port);
  // "127.0.0.1:5201" or "[::1]:5201".
  std::string ToString() const;
  // "127.0.0.1" or "::1".
  std::string IpString() const;
  // The address bytes (4 or 16) followed by the port (2 bytes, network order); what the
  // handshake cookie binds. Returns the number of bytes written to out (<= 18).
  size_t Identity(uint8_t out[18]) const;

  bool operator==(const SocketAddress& o) const;
  bool operator!=(const SocketAddress& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const SocketAddress& a) {
    uint8_t id[18];
    size_t n = a.Identity(id);
    return H::combine(H::combine_contiguous(std::move(h), id, n), a.family());
  }

 private:
  sockaddr_storage storage_;
  socklen_t len_ = 0;
};

}  // namespace longhaul::udp
