// longhaul-perf: iperf3-style throughput and message-latency tests over longhaul.
// See docs/perf.md.
//
//   longhaul-perf --server [--bind=ADDR] [--port=5201] [--engines=N] KEYS
//   longhaul-perf --client=HOST [--port=5201] [--time=SEC | --bytes=SIZE] [--reverse]
//                 [--parallel=N] [--message_size=SIZE] [--interval=SEC] [--json]
//                 [--workload=messages --load=FRACTION] [--verify=on|off] [--profile=FILE]
//                 [--engines=N [--engine_cpus=LIST]] [transport flags] KEYS
//
// KEYS: --key=FILE --peer_key=FILE (static keys), --psk_file=FILE (a pre-shared key),
// both, or --insecure (plaintext); one choice is required (tools/common/security_flags.h).
//
// Exit status: 0 when every byte arrived and was verified (with --verify=off: arrived),
// 1 for errors (connection, a refused key, corruption, incomplete transfer), 2 for bad
// flags and key files.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/common/engine_flags.h"
#include "tools/common/security_flags.h"
#include "tools/common/path_memory.h"
#include "tools/common/tool_flags.h"
#include "tools/common/transport_flags.h"
#include "tools/perf/perf_control.h"
#include "tools/perf/perf_tool.h"
#include "transport/base/parse.h"

DEFINE_bool(server, false, "run as the server (-s)");
DEFINE_string(client, "", "run as a client of the server at HOST (-c HOST)");
DEFINE_string(bind, "0.0.0.0", "server: local address to listen on (-B)");
DEFINE_int32(port, 5201, "server port to listen on / connect to; 0: any free port (-p)");
DEFINE_string(time, "10", "seconds to send for (a number, or a duration like 500ms) (-t)");
DEFINE_string(bytes, "", "bytes to send per connection instead of --time, e.g. 1GiB (-n)");
DEFINE_bool(reverse, false, "the server sends, the client receives (-R)");
DEFINE_int32(parallel, 1, "connections in parallel (-P)");
DEFINE_string(message_size, "1MiB", "size of each message, 64 B .. 64 MiB (-l)");
DEFINE_string(interval, "1", "seconds between interval reports (-i)");
DEFINE_string(verify, "on",
              "on: fill each message with the test pattern and check every byte on receipt; "
              "off: send the same bytes every time and check nothing (as iperf3; for CPU "
              "measurements). Client flag; the server follows the client's choice");
DEFINE_bool(json, false,
            "print one iperf3-shaped JSON object (server: one JSON line per test) (-J)");
DEFINE_string(workload, "bulk",
              "bulk (keep the pipe full) or messages (open-loop messages, see --load)");
DEFINE_double(load, 0.5,
              "messages: offered load as a fraction of the rate (--rate or the profile's)");
DEFINE_string(connect_timeout, "5s", "client: give up a handshake after this long");
DEFINE_string(timeout, "0",
              "client: abort the test after this long (0: --time + 60s, or 1h with --bytes)");
DEFINE_bool(one_off, false, "server: serve one test, then exit with its status (-1)");
DEFINE_string(max_test_duration, "3600s", "server: longest test it runs (longer ones are ended)");
DEFINE_bool(answer_probes, true,
            "server: answer longhaul-probe/longhaul-tune --target on the same port "
            "(the tuner's probe protocol)");
DEFINE_int32(max_connections, 256, "server: most connections at once (more are refused)");
DEFINE_string(socket_buffer, "0",
              "SO_RCVBUF/SO_SNDBUF to ask for (0: window/4 within [4MiB, 256MiB])");
DEFINE_string(spin, "20us", "poll instead of sleeping when the next send is this close");
DEFINE_string(send_quantum, "128KiB",
              "batch paced sends: sleep until this much is due at the pacing rate, then "
              "send it at once (0: wake for every datagram; at most 1MiB)");
DEFINE_bool(gso, true, "use UDP GSO (UDP_SEGMENT) where the kernel has it");
DEFINE_bool(gro, true, "use UDP GRO where the kernel has it");
DEFINE_int32(tx_batch, 64, "datagrams per sendmmsg batch");
DEFINE_int32(rx_batch, 32, "messages per recvmmsg");
DEFINE_string(datapath, "udp", "udp (sockets) or verbs (RDMA UD queue pairs on RoCE v2; docs/rdma.md)");
DEFINE_string(device, "", "verbs: RDMA device (rxe0, mlx5_0); empty: the one holding the local address");
DEFINE_int32(gid_index, -1, "verbs: GID table index; -1: the RoCE v2 GID of the local IPv4 address");
DEFINE_int32(traffic_class, 0, "verbs: IP traffic class of sent packets (DSCP << 2)");
DEFINE_string(qp_type, "ud",
              "verbs: ud (every datagram a UD message) or uc (large datagrams written as chunks "
              "into the peer's registered ring over a UC queue pair once both sides offer one; "
              "docs/rdma.md section 7)");
DEFINE_string(uc_chunk, "0",
              "verbs, qp_type uc: chunk size in bytes (0: 16 x the active MTU, at most 16 "
              "single-packet writes)");
DEFINE_int32(uc_lanes, 1,
             "verbs, qp_type uc: lanes (UC queue pairs, each its own RoCE v2 source port) per "
             "connection, 1 to 4; chunks are sprayed over them (both sides use the smaller)");
DEFINE_bool(zero_copy, true,
            "verbs, qp_type uc: register the payload this side sends from, so that plaintext "
            "chunks gather it from there instead of the transport copying it (docs/rdma.md "
            "7.14), and post registered receive buffers, so that the peer's NIC writes "
            "plaintext payloads straight into them (7.15); --nozero_copy copies, for "
            "comparison");
DEFINE_int64(uc_fail_lane_after, 0,
             "verbs, qp_type uc, a test mode: after this many chunks force the writing queue "
             "pair of the lane in use into the error state; the connection goes on over its "
             "other lanes, or UD (0: off)");
DEFINE_int64(uc_stall_lane_after, 0,
             "verbs, qp_type uc, a test mode: after this many chunks the first lane writes "
             "with a key the peer's NIC drops silently (a lane that stalls); the sender "
             "retires it when the peer's count of that lane stops (0: off)");
DEFINE_int32(uc_replay_every, 0,
             "verbs, qp_type uc, a test mode: after every Nth chunk also write a late duplicate "
             "into the slot of the chunk one lap back, with its old key (docs/rdma.md 7.4); "
             "0: off");
DECLARE_string(profile);

namespace longhaul::perf {
namespace {

constexpr ToolUsage kUsage("longhaul-perf");

const std::vector<std::string> kFlagDirs = {"tools/perf/", "tools/common/transport_flags",
                                            "tools/common/security_flags",
                                            "tools/common/engine_flags", "tools/common/path_memory"};

void PrintHelp() {
  std::cout << "longhaul-perf: iperf3-style tests over longhaul\n\n"
               "usage: longhaul-perf --server [--bind=ADDR] [--port=5201] [--one_off]\n"
               "                     [--answer_probes=true] [--engines=N [--engine_cpus=LIST]]\n"
               "                     [--datapath=verbs [--device=NAME] [--gid_index=N]\n"
               "                      [--qp_type=ud|uc [--uc_chunk=BYTES] [--uc_lanes=N]\n"
               "                       [--nozero_copy]]] KEYS\n"
               "       longhaul-perf --client=HOST [--port=5201] [--time=SEC | --bytes=SIZE]\n"
               "                     [--reverse] [--parallel=N] [--message_size=SIZE]\n"
               "                     [--interval=SEC] [--workload=messages --load=F]\n"
               "                     [--verify=on|off] [--profile=FILE] [transport flags]\n"
               "                     [--json] [--engines=N [--engine_cpus=LIST]]\n"
               "                     [--datapath=verbs [--device=NAME] [--gid_index=N]\n"
               "                      [--qp_type=ud|uc [--uc_chunk=BYTES] [--uc_lanes=N]\n"
               "                       [--nozero_copy]]] KEYS\n"
               "KEYS: --key=FILE --peer_key=FILE (each side's key pair and the other's public\n"
               "key; a server's file lists the clients it allows), --psk_file=FILE (one\n"
               "pre-shared key on both sides), both, or --insecure (plaintext). One is\n"
               "required; longhaul-keygen writes the files (docs/perf.md).\n\n"
               "iperf3's short forms work too: -s -c HOST -p -t -n -R -P -l -i -J -1 -B.\n"
               "The client's transport settings (flags and profile) apply to both directions\n"
               "of its test. Rate: without --rate, --cc or a profile that sets them the test\n"
               "runs cc=bbr with no cap (it finds the link's rate; a fixed guess would flood a\n"
               "slower link or waste a faster one); --rate=R alone paces at R (cc=fixed), the\n"
               "link's rate on a dedicated line; --cc=bbr --rate=R caps bbr at R. The messages\n"
               "workload needs a rate (--rate or a profile's).\n"
               "Payload: by default (--verify=on) every message carries a test pattern that\n"
               "the receiver checks byte by byte. --verify=off (client; the server follows)\n"
               "sends the same bytes every time and checks nothing, as iperf3 does, so CPU\n"
               "measurements see the transport alone; the JSON then says \"verified\": false\n"
               "and counts received_bytes under end.longhaul.integrity.\n"
               "Engines: --engines=N runs N driver threads per side, each with its own\n"
               "sockets (0: one per CPU, at most 8); the server's port is shared by all of\n"
               "them, a client's --parallel connections go to them in turn (-P N with\n"
               "--engines=N puts one on each). --engine_cpus=0,2 pins engine i to the i-th\n"
               "CPU of the list (cyclically). The JSON's end.longhaul.engines (the server's\n"
               "test events: engines) has each engine's connections, bytes, datagrams and\n"
               "thread CPU seconds; the text output prints a line per engine when N > 1.\n"
               "Exit status: 0 every byte arrived (and, with --verify=on, was verified), 1\n"
               "errors (connection, corruption, incomplete), 2 bad flags. docs/perf.md has the\n"
               "output and JSON fields.\n\nflags:\n";
  PrintToolFlags(std::cout, kFlagDirs);
}

// iperf3's single-letter flags, as our long names.
const char* LongName(const std::string& s) {
  static const std::pair<const char*, const char*> kShort[] = {
      {"s", "server"},   {"c", "client"},  {"p", "port"},     {"t", "time"},
      {"n", "bytes"},    {"R", "reverse"}, {"P", "parallel"}, {"l", "message_size"},
      {"i", "interval"}, {"J", "json"},    {"1", "one_off"},  {"B", "bind"}};
  for (const auto& [a, b] : kShort) {
    if (s == a) return b;
  }
  return nullptr;
}

// --name=value, --name value, --[no]bool and iperf3's short forms; exit status 2 and a message
// naming the flag.
void ParseFlags(int argc, char** argv) {
  ToolFlagOptions o;
  o.dirs = kFlagDirs;
  o.short_name = LongName;
  o.version_flag = true;
  InitTool(argc, argv, o, kUsage.tool(), PrintHelp);
}

// Seconds from "10", "2.5" or a duration ("500ms", "1m").
double SecondsFlag(const std::string& text, const char* flag) {
  double v;
  if (absl::SimpleAtod(text, &v)) return v;
  return kUsage.Or(ParseDuration(text), flag).seconds();
}

// The keys of --key/--peer_key/--psk_file/--insecure (and --profile's); a usage error
// (exit 2) naming the flag or file when they are missing or wrong.
crypto::LoadedKeys KeysFromFlags(bool client) {
  absl::StatusOr<crypto::LoadedKeys> keys =
      client ? ClientSecurityFromFlags() : SecurityFromFlags();
  if (!keys.ok()) kUsage.Fail(keys.status().message());
  return *std::move(keys);
}

EndpointOptions EndpointFromFlags(const crypto::LoadedKeys& keys) {
  EndpointOptions e;
  e.security = keys.security;  // the driver sets the entropy source
  e.socket_buffer = kUsage.Or(ParseByteCount(FLAGS_socket_buffer), "socket_buffer");
  e.spin = kUsage.Or(ParseDuration(FLAGS_spin), "spin");
  e.send_quantum = kUsage.Or(ParseByteCount(FLAGS_send_quantum), "send_quantum");
  if (e.send_quantum > (ByteCount{1} << 20)) kUsage.Fail("--send_quantum must be at most 1MiB");
  e.gso = FLAGS_gso;
  e.gro = FLAGS_gro;
  if (FLAGS_tx_batch < 1 || FLAGS_tx_batch > 1024) kUsage.Fail("--tx_batch must be in [1, 1024]");
  if (FLAGS_rx_batch < 1 || FLAGS_rx_batch > 1024) kUsage.Fail("--rx_batch must be in [1, 1024]");
  if (e.spin > Duration::Milliseconds(10)) kUsage.Fail("--spin must be at most 10ms");
  e.tx_batch = static_cast<uint32_t>(FLAGS_tx_batch);
  e.rx_batch = static_cast<uint32_t>(FLAGS_rx_batch);
  if (FLAGS_max_connections < 1) kUsage.Fail("--max_connections must be >= 1");
  e.max_connections = static_cast<uint32_t>(FLAGS_max_connections);
  e.datapath = kUsage.Or(ParseDatapath(FLAGS_datapath), "datapath");
  e.verbs.device = FLAGS_device;
  if (FLAGS_gid_index < -1 || FLAGS_gid_index > 255) kUsage.Fail("--gid_index must be in [-1, 255]");
  e.verbs.gid_index = FLAGS_gid_index;
  if (FLAGS_traffic_class < 0 || FLAGS_traffic_class > 255) {
    kUsage.Fail("--traffic_class must be in [0, 255]");
  }
  e.verbs.traffic_class = static_cast<uint8_t>(FLAGS_traffic_class);
  e.verbs.qp_type = kUsage.Or(ParseQpType(FLAGS_qp_type), "qp_type");
  const ByteCount chunk = kUsage.Or(ParseByteCount(FLAGS_uc_chunk), "uc_chunk");
  if (chunk != 0 && (chunk < 1024 || chunk > 65536)) {
    kUsage.Fail("--uc_chunk must be 0 or in [1KiB, 64KiB]");
  }
  e.verbs.uc_chunk = static_cast<uint32_t>(chunk);
  if (FLAGS_uc_replay_every < 0) kUsage.Fail("--uc_replay_every must be >= 0");
  e.verbs.uc_replay_every = static_cast<uint32_t>(FLAGS_uc_replay_every);
  if (FLAGS_uc_lanes < 1 || FLAGS_uc_lanes > 4) kUsage.Fail("--uc_lanes must be in [1, 4]");
  e.verbs.uc_lanes = static_cast<uint32_t>(FLAGS_uc_lanes);
  if (FLAGS_uc_fail_lane_after < 0) kUsage.Fail("--uc_fail_lane_after must be >= 0");
  e.verbs.uc_fail_lane_after = static_cast<uint64_t>(FLAGS_uc_fail_lane_after);
  if (FLAGS_uc_stall_lane_after < 0) kUsage.Fail("--uc_stall_lane_after must be >= 0");
  e.verbs.uc_stall_lane_after = static_cast<uint64_t>(FLAGS_uc_stall_lane_after);
  if (e.verbs.qp_type == QpType::kUc && e.datapath != Datapath::kVerbs) {
    kUsage.Fail("--qp_type=uc needs --datapath=verbs");
  }
  EnginesFromFlags(kUsage, &e);
  // A segment given on the command line is kept (an error if the port's MTU is smaller);
  // the default follows the MTU.
  e.verbs.fit_segment = gflags::GetCommandLineFlagInfoOrDie("segment").is_default &&
                        gflags::GetCommandLineFlagInfoOrDie("mtu").is_default;
  return e;
}

int Main(int argc, char** argv) {
  ParseFlags(argc, argv);
  if (FLAGS_server == !FLAGS_client.empty()) {
    kUsage.Fail("give exactly one of --server and --client=HOST");
  }
  // Checked on both sides (a server takes the mode from each client's request).
  const bool verify = kUsage.Choice<bool>(FLAGS_verify, "verify", {{"on", true}, {"off", false}});
  absl::StatusOr<TransportConfig> config = TransportConfigFromFlags();
  if (!config.ok()) kUsage.Fail(config.status().message());
  if (FLAGS_port < 0 || FLAGS_port > 65535) kUsage.Fail("--port must be in [0, 65535]");
  if (FLAGS_server) {
    ServerOptions o;
    o.bind = FLAGS_bind;
    o.port = static_cast<uint16_t>(FLAGS_port);
    o.config = *config;
    o.keys = KeysFromFlags(/*client=*/false);
    o.endpoint = EndpointFromFlags(o.keys);
    o.json = FLAGS_json;
    o.one_off = FLAGS_one_off;
    o.answer_probes = FLAGS_answer_probes;
    o.zero_copy = FLAGS_zero_copy;
    o.max_duration_s = SecondsFlag(FLAGS_max_test_duration, "max_test_duration");
    if (!(o.max_duration_s > 0)) kUsage.Fail("--max_test_duration must be > 0");
    return RunServer(o);
  }
  ClientOptions o;
  o.host = FLAGS_client;
  if (FLAGS_port == 0) kUsage.Fail("--port must be given (1..65535) for a client");
  o.port = static_cast<uint16_t>(FLAGS_port);
  o.config = *config;
  ApplyToolRateDefault(&o.config);
  o.keys = KeysFromFlags(/*client=*/true);
  o.endpoint = EndpointFromFlags(o.keys);
  o.time_s = SecondsFlag(FLAGS_time, "time");
  if (!FLAGS_bytes.empty()) {
    o.bytes = kUsage.Or(ParseByteCount(FLAGS_bytes), "bytes");
    if (o.bytes == 0) kUsage.Fail("--bytes must be > 0");
  } else if (!(o.time_s > 0 && o.time_s <= 86400)) {
    kUsage.Fail("--time must be in (0, 86400] seconds");
  }
  o.reverse = FLAGS_reverse;
  if (FLAGS_parallel < 1 || FLAGS_parallel > 128) kUsage.Fail("--parallel must be in [1, 128]");
  o.parallel = static_cast<uint32_t>(FLAGS_parallel);
  o.message_size = kUsage.Or(ParseByteCount(FLAGS_message_size), "message_size");
  if (o.message_size < kMinMessageSize || o.message_size > kMaxMessageSize) {
    kUsage.Fail(absl::StrFormat("--message_size must be in [%d, %d] bytes", kMinMessageSize,
                                kMaxMessageSize));
  }
  o.interval_s = SecondsFlag(FLAGS_interval, "interval");
  if (!(o.interval_s >= 0.01 && o.interval_s <= 3600)) {
    kUsage.Fail("--interval must be in [0.01, 3600] seconds");
  }
  o.workload = FLAGS_workload;
  if (o.workload != "bulk" && o.workload != "messages") {
    kUsage.Fail(absl::StrCat("--workload: unknown '", o.workload, "' (bulk, messages)"));
  }
  o.load = FLAGS_load;
  if (!(o.load > 0 && o.load <= 100)) kUsage.Fail("--load must be in (0, 100]");
  if (o.workload == "messages" && o.config.rate.IsZero()) {
    kUsage.Fail(
        "--workload=messages needs the link rate for its schedule and ideal completion "
        "time: give --rate (or a profile that sets rate)");
  }
  o.verify = verify;
  o.zero_copy = FLAGS_zero_copy;
  o.json = FLAGS_json;
  o.connect_timeout = kUsage.Or(ParseDuration(FLAGS_connect_timeout), "connect_timeout");
  o.timeout_s = SecondsFlag(FLAGS_timeout, "timeout");
  o.profile_path = FLAGS_profile;
  o.path_memory = PathMemoryFileFromFlags();
  o.path_memory_applies = PathMemoryMayApply();
  return RunClient(o);
}

}  // namespace
}  // namespace longhaul::perf

int main(int argc, char** argv) {
  return longhaul::perf::Main(argc, argv);
}
