// RateLimitedLog: logs a warning at most once per period per key, then says how many like
// it were suppressed meanwhile. Times are given by the caller (sans-IO code passes its
// `now`). Not thread-safe; memory grows with the number of distinct keys, so keys must
// come from a fixed set (never from packet contents).
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "glog/logging.h"
#include "transport/base/parse.h"
#include "transport/base/units.h"

namespace longhaul {

class RateLimitedLog {
 public:
  explicit RateLimitedLog(Duration period = Duration::Seconds(10)) : period_(period) {}

  void Warn(const std::string& key, Time now, const std::string& message) {
    Entry& e = entries_[key];
    if (e.logged && now - e.last < period_) {
      ++e.suppressed;
      return;
    }
    if (e.suppressed > 0) {
      LOG(WARNING) << message << " (and " << e.suppressed << " more like it in the last "
                   << FormatDuration(period_) << ")";
    } else {
      LOG(WARNING) << message;
    }
    e.logged = true;
    e.last = now;
    e.suppressed = 0;
  }

 private:
  struct Entry {
    bool logged = false;
    Time last;
    uint64_t suppressed = 0;
  };
  Duration period_;
  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace longhaul
