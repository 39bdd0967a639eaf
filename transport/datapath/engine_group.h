// EngineGroup: a Driver made of N drivers, one per engine (EndpointOptions::engines; the
// API's Endpoint builds it when engines > 1). docs/architecture.md "Engines".
//
//   - Listen: every engine listens on the same address and port, in engine order (the
//     first one picks the port when 0 is asked for), so engine i holds slot i of the
//     port's SO_REUSEPORT group; the driver of the last engine attaches the steering
//     program that sends a datagram to the engine its connection id names.
//   - Connect: connections go to the engines in turn (round-robin), or to the one
//     ConnectOptions::engine names; each engine opens its own sockets for them.
//   - Accept: one queue for the whole group (AcceptQueue), the backlog counting every
//     engine's waiting connections.
//   - stats: the engines' counters summed (socket facts from engine 0); engine_stats:
//     each engine's own.
// Accept callbacks and connection events run on the engine threads, several at once.
//
// Thread-safety: as Driver.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/datapath/accept_queue.h"
#include "transport/datapath/driver.h"
#include "transport/datapath/driver_runtime.h"

namespace longhaul::datapath {

// How many engines `options` asks for: options.engines, or for 0 the CPUs this process
// may run on (sched_getaffinity) up to kMaxAutoEngines (1 on a datapath other than
// udp). InvalidArgument naming the option: engines above kMaxEngines, more than one on
// another datapath, engine_cpus naming a CPU this process may not run on.
absl::StatusOr<uint32_t> ResolveEngines(const EndpointOptions& options);

// Adds every counter of `s` to `sum` (the socket facts are left as they are).
void AddEndpointStats(EndpointStats* sum, const EndpointStats& s);

class EngineGroup final : public Driver {
 public:
  // Creates a driver for one engine's slot.
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Driver>>(const EngineSlot&)>;

  // Creates `engines` drivers through `factory`, sharing one cookie secret and one accept
  // queue; engine i pinned to options.engine_cpus[i % size] when that is set. Errors:
  // the factory's (the engines already made are shut down).
  static absl::StatusOr<std::unique_ptr<EngineGroup>> Create(const EndpointOptions& options,
                                                            uint32_t engines,
                                                            const Factory& factory);
  ~EngineGroup() override;

  // Errors: the first engine's, or an engine's that could not join the port (then the
  // engines before it keep listening: Shutdown the endpoint).
  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port,
                                  ListenOptions options) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host, uint16_t port,
                                                            ConnectOptions options) override;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) override;
  void Shutdown() override;
  EndpointStats stats() const override;
  std::vector<EndpointStats> engine_stats() const override;

 private:
  EngineGroup(std::vector<std::unique_ptr<Driver>> engines, std::shared_ptr<AcceptQueue> queue);

  std::vector<std::unique_ptr<Driver>> engines_;
  std::shared_ptr<AcceptQueue> queue_;
  std::atomic<uint32_t> next_connect_{0};
};

}  // namespace longhaul::datapath
