#include "transport/api/endpoint.h"

#include "transport/base/status.h"
#include "transport/datapath/engine_group.h"
#include "transport/drivers/udp/udp_driver.h"
#ifdef LONGHAUL_HAVE_VERBS
#include "transport/drivers/verbs/verbs_driver.h"
#endif

namespace longhaul {

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(const EndpointOptions& options) {
  LH_ASSIGN_OR_RETURN(const uint32_t engines, datapath::ResolveEngines(options));
  std::unique_ptr<Driver> driver;
  switch (options.datapath) {
    case Datapath::kUdp: {
      if (engines > 1) {
        LH_ASSIGN_OR_RETURN(
            driver, datapath::EngineGroup::Create(
                        options, engines,
                        [&](const datapath::EngineSlot& slot)
                            -> absl::StatusOr<std::unique_ptr<Driver>> {
                          LH_ASSIGN_OR_RETURN(std::unique_ptr<udp::UdpDriver> d,
                                              udp::UdpDriver::Create(options, slot));
                          return std::unique_ptr<Driver>(std::move(d));
                        }));
        break;
      }
      datapath::EngineSlot slot;
      if (!options.engine_cpus.empty()) slot.cpu = options.engine_cpus[0];
      LH_ASSIGN_OR_RETURN(driver, udp::UdpDriver::Create(options, slot));
      break;
    }
    case Datapath::kVerbs: {
#ifdef LONGHAUL_HAVE_VERBS
      LH_ASSIGN_OR_RETURN(driver, verbs::VerbsDriver::Create(options));
      break;
#else
      return absl::UnimplementedError(
          "the verbs datapath is not built in (libibverbs-dev was missing at build time)");
#endif
    }
  }
  if (driver == nullptr) return absl::InvalidArgumentError("unknown datapath");
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(driver)));
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

absl::StatusOr<uint64_t> Endpoint::RegisterMemory(const void* data, size_t size) {
  const uint64_t region = next_region_.fetch_add(1);
  LH_RETURN_IF_ERROR(driver_->RegisterMemory(region, data, size));
  return region;
}

absl::Status Endpoint::DeregisterMemory(uint64_t region) {
  return driver_->DeregisterMemory(region);
}

EndpointStats Endpoint::stats() const { return driver_->stats(); }

std::vector<EndpointStats> Endpoint::engine_stats() const { return driver_->engine_stats(); }

}  // namespace longhaul
