#include "tools/common/link_json.h"

#include "tools/common/json_fields.h"

namespace longhaul {

nlohmann::json LinkCountersToJson(const sim::LinkCounters& c) {
  nlohmann::json j;
  LONGHAUL_JSON_SET_FIELDS(j, c, offered, offered_bytes, delivered, delivered_bytes, dropped_loss,
                           dropped_queue, dropped_too_big, loss_bursts, reordered, duplicated,
                           corrupted, ce_marked, max_queue_bytes, avg_queue_bytes);
  j["busy_s"] = c.busy_time.seconds();
  return j;
}

}  // namespace longhaul
