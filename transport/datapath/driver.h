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

  // Zero copy: `size` bytes at `data` the application sends from (SendBuffer::region =
  // `region`, an id the API's Endpoint chose) and keeps until DeregisterMemory. A driver
  // whose datapath can send from it without copying (the verbs driver's UC lanes)
  // registers it with its device; the others copy, as for any message, and only check
  // the arguments. Errors: InvalidArgument for null or empty memory or a region in use,
  // the device's refusal (ResourceExhausted naming memlock).
  virtual absl::Status RegisterMemory(uint64_t region, const void* data, size_t size) {
    (void)region;
    if (data == nullptr || size == 0) {
      return absl::InvalidArgumentError("RegisterMemory: null or empty memory");
    }
    return absl::OkStatus();
  }
  // The memory is the application's again once the sends from it completed (a send
  // still in flight keeps the device's registration until it is done).
  virtual absl::Status DeregisterMemory(uint64_t region) {
    (void)region;
    return absl::OkStatus();
  }
  // One entry per engine (EndpointOptions::engines), in engine order.
  virtual std::vector<EndpointStats> engine_stats() const { return {stats()}; }
};

}  // namespace longhaul
