// longhaul-emu: a user-space netem. The simulator's link model (transport/sim) applied in
// real time, per direction, to real traffic. docs/emulator.md has the details.
//
//   UDP relay (no privileges):
//     longhaul-emu --link=ts-1g --listen=127.0.0.1:9000 --forward=127.0.0.1:9001
//   TUN mode (root): two network namespaces joined through the emulated link
//     longhaul-emu --link=ts-1g --tun --netns=lhA,lhB
//
// Exit status: 0 stopped by a signal or --max_time; 1 a runtime failure (address in use,
// no permission, ...); 2 bad flags or link spec (a message names the problem).
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "tools/common/tool_flags.h"
#include "tools/emu/emu_json.h"
#include "transport/base/parse.h"
#include "transport/emu/netns.h"
#include "transport/emu/tun_bridge.h"
#include "transport/emu/udp_relay.h"
#include "transport/net/socket_address.h"
#include "transport/sim/link_files.h"
#include "transport/sim/link_spec.h"

DEFINE_string(link, "",
              "link spec: a named link (tokyo-singapore, ts-1g, ...) and/or key=value pairs, "
              "e.g. ts-1g,loss=1e-4 or rate=1gbit,rtt=58ms (required)");
DEFINE_string(link_schedule, "",
              "link changes over time since the start, e.g. 2s:rate=5gbit,4s:rate=10gbit,loss=1e-3 "
              "(keys: rate rtt jitter loss burst reorder reorder_delay dup corrupt queue ecn mtu; mtu only downward)");
DEFINE_string(listen, "", "UDP mode: address clients send to, e.g. 127.0.0.1:9000 (port 0: any)");
DEFINE_string(forward, "", "UDP mode: address datagrams are relayed to, e.g. 127.0.0.1:9001");
DEFINE_bool(tun, false, "TUN mode (root): join two network namespaces (--netns) by TUN devices");
DEFINE_string(netns, "",
              "TUN mode: the two namespaces A,B (created if missing, removed at exit "
              "if created)");
DEFINE_uint64(seed, 1, "seed of the link's randomness (a spec's seed key overrides it)");
DEFINE_string(stats_interval, "0",
              "print a statistics line on stderr this often (e.g. 1s; 0: off)");
DEFINE_bool(json, false, "JSON lines on stdout: ready, periodic stats, and a final summary");
DEFINE_string(max_time, "0", "stop after this long (e.g. 30s; 0: run until SIGINT/SIGTERM)");
DEFINE_uint64(max_clients, 1024, "UDP mode: client flows kept (least recently used evicted)");
DEFINE_string(buffer, "1GiB",
              "memory for datagrams waiting for their delivery time, both "
              "directions; beyond it the emulator drops (counted as its own drops)");
DEFINE_string(socket_buffer, "64MiB",
              "SO_RCVBUF/SO_SNDBUF of the relay's sockets (forced "
              "past net.core.rmem_max/wmem_max when root)");
DEFINE_bool(tcp_relay, false,
            "UDP mode: also relay TCP from --listen to --forward, unmodelled "
            "(control channels, e.g. iperf3's)");
DEFINE_bool(gso, true,
            "UDP mode: send runs of equal-sized datagrams of one flow that are due "
            "together as one UDP GSO message (receivers still get separate datagrams)");
DEFINE_int32(realtime, 0,
             "run the emulator's loop under SCHED_FIFO at this priority (1..99, "
             "root): wake-ups on time even when other processes keep the CPUs busy; 0: off");
DEFINE_string(port_file, "", "UDP mode: once listening, write the listen port to this file");
DEFINE_string(rebind_at, "",
              "UDP mode: NAT rebinding at these times since the start, e.g. 3s or 3s,6s: every "
              "client flow moves to a new upstream socket, so the target sees its source "
              "port change mid-flow (what it still sends to the old port is lost)");
DEFINE_string(tun_name, "lhemu0", "TUN mode: name of the TUN device in each namespace");

namespace longhaul {
namespace {

constexpr ToolUsage kUsage("longhaul-emu");
int g_stop_fd = -1;

const std::vector<std::string> kFlagDirs = {"tools/emu/"};

void PrintHelp() {
  std::cout << "longhaul-emu: a user-space netem; the simulator's link model in real time\n\n"
               "usage: longhaul-emu --link=SPEC --listen=ADDR:PORT --forward=ADDR:PORT [flags]\n"
               "       longhaul-emu --link=SPEC --tun --netns=A,B [flags]          (root)\n\n"
               "UDP relay: datagrams sent to --listen cross the link's forward direction to\n"
               "--forward; answers cross the reverse direction back to the client. Each client\n"
               "address:port gets its own upstream socket (multi-flow clients work).\n"
               "TUN mode: namespaces A (198.18.0.1/30) and B (198.18.0.2/30) joined by TUN\n"
               "devices through the link, MTU from the spec; any IP traffic between\n"
               "`ip netns exec A ...` and `ip netns exec B ...` crosses it. Namespaces it\n"
               "created are removed on SIGINT/SIGTERM. Long fat links need larger TCP buffers\n"
               "inside the namespaces (net.ipv4.tcp_rmem/tcp_wmem are per namespace;\n"
               "net.core.rmem_max/wmem_max are host-wide): see docs/emulator.md.\n\n"
               "Counters: the model's drops (loss, queue, too_big) and the emulator's own drops\n"
               "(buffer full, send errors, kernel drops at its sockets, evicted clients) apart.\n"
               "Sizes take units (64KiB, 1GiB), durations too (300us, 58ms, 2s), rates bits/s\n"
               "(800mbit, 100gbit). Exit status: 0 stopped (signal or --max_time), 1 runtime\n"
               "failure, 2 bad flags or spec. docs/emulator.md has the details.\n\nflags:\n";
  PrintToolFlags(std::cout, kFlagDirs);
  std::cout << "\n" << sim::LinkSpecHelp();
}

void OnSignal(int) {
  if (g_stop_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(g_stop_fd, &one, sizeof(one));
  }
}

// SIGINT/SIGTERM are blocked while the emulator sets up (so a signal cannot kill it
// half-way with namespaces created and nothing to remove them); once the stop fd exists
// the handler is installed and the signals unblocked: one that came meanwhile is
// delivered then and stops the run at once, with the normal cleanup.
void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void InstallSignals(int stop_fd) {
  g_stop_fd = stop_fd;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

// Periodic lines must never stall the emulator: when `fd` is a pipe that nobody reads
// and it is nearly full, the line is skipped (counted) instead of blocking the loop.
uint64_t g_lines_skipped = 0;
bool RoomFor(int fd, size_t bytes) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return true;
  int queued = 0;
  const int capacity = fcntl(fd, F_GETPIPE_SZ);
  if (capacity <= 0 || ioctl(fd, FIONREAD, &queued) != 0) return true;
  // A pipe is a ring of page-sized buffers and small writes do not always share one, so
  // up to a line per page can be lost to fragmentation: keep that much in reserve.
  const size_t pages = static_cast<size_t>(capacity) / 4096 + 1;
  const size_t reserve = bytes + pages * std::min<size_t>(bytes, 4096) + 4096;
  return static_cast<size_t>(capacity - queued) > reserve;
}

void WritePeriodic(int fd, const std::string& line) {
  if (!RoomFor(fd, line.size())) {
    ++g_lines_skipped;
    return;
  }
  [[maybe_unused]] ssize_t n = write(fd, line.data(), line.size());
}

// The ready and final lines are written whatever it takes.
void PrintJsonLine(const nlohmann::json& j) {
  std::cout << j.dump() << "\n";
  std::cout.flush();
}

bool WritePortFile(const std::string& path, uint16_t port) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  fprintf(f, "%u\n", port);
  if (fclose(f) != 0) return false;
  return rename(tmp.c_str(), path.c_str()) == 0;
}

std::vector<Duration> g_schedule_times;
std::vector<sim::LinkSpec> g_schedule_specs;
std::vector<Duration> g_rebind_times;

// --rebind_at: durations separated by commas, each > 0.
std::vector<Duration> ParseRebindTimes(const std::string& text) {
  std::vector<Duration> times;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const Duration d = kUsage.Or(ParseDuration(part), "rebind_at");
    if (d <= Duration::Zero()) kUsage.Fail("--rebind_at: each time must be > 0");
    times.push_back(d);
  }
  return times;
}

// The first keys of a JSON line about the run: the event, the mode, the link and the seed.
nlohmann::json EventJson(const char* event, bool udp_mode, const sim::LinkSpec& link) {
  nlohmann::json j;
  j["event"] = event;
  j["mode"] = udp_mode ? "udp" : "tun";
  j["link"] = nlohmann::json::parse(link.ToJson());
  j["seed"] = FLAGS_seed;
  return j;
}

// The on_stats callback of either mode: a line on stderr with the rates since the
// previous call and, with --json, a "stats" JSON line on stdout.
std::function<void(const emu::EmuStats&)> StatsPrinter(const sim::LinkSpec& link, size_t overhead,
                                                       bool udp_mode) {
  return [link, overhead, udp_mode, prev = emu::EmuStats{}](const emu::EmuStats& s) mutable {
    WritePeriodic(2, emu::EmuStatsLine(s, prev, link, overhead) + "\n");
    if (FLAGS_json) {
      nlohmann::json j = emu::EmuStatsToJson(s, udp_mode);
      j["event"] = "stats";
      std::cout.flush();
      WritePeriodic(1, j.dump() + "\n");
    }
    prev = s;
  };
}

// The end of a run in either mode: with --json the "final" line (the totals, the keys of
// `extra` and the error if any); then the exit status, 1 after the error on stderr.
int FinishRun(const absl::Status& run, const emu::EmuStats& s, const sim::LinkSpec& link,
              bool udp_mode, const nlohmann::json& extra) {
  if (FLAGS_json) {
    nlohmann::json j = emu::EmuStatsToJson(s, udp_mode);
    j.update(EventJson("final", udp_mode, link));
    j.update(extra);
    j["stats_lines_skipped"] = g_lines_skipped;
    if (!run.ok()) j["error"] = std::string(run.message());
    PrintJsonLine(j);
  }
  if (!run.ok()) {
    std::cerr << "longhaul-emu: " << run.message() << "\n";
    return 1;
  }
  return 0;
}

int RunUdp(const sim::LinkSpec& link, Duration stats_interval, Duration max_time, ByteCount buffer,
           ByteCount socket_buffer) {
  emu::UdpRelayOptions o;
  o.link = link;
  o.seed = FLAGS_seed;
  o.listen = kUsage.Or(net::SocketAddress::Parse(FLAGS_listen), "listen");
  o.forward = kUsage.Or(net::SocketAddress::Parse(FLAGS_forward), "forward");
  if (o.forward.port() == 0) kUsage.Fail("--forward: the port must not be 0");
  if (FLAGS_max_clients == 0) kUsage.Fail("--max_clients must be >= 1");
  o.max_clients = FLAGS_max_clients;
  o.buffer_bytes = buffer;
  o.socket_buffer_bytes = socket_buffer;
  o.tcp_relay = FLAGS_tcp_relay;
  o.gso = FLAGS_gso;
  o.realtime_priority = FLAGS_realtime;
  o.schedule_times = g_schedule_times;
  o.schedule_specs = g_schedule_specs;
  o.rebind_times = g_rebind_times;
  o.stats_interval = stats_interval;
  o.max_time = max_time;
  const size_t overhead = link.overhead;
  o.on_stats = StatsPrinter(link, overhead, /*udp_mode=*/true);
  absl::StatusOr<std::unique_ptr<emu::UdpRelay>> relay = emu::UdpRelay::Create(o);
  if (!relay.ok()) {
    if (absl::IsInvalidArgument(relay.status())) kUsage.Fail(relay.status().message());
    std::cerr << "longhaul-emu: " << relay.status().message() << "\n";
    return 1;
  }
  InstallSignals((*relay)->stop_fd());
  const emu::EmuStats initial = (*relay)->Stats();
  const std::string listen = (*relay)->listen_address().ToString();
  std::cerr << "longhaul-emu: relaying " << listen << " <-> " << o.forward.ToString() << " over "
            << link.ToString() << " (seed " << FLAGS_seed << ")\n";
  if (initial.socket_buffers.capped()) {
    std::cerr << absl::StrFormat(
        "longhaul-emu: warning: socket buffers capped at rcv %d / snd %d bytes (asked %d); "
        "raise net.core.rmem_max/wmem_max or run as root\n",
        initial.socket_buffers.rcvbuf, initial.socket_buffers.sndbuf,
        initial.socket_buffers.requested);
  }
  if (!FLAGS_port_file.empty() &&
      !WritePortFile(FLAGS_port_file, (*relay)->listen_address().port())) {
    std::cerr << "longhaul-emu: cannot write --port_file " << FLAGS_port_file << "\n";
    return 1;
  }
  if (FLAGS_json) {
    nlohmann::json j = EventJson("ready", /*udp_mode=*/true, link);
    j["listen"] = listen;
    j["listen_port"] = (*relay)->listen_address().port();
    j["forward"] = o.forward.ToString();
    if (!FLAGS_link_schedule.empty()) j["link_schedule"] = FLAGS_link_schedule;
    if (!FLAGS_rebind_at.empty()) j["rebind_at"] = FLAGS_rebind_at;
    PrintJsonLine(j);
  }
  absl::Status run = (*relay)->Run();
  const emu::EmuStats s = (*relay)->Stats();
  std::cerr << emu::EmuStatsLine(s, emu::EmuStats{}, link, overhead) << " (totals)\n";
  return FinishRun(run, s, link, /*udp_mode=*/true, nlohmann::json::object());
}

int RunTun(const sim::LinkSpec& link, Duration stats_interval, Duration max_time,
           ByteCount buffer) {
  const std::vector<std::string> names = absl::StrSplit(FLAGS_netns, ',');
  if (names.size() != 2) kUsage.Fail("--netns needs two names, e.g. --netns=lhA,lhB");
  for (const std::string& n : names) {
    if (absl::Status st = emu::ValidateNetnsName(n); !st.ok()) {
      kUsage.Fail(absl::StrCat("--netns: ", st.message()));
    }
  }
  if (names[0] == names[1]) kUsage.Fail("--netns: the two namespaces must differ");
  if (FLAGS_tun_name.empty() || FLAGS_tun_name.size() > 15) {
    kUsage.Fail("--tun_name must have 1..15 characters");
  }
  if (link.mtu < 68) kUsage.Fail("--link: TUN mode needs mtu >= 68");
  emu::TunBridgeOptions o;
  o.link = link;
  o.seed = FLAGS_seed;
  o.netns_a = names[0];
  o.netns_b = names[1];
  o.tun_name = FLAGS_tun_name;
  o.realtime_priority = FLAGS_realtime;
  o.schedule_times = g_schedule_times;
  o.schedule_specs = g_schedule_specs;
  o.buffer_bytes = buffer;
  o.stats_interval = stats_interval;
  o.max_time = max_time;
  // In TUN mode the model's byte counts are IP packets, so only extra framing is added.
  const size_t overhead = emu::EmuDirection::ModelSpec(link, emu::PayloadKind::kIpPacket).overhead;
  o.on_stats = StatsPrinter(link, overhead, /*udp_mode=*/false);
  absl::StatusOr<std::unique_ptr<emu::TunBridge>> bridge = emu::TunBridge::Create(o);
  if (!bridge.ok()) {
    if (absl::IsInvalidArgument(bridge.status())) {
      kUsage.Fail(bridge.status().message());
    }
    std::cerr << "longhaul-emu: " << bridge.status().message() << "\n";
    return 1;
  }
  InstallSignals((*bridge)->stop_fd());
  auto made = [](bool created) { return created ? "created" : "existing"; };
  std::cerr << absl::StrFormat(
      "longhaul-emu: bridging namespaces %s (%s, %s/%d on %s) and %s (%s, %s/%d on %s), mtu %d, "
      "over %s (seed %d)\n",
      o.netns_a, made((*bridge)->created_a()), o.address_a, o.prefix_len, o.tun_name, o.netns_b,
      made((*bridge)->created_b()), o.address_b, o.prefix_len, o.tun_name, link.mtu,
      link.ToString(), FLAGS_seed);
  if (FLAGS_json) {
    nlohmann::json j = EventJson("ready", /*udp_mode=*/false, link);
    j["netns"] = {
        {{"name", o.netns_a}, {"created", (*bridge)->created_a()}, {"address", o.address_a}},
        {{"name", o.netns_b}, {"created", (*bridge)->created_b()}, {"address", o.address_b}}};
    j["prefix_len"] = o.prefix_len;
    j["device"] = o.tun_name;
    j["mtu"] = link.mtu;
    if (!FLAGS_link_schedule.empty()) j["link_schedule"] = FLAGS_link_schedule;
    PrintJsonLine(j);
  }
  absl::Status run = (*bridge)->Run();
  const emu::EmuStats s = (*bridge)->Stats();
  const std::vector<std::string> deleted = (*bridge)->Shutdown();
  std::cerr << emu::EmuStatsLine(s, emu::EmuStats{}, link, overhead) << " (totals)\n";
  std::cerr << "longhaul-emu: devices removed"
            << (deleted.empty()
                    ? ""
                    : absl::StrCat("; namespaces deleted: ", absl::StrJoin(deleted, ", ")))
            << "\n";
  return FinishRun(run, s, link, /*udp_mode=*/false, {{"netns_deleted", deleted}});
}

int Main(int argc, char** argv) {
  BlockStopSignals();
  // --name=value, --name value, --[no]bool; exit status 2 and a message naming the flag.
  InitTool(argc, argv, kFlagDirs, kUsage, PrintHelp);
  if (FLAGS_link.empty()) kUsage.Fail("--link is required (e.g. --link=ts-1g)");
  const sim::LinkSpec link = kUsage.Or(sim::LoadLinkSpec(FLAGS_link), "link");
  if (!FLAGS_link_schedule.empty()) {
    const sim::LinkSchedule schedule =
        kUsage.Or(sim::ParseLinkSchedule(FLAGS_link_schedule), "link_schedule");
    g_schedule_specs = kUsage.Or(sim::ResolveLinkSchedule(link, schedule), "link_schedule");
    for (const sim::LinkScheduleStep& step : schedule.steps) g_schedule_times.push_back(step.at);
    for (const sim::LinkSpec& spec : g_schedule_specs) {
      // Buffers and the TUN devices are sized for the starting MTU: a step may lower it (a
      // path-MTU drop without ICMP), not raise it.
      if (spec.mtu > link.mtu) {
        kUsage.Fail(absl::StrCat("--link_schedule: mtu=", spec.mtu, " is above the link's mtu ",
                                 link.mtu, "; a schedule may only lower the MTU"));
      }
    }
  }
  if (!FLAGS_rebind_at.empty()) g_rebind_times = ParseRebindTimes(FLAGS_rebind_at);
  const Duration stats_interval = kUsage.Or(ParseDuration(FLAGS_stats_interval), "stats_interval");
  const Duration max_time = kUsage.Or(ParseDuration(FLAGS_max_time), "max_time");
  if (stats_interval < Duration::Zero()) kUsage.Fail("--stats_interval must be >= 0");
  if (max_time < Duration::Zero()) kUsage.Fail("--max_time must be >= 0");
  const ByteCount buffer = kUsage.Or(ParseByteCount(FLAGS_buffer), "buffer");
  const ByteCount socket_buffer = kUsage.Or(ParseByteCount(FLAGS_socket_buffer), "socket_buffer");
  if (buffer == 0) kUsage.Fail("--buffer must be > 0");
  if (socket_buffer == 0) kUsage.Fail("--socket_buffer must be > 0");
  if (FLAGS_realtime < 0 || FLAGS_realtime > 99) kUsage.Fail("--realtime must be in 0..99");
  const bool udp = !FLAGS_listen.empty() || !FLAGS_forward.empty();
  if (FLAGS_tun && udp) kUsage.Fail("--tun cannot be combined with --listen/--forward");
  if (FLAGS_tun) {
    if (FLAGS_netns.empty()) kUsage.Fail("--tun needs --netns=A,B");
    if (!FLAGS_port_file.empty() || FLAGS_tcp_relay || !FLAGS_rebind_at.empty()) {
      kUsage.Fail("--port_file, --tcp_relay and --rebind_at are UDP-mode flags");
    }
    return RunTun(link, stats_interval, max_time, buffer);
  }
  if (!FLAGS_netns.empty()) kUsage.Fail("--netns needs --tun");
  if (FLAGS_listen.empty() || FLAGS_forward.empty()) {
    kUsage.Fail("UDP mode needs both --listen and --forward (or use --tun --netns=A,B)");
  }
  return RunUdp(link, stats_interval, max_time, buffer, socket_buffer);
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) {
  return longhaul::Main(argc, argv);
}
