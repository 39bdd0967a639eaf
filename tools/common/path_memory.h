// Path memory: what the last connections to a peer measured (the congestion controller's
// bandwidth estimate and min RTT), kept in a small file so that the next connection to
// that peer need not find the rate again from ten packets (as Linux keeps per-destination
// TCP metrics, and as the "careful resume" draft reuses a previous connection's
// capacity). A cc=bbr connection with a fresh record starts at half the remembered rate
// (TransportConfig::initial_rate): one round trip at that rate, paced, then startup grows
// from what is delivered; a path that became slower costs one round trip's excess, and
// the model keeps nothing of the record.
//
// The file is text, one peer per line: `PEER RATE_BPS MIN_RTT_NS SAVED_UNIX_S`; '#' starts
// a comment. Lines that do not parse are skipped (counted); records older than kMaxAge
// are not used. Saves replace the file atomically (a temporary file, then rename) and
// keep the kMaxRecords newest records. Tool-layer code (flags: --path_memory).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/stats.h"

namespace longhaul {

struct PathRecord {
  Bandwidth rate;          // the bandwidth estimate (all the peer's connections together)
  Duration min_rtt;        // their min RTT
  int64_t saved_unix_s = 0;
};

class PathMemory {
 public:
  static constexpr int64_t kMaxAgeSeconds = 3600;  // a record older than this is unused
  static constexpr size_t kMaxRecords = 1024;
  // The share of the remembered rate a new connection starts at.
  static constexpr double kResumeFraction = 0.5;

  // An empty memory that Save() writes to `file`.
  explicit PathMemory(std::string file) : file_(std::move(file)) {}
  // Reads `file`; a file that does not exist is an empty memory. Unreadable: the error
  // names the file.
  static absl::StatusOr<PathMemory> Load(std::string file);
  // Parses the file's text (Load without the file).
  static PathMemory Parse(std::string file, absl::string_view text);
  // Load, but an empty memory where the file cannot be read, with a warning (a broken
  // cache must not stop a transfer); skipped lines are warned about too.
  static PathMemory LoadOrWarn(std::string file);

  // The record for `peer` (e.g. "198.18.0.2:5201") if one is at most kMaxAgeSeconds old.
  std::optional<PathRecord> Find(const std::string& peer, int64_t now_unix_s) const;
  // Replaces the record for `peer`. A zero rate or an unknown RTT forgets the peer.
  void Remember(const std::string& peer, const PathRecord& record);
  // Writes the file (its directory is created), keeping the newest kMaxRecords.
  absl::Status Save() const;
  std::string Format() const;

  const std::string& file() const { return file_; }
  size_t size() const { return records_.size(); }
  size_t skipped_lines() const { return skipped_lines_; }

 private:
  std::string file_;
  std::map<std::string, PathRecord> records_;
  size_t skipped_lines_ = 0;
};

// Applies a record to a connection's configuration: a cc=bbr connection with no
// initial_rate and no rate_min of its own starts at kResumeFraction of the record's rate
// split over `connections`, capped by `rate` where that is set. Returns the initial rate
// it set, or nullopt where it changed nothing.
std::optional<Bandwidth> ApplyPathRecord(const PathRecord& record, uint32_t connections,
                                         TransportConfig* config);

// The record of a peer's connections at `now_unix_s`: their bandwidth estimates summed,
// their smallest min RTT. None (a zero rate: Remember forgets the peer) where one of them
// competed with queue-building traffic (cc_compete): a path shared with TCP is no path to
// start fast on (a fast start beside CUBIC left longhaul a smaller share for the rest of
// the run), and where nothing was measured.
PathRecord PathRecordOf(const std::vector<ConnectionDebugState>& connections,
                        int64_t now_unix_s);

// --path_memory: the file ("" or "off": none). The default is
// $XDG_CACHE_HOME/longhaul/paths, or ~/.cache/longhaul/paths, or none without HOME.
std::string PathMemoryFileFromFlags();
// Whether the command line leaves the start rate to the path memory: neither
// --initial_rate nor --rate_min is given, on the command line or in the --profile.
bool PathMemoryMayApply();

}  // namespace longhaul
