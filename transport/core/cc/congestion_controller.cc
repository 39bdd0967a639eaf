#include "transport/core/cc/congestion_controller.h"

namespace longhaul {

std::unique_ptr<CongestionController> MakeCongestionController(const TransportConfig& config) {
  switch (config.cc) {
    case CongestionControl::kFixed:
    case CongestionControl::kBbr:  // the model-based controller lands with cc/bbr.h
      return std::make_unique<FixedRateController>(config);
  }
  return std::make_unique<FixedRateController>(config);
}

}  // namespace longhaul
