#include "transport/core/cc/congestion_controller.h"

#include "transport/core/cc/bbr.h"

namespace longhaul {

std::unique_ptr<CongestionController> MakeCongestionController(const TransportConfig& config,
                                                               uint64_t seed) {
  switch (config.cc) {
    case CongestionControl::kFixed:
      return std::make_unique<FixedRateController>(config);
    case CongestionControl::kBbr:
      return std::make_unique<BbrController>(config, seed);
  }
  return std::make_unique<FixedRateController>(config);
}

}  // namespace longhaul
