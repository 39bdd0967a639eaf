// Scenario runner: real longhaul::Connection pairs over the simulator's dumbbell, with a
// workload, payload verification and a result summary. Shared by longhaul-sim and the
// sim-tier tests so both measure the same thing.
//
// Nodes (ScenarioOptions::nodes): by default each side is a bare Connection whose ids
// and windows are set up front (no handshake, CRC32C packets). With NodeKind::kEndpoint
// each side is a whole endpoint::SansIoEndpoint instead (scenario_endpoint.h): the left
// one connects at the pair's start (Hello, Retry, Accept, Confirm over the simulated
// link, so handshake loss and RTT count), the right one listens and accepts, and the data
// then flows through the endpoint's routing and, with EndpointSecurity other than kNone,
// its packet protection (AEAD), under keys derived from the seed. Every pair has its own
// two endpoints; the workload starts when the client is connected.
//
// Pair i is a sender (left, its data flows forward over the bottleneck) and a receiver
// (right); pair i starts its workload at i x stagger. Workloads:
//   bulk      the sender streams `bytes` as consecutive messages of `chunk` bytes, keeping
//             enough submitted to fill its window; goodput is measured.
//   messages  open loop: message k (of `messages`) is submitted at k x size x 8 / (rate x
//             load / connections); message completion time (MCT) = the receiver's
//             kReceiveComplete time minus the submission time.
// Every message carries a pattern that depends on (pair, message index, offset); the
// receiver checks every byte, the order and the count, so misplaced, corrupted, lost or
// repeated data shows as delivered_intact = false. Send buffers are zero-copy views into
// one shared read-only pattern; receive buffers are a recycled pool of posted buffers
// (transport-owned memory is verified and handed back with ReturnBuffer), so memory stays
// bounded by the windows, not by the transfer size.
//
// Every run is bounded by max_virtual_time and, given a wall clock (wall_seconds), by
// max_wall_time, and reports which bound (if any) stopped it. The runner reads no clock
// itself: the wall and CPU times it reports (wall_s, cpu_s) are read from the clocks the
// caller passes in (the tools pass MonotonicSeconds and ProcessCpuSeconds of
// transport/base/clock.h); without them they are 0. With sample_interval > 0 the result
// also has a time series: per interval, each connection's delivered rate, losses and
// congestion-controller state, and the bottleneck's mean queue (for "reaches 95% within
// 20 RTTs", convergence and rate-step tests). Thread-safety: RunScenario is reentrant (no
// shared state).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/stats.h"
#include "transport/sim/link_model.h"
#include "transport/sim/link_spec.h"
#include "transport/sim/simulator.h"

namespace longhaul::sim {

enum class Workload { kBulk, kMessages };
const char* WorkloadName(Workload w);

// What each side of a pair is (see above).
enum class NodeKind { kConnection, kEndpoint };
const char* NodeKindName(NodeKind k);  // "connection", "endpoint"

// Packet protection of endpoint nodes, keys derived deterministically from the seed:
//   kNone        plaintext packets with a CRC32C (SecurityConfig::Insecure)
//   kPsk         a pre-shared key (Noise NNpsk0)
//   kStaticKeys  both sides' X25519 static keys (Noise IK)
enum class EndpointSecurity { kNone, kPsk, kStaticKeys };
const char* EndpointSecurityName(EndpointSecurity s);  // "none", "psk", "keys"

struct ScenarioOptions {
  LinkSpec link;
  LinkSchedule schedule;
  LinkOverrides reverse;            // the reverse (ACK) direction's differences
  TransportConfig sender_config;    // left endpoints (must Validate())
  TransportConfig receiver_config;  // right endpoints
  Workload workload = Workload::kBulk;
  // bulk
  ByteCount bytes = ByteCount{1} << 30;  // per connection
  ByteCount chunk = ByteCount{16} << 20;  // message size the stream is cut into
  // Receive buffers the receiver keeps posted (each the size of a message).
  uint64_t posted_receives = 4;
  // messages
  ByteCount message_size = 64 * 1024;
  uint64_t messages = 1000;  // per connection
  double load = 0.5;         // aggregate offered load as a fraction of the link rate
  // topology and run
  uint64_t seed = 1;
  int connections = 1;
  Duration stagger;  // pair i starts at i x stagger
  Duration max_virtual_time = Duration::Seconds(600);
  Duration max_wall_time = Duration::Seconds(600);  // applies only with wall_seconds
  // The caller's clocks, in seconds from any origin: a wall clock (bounds the run by
  // max_wall_time; wall_s) and the process's CPU time (cpu_s). Empty: no wall-time
  // bound, and wall_s / cpu_s (and the rates per second of them) are 0.
  std::function<double()> wall_seconds;
  std::function<double()> cpu_seconds;
  // Time series: one IntervalSample per interval (zero: none).
  Duration sample_interval;
  // false: payload-free run (TransportConfig::elide_payload on both ends): datagrams carry
  // headers, frames and 8-byte stamps of the pattern every 4 KiB instead of the payload,
  // the link charges the full sizes, and the receiver checks order, sizes and each
  // message's stamp digest instead of every byte. Same protocol behaviour, a fraction of
  // the memory traffic.
  bool payload = true;
  // Bare connections (the default) or whole endpoints; endpoints need payload = true and
  // one flow (TransportConfig::flows = 1). InvalidArgument otherwise, and for a security
  // other than kNone with connection nodes.
  NodeKind nodes = NodeKind::kConnection;
  EndpointSecurity security = EndpointSecurity::kNone;
};

// One endpoint's figures (endpoint nodes; all zero with connection nodes).
struct EndpointSideStats {
  // Packet protection of its connection (zero without protection).
  uint64_t packets_sealed = 0;
  uint64_t packets_opened = 0;
  uint64_t auth_failures = 0;  // sealed packets that did not open (tampered, forged)
  uint64_t replays = 0;
  // The endpoint's handshake and routing counters (EndpointCounters).
  uint64_t hellos_received = 0;
  uint64_t retries_sent = 0;
  uint64_t connections_accepted = 0;
  uint64_t handshake_errors = 0;
  uint64_t undecodable = 0;  // corrupted or foreign datagrams
  uint64_t unknown_connection = 0;
};

// One connection during one interval of the time series.
struct ConnectionSample {
  double goodput_bps = 0;        // new message bytes the receiver got x 8 / interval
  uint64_t packets_sent = 0;     // sender datagrams in the interval
  uint64_t packets_lost = 0;     // declared lost by the sender in the interval
  // The sender's state at the end of the interval.
  std::string cc_mode;
  double cc_bandwidth_bps = 0;   // the controller's bottleneck-bandwidth estimate
  double pacing_rate_bps = 0;
  ByteCount cwnd = 0;
  ByteCount bytes_in_flight = 0;
  double srtt_s = 0;
};

struct IntervalSample {
  double t_s = 0;                  // end of the interval (virtual time)
  double goodput_bps = 0;          // all connections
  double avg_queue_bytes = 0;      // forward bottleneck, time-weighted over the interval
  uint64_t offered = 0;            // forward bottleneck datagrams in the interval
  uint64_t dropped_queue = 0;
  uint64_t dropped_loss = 0;
  uint64_t ce_marked = 0;
  std::vector<ConnectionSample> connections;
};

struct MessageTimes {
  uint64_t count = 0;
  double ideal_s = 0;  // rtt/2 + (size + per-packet overheads) serialised at the link rate
  double mean_s = 0;
  double p50_s = 0;
  double p99_s = 0;
  double p999_s = 0;
  double max_s = 0;
};

// One delivered message (ScenarioResult::deliveries).
struct DeliveryRecord {
  int connection = 0;
  uint64_t index = 0;     // the message's number in its connection's workload
  ByteCount size = 0;
  double submit_s = 0;    // messages workload: when it was submitted (bulk: 0)
  double done_s = 0;      // when the receiver had all of it
};

// A time window of a run (for example one phase of a link schedule).
struct WindowSummary {
  double from_s = 0;
  double to_s = 0;
  // Message completion times of the messages submitted in [from_s, to_s) (messages
  // workload; ideal_s as given to SummarizeWindow).
  MessageTimes mct;
  // Bytes of the messages completed in [from_s, to_s) x 8 / (to_s - from_s): for bulk
  // transfers cut into chunks much shorter than the window.
  double goodput_bps = 0;
};

struct ConnectionResult {
  ByteCount bytes_expected = 0;
  ByteCount bytes_delivered = 0;    // verified message bytes
  uint64_t messages_delivered = 0;
  bool complete = false;            // every expected message arrived
  bool delivered_intact = false;    // complete, in order, once each, every byte verified
  double goodput_bps = 0;           // bytes_delivered x 8 / (last delivery - first send)
  Time start;
  Time first_send = Time::Infinite();
  Time last_delivery;
  ConnectionStats sender;
  ConnectionStats receiver;
  ConnectionDebugState sender_state;  // the sender's state when the run stopped
  std::string error;                // first problem seen (verification, close status)
  // Endpoint nodes: whether the client's handshake completed, and the virtual time from
  // its Connect (at `start`) to kConnected; `first_send` is then its first datagram
  // after the handshake, so goodput is the data phase's, comparable with connection nodes.
  bool connected = false;
  double handshake_s = 0;
  EndpointSideStats client;          // the sender's endpoint
  EndpointSideStats server;          // the receiver's
};

struct ScenarioResult {
  std::string stop_reason;          // "done", "max_virtual_time", "max_wall_time", "idle"
  bool completed = false;           // every connection delivered everything
  bool delivered_intact = false;    // completed and every connection intact
  double goodput_bps = 0;           // all payload bits / (last delivery - first send)
  double link_rate_bps = 0;
  ByteCount bytes_delivered = 0;
  uint64_t packets_sent = 0;        // by all endpoints (ConnectionStats::packets_sent)
  uint64_t packets_lost = 0;        // declared lost by the senders
  uint64_t packets_retransmitted = 0;
  double virtual_s = 0;             // simulated time at the stop
  double transfer_s = 0;            // first send to last delivery
  double wall_s = 0;                // on ScenarioOptions::wall_seconds (0 without it)
  double cpu_s = 0;                 // process CPU time of the run (the machine may be shared;
                                    // on ScenarioOptions::cpu_seconds, 0 without it)
  uint64_t sim_packets = 0;         // datagrams offered to the link, both directions
  double sim_packets_per_wall_s = 0;
  double sim_packets_per_cpu_s = 0;
  bool has_message_times = false;
  MessageTimes mct;
  LinkCounters forward;             // sender -> receiver direction
  LinkCounters reverse;
  ConnectionStats sender_total;     // summed over connections
  ConnectionStats receiver_total;
  std::vector<ConnectionResult> connections;
  double jain_fairness = 1;         // of per-connection goodput
  double sample_interval_s = 0;
  std::vector<IntervalSample> series;  // with ScenarioOptions::sample_interval
  std::vector<DeliveryRecord> deliveries;  // every delivered message, in delivery order
  SimulatorCounters sim;
  uint64_t trace_hash = 0;
  std::string error;                // first connection error, if any
  NodeKind nodes = NodeKind::kConnection;  // as run
  EndpointSecurity security = EndpointSecurity::kNone;
  // Endpoint nodes: the longest and the mean handshake of the connected connections
  // (virtual seconds from Connect to kConnected), and the endpoints' figures summed.
  double handshake_max_s = 0;
  double handshake_mean_s = 0;
  EndpointSideStats client_total;
  EndpointSideStats server_total;
};

// Runs one scenario. InvalidArgument for bad options (config, sizes, counts); otherwise
// the result, whether or not the transfer completed (see stop_reason / completed).
absl::StatusOr<ScenarioResult> RunScenario(const ScenarioOptions& options);

// The ideal completion time of one message of the run's size on `link`: one-way delay
// plus the message and its packets' overheads serialised at the link rate.
double IdealMessageTime(const ScenarioOptions& options, const LinkSpec& link);

// The messages and deliveries of `result` within [from_s, to_s); `ideal_s` is copied
// into the summary's MessageTimes.
WindowSummary SummarizeWindow(const ScenarioResult& result, double from_s, double to_s,
                              double ideal_s);

// One phase of a run with a link schedule: phase 0 is the link before the first step,
// phase i the link after step i-1. The window leaves out `settle` after the phase's start
// (the time an adaptive transport is given to follow the change) and ends at the next
// step (the last phase: at the last delivery).
struct PhaseSummary {
  LinkSpec link;          // the link in force during the phase
  double start_s = 0;     // when the phase's link took effect
  WindowSummary window;   // [start_s + settle, end)
};

// The run's phases (one, without a schedule). `settle_rtts`: the settle time in round
// trips of the phase's link. InvalidArgument where the schedule does not resolve.
absl::StatusOr<std::vector<PhaseSummary>> SummarizePhases(const ScenarioOptions& options,
                                                          const ScenarioResult& result,
                                                          double settle_rtts);

// Jain's fairness index of `rates`: (sum x)^2 / (n sum x^2), 1 = equal; 1 for no rates or
// all zero.
double JainFairness(const std::vector<double>& rates);

// Adds every counter of `s` into `into`.
void AddConnectionStats(ConnectionStats* into, const ConnectionStats& s);

}  // namespace longhaul::sim
