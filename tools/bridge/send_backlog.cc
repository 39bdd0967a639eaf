#include "tools/bridge/send_backlog.h"

#include <algorithm>

namespace longhaul::bridge {

uint64_t SendBacklog::Limit(Time now, Bandwidth rate) const {
  const Duration t = interactive(now) ? o_.interactive : o_.bulk;
  return std::max<uint64_t>(o_.min_bytes, rate.BytesIn(t));
}

}  // namespace longhaul::bridge
