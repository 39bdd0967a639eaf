// longhaul-bridge: carries TCP connections between two sites over longhaul connections
// (a performance-enhancing proxy: TCP stays short and local at each end).
// See docs/bridge.md.
//
//   longhaul-bridge client --listen=ADDR:PORT --peer=HOST:PORT [--forwards=FILE] KEYS
//   longhaul-bridge server --listen=ADDR:PORT --target=HOST:PORT [--forwards=FILE] KEYS
//
// Exit status: 0 after a drain (SIGTERM/SIGINT), 1 for errors (a port in use, no
// endpoint), 2 for bad flags, forwards files and key files.
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_tool.h"
#include "tools/common/engine_flags.h"
#include "tools/common/path_memory.h"
#include "tools/common/security_flags.h"
#include "tools/common/tool_flags.h"
#include "tools/common/transport_flags.h"
#include "transport/base/file_trust.h"
#include "transport/base/parse.h"
#include "transport/net/socket_address.h"

DEFINE_string(listen, "",
              "client: TCP ADDR:PORT to accept connections on (the forward 'default'); "
              "server: the longhaul (UDP) ADDR:PORT to listen on");
DEFINE_string(peer, "", "client: the server bridge's longhaul address, HOST:PORT");
DEFINE_string(target, "", "server: the TCP service HOST:PORT of the forward 'default'");
DEFINE_string(forwards, "",
              "file of more forwards, one a line: NAME ADDRESS:PORT (client: the TCP "
              "address to listen on; server: the target); '#' comments");
DEFINE_string(metrics, "", "ADDR:PORT to serve Prometheus metrics on (GET /metrics)");
DEFINE_string(stream_window, "32MiB",
              "most one stream's receiver buffers (its flow-control window); enough for "
              "one stream to fill the link: >= 2 x rate x RTT");
DEFINE_string(memory, "512MiB",
              "receive memory shared by one connection's open streams: windows shrink to "
              "memory / streams when many are open (a server charges them to its "
              "--memory_per_key budget too)");
DEFINE_string(send_memory, "256MiB",
              "most bytes read from TCP and not yet acknowledged by the peer, all streams");
DEFINE_string(send_backlog, "2ms",
              "data kept queued in the longhaul connection ahead of its pacer, as time at "
              "the pacing rate (at least 256KiB), while small messages flow (a stream read "
              "<= 16KiB that emptied its socket within the last second): what a small "
              "request may wait behind bulk data on the sending side");
DEFINE_string(bulk_send_backlog, "20ms",
              "the same while only bulk data flows: slack for the bridge's thread waking "
              "late on a busy host, while nothing small waits behind it");
DEFINE_int32(max_streams, 4096, "most streams (TCP connections) at once per connection");
DEFINE_string(memory_per_key, "1GiB",
              "server: most memory the sessions of one client key may hold (stream windows, "
              "buffered frames at >= 256 bytes each, frames sent and not yet acknowledged); "
              "a client without a static key is counted by its address");
DEFINE_string(memory_total, "4GiB", "server: most memory all clients together may hold");
DEFINE_int32(targets_per_key, 4096, "server: most target TCP connections for one client key");
DEFINE_int32(targets_total, 16384, "server: most target TCP connections for all clients");
DEFINE_int32(sessions_per_key, 4,
             "server: most longhaul connections (client bridges) at once per client key");
DEFINE_string(connect_timeout, "5s", "client: give up one handshake with the peer after this");
DEFINE_string(reconnect_max, "5s", "client: longest wait between attempts to reach the peer");
DEFINE_string(connect_wait, "10s",
              "client: how long a new TCP connection waits for the peer while it is down "
              "(then it is reset)");
DEFINE_string(target_timeout, "10s", "server: give up connecting to a target after this");
DEFINE_int32(connections, 1,
             "client: longhaul connections to keep to the server bridge, 1 to 64 (each TCP "
             "connection rides on the one with the fewest streams); the server's "
             "--sessions_per_key must allow them");
DEFINE_string(drain_timeout, "30s",
              "on SIGTERM/SIGINT: how long open streams may take to end before they are reset");
DECLARE_string(profile);

namespace longhaul::bridge {
namespace {

constexpr ToolUsage kUsage("longhaul-bridge");

const std::vector<std::string> kFlagDirs = {"tools/bridge/", "tools/common/transport_flags",
                                            "tools/common/security_flags",
                                            "tools/common/engine_flags", "tools/common/path_memory"};

void PrintHelp() {
  std::cout
      << "longhaul-bridge: carry TCP connections over longhaul connections\n\n"
         "usage: longhaul-bridge client --listen=ADDR:PORT --peer=HOST:PORT\n"
         "                      [--forwards=FILE] [--metrics=ADDR:PORT] [transport flags] KEYS\n"
         "       longhaul-bridge server --listen=ADDR:PORT --target=HOST:PORT\n"
         "                      [--forwards=FILE] [--metrics=ADDR:PORT] [transport flags] KEYS\n"
         "The client accepts TCP connections and carries each as a stream over one longhaul\n"
         "connection to the server bridge, which connects it to the target. Streams do not\n"
         "wait for each other's repairs, each has its own flow control, and a half-close or\n"
         "a reset crosses as one. KEYS: --key=FILE --peer_key=FILE, --psk_file=FILE, or\n"
         "--insecure (plaintext), as for longhaul-perf (docs/security.md).\n"
         "Congestion control: bbr unless --rate, --cc or a --profile sets rate or cc (a fixed\n"
         "rate floods a slower link and wastes a faster one); idle_timeout 10s and\n"
         "keepalive 1s unless set, so a vanished peer is noticed in seconds. SIGTERM\n"
         "drains: no new connections, exit when the open ones end. Exit status: 0 after a\n"
         "drain, 1 errors, 2 bad flags or files.\n"
         "Several cores: --engines=N runs N driver threads on each side (--engine_cpus pins\n"
         "them); a client's --connections=K keeps K longhaul connections, spread over its\n"
         "engines, each TCP connection on the one with the fewest streams. The metrics show\n"
         "each engine's connections, bytes and CPU seconds. docs/bridge.md.\n\nflags:\n";
  PrintToolFlags(std::cout, kFlagDirs);
}

std::chrono::milliseconds Millis(const std::string& text, const char* flag) {
  const Duration d = kUsage.Or(ParseDuration(text), flag);
  if (d <= Duration::Zero()) kUsage.Fail(absl::StrCat("--", flag, " must be > 0"));
  return std::chrono::milliseconds(std::max<int64_t>(1, d.ns() / 1'000'000));
}

Duration Backlog(const std::string& text, const char* flag) {
  const Duration b = kUsage.Or(ParseDuration(text), flag);
  if (b < Duration::Microseconds(100) || b > Duration::Seconds(1)) {
    kUsage.Fail(absl::StrCat("--", flag, " must be in [100us, 1s]"));
  }
  return b;
}

net::HostPort HostPortFlag(const std::string& text, const char* flag, bool port_required) {
  net::HostPort hp = kUsage.Or(net::SplitHostPort(text), flag);
  if (port_required && hp.port == 0) kUsage.Fail(absl::StrCat("--", flag, ": give a port (1..65535)"));
  return hp;
}

// A forwards file lists a few hundred lines at most.
constexpr size_t kMaxForwardsFileBytes = size_t{1} << 20;

std::vector<Forward> ReadForwardsFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) kUsage.Fail(absl::StrCat("--forwards: cannot read ", path, ": ", std::strerror(errno)));
  // The forwards decide where a peer's streams go: nobody else may change the file.
  const absl::Status trusted = CheckTrustedFile(fd, path, FileTrust::kTrust);
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  while (trusted.ok() && text.size() <= kMaxForwardsFileBytes &&
         ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  const int err = errno;
  close(fd);
  if (!trusted.ok()) kUsage.Fail(absl::StrCat("--forwards: ", trusted.message()));
  if (n < 0) kUsage.Fail(absl::StrCat("--forwards: cannot read ", path, ": ", std::strerror(err)));
  if (text.size() > kMaxForwardsFileBytes) {
    kUsage.Fail(absl::StrCat("--forwards: ", path, " is larger than ", kMaxForwardsFileBytes,
                             " bytes: not a forwards file"));
  }
  return kUsage.Or(ParseForwards(text, path), "forwards");
}

// Most connections a client bridge keeps (--connections).
constexpr int kMaxConnections = 64;

// --engines, --engine_cpus and --connections.
void EngineFlags(bool client, BridgeOptions* o) {
  EnginesFromFlags(kUsage, &o->endpoint);
  const bool connections_set = !gflags::GetCommandLineFlagInfoOrDie("connections").is_default;
  if (!client && connections_set) {
    kUsage.Fail("--connections is the client's: a server accepts every connection a client "
                "opens, up to --sessions_per_key per client key");
  }
  if (FLAGS_connections < 1 || FLAGS_connections > kMaxConnections) {
    kUsage.Fail(absl::StrCat("--connections must be in [1, ", kMaxConnections, "]: got ",
                             FLAGS_connections));
  }
  o->connections = static_cast<size_t>(FLAGS_connections);
}

crypto::LoadedKeys KeysFromFlags(bool client) {
  absl::StatusOr<crypto::LoadedKeys> keys =
      client ? ClientSecurityFromFlags() : SecurityFromFlags();
  if (!keys.ok()) kUsage.Fail(keys.status().message());
  return *std::move(keys);
}

int Main(int argc, char** argv) {
  ExitIfVersionRequested(argc, argv, kUsage.tool());
  if (argc < 2 || (std::strcmp(argv[1], "client") != 0 && std::strcmp(argv[1], "server") != 0)) {
    bool help = false;
    for (int i = 1; i < argc; ++i) {
      help |= std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0;
    }
    if (help) {
      PrintHelp();
      return 0;
    }
    kUsage.Fail("the first argument must be the mode: client or server");
  }
  const bool client = std::strcmp(argv[1], "client") == 0;
  // The flags after the mode.
  std::vector<char*> rest = {argv[0]};
  for (int i = 2; i < argc; ++i) rest.push_back(argv[i]);
  ToolFlagOptions fo;
  fo.dirs = kFlagDirs;
  InitTool(static_cast<int>(rest.size()), rest.data(), fo, kUsage.tool(), PrintHelp);

  BridgeOptions o;
  o.is_client = client;
  absl::StatusOr<TransportConfig> config = TransportConfigFromFlags();
  if (!config.ok()) kUsage.Fail(config.status().message());
  o.config = *config;
  ApplyToolRateDefault(&o.config);
  // A bridge notices a vanished peer in seconds, not the transport's 30 s: its streams
  // are reset and new TCP connections wait for the reconnected session instead.
  if (FLAGS_profile.empty() && !TransportFlagWasSet("idle_timeout")) {
    o.config.idle_timeout = Duration::Seconds(10);
  }
  if (FLAGS_profile.empty() && !TransportFlagWasSet("keepalive")) {
    o.config.keepalive = Duration::Seconds(1);
  }
  if (absl::Status v = o.config.Validate(); !v.ok()) kUsage.Fail(v.message());
  o.path_memory = PathMemoryFileFromFlags();
  o.path_memory_applies = PathMemoryMayApply();
  if (FLAGS_listen.empty()) kUsage.Fail("--listen=ADDR:PORT is required");
  if (client) {
    if (FLAGS_peer.empty()) kUsage.Fail("client: --peer=HOST:PORT (the server bridge) is required");
    if (!FLAGS_target.empty()) kUsage.Fail("--target is the server's; the client takes --peer");
    const net::HostPort listen = HostPortFlag(FLAGS_listen, "listen", false);
    o.forwards.push_back({"default", listen.host, listen.port, "--listen"});
    const net::HostPort peer = HostPortFlag(FLAGS_peer, "peer", true);
    o.peer_host = peer.host;
    o.peer_port = peer.port;
  } else {
    if (!FLAGS_peer.empty()) kUsage.Fail("--peer is the client's; the server takes --target");
    const net::HostPort listen = HostPortFlag(FLAGS_listen, "listen", false);
    o.listen_host = listen.host;
    o.listen_port = listen.port;
    if (FLAGS_target.empty() && FLAGS_forwards.empty()) {
      kUsage.Fail("server: --target=HOST:PORT or --forwards=FILE is required");
    }
    if (!FLAGS_target.empty()) {
      const net::HostPort t = HostPortFlag(FLAGS_target, "target", true);
      o.forwards.push_back({"default", t.host, t.port, "--target"});
    }
  }
  if (!FLAGS_forwards.empty()) {
    for (Forward& f : ReadForwardsFile(FLAGS_forwards)) {
      if (absl::Status s = AddForward(std::move(f), &o.forwards); !s.ok()) kUsage.Fail(s.message());
    }
  }
  if (!FLAGS_metrics.empty()) {
    const net::HostPort m = HostPortFlag(FLAGS_metrics, "metrics", false);
    o.metrics_host = m.host;
    o.metrics_port = m.port;
  }
  o.session.is_client = client;
  o.session.stream_window = kUsage.Or(ParseByteCount(FLAGS_stream_window), "stream_window");
  o.session.memory = kUsage.Or(ParseByteCount(FLAGS_memory), "memory");
  o.session.send_memory = kUsage.Or(ParseByteCount(FLAGS_send_memory), "send_memory");
  if (o.session.stream_window < kChunk) {
    kUsage.Fail(absl::StrCat("--stream_window must be at least ", kChunk, " bytes"));
  }
  if (o.session.memory < o.session.stream_window) kUsage.Fail("--memory must be >= --stream_window");
  if (o.session.send_memory < 1024 * 1024) kUsage.Fail("--send_memory must be at least 1MiB");
  if (FLAGS_max_streams < 1) kUsage.Fail("--max_streams must be >= 1");
  o.session.max_streams = static_cast<size_t>(FLAGS_max_streams);
  o.limits.memory_per_key = kUsage.Or(ParseByteCount(FLAGS_memory_per_key), "memory_per_key");
  o.limits.memory_total = kUsage.Or(ParseByteCount(FLAGS_memory_total), "memory_total");
  if (o.limits.memory_per_key < 4 * 1024 * 1024) {
    kUsage.Fail("--memory_per_key must be at least 4MiB");
  }
  if (o.limits.memory_total < o.limits.memory_per_key) {
    kUsage.Fail("--memory_total must be >= --memory_per_key");
  }
  if (FLAGS_targets_per_key < 1) kUsage.Fail("--targets_per_key must be >= 1");
  if (FLAGS_targets_total < FLAGS_targets_per_key) {
    kUsage.Fail("--targets_total must be >= --targets_per_key");
  }
  if (FLAGS_sessions_per_key < 1) kUsage.Fail("--sessions_per_key must be >= 1");
  o.limits.targets_per_key = static_cast<uint64_t>(FLAGS_targets_per_key);
  o.limits.targets_total = static_cast<uint64_t>(FLAGS_targets_total);
  o.limits.sessions_per_key = static_cast<uint64_t>(FLAGS_sessions_per_key);
  o.session.connect_timeout = Millis(FLAGS_target_timeout, "target_timeout");
  o.session.send_backlog.interactive = Backlog(FLAGS_send_backlog, "send_backlog");
  o.session.send_backlog.bulk = Backlog(FLAGS_bulk_send_backlog, "bulk_send_backlog");
  o.connect_timeout = Millis(FLAGS_connect_timeout, "connect_timeout");
  o.reconnect_max = Millis(FLAGS_reconnect_max, "reconnect_max");
  o.connect_wait = Millis(FLAGS_connect_wait, "connect_wait");
  o.drain_timeout = Millis(FLAGS_drain_timeout, "drain_timeout");
  EngineFlags(client, &o);
  o.keys = KeysFromFlags(client);
  o.endpoint.security = o.keys.security;
  return client ? RunClient(o) : RunServer(o);
}

}  // namespace
}  // namespace longhaul::bridge

int main(int argc, char** argv) {
  return longhaul::bridge::Main(argc, argv);
}
