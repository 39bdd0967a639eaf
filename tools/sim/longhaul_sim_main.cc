// longhaul-sim: runs longhaul Connections over a simulated link in virtual time and
// reports goodput, message completion times, loss/repair counters and link statistics.
// See docs/simulator.md.
//
//   longhaul-sim --link=tokyo-singapore --workload=bulk --bytes=20GiB --json
//   longhaul-sim --link=rate=1gbit,rtt=58ms,loss=1e-3 --workload=messages
//                --message_size=1MiB --messages=1000 --load=0.5
//
// Exit status: 0 when everything was delivered intact, 1 when the run ended otherwise
// (a bound was hit, data was lost or corrupted), 2 for bad flags or specs.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "tools/common/json_fields.h"
#include "tools/common/link_json.h"
#include "tools/common/tool_flags.h"
#include "tools/common/transport_flags.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/profile/profile_file.h"
#include "transport/sim/link_files.h"
#include "transport/sim/link_spec.h"
#include "transport/sim/scenario.h"

DEFINE_string(link, "",
              "link spec: a named link (tokyo-singapore, ts-1g, ...) and/or key=value pairs, "
              "e.g. tokyo-singapore,loss=1e-3 or rate=10gbit,rtt=58ms,loss=1e-4 (required)");
DEFINE_string(link_schedule, "",
              "link changes over time, e.g. 2s:rate=5gbit,4s:rate=10gbit,loss=1e-3");
DEFINE_string(reverse_link, "",
              "settings of the reverse (ACK) direction on top of --link and every schedule "
              "step, e.g. loss=0.05 for an ACK path that loses 5 percent (keys as in "
              "--link_schedule)");
DEFINE_string(workload, "bulk", "bulk (stream --bytes) or messages (open-loop messages)");
DEFINE_string(bytes, "1GiB", "bulk: bytes each connection transfers");
DEFINE_string(chunk, "16MiB", "bulk: message size the stream is cut into");
DEFINE_string(message_size, "64KiB", "messages: size of each message");
DEFINE_uint64(messages, 1000, "messages: messages per connection");
DEFINE_double(load, 0.5,
              "messages: aggregate offered load as a fraction of the link rate (open loop)");
DEFINE_uint64(seed, 1, "seed of the link's and the connections' randomness");
DEFINE_int32(connections, 1, "connection pairs sharing the bottleneck");
DEFINE_string(stagger, "0", "start of connection i is i x stagger (e.g. 100ms)");
DEFINE_string(max_virtual_time, "600s", "stop after this much simulated time");
DEFINE_string(max_wall_time, "600s", "stop after this much real time");
DEFINE_string(sample_interval, "0",
              "time series: per-interval goodput, losses, congestion-control state and queue "
              "(e.g. 100ms; 0: none)");
DEFINE_bool(json, false, "print one JSON object instead of the summary");
DEFINE_string(deliveries, "",
              "write one CSV line per delivered message to this file (connection, index, "
              "size, submit_s, done_s, mct_s) for a look at the tail's messages");
DEFINE_string(payload, "on",
              "on: datagrams carry the messages' bytes, every byte checked on arrival; off: "
              "payload-free (headers, frames and 8-byte stamps every 4 KiB; the link still "
              "charges full sizes; delivery checked by order, sizes and a digest of the "
              "stamps), same protocol behaviour, several times faster");
DEFINE_string(nodes, "connection",
              "connection: each side is a bare Connection, set up without a handshake "
              "(the default); endpoint: each side is a whole sans-IO endpoint, the client "
              "connects over the simulated link (handshake loss and RTT count) and data goes "
              "through its routing and --security");
DEFINE_string(security, "none",
              "--nodes=endpoint: packet protection, keys derived from --seed: none "
              "(plaintext, CRC32C), psk (pre-shared key, Noise NNpsk0) or keys (static "
              "X25519 keys, Noise IK); every packet sealed with AES-256-GCM or "
              "ChaCha20-Poly1305");
DECLARE_string(profile);

namespace longhaul {
namespace {

constexpr ToolUsage kUsage("longhaul-sim");

const std::vector<std::string> kFlagDirs = {"tools/sim/", "tools/common/transport_flags"};

void PrintHelp() {
  std::cout << "longhaul-sim: longhaul connections over a simulated link, in virtual time\n\n"
               "usage: longhaul-sim --link=SPEC [--workload=bulk --bytes=SIZE |\n"
               "         --workload=messages --message_size=SIZE --messages=N [--load=F]]\n"
               "         [transport flags] [--seed=N] [--connections=N --stagger=DURATION]\n"
               "         [--link_schedule=...] [--max_virtual_time=D] [--payload=off] [--json]\n"
               "         [--nodes=endpoint [--security=none|psk|keys]]\n\n"
               "Sizes take units (4096, 64KiB, 1MB, 20GiB), durations too (300us, 58ms, 2s),\n"
               "rates bits/s (800mbit, 100gbit). Exit status: 0 delivered intact, 1 not\n"
               "(bound hit, data lost or corrupted), 2 bad flags. docs/simulator.md has the\n"
               "link-spec keys and the JSON fields.\n\nflags:\n";
  PrintToolFlags(std::cout, kFlagDirs);
  std::cout << "\n" << sim::LinkSpecHelp();
}

// Phases of a link schedule are summarised from this many of the new link's round trips
// after each change (the time the transport is given to follow it); a run without a
// schedule is one phase from this many round trips after the start.
constexpr double kPhaseSettleRtts = 5;

nlohmann::json EndpointSideJson(const sim::EndpointSideStats& s) {
  nlohmann::json j;
  LONGHAUL_JSON_SET_FIELDS(j, s, packets_sealed, packets_opened, auth_failures, replays,
                           hellos_received, retries_sent, connections_accepted, handshake_errors,
                           undecodable, unknown_connection);
  return j;
}

// Endpoint nodes only (connection nodes keep the JSON they always had): the mode, the
// handshake times and the endpoints' figures.
void AddEndpointJson(const sim::ScenarioResult& r, nlohmann::json* j) {
  (*j)["nodes"] = sim::NodeKindName(r.nodes);
  (*j)["security"] = sim::EndpointSecurityName(r.security);
  (*j)["handshake_s"] = r.handshake_max_s;
  (*j)["handshake_mean_s"] = r.handshake_mean_s;
  (*j)["client_endpoint"] = EndpointSideJson(r.client_total);
  (*j)["server_endpoint"] = EndpointSideJson(r.server_total);
}

nlohmann::json ResultJson(const sim::ScenarioOptions& opt, const sim::ScenarioResult& r) {
  nlohmann::json j;
  LONGHAUL_JSON_SET_FIELDS(j, r, stop_reason, completed, delivered_intact, goodput_bps,
                           link_rate_bps, bytes_delivered, packets_sent, packets_lost,
                           packets_retransmitted, virtual_s, transfer_s, wall_s, sim_packets,
                           sim_packets_per_wall_s, cpu_s, sim_packets_per_cpu_s);
  if (!r.error.empty()) j["error"] = r.error;
  j["link_utilisation"] = r.link_rate_bps > 0 ? r.goodput_bps / r.link_rate_bps : 0;
  j["fec_recovered_packets"] = r.receiver_total.fec_recovered_packets;
  j["fec_overhead_bytes"] = r.sender_total.fec_overhead_bytes;
  j["fec_repair_packets_sent"] = r.sender_total.fec_repair_packets_sent;
  j["blocks_unrecoverable"] = r.receiver_total.fec_blocks_unrecoverable;
  if (opt.sender_config.fec == FecMode::kAuto && !r.connections.empty()) {
    // The first sender's FEC policy when the run stopped.
    const ConnectionDebugState& d = r.connections[0].sender_state;
    nlohmann::json f;
    f["reason"] = d.fec_reason;
    f["k"] = d.fec_k;
    f["m"] = d.fec_m;
    f["interleave"] = d.fec_interleave;
    f["loss_estimate"] = d.fec_loss_estimate;
    f["burst_estimate"] = d.fec_burst_estimate;
    f["expected_repairs_per_message"] = d.fec_expected_repairs;
    j["fec_auto"] = f;
  }
  j["sim_events"] = r.sim.events;
  j["sim_pool_buffers"] = r.sim.pool_buffers;
  j["trace_hash"] = absl::StrFormat("%016x", r.trace_hash);
  if (r.has_message_times) {
    j["messages_delivered"] = r.mct.count;
    j["mct_ideal_s"] = r.mct.ideal_s;
    SetMctPercentiles(j, r.mct);
  }
  if (opt.nodes == sim::NodeKind::kEndpoint) AddEndpointJson(r, &j);
  j["link_forward"] = LinkCountersToJson(r.forward);
  j["link_reverse"] = LinkCountersToJson(r.reverse);
  j["sender_stats"] = ConnectionStatsToJson(r.sender_total);
  j["receiver_stats"] = ConnectionStatsToJson(r.receiver_total);
  if (!r.series.empty()) {
    nlohmann::json series = nlohmann::json::array();
    for (const sim::IntervalSample& x : r.series) {
      nlohmann::json xj;
      LONGHAUL_JSON_SET_FIELDS(xj, x, t_s, goodput_bps, avg_queue_bytes, offered, dropped_queue,
                               dropped_loss, ce_marked);
      nlohmann::json cs = nlohmann::json::array();
      for (const sim::ConnectionSample& c : x.connections) {
        nlohmann::json cj;
        LONGHAUL_JSON_SET_FIELDS(cj, c, goodput_bps, packets_sent, packets_lost, cc_mode,
                                 cc_bandwidth_bps, pacing_rate_bps, bytes_in_flight, srtt_s);
        cj["cwnd_bytes"] = c.cwnd;
        cs.push_back(cj);
      }
      xj["connections"] = cs;
      series.push_back(xj);
    }
    j["sample_interval_s"] = r.sample_interval_s;
    j["series"] = series;
  }
  {
    absl::StatusOr<std::vector<sim::PhaseSummary>> phases =
        sim::SummarizePhases(opt, r, kPhaseSettleRtts);
    if (phases.ok()) {
      nlohmann::json pj = nlohmann::json::array();
      for (const sim::PhaseSummary& p : *phases) {
        nlohmann::json x;
        x["link"] = p.link.ToString();
        x["start_s"] = p.start_s;
        x["from_s"] = p.window.from_s;
        x["to_s"] = p.window.to_s;
        x["goodput_bps"] = p.window.goodput_bps;
        if (r.has_message_times) {
          x["messages"] = p.window.mct.count;
          x["mct_ideal_s"] = p.window.mct.ideal_s;
          x["mct_mean_s"] = p.window.mct.mean_s;
          x["mct_p99_s"] = p.window.mct.p99_s;
          x["mct_max_s"] = p.window.mct.max_s;
        }
        pj.push_back(x);
      }
      j["phases"] = pj;
    }
  }
  if (opt.connections > 1) {
    nlohmann::json conns = nlohmann::json::array();
    for (const sim::ConnectionResult& c : r.connections) {
      nlohmann::json cj;
      cj["goodput_bps"] = c.goodput_bps;
      cj["bytes_delivered"] = c.bytes_delivered;
      cj["start_s"] = c.start.seconds();
      cj["complete"] = c.complete;
      cj["delivered_intact"] = c.delivered_intact;
      cj["packets_lost"] = c.sender.packets_lost;
      cj["packets_retransmitted"] = c.sender.packets_retransmitted;
      if (opt.nodes == sim::NodeKind::kEndpoint) {
        cj["connected"] = c.connected;
        cj["handshake_s"] = c.handshake_s;
      }
      if (!c.error.empty()) cj["error"] = c.error;
      conns.push_back(cj);
    }
    j["connections"] = conns;
    j["jain_fairness"] = r.jain_fairness;
  }
  return j;
}

std::string Gbps(double bps) { return absl::StrFormat("%.3f Gbit/s", bps / 1e9); }

void PrintSummary(const sim::ScenarioOptions& opt, const sim::ScenarioResult& r) {
  std::cout << "link      " << opt.link.ToString() << " (queue "
            << FormatByteCount(opt.link.QueueLimitBytes()) << " bytes)\n";
  if (!opt.schedule.empty()) std::cout << "schedule  " << opt.schedule.ToString() << "\n";
  if (!FLAGS_reverse_link.empty()) std::cout << "reverse   " << FLAGS_reverse_link << "\n";
  std::cout << "workload  " << sim::WorkloadName(opt.workload) << ", "
            << opt.connections << " connection(s), seed " << opt.seed
            << (opt.payload ? "" : ", payload off");
  if (opt.nodes == sim::NodeKind::kEndpoint) {
    std::cout << ", endpoint nodes, security " << sim::EndpointSecurityName(opt.security);
  }
  std::cout << "\n";
  std::cout << "transport segment " << opt.sender_config.segment << ", window "
            << FormatByteCount(opt.sender_config.window) << ", cc "
            << CongestionControlName(opt.sender_config.cc) << " rate "
            << FormatBandwidth(opt.sender_config.rate) << ", fec "
            << FecModeName(opt.sender_config.fec) << "\n";
  std::cout << absl::StrFormat(
      "result    %s: %s, %d bytes delivered%s in %.4f s (virtual %.4f s)\n", r.stop_reason,
      r.delivered_intact ? "delivered intact" : (r.completed ? "NOT INTACT" : "INCOMPLETE"),
      r.bytes_delivered, "", r.transfer_s, r.virtual_s);
  if (!r.error.empty()) std::cout << "error     " << r.error << "\n";
  std::cout << "goodput   " << Gbps(r.goodput_bps) << " of " << Gbps(r.link_rate_bps)
            << absl::StrFormat(" (%.1f%%)\n",
                               r.link_rate_bps > 0 ? 100 * r.goodput_bps / r.link_rate_bps : 0);
  if (r.has_message_times) {
    std::cout << absl::StrFormat(
        "mct       ideal %.3f ms, mean %.3f ms, p50 %.3f, p99 %.3f, p99.9 %.3f, max %.3f ms "
        "(%d messages)\n",
        r.mct.ideal_s * 1e3, r.mct.mean_s * 1e3, r.mct.p50_s * 1e3, r.mct.p99_s * 1e3,
        r.mct.p999_s * 1e3, r.mct.max_s * 1e3, r.mct.count);
  }
  if (opt.nodes == sim::NodeKind::kEndpoint) {
    std::cout << absl::StrFormat(
        "endpoints handshake %.3f ms (mean %.3f ms); packets sealed %d, opened %d, "
        "auth failures %d\n",
        r.handshake_max_s * 1e3, r.handshake_mean_s * 1e3,
        r.client_total.packets_sealed + r.server_total.packets_sealed,
        r.client_total.packets_opened + r.server_total.packets_opened,
        r.client_total.auth_failures + r.server_total.auth_failures);
  }
  std::cout << absl::StrFormat(
      "packets   sent %d, lost %d, retransmitted %d, fec recovered %d\n", r.packets_sent,
      r.packets_lost, r.packets_retransmitted, r.receiver_total.fec_recovered_packets);
  std::cout << absl::StrFormat(
      "link fwd  drops: loss %d, queue %d, too-big %d; max queue %d B, avg %.0f B\n",
      r.forward.dropped_loss, r.forward.dropped_queue, r.forward.dropped_too_big,
      r.forward.max_queue_bytes, r.forward.avg_queue_bytes);
  if (!opt.schedule.empty()) {
    absl::StatusOr<std::vector<sim::PhaseSummary>> phases =
        sim::SummarizePhases(opt, r, kPhaseSettleRtts);
    for (size_t i = 0; phases.ok() && i < phases->size(); ++i) {
      const sim::PhaseSummary& p = (*phases)[i];
      std::cout << absl::StrFormat("phase %d   %.2f-%.2f s: goodput %s", i, p.window.from_s,
                                   p.window.to_s, Gbps(p.window.goodput_bps));
      if (r.has_message_times) {
        std::cout << absl::StrFormat(", mct ideal %.3f ms, mean %.3f, p99 %.3f ms (%d messages)",
                                     p.window.mct.ideal_s * 1e3, p.window.mct.mean_s * 1e3,
                                     p.window.mct.p99_s * 1e3, p.window.mct.count);
      }
      std::cout << "\n";
    }
  }
  if (opt.connections > 1) {
    std::cout << "conns    ";
    for (const auto& c : r.connections) std::cout << " " << Gbps(c.goodput_bps);
    std::cout << absl::StrFormat("; Jain fairness %.4f\n", r.jain_fairness);
  }
  if (!r.series.empty()) {
    std::cout << "series    t_s  goodput_gbit  queue_MB  q_drops  loss_drops  ce  | "
                 "per connection: goodput_gbit mode bw_gbit\n";
    for (const sim::IntervalSample& x : r.series) {
      std::cout << absl::StrFormat("  %8.3f  %8.3f  %8.2f  %7d  %7d  %7d  |", x.t_s,
                                   x.goodput_bps / 1e9, x.avg_queue_bytes / 1e6, x.dropped_queue,
                                   x.dropped_loss, x.ce_marked);
      for (const sim::ConnectionSample& c : x.connections) {
        std::cout << absl::StrFormat("  %.3f %s %.3f", c.goodput_bps / 1e9, c.cc_mode,
                                     c.cc_bandwidth_bps / 1e9);
      }
      std::cout << "\n";
    }
  }
  std::cout << absl::StrFormat(
      "sim       %d packets in %.3f s wall (%.3g packets/s), %.3f s cpu (%.3g packets/s)\n",
      r.sim_packets, r.wall_s, r.sim_packets_per_wall_s, r.cpu_s, r.sim_packets_per_cpu_s);
}

int Main(int argc, char** argv) {
  // --name=value, --name value, --[no]bool; exit status 2 and a message naming the flag.
  InitTool(argc, argv, kFlagDirs, kUsage, PrintHelp);
  if (FLAGS_link.empty()) kUsage.Fail("--link is required (e.g. --link=tokyo-singapore)");
  sim::ScenarioOptions opt;
  opt.link = kUsage.Or(sim::LoadLinkSpec(FLAGS_link), "link");
  if (!FLAGS_link_schedule.empty()) {
    opt.schedule = kUsage.Or(sim::ParseLinkSchedule(FLAGS_link_schedule), "link_schedule");
  }
  opt.reverse = kUsage.Or(sim::ParseLinkOverrides(FLAGS_reverse_link), "reverse_link");
  absl::StatusOr<TransportConfig> from_flags = TransportConfigFromFlags();
  if (!from_flags.ok()) kUsage.Fail(from_flags.status().message());
  TransportConfig config = *from_flags;
  const GivenSettings given = GivenTransportSettings();
  // The fixed controller is for dedicated lines whose rate is known: without --rate (or
  // a profile's rate) it paces at the link's rate. Without --segment/--mtu (or a
  // profile's), segments fill the link's MTU.
  if (config.cc == CongestionControl::kFixed && !given.rate) {
    config.rate = opt.link.rate;
  }
  // For cc=bbr the rate is only a cap: without --rate (or a profile's) there is none, and
  // the controller finds the link's rate itself.
  if (config.cc == CongestionControl::kBbr && !given.rate) {
    config.rate = Bandwidth::Zero();
  }
  if (!given.segment) {
    config.segment = TransportConfig::SegmentForMtu(opt.link.mtu);
  }
  if (absl::Status s = config.Validate(); !s.ok()) kUsage.Fail(s.message());
  opt.sender_config = config;
  opt.receiver_config = config;
  opt.workload = kUsage.Choice<sim::Workload>(
      FLAGS_workload, "workload",
      {{"bulk", sim::Workload::kBulk}, {"messages", sim::Workload::kMessages}});
  opt.bytes = kUsage.Or(ParseByteCount(FLAGS_bytes), "bytes");
  opt.chunk = kUsage.Or(ParseByteCount(FLAGS_chunk), "chunk");
  opt.message_size = kUsage.Or(ParseByteCount(FLAGS_message_size), "message_size");
  opt.messages = FLAGS_messages;
  opt.load = FLAGS_load;
  opt.seed = FLAGS_seed;
  opt.connections = FLAGS_connections;
  opt.stagger = kUsage.Or(ParseDuration(FLAGS_stagger), "stagger");
  opt.max_virtual_time = kUsage.Or(ParseDuration(FLAGS_max_virtual_time), "max_virtual_time");
  opt.max_wall_time = kUsage.Or(ParseDuration(FLAGS_max_wall_time), "max_wall_time");
  // The run's wall-time bound and its wall_s / cpu_s figures read these clocks.
  opt.wall_seconds = MonotonicSeconds;
  opt.cpu_seconds = ProcessCpuSeconds;
  opt.sample_interval = kUsage.Or(ParseDuration(FLAGS_sample_interval), "sample_interval");
  opt.payload = kUsage.Choice<bool>(FLAGS_payload, "payload", {{"on", true}, {"off", false}});
  opt.nodes = kUsage.Choice<sim::NodeKind>(
      FLAGS_nodes, "nodes",
      {{"connection", sim::NodeKind::kConnection}, {"endpoint", sim::NodeKind::kEndpoint}});
  opt.security =
      kUsage.Choice<sim::EndpointSecurity>(FLAGS_security, "security",
                                           {{"none", sim::EndpointSecurity::kNone},
                                            {"psk", sim::EndpointSecurity::kPsk},
                                            {"keys", sim::EndpointSecurity::kStaticKeys}});
  if (opt.security != sim::EndpointSecurity::kNone && opt.nodes != sim::NodeKind::kEndpoint) {
    kUsage.Fail("--security needs --nodes=endpoint (bare connections are not sealed)");
  }
  if (opt.sample_interval < Duration::Zero()) kUsage.Fail("--sample_interval must be >= 0");
  if (opt.workload == sim::Workload::kBulk && opt.bytes == 0) kUsage.Fail("--bytes must be > 0");
  if (opt.chunk == 0) kUsage.Fail("--chunk must be > 0");
  if (opt.workload == sim::Workload::kMessages && opt.messages == 0) {
    kUsage.Fail("--messages must be > 0");
  }
  if (!(opt.load > 0 && opt.load <= 100)) kUsage.Fail("--load must be in (0, 100]");
  if (opt.connections < 1 || opt.connections > 4096) {
    kUsage.Fail("--connections must be in [1, 4096]");
  }

  // Opened before the run, so a path that cannot be written fails at once.
  std::ofstream deliveries;
  if (!FLAGS_deliveries.empty()) {
    deliveries.open(FLAGS_deliveries);
    if (!deliveries) kUsage.Fail("--deliveries: cannot write " + FLAGS_deliveries);
  }

  absl::StatusOr<sim::ScenarioResult> r = sim::RunScenario(opt);
  if (!r.ok()) {
    if (absl::IsInvalidArgument(r.status())) kUsage.Fail(r.status().message());
    std::cerr << "longhaul-sim: " << r.status() << "\n";
    return 1;
  }
  if (deliveries.is_open()) {
    deliveries << "connection,index,size,submit_s,done_s,mct_s\n";
    for (const sim::DeliveryRecord& d : r->deliveries) {
      deliveries << absl::StrFormat("%d,%d,%d,%.9f,%.9f,%.9f\n", d.connection, d.index, d.size,
                                    d.submit_s, d.done_s, d.done_s - d.submit_s);
    }
    deliveries.close();
    if (!deliveries) {
      std::cerr << "longhaul-sim: writing --deliveries file " << FLAGS_deliveries << " failed\n";
      return 1;
    }
  }
  if (FLAGS_json) {
    nlohmann::json j;
    j["link"] = nlohmann::json::parse(opt.link.ToJson());
    if (!opt.schedule.empty()) j["link_schedule"] = opt.schedule.ToString();
    if (!FLAGS_reverse_link.empty()) j["reverse_link"] = FLAGS_reverse_link;
    j["params"] = TransportConfigToJson(config);
    nlohmann::json w;
    w["workload"] = sim::WorkloadName(opt.workload);
    if (opt.workload == sim::Workload::kBulk) {
      w["bytes"] = opt.bytes;
      w["chunk"] = opt.chunk;
    } else {
      w["message_size"] = opt.message_size;
      w["messages"] = opt.messages;
      w["load"] = opt.load;
    }
    w["seed"] = opt.seed;
    w["connections"] = opt.connections;
    w["stagger_s"] = opt.stagger.seconds();
    w["max_virtual_time_s"] = opt.max_virtual_time.seconds();
    w["max_wall_time_s"] = opt.max_wall_time.seconds();
    w["sample_interval_s"] = opt.sample_interval.seconds();
    w["payload"] = opt.payload ? "on" : "off";
    if (opt.nodes == sim::NodeKind::kEndpoint) {
      w["nodes"] = sim::NodeKindName(opt.nodes);
      w["security"] = sim::EndpointSecurityName(opt.security);
    }
    j["scenario"] = w;
    j["result"] = ResultJson(opt, *r);
    std::cout << j.dump(2) << "\n";
  } else {
    PrintSummary(opt, *r);
  }
  return r->delivered_intact ? 0 : 1;
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) {
  return longhaul::Main(argc, argv);
}
