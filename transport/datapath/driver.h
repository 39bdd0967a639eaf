// Driver: what a datapath (transport/drivers/udp, and later verbs) offers the API's
// Endpoint (transport/api/endpoint.h). A driver owns a thread, its I/O (sockets, queue
// pairs), one timer and a DriverRuntime (driver_runtime.h) that runs the sans-IO
// endpoint and the application's connection handles. The interface lives below both the
// API and the drivers: the API depends on drivers, never the reverse.
//
// Thread-safety: every method may be called from any thread, except that Listen, Connect
// and Shutdown must not be called from an event callback (the driver's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/datapath/connection_handle.h"
#include "transport/datapath/options.h"

namespace longhaul {

class Driver {
 public:
  virtual ~Driver() = default;

  // Listens on a numeric local address and port (0: any free port). Returns the bound
  // port. Errors: InvalidArgument for a bad address or options, AlreadyExists when the
  // port is in use, Cancelled after Shutdown.
  virtual absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port,
                                          ListenOptions options) = 0;

  // Runs the client handshake with `host` (a name or numeric address) and `port`, and
  // returns the connection. Errors name the server and the cause: NotFound (the name
  // does not resolve), Unavailable "connection refused", DeadlineExceeded (no answer
  // within options.timeout), FailedPrecondition (rejected: version, busy, policy).
  virtual absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host,
                                                                    uint16_t port,
                                                                    ConnectOptions options) = 0;

  // Next accepted connection (for listens without ListenOptions::on_accept).
  // DeadlineExceeded after `timeout`; Cancelled once the driver shuts down.
  virtual absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) = 0;

  // Closes every connection (peers get a CLOSE), fails pending handshakes and Accepts,
  // stops and joins the thread. Idempotent.
  virtual void Shutdown() = 0;

  virtual EndpointStats stats() const = 0;
  // One entry per engine (EndpointOptions::engines), in engine order.
  virtual std::vector<EndpointStats> engine_stats() const { return {stats()}; }
};

}  // namespace longhaul
