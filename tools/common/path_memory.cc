// Path memory (path_memory.h).

#include "tools/common/path_memory.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/common/transport_flags.h"

DEFINE_string(path_memory, "auto",
              "cc=bbr: the file that remembers each peer's measured rate and min RTT "
              "(written after a connection): a new connection to a peer measured within "
              "the last hour starts at half that rate instead of ten packets, unless "
              "--initial_rate or --rate_min (or the profile's) says otherwise. auto: "
              "$XDG_CACHE_HOME/longhaul/paths or ~/.cache/longhaul/paths; off: none "
              "(docs/congestion-control.md, \"Path memory\").");

namespace longhaul {

PathMemory PathMemory::Parse(std::string file, absl::string_view text) {
  PathMemory m(std::move(file));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double bps = 0;
    int64_t rtt_ns = 0, saved = 0;
    if (f.size() != 4 || !absl::SimpleAtod(f[1], &bps) || !absl::SimpleAtoi(f[2], &rtt_ns) ||
        !absl::SimpleAtoi(f[3], &saved) || !(bps > 0 && bps <= 10e12) || rtt_ns <= 0 ||
        f[0].size() > 300) {
      ++m.skipped_lines_;
      continue;
    }
    m.records_[std::string(f[0])] =
        PathRecord{Bandwidth::BitsPerSecond(bps), Duration::Nanoseconds(rtt_ns), saved};
  }
  return m;
}

absl::StatusOr<PathMemory> PathMemory::Load(std::string file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return PathMemory(std::move(file));
  std::ifstream in(file);
  if (!in) {
    return absl::UnavailableError(
        absl::StrCat("path memory ", file, ": cannot read: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(std::move(file), text.str());
}

PathMemory PathMemory::LoadOrWarn(std::string file) {
  absl::StatusOr<PathMemory> m = Load(file);
  if (!m.ok()) {
    LOG(WARNING) << m.status().message() << " (starting from ten packets)";
    return PathMemory(std::move(file));
  }
  if (m->skipped_lines() > 0) {
    LOG(WARNING) << "path memory " << file << ": " << m->skipped_lines()
                 << " lines that do not parse skipped";
  }
  return *std::move(m);
}

std::optional<PathRecord> PathMemory::Find(const std::string& peer, int64_t now_unix_s) const {
  auto it = records_.find(peer);
  if (it == records_.end()) return std::nullopt;
  const int64_t age = now_unix_s - it->second.saved_unix_s;
  if (age < 0 || age > kMaxAgeSeconds) return std::nullopt;
  return it->second;
}

void PathMemory::Remember(const std::string& peer, const PathRecord& record) {
  if (record.rate.IsZero() || record.min_rtt.IsInfinite() || record.min_rtt.ns() <= 0 ||
      peer.empty() || peer.find_first_of(" \t\n#") != std::string::npos) {
    records_.erase(peer);
    return;
  }
  records_[peer] = record;
}

std::string PathMemory::Format() const {
  std::vector<std::pair<std::string, PathRecord>> newest(records_.begin(), records_.end());
  std::sort(newest.begin(), newest.end(), [](const auto& a, const auto& b) {
    return a.second.saved_unix_s > b.second.saved_unix_s;
  });
  if (newest.size() > kMaxRecords) newest.resize(kMaxRecords);
  std::string out =
      "# longhaul path memory: peer, bandwidth estimate (bit/s), min RTT (ns), saved (unix s)\n";
  for (const auto& [peer, r] : newest) {
    absl::StrAppend(&out, peer, " ", static_cast<int64_t>(r.rate.bps()), " ", r.min_rtt.ns(), " ",
                    r.saved_unix_s, "\n");
  }
  return out;
}

absl::Status PathMemory::Save() const {
  const std::filesystem::path path(file_);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("path memory ", file_, ": cannot create ",
                                               path.parent_path().string(), ": ", ec.message()));
  }
  // Written whole beside the file, then renamed over it: a reader (another process
  // starting) sees the old file or the new one, never half of one.
  const std::string tmp = absl::StrCat(file_, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Format();
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return absl::UnavailableError(absl::StrCat("path memory ", tmp, ": cannot write"));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("path memory ", file_, ": cannot replace: ", ec.message()));
  }
  return absl::OkStatus();
}

std::optional<Bandwidth> ApplyPathRecord(const PathRecord& record, uint32_t connections,
                                         TransportConfig* config) {
  if (config->cc != CongestionControl::kBbr || !config->initial_rate.IsZero() ||
      !config->rate_min.IsZero() || record.rate.IsZero() || connections == 0) {
    return std::nullopt;
  }
  Bandwidth start = record.rate.Scaled(PathMemory::kResumeFraction / connections);
  if (!config->rate.IsZero()) start = std::min(start, config->rate);
  config->initial_rate = start;
  return start;
}

PathRecord PathRecordOf(const std::vector<ConnectionDebugState>& connections,
                        int64_t now_unix_s) {
  double bps = 0;
  Duration min_rtt = Duration::Infinite();
  for (const ConnectionDebugState& d : connections) {
    if (d.cc_competed) return PathRecord{Bandwidth::Zero(), Duration::Infinite(), now_unix_s};
    bps += d.cc_bandwidth_estimate.bps();
    if (d.min_rtt.ns() > 0) min_rtt = std::min(min_rtt, d.min_rtt);
  }
  if (min_rtt.IsInfinite()) bps = 0;
  return PathRecord{Bandwidth::BitsPerSecond(bps), min_rtt, now_unix_s};
}

std::string PathMemoryFileFromFlags() {
  if (FLAGS_path_memory == "off" || FLAGS_path_memory.empty()) return "";
  if (FLAGS_path_memory != "auto") return FLAGS_path_memory;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  if (cache != nullptr && cache[0] == '/') return absl::StrCat(cache, "/longhaul/paths");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return absl::StrCat(home, "/.cache/longhaul/paths");
  return "";
}

bool PathMemoryMayApply() {
  const GivenSettings given = GivenTransportSettings();
  return !given.initial_rate && !given.rate_min;
}

}  // namespace longhaul
