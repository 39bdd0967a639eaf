// VerbsDriver: the datapath over rdma-core verbs (Driver, transport/datapath/driver.h):
// longhaul datagrams as UD SEND messages between queue pairs on RoCE v2.
//
// I/O only, like the UDP driver: one thread owns the device (VerbsDevice), the queue
// pairs, the completion queues and channel, the registered send and receive rings and
// one deadline. It feeds every received message to the sans-IO endpoint (through
// datapath::DriverRuntime), posts what PollTransmit writes straight into registered
// send buffers (post lists, selective signalling, inline sends for small datagrams),
// refills receive buffers in batches, and sleeps on the completion channel, an eventfd
// (wake-ups) and the locator sockets until the endpoint's next deadline. The handshake,
// cookies, routing by connection id and (when present) packet protection are the
// endpoint's, unchanged: every datagram goes through PollTransmit and OnDatagram.
//
// Each queue pair is one endpoint local: a listener has one (found by clients through
// the locator, locator.h); a client connection has one per flow. A datagram is at most
// the port's active MTU; the segment is fitted to it (VerbsOptions::fit_segment).
// docs/rdma.md describes the design, the errors and the numbers.
//
// Thread-safety: as Driver.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "transport/datapath/driver.h"

namespace longhaul::verbs {

class VerbsDriverImpl;

class VerbsDriver final : public Driver {
 public:
  // Starts the driver thread (named "lh-engine-0", like a lone UDP engine's); opens the
  // device now when options.verbs.device names one (else at the first Listen or Connect,
  // from the local address). Errors: InvalidArgument naming a bad option;
  // VerbsDevice::Open's errors.
  static absl::StatusOr<std::unique_ptr<VerbsDriver>> Create(const EndpointOptions& options);
  ~VerbsDriver() override;  // Shutdown()

  // `address` must be numeric IPv4 ("0.0.0.0": any device with a RoCE v2 IPv4 GID).
  // Binds the locator's UDP socket to address:port (port 0: any) and creates the
  // listening queue pair. Errors: as Driver, plus the device's and FailedPrecondition
  // when the configured segment does not fit the active MTU (fit_segment off).
  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port,
                                  ListenOptions options) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host, uint16_t port,
                                                            ConnectOptions options) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) override;
  void Shutdown() override;
  // send_syscalls / recv_syscalls count ibv_post_send / ibv_post_recv calls (each a post
  // list); gso_sends counts post lists of more than one work request.
  EndpointStats stats() const override;
  // Zero copy (docs/rdma.md 7.14): registered in the device's protection domain now, or
  // when the device opens; UC lanes gather DATA payloads of messages sent with this
  // SendBuffer::region from it. Errors: MemoryRegions::Add's (memlock named).
  absl::Status RegisterMemory(uint64_t region, const void* data, size_t size) override;
  absl::Status DeregisterMemory(uint64_t region) override;

 private:
  explicit VerbsDriver(std::unique_ptr<VerbsDriverImpl> impl);
  std::unique_ptr<VerbsDriverImpl> impl_;
};

}  // namespace longhaul::verbs
