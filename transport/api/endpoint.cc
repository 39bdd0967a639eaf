#include "transport/api/endpoint.h"

#include "transport/drivers/udp/udp_driver.h"

namespace longhaul {

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(const EndpointOptions& options) {
  absl::StatusOr<std::unique_ptr<udp::UdpDriver>> d = udp::UdpDriver::Create(options);
  if (!d.ok()) return d.status();
  return std::unique_ptr<Endpoint>(new Endpoint(*std::move(d)));
}

Endpoint::Endpoint(std::unique_ptr<Driver> driver) : driver_(std::move(driver)) {}

Endpoint::~Endpoint() { Close(); }

absl::StatusOr<uint16_t> Endpoint::Listen(const std::string& address, uint16_t port,
                                          ListenOptions options) {
  return driver_->Listen(address, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> Endpoint::Connect(const std::string& host,
                                                                    uint16_t port,
                                                                    ConnectOptions options) {
  return driver_->Connect(host, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> Endpoint::Accept(Duration timeout) {
  return driver_->Accept(timeout);
}

void Endpoint::Close() { driver_->Shutdown(); }

EndpointStats Endpoint::stats() const { return driver_->stats(); }

}  // namespace longhaul
