// Endpoint: the application's entry point to longhaul. It owns a datapath driver
// (transport/datapath/driver.h; EndpointOptions::datapath picks the UDP driver,
// transport/drivers/udp, or the verbs driver, transport/drivers/verbs) whose
// thread runs every connection of the endpoint; an endpoint can listen (server), connect
// (client), or both. With EndpointOptions::engines > 1 it runs one driver per engine
// (datapath::EngineGroup): a listening port is shared by all of them, connections are
// spread over them, and accept callbacks and connection events run on several threads.
//
//   auto ep = Endpoint::Create({});                       // starts the driver thread
//   ListenOptions lo; lo.config = config;
//   auto addr = (*ep)->Listen("0.0.0.0", 5201, lo);        // server
//   auto conn = (*ep)->Accept(Duration::Seconds(10));
//   ConnectOptions co; co.config = config;
//   auto c = (*ep)->Connect("127.0.0.1", 5201, co);       // client: handshake, then ready
//   (*c)->Send({data, size}, /*tag=*/1);  (*c)->Wait(&event, timeout);
//
// Thread-safety: every method may be called from any thread, except that Connect, Listen
// and Close must not be called from an event callback (they wait for the driver thread).
// Closing (or destroying) the endpoint closes its connections: peers receive a CLOSE, and
// the local handles end with kClosed (Aborted "endpoint closed"; Cancelled for handles
// the driver still held when it stopped).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/datapath/connection_handle.h"
#include "transport/datapath/driver.h"
#include "transport/datapath/options.h"

namespace longhaul {

class Endpoint {
 public:
  // Starts the driver thread. Errors: InvalidArgument naming a bad option.
  static absl::StatusOr<std::unique_ptr<Endpoint>> Create(const EndpointOptions& options);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Listens on a numeric address ("0.0.0.0", "127.0.0.1", "::") and port (0: any free
  // port). Returns the bound port. Errors: InvalidArgument for a bad address,
  // AlreadyExists when the port is in use.
  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port, ListenOptions options);

  // Connects to `host` (a name or a numeric address) and `port`; returns once the
  // handshake completed. Errors name the server and the cause: NotFound (the name does
  // not resolve), Unavailable "connection refused" (nothing listens there),
  // DeadlineExceeded (no answer within options.timeout), FailedPrecondition (rejected:
  // version mismatch, busy, the server's policy).
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host, uint16_t port,
                                                            ConnectOptions options);

  // Next accepted connection (for listens without ListenOptions::on_accept).
  // DeadlineExceeded after `timeout`, Cancelled after Close().
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout);

  // Closes every connection and stops the driver thread. Idempotent.
  void Close();

  // Zero copy (docs/rdma.md 7.14): memory the application sends from and keeps until
  // DeregisterMemory. Send a message from it with SendBuffer::region set to the returned
  // id (never 0): with the verbs datapath's UC lanes (qp_type uc) and no packet
  // protection, the NIC gathers its bytes from where they are instead of the transport
  // copying them; with any other datapath, or sealed, the message is copied as usual.
  // Errors: InvalidArgument for null or empty memory, the device's refusal
  // (ResourceExhausted naming the locked-memory limit), Cancelled after Close().
  absl::StatusOr<uint64_t> RegisterMemory(const void* data, size_t size);
  // The region's memory is the application's again once every send from it completed.
  // NotFound for a region the verbs datapath does not know (the others accept any id).
  absl::Status DeregisterMemory(uint64_t region);

  // Counters of every engine summed (EndpointOptions::engines; `engines` says how many).
  EndpointStats stats() const;
  // Each engine's counters and its thread's CPU time, in engine order.
  std::vector<EndpointStats> engine_stats() const;

 private:
  explicit Endpoint(std::unique_ptr<Driver> driver);
  std::unique_ptr<Driver> driver_;
  std::atomic<uint64_t> next_region_{1};
};

}  // namespace longhaul
