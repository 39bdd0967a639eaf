#include "transport/base/units.h"

#include "absl/strings/str_format.h"

namespace longhaul {

std::string Duration::ToString() const {
  if (IsInfinite()) return "inf";
  int64_t a = ns_ < 0 ? -ns_ : ns_;
  if (a >= 1000000000) return absl::StrFormat("%.3gs", seconds());
  if (a >= 1000000) return absl::StrFormat("%.3gms", milliseconds());
  if (a >= 1000) return absl::StrFormat("%.3gus", microseconds());
  return absl::StrFormat("%dns", ns_);
}

std::string Bandwidth::ToString() const {
  if (bps_ >= 1e9) return absl::StrFormat("%.4ggbit", bps_ / 1e9);
  if (bps_ >= 1e6) return absl::StrFormat("%.4gmbit", bps_ / 1e6);
  if (bps_ >= 1e3) return absl::StrFormat("%.4gkbit", bps_ / 1e3);
  return absl::StrFormat("%.4gbit", bps_);
}

}  // namespace longhaul
