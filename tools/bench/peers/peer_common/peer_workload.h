// The workloads of longhaul-perf, run over any reliable byte stream, for the comparison
// peers of tools/bench/wan-compare (docs/comparison.md): longhaul-tcp-peer runs them over
// one TCP connection, longhaul-udt-peer over one UDT connection.
//
//   bulk      keep the stream full for --time seconds (after --omit seconds)
//   messages  open-loop messages: message k is submitted at k x SIZE x 8 / (rate x load)
//             after the start, whether or not earlier ones are done (the same schedule
//             as longhaul-perf --workload=messages)
//   transfer  --bytes as fast as possible; completion is timed from the client's first
//             connect() to the last byte delivered at the receiver (cold start included)
//
// Definitions shared with longhaul-perf (docs/perf.md), so the mct_* fields mean the same:
//   - a message's completion time runs from its submission (the sender stamps the system
//     clock into the message's 16-byte header when it hands the message over) to the
//     arrival of its last byte at the receiver (the receiver reads the same clock: both
//     ends run on one host, in two network namespaces);
//   - percentiles interpolate linearly between order statistics (q x (n - 1));
//   - mct_ideal_s = one-way delay (the sender's minimum RTT / 2) + serialisation of the
//     message and its per-packet headers at the link rate.
//
// Wire protocol on the stream (both ends are this code, on one host: fields are in host
// byte order):
//   client -> server  Hello (kHelloBytes), then frames: u64 total length (>= 16, header
//                     included), i64 submission time (CLOCK_REALTIME ns), payload;
//                     a frame of total length 0 ends the data
//   server -> client  u32 length + JSON text: the receiver's result
//
// Thread-safety: RunClient/RunServer own their stream; the sender uses one scheduler and
// one writer thread internally (messages), joined before returning.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace longhaul::bench {

// A reliable, ordered, bidirectional byte stream (a connected TCP or UDT socket).
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Blocking calls give up (DeadlineExceeded) once CLOCK_MONOTONIC passes this (ns);
  // 0: no deadline.
  void set_deadline_ns(int64_t deadline_ns) { deadline_ns_ = deadline_ns; }
  int64_t deadline_ns() const { return deadline_ns_; }
  // Sends all n bytes, blocking. An error when the stream failed or the deadline passed.
  // `more`: more bytes follow at once (a hint to coalesce them into one packet, like
  // MSG_MORE).
  virtual absl::Status SendAll(const uint8_t* data, size_t n, bool more) = 0;
  // Receives 1..n bytes, blocking for at most about one second: OK(0) when the peer
  // closed the stream, DeadlineExceeded when nothing arrived in that time (call again),
  // another error when the stream failed.
  virtual absl::StatusOr<size_t> RecvSome(uint8_t* data, size_t n) = 0;
  // This side's transport counters for the JSON (retransmissions, RTT, windows, ...).
  virtual nlohmann::json Stats() = 0;
  // Sender side: packets retransmitted so far (-1: unknown), minimum (or, when the
  // transport keeps no minimum, smoothed) RTT in seconds (0: unknown), and the header
  // bytes each data packet carries besides its payload (IP and transport headers).
  virtual int64_t Retransmissions() = 0;
  virtual double MinRttSeconds() = 0;
  virtual int64_t PayloadPerPacket() = 0;
  virtual int64_t HeaderBytesPerPacket() = 0;
  // Bytes handed to the transport and not yet acknowledged by the peer (the messages
  // workload counts them as outstanding, as longhaul-perf does); 0 if unknown.
  virtual int64_t UnackedBytes() = 0;

 private:
  int64_t deadline_ns_ = 0;
};

enum class Workload { kBulk, kMessages, kTransfer };
absl::StatusOr<Workload> ParseWorkload(const std::string& name);
std::string WorkloadName(Workload w);

struct WorkloadOptions {
  Workload workload = Workload::kBulk;
  uint64_t message_size = 1 << 20;  // bytes per frame (bulk, transfer) or per message
  uint64_t bytes = 0;               // transfer: bytes; messages: stop after this many
  int64_t time_ns = 10'000'000'000;  // bulk: sending time; messages: submission time bound
  int64_t omit_ns = 0;              // bulk: seconds sent before the measured --time
  double rate_bps = 1e9;            // link rate (messages schedule, ideal completion)
  double load = 0.5;                // messages: offered load as a fraction of rate_bps
  int64_t connect_start_realtime_ns = 0;  // client: just before connect()
  int64_t connect_done_realtime_ns = 0;   // client: connect() returned
  int64_t timeout_ns = 0;           // abort the test after this long (0: derived)
};

// The options from command-line text, validated (both peers' flags mean the same):
// workload bulk|messages|transfer, sizes like 4MiB, durations like 30 or 500ms, rates
// like 1gbit; `messages` > 0 sets bytes = messages x message_size. Errors name the flag.
struct WorkloadFlags {
  // time "": 10 s (messages with a count: no time bound).
  std::string workload = "bulk", message_size = "1MiB", bytes = "", time = "", omit = "0";
  std::string rate = "1gbit", timeout = "0";
  double load = 0.5;
  uint64_t messages = 0;
};
absl::StatusOr<WorkloadOptions> WorkloadOptionsFromFlags(const WorkloadFlags& f);

// Client side (the data sender): sends the hello and the workload on `stream`, then waits
// for the receiver's result. Returns the combined result JSON (iperf3-shaped: start,
// intervals, end.sum_sent, end.sum_received, and mct_* / completion_s where they apply).
absl::StatusOr<nlohmann::json> RunClient(ByteStream& stream, const WorkloadOptions& options);

// Server side (the receiver): reads the hello and the data, answers the result. Returns
// the result it sent. `deadline_s` bounds the whole test.
absl::StatusOr<nlohmann::json> RunServer(ByteStream& stream, double deadline_s);

// Completion-time summary exactly as longhaul-perf computes it (tools/perf/perf_stream.cc),
// plus "mct_cdf": [[q, seconds], ...] at q = 0, 0.01, ..., 1 and 0.999 (for plots).
nlohmann::json SummarizeCompletionTimes(std::vector<double> samples_s);

}  // namespace longhaul::bench
