// JSON form of a simulated link's counters, shared by longhaul-sim (link_forward,
// link_reverse) and longhaul-emu (each direction's "model"). Tool layer.
#pragma once

#include "nlohmann/json.hpp"
#include "transport/sim/link_model.h"

namespace longhaul {

// {"offered":N, "offered_bytes":N, "delivered":N, ..., "avg_queue_bytes":N, "busy_s":S}:
// every counter under its own name, the busy time in seconds.
nlohmann::json LinkCountersToJson(const sim::LinkCounters& c);

}  // namespace longhaul
