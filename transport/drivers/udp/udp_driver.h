// UdpDriver: the datapath over UDP sockets (Driver, transport/datapath/driver.h).
//
// I/O only: one thread owns a Boost.Asio io_context, the sockets (UdpSocket:
// recvmmsg/sendmmsg, GSO/GRO, ECN) and one timer. It feeds every received datagram to the
// sans-IO endpoint (transport/endpoint, through datapath::DriverRuntime) with a
// monotonic clock (steady_clock nanoseconds as longhaul::Time), drains its PollTransmit
// into sendmmsg batches per socket, keeps what a full socket buffer refused until the
// socket is writable, reports ICMP errors, and sleeps on the one timer at the endpoint's
// next deadline (polling instead when that is closer than EndpointOptions::spin). The
// handshake, routing by connection id, cookies and the amplification limit are the
// endpoint's. A listening socket's datagrams of other protocols go to
// ListenOptions::on_foreign_datagram with their kernel receive times.
//
// Each socket is one endpoint local (its LocalId is the driver's socket id); a client
// connection has one connected socket per flow, a server's connections share the
// listening socket. docs/udp-driver.md describes the design and the numbers.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "transport/datapath/driver.h"
#include "transport/datapath/driver_runtime.h"

namespace longhaul::udp {

class UdpDriverImpl;

class UdpDriver final : public Driver {
 public:
  // Starts the driver thread. `slot`: the engine this driver is (datapath::EngineGroup
  // makes one per engine; the default is a lone engine): with several, a listening socket
  // joins the port's SO_REUSEPORT group, and the last engine's attaches the steering
  // program (engine_steering.h). Errors: InvalidArgument naming a bad option.
  static absl::StatusOr<std::unique_ptr<UdpDriver>> Create(const EndpointOptions& options,
                                                           const datapath::EngineSlot& slot = {});
  ~UdpDriver() override;  // Shutdown()

  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port,
                                  ListenOptions options) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host, uint16_t port,
                                                            ConnectOptions options) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) override;
  void Shutdown() override;
  EndpointStats stats() const override;

 private:
  explicit UdpDriver(std::unique_ptr<UdpDriverImpl> impl);
  std::unique_ptr<UdpDriverImpl> impl_;
};

}  // namespace longhaul::udp
