#include "tools/perf/perf_format.h"

#include "absl/strings/str_format.h"

namespace longhaul::perf {
namespace {

std::string Scaled(double v, double base, const char* const* units, const char* suffix) {
  int u = 0;
  while (v >= base && u < 4) {
    v /= base;
    ++u;
  }
  if (v < 9.995) return absl::StrFormat("%4.2f %s%s", v, units[u], suffix);
  if (v < 99.95) return absl::StrFormat("%4.1f %s%s", v, units[u], suffix);
  return absl::StrFormat("%4.0f %s%s", v, units[u], suffix);
}

}  // namespace

std::string FormatTransfer(uint64_t bytes) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T"};
  return Scaled(static_cast<double>(bytes), 1024, kUnits, "Bytes");
}

std::string FormatBitrate(double bps) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T"};
  return Scaled(bps, 1000, kUnits, "bits/sec");
}

std::string UcLine(const EndpointOptions& o, const EndpointStats& s) {
  if (o.datapath != Datapath::kVerbs || o.verbs.qp_type != QpType::kUc) return "";
  std::string per_lane;
  for (uint32_t i = 0; i < o.verbs.uc_lanes && i < s.uc_lane_chunks_sent.size(); ++i) {
    per_lane += absl::StrFormat("%s%d", i == 0 ? "" : "/", s.uc_lane_chunks_sent[i]);
  }
  return absl::StrFormat(
      "verbs uc: %d lane(s) opened, %d chunks sent (%s; per lane %s), %d received, %d stale "
      "completions, %d given up, %d grant waits, chunk halved %d and doubled %d times, %d lanes "
      "failed (%d stalled), %d replaced, %d lane errors, %d late duplicates written; zero copy: %s of "
      "payload gathered from %d registered region(s), %s copied; placement: %d chunks (%s) sent "
      "direct, %d buffers advertised (%d withdrawn), %d direct chunks received (%s in place, "
      "%s copied), %d refused",
      s.uc_lanes_opened, s.uc_chunks_sent, FormatTransfer(s.uc_chunk_bytes_sent), per_lane,
      s.uc_chunks_received, s.uc_stale_completions, s.uc_chunks_given_up, s.uc_grant_waits,
      s.uc_chunk_shrinks, s.uc_chunk_grows, s.uc_lanes_failed, s.uc_lanes_stalled, s.uc_lanes_replaced,
      s.uc_lane_errors, s.uc_replays, FormatTransfer(s.uc_payload_bytes_referenced),
      s.memory_regions, FormatTransfer(s.uc_payload_bytes_copied), s.uc_direct_chunks_sent,
      FormatTransfer(s.uc_direct_bytes_sent), s.uc_placements_advertised,
      s.uc_placements_withdrawn, s.uc_direct_chunks_received, FormatTransfer(s.uc_direct_bytes_in_place),
      FormatTransfer(s.uc_direct_bytes_copied), s.uc_direct_chunks_refused);
}

}  // namespace longhaul::perf
