// UdpDriver: runs longhaul Connections over UDP sockets on one driver thread.
//
// The thread owns a Boost.Asio io_context, the sockets (net::UdpSocket: recvmmsg/sendmmsg,
// GSO/GRO) and every Connection. It feeds received datagrams to OnDatagram with a
// monotonic clock (steady_clock nanoseconds as longhaul::Time), arms one timer at the
// earliest NextTimeout() of all connections (polling instead of sleeping when that is
// closer than EndpointOptions::spin), drains PollTransmit into sendmmsg batches, and
// routes every datagram by the connection id in its header (not by address), so a
// connection's flows may come from several source ports. It also runs the handshake
// (handshake.h) on both sides: stateless cookies, negotiation, version checks.
//
// Applications use it through transport/api (Endpoint and ConnectionHandle); the public
// methods here are thread-safe and may be called from any thread except the driver's
// own (they block until the driver thread has done the work), except Wake.
// docs/udp-driver.md describes the design, the handshake and the numbers.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/api/connection_handle.h"
#include "transport/api/endpoint_options.h"
#include "transport/net/socket_address.h"

namespace longhaul::udp {

class UdpDriverImpl;

class UdpDriver final : public ConnectionHost {
 public:
  // Starts the driver thread. Errors: InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<UdpDriver>> Create(const EndpointOptions& options);
  ~UdpDriver() override;  // Shutdown()

  // Opens a listening socket (port 0: the kernel picks one) and returns its address.
  // Errors: the bind failure ("address already in use", ...).
  absl::StatusOr<net::SocketAddress> Listen(const net::SocketAddress& bind, ListenOptions options);

  // Runs the client handshake with the server at `server` and returns the connection, or
  // an error naming the server and the cause: Unavailable "connection refused" (nothing
  // listens on the port), DeadlineExceeded (no answer within options.timeout),
  // FailedPrecondition (the server rejected it: version mismatch, busy, policy).
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const net::SocketAddress& server,
                                                            ConnectOptions options);

  // Next accepted connection (confirmed handshakes of Listen()s without on_accept).
  // DeadlineExceeded after `timeout`; Cancelled once the driver shuts down.
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout);

  // Closes every connection (peers get a CLOSE), fails pending handshakes and Accepts,
  // stops and joins the thread. Idempotent.
  void Shutdown();

  EndpointStats stats() const;

  // ConnectionHost.
  void Wake(ConnectionHandle* handle) override;

 private:
  explicit UdpDriver(std::unique_ptr<UdpDriverImpl> impl);
  std::unique_ptr<UdpDriverImpl> impl_;
};

}  // namespace longhaul::udp
