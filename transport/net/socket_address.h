// SocketAddress: an IPv4 or IPv6 address and port as the socket calls want them
// (sockaddr_storage), with parsing ("127.0.0.1:5201", "[::1]:5201"), printing, comparison
// and hashing, so it can key a map. The one address type of the tree: the UDP driver, the
// emulator, the prober and the tests use it. Names are resolved elsewhere (resolver.h);
// everything here is numeric.
//
// Equality and hashing cover the family, the address, the port and, for IPv6, the scope
// id (fe80::1%eth0 and fe80::1%eth1 are different peers). Identity() is what the
// handshake cookie binds: address and port bytes only.
//
// Thread-safety: a value type.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace longhaul::net {

// "HOST:PORT" split into its parts: HOST is a name or a numeric address, without the
// brackets of "[V6]:PORT".
struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// Splits "HOST:PORT" or "[V6]:PORT" with PORT in 0..65535. HOST must not be empty and may
// contain ':' only inside brackets. Errors: InvalidArgument "bad address 'TEXT': WHY
// (expected HOST:PORT, e.g. 127.0.0.1:5201 or [::1]:5201)".
absl::StatusOr<HostPort> SplitHostPort(absl::string_view text);

class SocketAddress {
 public:
  // Identity() writes at most this many bytes (16 of IPv6 address, 2 of port).
  static constexpr size_t kMaxIdentityBytes = 18;

  // An invalid (empty) address: valid() is false, ToString() is "(none)".
  SocketAddress() { std::memset(&storage_, 0, sizeof(storage_)); }

  // "A.B.C.D:PORT" or "[IPV6]:PORT" with a numeric address and PORT in 0..65535.
  // Errors: InvalidArgument "bad address 'TEXT': WHY (expected ...)".
  static absl::StatusOr<SocketAddress> Parse(absl::string_view text);
  // A numeric IPv4 ("127.0.0.1") or IPv6 ("::1", also "[::1]") address and a port.
  // Errors: InvalidArgument naming the text.
  static absl::StatusOr<SocketAddress> FromNumeric(absl::string_view ip, uint16_t port);
  // From a kernel-filled sockaddr (recvmsg, getsockname, getaddrinfo); `len` as the kernel
  // returned it. Anything but a complete AF_INET or AF_INET6 address gives an invalid one.
  static SocketAddress FromSockaddr(const sockaddr* sa, socklen_t len);

  bool valid() const { return len_ > 0; }
  // AF_INET, AF_INET6, or AF_UNSPEC when invalid.
  int family() const { return len_ == 0 ? AF_UNSPEC : storage_.ss_family; }
  uint16_t port() const;
  // No effect on an invalid address.
  void set_port(uint16_t port);
  // 127.0.0.0/8 or ::1.
  bool is_loopback() const;

  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t sockaddr_len() const { return len_; }

  // "127.0.0.1:5201" or "[::1]:5201"; "(none)" when invalid.
  std::string ToString() const;
  // "127.0.0.1" or "::1"; "(none)" when invalid.
  std::string IpString() const;
  // The address bytes (4 or 16) followed by the port (2 bytes, network order): what the
  // handshake cookie binds. Returns the number of bytes written (0 when invalid).
  size_t Identity(uint8_t out[kMaxIdentityBytes]) const;

  bool operator==(const SocketAddress& o) const;
  bool operator!=(const SocketAddress& o) const { return !(*this == o); }

  template <typename H>
  friend H AbslHashValue(H h, const SocketAddress& a) {
    uint8_t id[kMaxIdentityBytes];
    const size_t n = a.Identity(id);
    return H::combine(H::combine_contiguous(std::move(h), id, n), a.family(), a.scope_id());
  }

 private:
  uint32_t scope_id() const;

  sockaddr_storage storage_;
  socklen_t len_ = 0;
};

}  // namespace longhaul::net
