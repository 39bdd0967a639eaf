// JSON and one-line text forms of the emulator's statistics (longhaul-emu output).
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "transport/emu/emu_stats.h"
#include "transport/sim/link_model.h"
#include "transport/sim/link_spec.h"

namespace longhaul::emu {

nlohmann::json EmuCountersToJson(const EmuCounters& c);
// {"elapsed_s":..,"forward":{"model":{..},"emulator":{..},"pending":..},"reverse":..,
//  "own_drops":N, ...}
nlohmann::json EmuStatsToJson(const EmuStats& s, bool udp_mode);

// One line for stderr: per direction the delivered rate since `prev` (wire bits:
// datagram + overhead), datagrams, model drops, own drops, queued.
std::string EmuStatsLine(const EmuStats& now, const EmuStats& prev, const sim::LinkSpec& link,
                         size_t overhead_bytes);

}  // namespace longhaul::emu
