// Transport flags for longhaul-sim until the shared tools/common/transport_flags lands:
// the same API (TransportConfigFromFlags / TransportConfigToJson) so the switch is an
// include change. Only tools/sim uses this file.
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "transport/core/config.h"

namespace longhaul::sim_tool {

// Defaults, then explicitly given transport flags. Errors name the flag.
absl::StatusOr<TransportConfig> TransportConfigFromFlags();
// Every field of the config, units in the names.
nlohmann::json TransportConfigToJson(const TransportConfig& c);
// True if --NAME was given on the command line.
bool FlagWasSet(const char* name);

}  // namespace longhaul::sim_tool
