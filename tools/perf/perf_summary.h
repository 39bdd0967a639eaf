// The longhaul-perf client's arithmetic and report building, apart from its sockets and
// clocks (tools/perf/perf_client.cc does the I/O): interval samples from the streams'
// cumulative counters, and the end-of-test summary from what each stream's sender and
// receiver reported (their JSON summaries, docs/perf.md), as iperf3-like text lines and
// as the "end" object of the JSON report. Pure functions and value types; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "transport/core/config.h"
#include "transport/core/stats.h"

namespace longhaul::perf {

// One interval of one stream (or the sum over the streams); times in seconds since
// the test began.
struct IntervalSample {
  double start = 0, end = 0;
  uint64_t bytes = 0;
  uint64_t retransmits = 0;
  uint64_t fec_recovered = 0;
  double rtt_ms = 0;
};

// A stream's cumulative counters when an interval ends (the sending side's bytes
// acknowledged or the receiving side's bytes delivered; retransmissions and FEC
// recoveries from whichever side counts them; the smoothed RTT).
struct StreamCounters {
  uint64_t bytes = 0;
  uint64_t retransmits = 0;
  uint64_t fec_recovered = 0;
  double rtt_ms = 0;
};

// iperf3's "intervals": per-stream differences of the cumulative counters, and their sums
// (the RTT of a sum is the streams' mean).
class IntervalLog {
 public:
  explicit IntervalLog(size_t streams) : last_(streams), streams_(streams) {}

  // Records [start_s, end_s] from each stream's counters (one per stream, in order);
  // returns the text lines: one per stream, then a SUM line when there are several.
  std::vector<std::string> Record(double start_s, double end_s,
                                  const std::vector<StreamCounters>& counters);

  const std::vector<IntervalSample>& sums() const { return sums_; }
  const std::vector<IntervalSample>& stream(size_t i) const { return streams_[i]; }
  // The "intervals" array of the JSON report; `sender`: this side sends.
  nlohmann::json ToJson(bool sender) const;

 private:
  std::vector<StreamCounters> last_;
  std::vector<std::vector<IntervalSample>> streams_;
  std::vector<IntervalSample> sums_;
};

// One interval as iperf3 writes it (rtt in microseconds).
nlohmann::json IntervalJson(int socket, const IntervalSample& s, bool sender);
// "[ID] a-b sec  TRANSFER  BITRATE" followed by `tail`.
std::string IntervalLine(const std::string& id, double a, double b, uint64_t bytes,
                         const std::string& tail);

// What one stream reported at the end of the test.
struct StreamOutcome {
  bool complete = false;          // every result arrived
  std::string error;              // empty: none
  nlohmann::json sender_summary;  // the sending side's summary (bytes_acked, seconds, stats, debug)
  nlohmann::json receiver_result;  // the receiving side's result (bytes_verified, mct, ...)
};

struct SummaryOptions {
  bool verify = true;
  bool messages = false;  // the messages workload: completion times
  uint64_t message_size = 0;
  double rate_bps = 0;        // the requested rate (the ideal completion time's)
  TransportConfig effective;  // the connection's settings (segment, datagram size)
  bool timed_out = false;
  double timeout_s = 0;
  // Text only: lines printed after the transport lines, before the errors and the
  // verdict (the client's per-engine lines, perf_engines.h).
  std::vector<std::string> engine_lines;
};

// The end-of-test figures over all streams.
struct ClientSummary {
  bool ok = true;                   // no error, every stream complete and every byte there
  std::vector<std::string> errors;  // in order: timeout, then per stream
  uint64_t sent_bytes = 0, recv_bytes = 0, retx_total = 0, corrupt = 0, fec_total = 0;
  double sent_secs = 0, recv_secs = 0;                   // the longest stream's
  std::vector<std::string> corruption;                   // "stream N: ..." from the receivers
  nlohmann::json end_streams = nlohmann::json::array();  // iperf3's end.streams
  ConnectionStats snd_total, rcv_total;                  // sums over the streams
  double min_rtt_ms = 0, srtt_ms = 0, rttvar_ms = 0;     // the largest over the senders
  std::vector<std::string> lines;                        // per stream: sender, receiver
  nlohmann::json mct;  // messages workload: combined completion times (else null)

  // Exit status 0: no error and nothing corrupt.
  bool passed() const { return ok && corrupt == 0; }
};

ClientSummary Summarize(const std::vector<StreamOutcome>& streams, const SummaryOptions& options);

// The text summary: the separator, the per-stream lines (and SUM lines with several
// streams), payload, transport and completion-time lines, options.engine_lines, errors
// and "Done."/"FAILED.".
std::string SummaryText(const ClientSummary& s, const SummaryOptions& options, size_t streams);

// The JSON report's "end" object without what this side measured of itself (CPU,
// driver and protection counters, parameters, which the caller adds): streams, the sums,
// completion times, and "longhaul" with loss, retransmission, fec, rtt, integrity, the
// summed stats and the errors.
nlohmann::json SummaryEndJson(const ClientSummary& s, const SummaryOptions& options);

}  // namespace longhaul::perf
