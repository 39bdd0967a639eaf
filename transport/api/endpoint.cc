#include "transport/api/endpoint.h"

#include "transport/drivers/udp/udp_driver.h"
#include "transport/net/resolver.h"
#include "transport/net/socket_address.h"

namespace longhaul {

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(const EndpointOptions& options) {
  absl::StatusOr<std::unique_ptr<udp::UdpDriver>> d = udp::UdpDriver::Create(options);
  if (!d.ok()) return d.status();
  return std::unique_ptr<Endpoint>(new Endpoint(*std::move(d)));
}

Endpoint::Endpoint(std::unique_ptr<udp::UdpDriver> driver) : driver_(std::move(driver)) {}

Endpoint::~Endpoint() { Close(); }

absl::StatusOr<uint16_t> Endpoint::Listen(const std::string& address, uint16_t port,
                                          ListenOptions options) {
  absl::StatusOr<net::SocketAddress> a = net::SocketAddress::FromNumeric(address, port);
  if (!a.ok()) return a.status();
  absl::StatusOr<net::SocketAddress> bound = driver_->Listen(*a, std::move(options));
  if (!bound.ok()) return bound.status();
  return bound->port();
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> Endpoint::Connect(const std::string& host,
                                                                    uint16_t port,
                                                                    ConnectOptions options) {
  absl::StatusOr<net::SocketAddress> a = net::Resolve(host, port);
  if (!a.ok()) return a.status();
  return driver_->Connect(*a, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> Endpoint::Accept(Duration timeout) {
  return driver_->Accept(timeout);
}

void Endpoint::Close() { driver_->Shutdown(); }

EndpointStats Endpoint::stats() const { return driver_->stats(); }

}  // namespace longhaul
