#include "transport/sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/percentile.h"
#include "transport/base/rng.h"
#include "transport/base/status.h"
#include "transport/core/connection.h"
#include "transport/sim/scenario_apps.h"
#include "transport/sim/scenario_endpoint.h"

namespace longhaul::sim {
namespace {

using internal::App;
using internal::HugeBuffer;
using internal::MakePattern;
using internal::PairState;
using internal::ReceiverApp;
using internal::ScenarioSide;
using internal::SenderApp;

// Handshake datagrams (a Hello is padded to 1200 bytes) must fit the simulator's buffers
// whatever the segment.
constexpr size_t kMinEndpointDatagram = 2048;

MessageTimes Percentiles(std::vector<double> v) {
  MessageTimes t;
  std::sort(v.begin(), v.end());
  t.count = v.size();
  if (v.empty()) return t;
  double total = 0;
  for (double x : v) total += x;
  t.mean_s = total / static_cast<double>(v.size());
  t.p50_s = NearestRankPercentile(v, 0.5);
  t.p99_s = NearestRankPercentile(v, 0.99);
  t.p999_s = NearestRankPercentile(v, 0.999);
  t.max_s = v.back();
  return t;
}

// A Connection plus its application, seen by the simulator as one node.
class ConnectionNode final : public SimNode, public ScenarioSide {
 public:
  ConnectionNode(const TransportConfig& config, ConnectionIds ids, uint64_t seed, App* app,
                 PairState* pair, bool is_sender)
      : conn_(config, ids, seed, Time::Zero()), app_(app), pair_(pair), sender_(is_sender) {}

  Connection& conn() { return conn_; }
  SimNode* node() override { return this; }
  const Connection* connection() const override { return &conn_; }

  void OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn) override {
    conn_.OnDatagram(now, d, ecn);
    Drain(now);
  }
  void OnTimeout(Time now) override {
    if (app_->NextWake() <= now) app_->OnWake(now, conn_);
    if (conn_.NextTimeout() <= now) conn_.OnTimeout(now);
    Drain(now);
  }
  size_t PollTransmit(Time now, uint8_t* buf, size_t cap, TransmitInfo* info) override {
    size_t n = conn_.PollTransmit(now, buf, cap, info);
    // Sending the CLOSE finishes the close: its events (kClosed, cancelled sends) must
    // reach the application now, as no timer will wake this node again.
    if (conn_.closed()) Drain(now);
    if (n > 0 && sender_ && pair_->result.first_send.IsInfinite()) {
      pair_->result.first_send = now;
    }
    return n;
  }
  Time NextTimeout() const override { return std::min(conn_.NextTimeout(), app_->NextWake()); }

 private:
  void Drain(Time now) {
    Event ev;
    while (conn_.PollEvent(&ev)) {
      app_->OnEvent(now, conn_, ev);
      ev = Event();
    }
  }
  Connection conn_;
  App* app_;
  PairState* pair_;
  bool sender_;
};

// RunScenario's steps.

absl::Status CheckOptions(const ScenarioOptions& opt) {
  if (absl::Status s = opt.sender_config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sender config: ", s.message()));
  }
  if (absl::Status s = opt.receiver_config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("receiver config: ", s.message()));
  }
  if (opt.link.rate.IsZero()) return absl::InvalidArgumentError("link rate must be > 0");
  if (opt.connections < 1 || opt.connections > 4096) {
    return absl::InvalidArgumentError("connections must be in [1, 4096]");
  }
  if (opt.workload == Workload::kBulk && (opt.bytes == 0 || opt.chunk == 0)) {
    return absl::InvalidArgumentError("bulk workload needs bytes > 0 and chunk > 0");
  }
  if (opt.workload == Workload::kMessages) {
    if (opt.messages == 0) return absl::InvalidArgumentError("messages must be > 0");
    if (!(opt.load > 0 && opt.load <= 100)) {
      return absl::InvalidArgumentError("load must be in (0, 100] (fraction of the link rate)");
    }
    if (opt.message_size > (ByteCount{4} << 30)) {
      return absl::InvalidArgumentError("message_size must be <= 4GiB");
    }
  }
  if (opt.nodes == NodeKind::kConnection && opt.security != EndpointSecurity::kNone) {
    return absl::InvalidArgumentError(
        "packet protection needs endpoint nodes (bare connections are not sealed)");
  }
  if (opt.nodes == NodeKind::kEndpoint && !opt.payload) {
    return absl::InvalidArgumentError(
        "endpoint nodes carry whole payloads: payload-free runs use connection nodes");
  }
  if (opt.nodes == NodeKind::kEndpoint &&
      (opt.sender_config.flows != 1 || opt.receiver_config.flows != 1)) {
    return absl::InvalidArgumentError("endpoint nodes run one flow per connection (flows=1)");
  }
  LH_ASSIGN_OR_RETURN(std::vector<LinkSpec> steps, ResolveLinkSchedule(opt.link, opt.schedule));
  steps.push_back(opt.link);
  for (const LinkSpec& spec : steps) {
    if (absl::StatusOr<LinkSpec> r = ApplyLinkOverrides(spec, opt.reverse); !r.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("reverse link: ", r.status().message()));
    }
  }
  return absl::OkStatus();
}

// Per-pair message plan; *max_message is the largest message of any pair.
std::vector<std::unique_ptr<PairState>> PlanPairs(const ScenarioOptions& opt, int* finished,
                                                  ByteCount* max_message) {
  std::vector<std::unique_ptr<PairState>> pairs;
  for (int i = 0; i < opt.connections; ++i) {
    auto p = std::make_unique<PairState>();
    p->index = i;
    p->finished_pairs = finished;
    p->start = Time::Zero() + opt.stagger * i;
    p->result.start = p->start;
    if (opt.workload == Workload::kBulk) {
      ByteCount chunk = std::min(opt.chunk, opt.bytes);
      p->total_messages = (opt.bytes + chunk - 1) / chunk;
      p->sizes.assign(p->total_messages, chunk);
      p->sizes.back() = opt.bytes - chunk * (p->total_messages - 1);
      p->result.bytes_expected = opt.bytes;
      *max_message = std::max(*max_message, chunk);
    } else {
      p->total_messages = opt.messages;
      p->sizes.assign(opt.messages, opt.message_size);
      p->submit_times.assign(opt.messages, Time::Zero());
      p->mct_s.reserve(opt.messages);
      p->result.bytes_expected = opt.message_size * opt.messages;
      *max_message = std::max(*max_message, opt.message_size);
    }
    p->sent_ids.assign(p->total_messages, 0);
    pairs.push_back(std::move(p));
  }
  return pairs;
}

// Open-loop interval per connection: the aggregate offered load is `load` x rate (zero
// for bulk).
Duration MessageInterval(const ScenarioOptions& opt) {
  Duration interval;
  if (opt.workload == Workload::kMessages) {
    const double per_conn_bps = opt.link.rate.bps() * opt.load / opt.connections;
    interval = Duration::Nanoseconds(static_cast<int64_t>(
        std::llround(static_cast<double>(opt.message_size) * 8e9 / per_conn_bps)));
  }
  return interval;
}

SimulatorOptions MakeSimulatorOptions(const ScenarioOptions& opt) {
  SimulatorOptions sim_opt;
  sim_opt.link = opt.link;
  sim_opt.schedule = opt.schedule;
  sim_opt.reverse = opt.reverse;
  sim_opt.seed = opt.seed;
  sim_opt.max_datagram =
      std::max(opt.sender_config.MaxDatagramSize(), opt.receiver_config.MaxDatagramSize());
  if (opt.nodes == NodeKind::kEndpoint) {
    sim_opt.max_datagram = std::max(sim_opt.max_datagram, kMinEndpointDatagram);
  }
  // Payload-free datagrams are mostly headers and stamps: carry them in small slots.
  if (!opt.payload) sim_opt.small_datagram = 256;
  sim_opt.wall_seconds = opt.wall_seconds;
  return sim_opt;
}

// The apps and nodes of every pair: nodes[2i] is pair i's sender, nodes[2i + 1] its
// receiver.
struct Topology {
  std::vector<std::unique_ptr<SenderApp>> senders;
  std::vector<std::unique_ptr<ReceiverApp>> receivers;
  std::vector<std::unique_ptr<ScenarioSide>> nodes;
};

// Builds every pair's apps and nodes (bare connections or endpoints) and adds them to the
// simulator. Errors: the endpoints' (security settings, listen).
absl::Status BuildTopology(const ScenarioOptions& opt,
                           const std::vector<std::unique_ptr<PairState>>& pairs,
                           const uint8_t* pattern, Duration interval, Simulator* sim,
                           Topology* t) {
  Rng seeds(opt.seed);
  for (int i = 0; i < opt.connections; ++i) {
    PairState* p = pairs[i].get();
    t->senders.push_back(std::make_unique<SenderApp>(opt, p, pattern, interval));
    t->receivers.push_back(std::make_unique<ReceiverApp>(opt, p, pattern));
    const uint64_t left_seed = seeds.Next(), right_seed = seeds.Next();
    if (opt.nodes == NodeKind::kEndpoint) {
      LH_ASSIGN_OR_RETURN(internal::EndpointPair ep,
                          internal::MakeEndpointPair(opt, p, t->senders.back().get(),
                                                     t->receivers.back().get(), left_seed,
                                                     right_seed));
      t->nodes.push_back(std::move(ep.client));
      t->nodes.push_back(std::move(ep.server));
    } else {
      ConnectionIds left_ids, right_ids;
      left_ids.local = 2 * static_cast<uint64_t>(i) + 1;
      left_ids.peer = 2 * static_cast<uint64_t>(i) + 2;
      left_ids.peer_recv_window = opt.receiver_config.recv_window;
      right_ids.local = left_ids.peer;
      right_ids.peer = left_ids.local;
      right_ids.peer_recv_window = opt.sender_config.recv_window;
      t->nodes.push_back(std::make_unique<ConnectionNode>(
          opt.sender_config, left_ids, left_seed, t->senders.back().get(), p, true));
      auto right = std::make_unique<ConnectionNode>(opt.receiver_config, right_ids, right_seed,
                                                    t->receivers.back().get(), p, false);
      t->receivers.back()->Start(right->conn());
      t->nodes.push_back(std::move(right));
    }
    sim->AddPair(t->nodes[2 * i]->node(), t->nodes[2 * i + 1]->node());
  }
  return absl::OkStatus();
}

// The time series: sampled at the first event at or after each interval boundary (events
// are microseconds apart while data flows, so the skew is negligible).
class SeriesSampler {
 public:
  SeriesSampler(Duration interval, int connections)
      : interval_(interval),
        next_sample_(interval > Duration::Zero() ? Time::Zero() + interval : Time::Infinite()),
        prev_(connections) {}

  // Takes the samples of every boundary up to the simulator's now.
  void CatchUp(const Simulator& sim, Topology& t) {
    while (sim.now() >= next_sample_) {
      Take(next_sample_, sim, t);
      next_sample_ += interval_;
    }
  }
  std::vector<IntervalSample> TakeSeries() { return std::move(series_); }

 private:
  struct Prev {
    ByteCount delivered = 0;
    uint64_t sent = 0, lost = 0;
  };

  void Take(Time at, const Simulator& sim, Topology& t) {
    IntervalSample x;
    x.t_s = at.seconds();
    const double secs = interval_.seconds();
    const Time now = sim.now();
    const LinkCounters& lc = sim.forward().counters();
    const double queue = sim.forward().QueueByteSeconds(now);
    x.avg_queue_bytes = (queue - queue_prev_) / secs;
    queue_prev_ = queue;
    x.offered = lc.offered - link_prev_.offered;
    x.dropped_queue = lc.dropped_queue - link_prev_.dropped_queue;
    x.dropped_loss = lc.dropped_loss - link_prev_.dropped_loss;
    x.ce_marked = lc.ce_marked - link_prev_.ce_marked;
    link_prev_ = lc;
    for (size_t i = 0; i < prev_.size(); ++i) {
      x.connections.push_back(SampleConnection(secs, t.nodes[2 * i]->connection(),
                                               t.nodes[2 * i + 1]->connection(), &prev_[i]));
      x.goodput_bps += x.connections.back().goodput_bps;
    }
    series_.push_back(std::move(x));
  }

  // A connection that does not exist yet (endpoint nodes during the handshake) has
  // zero counters and an empty state.
  static ConnectionSample SampleConnection(double secs, const Connection* snd,
                                           const Connection* rcv, Prev* prev) {
    ConnectionSample c;
    if (snd == nullptr || rcv == nullptr) {
      c.goodput_bps = 0;
      return c;
    }
    const ConnectionStats& ss = snd->stats();
    const ConnectionStats& rs = rcv->stats();
    c.goodput_bps = static_cast<double>(rs.data_bytes_received - prev->delivered) * 8 / secs;
    c.packets_sent = ss.packets_sent - prev->sent;
    c.packets_lost = ss.packets_lost - prev->lost;
    *prev = {rs.data_bytes_received, ss.packets_sent, ss.packets_lost};
    const ConnectionDebugState d = snd->debug_state();
    c.cc_mode = d.cc_mode;
    c.cc_bandwidth_bps = d.cc_bandwidth_estimate.bps();
    c.pacing_rate_bps = d.pacing_rate.bps();
    c.cwnd = d.congestion_window;
    c.bytes_in_flight = d.bytes_in_flight;
    c.srtt_s = d.srtt.seconds();
    return c;
  }

  const Duration interval_;
  Time next_sample_;
  std::vector<Prev> prev_;
  LinkCounters link_prev_;
  double queue_prev_ = 0;
  std::vector<IntervalSample> series_;
};

// The run's own figures: how it stopped, its times and the simulator's counters.
void SummarizeRun(const ScenarioOptions& opt, const Simulator& sim, StopReason reason,
                  double wall_s, double cpu_s, ScenarioResult* r) {
  r->cpu_s = cpu_s;
  r->stop_reason = StopReasonName(reason);
  r->link_rate_bps = opt.link.rate.bps();
  r->virtual_s = sim.now().seconds();
  r->wall_s = wall_s;
  r->forward = sim.forward().Finish(sim.now());
  r->reverse = sim.reverse().Finish(sim.now());
  r->sim_packets = r->forward.offered + r->reverse.offered;
  r->sim_packets_per_wall_s = wall_s > 0 ? static_cast<double>(r->sim_packets) / wall_s : 0;
  r->sim_packets_per_cpu_s = cpu_s > 0 ? static_cast<double>(r->sim_packets) / cpu_s : 0;
  r->sim = sim.counters();
  r->trace_hash = sim.trace_hash();
}

// Pair i's connection result, from its workload's record and its nodes' statistics (a
// connection that never existed, after a failed handshake, has none).
const ConnectionResult& FinishConnection(PairState* p, const ScenarioSide& snd,
                                         const ScenarioSide& rcv) {
  ConnectionResult& c = p->result;
  if (snd.connection() != nullptr) {
    c.sender = snd.connection()->stats();
    c.sender_state = snd.connection()->debug_state();
  }
  if (rcv.connection() != nullptr) c.receiver = rcv.connection()->stats();
  c.client = snd.endpoint_stats();
  c.server = rcv.endpoint_stats();
  c.delivered_intact = c.complete && c.error.empty();
  if (!c.first_send.IsInfinite() && c.last_delivery > c.first_send) {
    c.goodput_bps = static_cast<double>(c.bytes_delivered) * 8 /
                    (c.last_delivery - c.first_send).seconds();
  }
  return c;
}

void AddEndpointStats(EndpointSideStats* a, const EndpointSideStats& b) {
  a->packets_sealed += b.packets_sealed;
  a->packets_opened += b.packets_opened;
  a->auth_failures += b.auth_failures;
  a->replays += b.replays;
  a->hellos_received += b.hellos_received;
  a->retries_sent += b.retries_sent;
  a->connections_accepted += b.connections_accepted;
  a->handshake_errors += b.handshake_errors;
  a->undecodable += b.undecodable;
  a->unknown_connection += b.unknown_connection;
}

// Endpoint nodes: the handshakes' times and the endpoints' figures, summed.
void AggregateEndpoints(ScenarioResult* r) {
  double sum = 0;
  int connected = 0;
  for (const ConnectionResult& c : r->connections) {
    AddEndpointStats(&r->client_total, c.client);
    AddEndpointStats(&r->server_total, c.server);
    if (!c.connected) continue;
    ++connected;
    sum += c.handshake_s;
    r->handshake_max_s = std::max(r->handshake_max_s, c.handshake_s);
  }
  r->handshake_mean_s = connected > 0 ? sum / connected : 0;
}

// The connections' results and their totals, fairness, deliveries and message times.
void AggregateConnections(const ScenarioOptions& opt,
                          const std::vector<std::unique_ptr<PairState>>& pairs, Topology& t,
                          ScenarioResult* r) {
  r->completed = true;
  r->delivered_intact = true;
  Time first = Time::Infinite(), last = Time::Zero();
  std::vector<double> goodputs;
  std::vector<double> mct;
  for (int i = 0; i < opt.connections; ++i) {
    PairState* p = pairs[i].get();
    const ConnectionResult& c = FinishConnection(p, *t.nodes[2 * i], *t.nodes[2 * i + 1]);
    r->completed &= c.complete;
    r->delivered_intact &= c.delivered_intact;
    if (r->error.empty() && !c.error.empty()) {
      r->error = absl::StrCat("connection ", i, ": ", c.error);
    }
    r->bytes_delivered += c.bytes_delivered;
    first = std::min(first, c.first_send);
    if (c.messages_delivered > 0) last = std::max(last, c.last_delivery);
    AddConnectionStats(&r->sender_total, c.sender);
    AddConnectionStats(&r->receiver_total, c.receiver);
    goodputs.push_back(c.goodput_bps);
    mct.insert(mct.end(), p->mct_s.begin(), p->mct_s.end());
    r->deliveries.insert(r->deliveries.end(), p->deliveries.begin(), p->deliveries.end());
    r->connections.push_back(c);
  }
  r->packets_sent = r->sender_total.packets_sent + r->receiver_total.packets_sent;
  r->packets_lost = r->sender_total.packets_lost + r->receiver_total.packets_lost;
  r->packets_retransmitted =
      r->sender_total.packets_retransmitted + r->receiver_total.packets_retransmitted;
  if (!first.IsInfinite() && last > first) {
    r->transfer_s = (last - first).seconds();
    r->goodput_bps = static_cast<double>(r->bytes_delivered) * 8 / r->transfer_s;
  }
  r->jain_fairness = JainFairness(goodputs);
  std::sort(r->deliveries.begin(), r->deliveries.end(),
            [](const DeliveryRecord& a, const DeliveryRecord& b) { return a.done_s < b.done_s; });
  if (opt.workload == Workload::kMessages) {
    r->has_message_times = true;
    r->mct = Percentiles(std::move(mct));
    r->mct.ideal_s = IdealMessageTime(opt, opt.link);
  }
}

}  // namespace

const char* WorkloadName(Workload w) {
  return w == Workload::kBulk ? "bulk" : "messages";
}

const char* NodeKindName(NodeKind k) {
  return k == NodeKind::kConnection ? "connection" : "endpoint";
}

const char* EndpointSecurityName(EndpointSecurity s) {
  switch (s) {
    case EndpointSecurity::kNone:
      return "none";
    case EndpointSecurity::kPsk:
      return "psk";
    case EndpointSecurity::kStaticKeys:
      return "keys";
  }
  return "?";
}

double JainFairness(const std::vector<double>& rates) {
  double sum = 0, sum_sq = 0;
  for (double x : rates) {
    sum += x;
    sum_sq += x * x;
  }
  return sum_sq > 0 ? sum * sum / (static_cast<double>(rates.size()) * sum_sq) : 1;
}

void AddConnectionStats(ConnectionStats* a, const ConnectionStats& b) {
  a->packets_sent += b.packets_sent;
  a->data_packets_sent += b.data_packets_sent;
  a->packets_retransmitted += b.packets_retransmitted;
  a->packets_lost += b.packets_lost;
  a->spurious_losses += b.spurious_losses;
  a->tail_protect_packets += b.tail_protect_packets;
  a->pto_count += b.pto_count;
  a->bytes_sent += b.bytes_sent;
  a->data_bytes_sent += b.data_bytes_sent;
  a->data_bytes_retransmitted += b.data_bytes_retransmitted;
  a->messages_sent += b.messages_sent;
  a->acks_received += b.acks_received;
  a->flow_control_blocked += b.flow_control_blocked;
  a->packets_received += b.packets_received;
  a->bytes_received += b.bytes_received;
  a->data_bytes_received += b.data_bytes_received;
  a->duplicate_data_bytes += b.duplicate_data_bytes;
  a->messages_received += b.messages_received;
  a->acks_sent += b.acks_sent;
  a->checksum_failures += b.checksum_failures;
  a->malformed_packets += b.malformed_packets;
  a->ecn_ce_received += b.ecn_ce_received;
  a->fec_repair_packets_sent += b.fec_repair_packets_sent;
  a->fec_overhead_bytes += b.fec_overhead_bytes;
  a->fec_recovered_packets += b.fec_recovered_packets;
  a->fec_blocks_unrecoverable += b.fec_blocks_unrecoverable;
  a->driver_state_sent += b.driver_state_sent;
  a->driver_state_resent += b.driver_state_resent;
  a->driver_state_received += b.driver_state_received;
}

absl::StatusOr<ScenarioResult> RunScenario(const ScenarioOptions& given) {
  ScenarioOptions opt = given;
  opt.sender_config.elide_payload = opt.receiver_config.elide_payload = !given.payload;
  LH_RETURN_IF_ERROR(CheckOptions(opt));

  int finished = 0;
  ByteCount max_message = 0;
  std::vector<std::unique_ptr<PairState>> pairs = PlanPairs(opt, &finished, &max_message);
  HugeBuffer pattern = MakePattern(opt.seed, max_message);
  Simulator sim(MakeSimulatorOptions(opt));
  ScenarioResult r;
  Topology topology;
  LH_RETURN_IF_ERROR(
      BuildTopology(opt, pairs, pattern.get(), MessageInterval(opt), &sim, &topology));
  r.nodes = opt.nodes;
  r.security = opt.security;

  SeriesSampler sampler(opt.sample_interval, opt.connections);
  auto done = [&] {
    sampler.CatchUp(sim, topology);
    return finished == opt.connections;
  };
  // Wall and CPU time come from the caller's clocks (none given: no wall bound, zeros).
  const double wall_start = opt.wall_seconds ? opt.wall_seconds() : 0;
  const double cpu_start = opt.cpu_seconds ? opt.cpu_seconds() : 0;
  const StopReason reason =
      sim.Run(Time::Zero() + opt.max_virtual_time, done, opt.max_wall_time);
  const double wall_s = opt.wall_seconds ? opt.wall_seconds() - wall_start : 0;
  const double cpu_s = opt.cpu_seconds ? opt.cpu_seconds() - cpu_start : 0;

  SummarizeRun(opt, sim, reason, wall_s, cpu_s, &r);
  AggregateConnections(opt, pairs, topology, &r);
  if (opt.nodes == NodeKind::kEndpoint) AggregateEndpoints(&r);
  r.sample_interval_s = opt.sample_interval.seconds();
  r.series = sampler.TakeSeries();
  return r;
}

double IdealMessageTime(const ScenarioOptions& options, const LinkSpec& link) {
  const TransportConfig& c = options.sender_config;
  const ByteCount per_packet = c.MaxDatagramSize() - c.segment + link.overhead;
  const ByteCount packets =
      std::max<ByteCount>(1, (options.message_size + c.segment - 1) / c.segment);
  return link.OneWayDelay().seconds() +
         static_cast<double>(options.message_size + packets * per_packet) * 8 / link.rate.bps();
}

WindowSummary SummarizeWindow(const ScenarioResult& result, double from_s, double to_s,
                              double ideal_s) {
  WindowSummary w;
  w.from_s = from_s;
  w.to_s = to_s;
  std::vector<double> mct;
  double bytes = 0;
  for (const DeliveryRecord& d : result.deliveries) {
    if (result.has_message_times && d.submit_s >= from_s && d.submit_s < to_s) {
      mct.push_back(d.done_s - d.submit_s);
    }
    if (d.done_s >= from_s && d.done_s < to_s) bytes += static_cast<double>(d.size);
  }
  w.mct = Percentiles(std::move(mct));
  w.mct.ideal_s = ideal_s;
  if (to_s > from_s) w.goodput_bps = bytes * 8 / (to_s - from_s);
  return w;
}

absl::StatusOr<std::vector<PhaseSummary>> SummarizePhases(const ScenarioOptions& options,
                                                          const ScenarioResult& result,
                                                          double settle_rtts) {
  LH_ASSIGN_OR_RETURN(std::vector<LinkSpec> specs,
                      ResolveLinkSchedule(options.link, options.schedule));
  std::vector<PhaseSummary> phases;
  std::vector<double> starts = {0};
  std::vector<LinkSpec> links = {options.link};
  for (size_t i = 0; i < options.schedule.steps.size(); ++i) {
    starts.push_back(options.schedule.steps[i].at.seconds());
    links.push_back(specs[i]);
  }
  const double last = result.deliveries.empty() ? 0 : result.deliveries.back().done_s;
  for (size_t i = 0; i < starts.size(); ++i) {
    PhaseSummary p;
    p.link = links[i];
    p.start_s = starts[i];
    const double from = starts[i] + settle_rtts * links[i].rtt.seconds();
    const double to = i + 1 < starts.size() ? starts[i + 1] : last;
    p.window =
        SummarizeWindow(result, from, std::max(from, to), IdealMessageTime(options, links[i]));
    phases.push_back(p);
  }
  return phases;
}

}  // namespace longhaul::sim
