#include "tools/emu/emu_json.h"

#include "absl/strings/str_format.h"
#include "tools/common/json_fields.h"
#include "tools/common/link_json.h"

namespace longhaul::emu {

nlohmann::json EmuCountersToJson(const EmuCounters& c) {
  nlohmann::json j;
  LONGHAUL_JSON_SET_FIELDS(j, c, received, received_bytes, released, released_bytes, buffer_full,
                           dup_lost, truncated, send_errors, rx_overflow, evicted, no_flow);
  j["own_drops"] = c.OwnDrops();
  return j;
}

static nlohmann::json DirectionToJson(const EmuDirectionStats& d) {
  nlohmann::json j;
  j["model"] = LinkCountersToJson(d.model);
  j["emulator"] = EmuCountersToJson(d.own);
  j["pending"] = d.pending;
  return j;
}

nlohmann::json EmuStatsToJson(const EmuStats& s, bool udp_mode) {
  nlohmann::json j;
  j["elapsed_s"] = s.elapsed_s;
  j["forward"] = DirectionToJson(s.forward);
  j["reverse"] = DirectionToJson(s.reverse);
  j["own_drops"] = s.OwnDrops();
  j["wakeups"] = s.wakeups;
  j["buffer"] = {{"slot_bytes", s.pool_slot_bytes},
                 {"max_slots", s.pool_max_slots},
                 {"peak_slots", s.pool_peak_slots}};
  if (udp_mode) {
    j["clients"] = {{"active", s.clients_active},
                    {"created", s.clients_created},
                    {"evicted", s.clients_evicted},
                    {"rebound", s.clients_rebound}};
    j["port_unreachable"] = s.port_unreachable;
    j["tcp_connections"] = s.tcp_connections;
    j["socket_buffers"] = {{"requested", s.socket_buffers.requested},
                           {"rcvbuf", s.socket_buffers.rcvbuf},
                           {"sndbuf", s.socket_buffers.sndbuf},
                           {"forced", s.socket_buffers.forced},
                           {"capped", s.socket_buffers.capped()}};
  }
  return j;
}

static std::string DirectionLine(const char* name, const EmuDirectionStats& now,
                                 const EmuDirectionStats& prev, double dt, size_t overhead) {
  const uint64_t pkts = now.own.released - prev.own.released;
  const uint64_t bytes = now.own.released_bytes - prev.own.released_bytes;
  const double wire_bps = dt > 0 ? static_cast<double>(bytes + pkts * overhead) * 8 / dt : 0;
  return absl::StrFormat(
      "%s %.3f Gbit/s %d pkts (drops: loss %d queue %d too_big %d; dup %d corrupt %d ce %d; "
      "own %d) queued %d",
      name, wire_bps / 1e9, pkts, now.model.dropped_loss - prev.model.dropped_loss,
      now.model.dropped_queue - prev.model.dropped_queue,
      now.model.dropped_too_big - prev.model.dropped_too_big,
      now.model.duplicated - prev.model.duplicated, now.model.corrupted - prev.model.corrupted,
      now.model.ce_marked - prev.model.ce_marked, now.own.OwnDrops() - prev.own.OwnDrops(),
      now.pending);
}

std::string EmuStatsLine(const EmuStats& now, const EmuStats& prev, const sim::LinkSpec& link,
                         size_t overhead) {
  const double dt = now.elapsed_s - prev.elapsed_s;
  return absl::StrFormat("longhaul-emu: t=%.1fs %s | %s", now.elapsed_s,
                         DirectionLine("fwd", now.forward, prev.forward, dt, overhead),
                         DirectionLine("rev", now.reverse, prev.reverse, dt, overhead));
}

}  // namespace longhaul::emu
