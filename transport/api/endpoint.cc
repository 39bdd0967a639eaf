#include "transport/api/endpoint.h"

#include <netdb.h>
#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "transport/drivers/udp/socket_address.h"
#include "transport/drivers/udp/udp_driver.h"

namespace longhaul {
namespace {

// A numeric address as is, or the first IPv4 (then IPv6) address the name resolves to.
absl::StatusOr<udp::SocketAddress> Resolve(const std::string& host, uint16_t port) {
  absl::StatusOr<udp::SocketAddress> numeric = udp::SocketAddress::FromNumeric(host, port);
  if (numeric.ok()) return numeric;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve host '", host,
                                            "': ", rc != 0 ? gai_strerror(rc) : "no address"));
  }
  udp::SocketAddress chosen;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    udp::SocketAddress s = udp::SocketAddress::FromSockaddr(a->ai_addr, a->ai_addrlen);
    if (!s.valid()) continue;
    if (!chosen.valid() || (chosen.family() != AF_INET && s.family() == AF_INET)) chosen = s;
  }
  freeaddrinfo(res);
  if (!chosen.valid()) {
    return absl::NotFoundError(absl::StrCat("host '", host, "' has no IPv4 or IPv6 address"));
  }
  chosen.set_port(port);
  return chosen;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(const EndpointOptions& options) {
  absl::StatusOr<std::unique_ptr<udp::UdpDriver>> d = udp::UdpDriver::Create(options);
  if (!d.ok()) return d.status();
  return std::unique_ptr<Endpoint>(new Endpoint(*std::move(d)));
}

Endpoint::Endpoint(std::unique_ptr<udp::UdpDriver> driver) : driver_(std::move(driver)) {}

Endpoint::~Endpoint() { Close(); }

absl::StatusOr<uint16_t> Endpoint::Listen(const std::string& address, uint16_t port,
                                          ListenOptions options) {
  absl::StatusOr<udp::SocketAddress> a = udp::SocketAddress::FromNumeric(address, port);
  if (!a.ok()) return a.status();
  absl::StatusOr<udp::SocketAddress> bound = driver_->Listen(*a, std::move(options));
  if (!bound.ok()) return bound.status();
  return bound->port();
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> Endpoint::Connect(const std::string& host,
                                                                    uint16_t port,
                                                                    ConnectOptions options) {
  absl::StatusOr<udp::SocketAddress> a = Resolve(host, port);
  if (!a.ok()) return a.status();
  return driver_->Connect(*a, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> Endpoint::Accept(Duration timeout) {
  return driver_->Accept(timeout);
}

void Endpoint::Close() { driver_->Shutdown(); }

EndpointStats Endpoint::stats() const { return driver_->stats(); }

}  // namespace longhaul
