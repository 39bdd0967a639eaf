// longhaul-emu-load: a bounded load generator and ping-pong probe for measuring
// longhaul-emu (docs/emulator.md). It binds the sink address itself (the address the
// emulator forwards to) and sends to the emulator's listen address, so one process sees
// both ends on one clock.
//
//   flood:    --flows sockets send --size datagrams for --duration (paced at --rate, or
//             as fast as possible with --rate=0); the sink counts what arrives, the rate
//             over [--warmup, --duration] and the one-way delay.
//   pingpong: one datagram at a time; the sink echoes it back through the emulator; the
//             round-trip times of --pings pings (each waits at most --ping_timeout).
//
// TUN mode: --client_netns=A --sink_netns=B --from=198.18.0.1:0 --to=198.18.0.2:PORT
// --sink=198.18.0.2:PORT creates the sockets inside the namespaces (root).
//
// Traffic goes only to the addresses given, which must be loopback or in 198.18.0.0/15
// (namespaces made for the purpose). Every loop is bounded
// by --duration (+ --drain) or --pings x --ping_timeout.
// Exit status: 0 done, 1 runtime failure, 2 bad flags.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "nlohmann/json.hpp"
#include "tools/common/tool_flags.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/emu/loop_util.h"
#include "transport/emu/netns.h"
#include "transport/net/control_messages.h"
#include "transport/net/socket_address.h"
#include "transport/net/socket_setup.h"

DEFINE_string(to, "",
              "where to send: the emulator's listen address, e.g. 127.0.0.1:9000, or "
              "in TUN mode the sink itself, e.g. 198.18.0.2:9001 (required)");
DEFINE_string(sink, "",
              "address to receive at: the emulator's --forward, e.g. 127.0.0.1:9001, "
              "or 198.18.0.2:9001 in TUN mode (required)");
DEFINE_string(from, "",
              "address the sending sockets bind to (default: --to's IP, any port; "
              "198.18.0.1:0 in TUN mode)");
DEFINE_string(client_netns, "", "TUN mode: create the sending sockets in this namespace (A)");
DEFINE_string(sink_netns, "", "TUN mode: create the sink socket in this namespace (B)");
DEFINE_string(mode, "flood", "flood (throughput) or pingpong (round-trip time)");
DEFINE_string(size, "8KiB", "datagram payload size (32..65507 bytes)");
DEFINE_string(duration, "10s", "flood: how long to send");
DEFINE_string(warmup, "1s", "flood: the rate is measured over [warmup, duration]");
DEFINE_string(drain, "1s", "flood: how long the sink keeps counting after the sender stops");
DEFINE_string(rate, "0", "flood: send rate of payload bits/s (e.g. 3gbit; 0: as fast as possible)");
DEFINE_int32(flows, 1, "flood: sending sockets (distinct source ports), 1..64");
DEFINE_int32(pings, 100, "pingpong: number of pings (1..100000)");
DEFINE_string(ping_timeout, "2s", "pingpong: a ping not answered within this is lost");
DEFINE_int32(overhead, 28, "bytes added per datagram on the wire, for the wire rate");
DEFINE_bool(json, false, "print one JSON object");

namespace longhaul {
namespace {

constexpr ToolUsage kUsage("longhaul-emu-load");
constexpr uint32_t kMagic = 0x4c48454d;  // "LHEM"

struct Header {
  uint32_t magic;
  uint32_t flow;
  uint64_t seq;
  int64_t sent_ns;  // CLOCK_MONOTONIC at the sender
  int64_t hold_ns;  // pingpong: time the echo spent in the sink (kernel arrival to send)
};
static_assert(sizeof(Header) == 32);

// Receives one datagram with its kernel arrival time mapped to CLOCK_MONOTONIC (the
// reading process's wake-up delay then does not count); -1 when nothing was read.
ssize_t RecvStamped(int fd, uint8_t* buf, size_t len, sockaddr_storage* from, socklen_t* from_len,
                    int64_t* arrival_ns) {
  iovec iov{buf, len};
  msghdr h{};
  alignas(cmsghdr) uint8_t control[64];
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_name = from;
  h.msg_namelen = from != nullptr ? sizeof(*from) : 0;
  h.msg_control = control;
  h.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(fd, &h, MSG_DONTWAIT);
  const int64_t mono = MonotonicNs();
  if (n < 0) return n;
  if (from_len != nullptr) *from_len = h.msg_namelen;
  const int64_t rt = net::ReceivedRealtimeNs(h);
  *arrival_ns = rt > 0 ? std::min(mono, rt - (RealtimeNs() - MonotonicNs())) : mono;
  return n;
}

int MakeSocket(const net::SocketAddress& bind_to, const net::SocketAddress* connect_to,
               bool nonblocking, const std::string& netns = "") {
  int fd = -1;
  const int type = SOCK_DGRAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
  if (netns.empty()) {
    fd = socket(bind_to.family(), type, 0);
  } else {
    // A socket belongs to the namespace it was created in, whichever thread uses it later.
    const int ns = open(emu::NetnsPath(netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
      std::cerr << "longhaul-emu-load: no namespace " << netns << ": " << strerror(errno) << "\n";
      std::exit(1);
    }
    absl::Status st = emu::RunInNetns(ns, [&]() -> absl::Status {
      fd = socket(bind_to.family(), type, 0);
      return absl::OkStatus();
    });
    close(ns);
    if (!st.ok()) {
      std::cerr << "longhaul-emu-load: " << st.message() << "\n";
      std::exit(1);
    }
  }
  if (fd < 0) {
    std::cerr << "longhaul-emu-load: socket: " << strerror(errno) << "\n";
    std::exit(1);
  }
  net::SetSocketBuffers(fd, 64 << 20);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
  if (absl::Status s = net::BindSocket(fd, bind_to); !s.ok()) {
    std::cerr << "longhaul-emu-load: " << s.message() << "\n";
    std::exit(1);
  }
  if (connect_to != nullptr) {
    if (absl::Status s = net::ConnectSocket(fd, *connect_to); !s.ok()) {
      std::cerr << "longhaul-emu-load: " << s.message() << "\n";
      std::exit(1);
    }
  }
  return fd;
}

net::SocketAddress g_from;  // where the sending sockets bind

// Traffic only to loopback or to the benchmarking range 198.18.0.0/15 (namespaces made
// for the purpose).
bool AllowedAddress(const net::SocketAddress& a) {
  if (a.is_loopback()) return true;
  if (a.family() != AF_INET) return false;
  const auto* s = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
  return (ntohl(s->sin_addr.s_addr) & 0xfffe0000u) == 0xc6120000u;
}

void SleepUntil(int64_t t_ns) {
  timespec ts{static_cast<time_t>(t_ns / 1000000000), static_cast<long>(t_ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// The flood's flags, checked (a bad one exits with the usage status).
struct FloodFlags {
  Duration duration, warmup, drain;
  Bandwidth rate;
};

FloodFlags ParseFloodFlags() {
  FloodFlags f;
  f.duration = kUsage.Or(ParseDuration(FLAGS_duration), "duration");
  f.warmup = kUsage.Or(ParseDuration(FLAGS_warmup), "warmup");
  f.drain = kUsage.Or(ParseDuration(FLAGS_drain), "drain");
  f.rate = kUsage.Or(ParseBandwidth(FLAGS_rate), "rate");
  if (f.duration <= Duration::Zero() || f.duration > Duration::Seconds(3600)) {
    kUsage.Fail("--duration must be in (0, 1h]");
  }
  if (f.warmup < Duration::Zero() || f.warmup >= f.duration) {
    kUsage.Fail("--warmup must be in [0, duration)");
  }
  if (f.drain < Duration::Zero() || f.drain > Duration::Seconds(60))
    kUsage.Fail("--drain must be in [0, 60s]");
  if (FLAGS_flows < 1 || FLAGS_flows > 64) kUsage.Fail("--flows must be in 1..64");
  return f;
}

// The flood's receiving end: 100 ms bins of payload bytes and datagrams by arrival time,
// and the one-way delay.
class FloodSink {
 public:
  static constexpr int64_t kBinNs = 100'000'000;

  FloodSink(int64_t start, Duration span)
      : start_(start),
        bins_(static_cast<size_t>(span.ns() / kBinNs + 2)),
        bin_bytes_(bins_, 0),
        bin_pkts_(bins_, 0) {}

  // Receives until the sender is done and `drain` more has passed.
  void Run(int sink_fd, const std::atomic<bool>& sender_done,
           const std::atomic<int64_t>& sender_end_ns, Duration drain) {
    constexpr int kBatch = 64;
    std::vector<uint8_t> buf(kBatch * 65536);
    mmsghdr msgs[kBatch];
    iovec iov[kBatch];
    alignas(cmsghdr) static thread_local uint8_t control[kBatch][64];
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {buf.data() + i * 65536, 65536};
    }
    while (true) {
      const int64_t now = MonotonicNs();
      if (sender_done.load() && now >= sender_end_ns.load() + drain.ns()) break;
      pollfd p{sink_fd, POLLIN, 0};
      poll(&p, 1, 20);
      for (int i = 0; i < kBatch; ++i) {
        msgs[i].msg_hdr = msghdr{};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control[i];
        msgs[i].msg_hdr.msg_controllen = sizeof(control[i]);
      }
      const int n = recvmmsg(sink_fd, msgs, kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) continue;
      const int64_t mono = MonotonicNs();
      const int64_t real_minus_mono = RealtimeNs() - mono;
      for (int i = 0; i < n; ++i) {
        // Kernel arrival time: the sink thread's own scheduling delay does not count.
        const int64_t rt = net::ReceivedRealtimeNs(msgs[i].msg_hdr);
        const int64_t t = rt > 0 ? std::min(mono, rt - real_minus_mono) : mono;
        Count(t, static_cast<const uint8_t*>(iov[i].iov_base), msgs[i].msg_len);
      }
    }
  }

  // Payload bytes and datagrams of the whole bins inside [from, to].
  void WindowTotals(Duration from, Duration to, size_t* b0, size_t* b1, uint64_t* bytes,
                    uint64_t* pkts) const {
    *b0 = static_cast<size_t>((from.ns() + kBinNs - 1) / kBinNs);
    *b1 = static_cast<size_t>(to.ns() / kBinNs);
    uint64_t wb = 0, wp = 0;
    for (size_t b = *b0; b < *b1 && b < bins_; ++b) {
      wb += bin_bytes_[b];
      wp += bin_pkts_[b];
    }
    *bytes = wb;
    *pkts = wp;
  }

  uint64_t received() const { return received_; }
  uint64_t received_bytes() const { return received_bytes_; }
  uint64_t foreign() const { return foreign_; }
  double owd_sum() const { return owd_sum_; }
  int64_t owd_min() const { return owd_min_; }
  int64_t owd_max() const { return owd_max_; }

 private:
  // One datagram of len bytes that arrived at t.
  void Count(int64_t t, const uint8_t* data, uint32_t len) {
    const size_t bin =
        static_cast<size_t>(std::clamp<int64_t>((t - start_) / kBinNs, 0, bins_ - 1));
    Header h;
    if (len < sizeof(h)) {
      ++foreign_;
      return;
    }
    std::memcpy(&h, data, sizeof(h));
    if (h.magic != kMagic) {
      ++foreign_;
      return;
    }
    ++received_;
    received_bytes_ += len;
    ++bin_pkts_[bin];
    bin_bytes_[bin] += len;
    const int64_t owd = t - h.sent_ns;
    owd_sum_ += static_cast<double>(owd);
    owd_min_ = std::min(owd_min_, owd);
    owd_max_ = std::max(owd_max_, owd);
  }

  const int64_t start_;
  const size_t bins_;
  std::vector<uint64_t> bin_bytes_, bin_pkts_;
  uint64_t received_ = 0, received_bytes_ = 0, foreign_ = 0;
  double owd_sum_ = 0;
  int64_t owd_min_ = INT64_MAX, owd_max_ = 0;
};

// Sends batches of 16 per flow, round-robin, until send_end; paced when rate > 0.
void SendFlood(const std::vector<int>& flows, size_t size, Bandwidth rate, int64_t start,
               int64_t send_end, uint64_t* sent, uint64_t* send_errors) {
  constexpr int kBatch = 16;
  std::vector<uint8_t> buf(kBatch * size, 0xa5);
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  const double ns_per_datagram = rate.IsZero() ? 0 : static_cast<double>(size) * 8e9 / rate.bps();
  int64_t next = start;
  for (size_t f = 0; MonotonicNs() < send_end; f = (f + 1) % flows.size()) {
    const int64_t now = MonotonicNs();
    for (int i = 0; i < kBatch; ++i) {
      Header h{kMagic, static_cast<uint32_t>(f), *sent + i, now, 0};
      std::memcpy(buf.data() + i * size, &h, sizeof(h));
      iov[i] = {buf.data() + i * size, size};
      msgs[i].msg_hdr = msghdr{};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int n = sendmmsg(flows[f], msgs, kBatch, 0);
    if (n > 0) {
      *sent += static_cast<uint64_t>(n);
    } else {
      ++*send_errors;
    }
    if (ns_per_datagram > 0) {
      next += static_cast<int64_t>(ns_per_datagram * std::max(n, 1));
      if (next > MonotonicNs()) SleepUntil(next);
    }
  }
}

// Prints the flood's figures (JSON with --json): the rate over whole bins inside
// [warmup, duration], the offered rate and the one-way delay.
void ReportFlood(const FloodFlags& flags, size_t size, const FloodSink& sink, uint64_t sent,
                 uint64_t send_errors, double sent_s) {
  size_t b0 = 0, b1 = 0;
  uint64_t wb = 0, wp = 0;
  sink.WindowTotals(flags.warmup, flags.duration, &b0, &b1, &wb, &wp);
  const uint64_t received = sink.received();
  const int64_t owd_min = sink.owd_min(), owd_max = sink.owd_max();
  const double window_s = b1 > b0 ? static_cast<double>((b1 - b0) * FloodSink::kBinNs) * 1e-9 : 0;
  const double payload_bps = window_s > 0 ? static_cast<double>(wb) * 8 / window_s : 0;
  const double wire_bps =
      window_s > 0
          ? static_cast<double>(wb + wp * static_cast<uint64_t>(FLAGS_overhead)) * 8 / window_s
          : 0;
  const double offered_bps = sent_s > 0 ? static_cast<double>(sent * size) * 8 / sent_s : 0;
  const double owd_mean_ms = received ? sink.owd_sum() / static_cast<double>(received) * 1e-6 : 0;
  if (FLAGS_json) {
    nlohmann::json j;
    j["mode"] = "flood";
    j["size"] = size;
    j["flows"] = FLAGS_flows;
    j["duration_s"] = flags.duration.seconds();
    j["sent"] = sent;
    j["send_errors"] = send_errors;
    j["offered_payload_bps"] = offered_bps;
    j["received"] = received;
    j["received_bytes"] = sink.received_bytes();
    j["foreign"] = sink.foreign();
    j["delivery_fraction"] = sent ? static_cast<double>(received) / static_cast<double>(sent) : 0;
    j["window_s"] = window_s;
    j["payload_bps"] = payload_bps;
    j["wire_bps"] = wire_bps;
    j["owd_min_ms"] = received ? static_cast<double>(owd_min) * 1e-6 : 0;
    j["owd_mean_ms"] = owd_mean_ms;
    j["owd_max_ms"] = static_cast<double>(owd_max) * 1e-6;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << absl::StrFormat(
        "sent %d datagrams of %d B (%.3f Gbit/s offered), received %d (%.2f%%)\n"
        "rate over [%s, %s]: payload %.4f Gbit/s, wire %.4f Gbit/s (overhead %d B)\n"
        "one-way delay: min %.3f ms, mean %.3f ms, max %.3f ms\n",
        sent, size, offered_bps / 1e9, received,
        sent ? 100.0 * static_cast<double>(received) / static_cast<double>(sent) : 0, FLAGS_warmup,
        FLAGS_duration, payload_bps / 1e9, wire_bps / 1e9, FLAGS_overhead,
        received ? static_cast<double>(owd_min) * 1e-6 : 0, owd_mean_ms,
        static_cast<double>(owd_max) * 1e-6);
  }
}

int Flood(const net::SocketAddress& to, const net::SocketAddress& sink, size_t size) {
  const FloodFlags flags = ParseFloodFlags();
  const int sink_fd = MakeSocket(sink, nullptr, /*nonblocking=*/true, FLAGS_sink_netns);
  std::vector<int> flows;
  for (int i = 0; i < FLAGS_flows; ++i) {
    flows.push_back(MakeSocket(g_from, &to, false, FLAGS_client_netns));
  }

  const int64_t start = MonotonicNs();
  const int64_t send_end = start + flags.duration.ns();
  std::atomic<bool> sender_done{false};
  std::atomic<int64_t> sender_end_ns{send_end};
  uint64_t sent = 0, send_errors = 0;

  FloodSink counts(start, flags.duration + flags.drain);
  std::thread receiver([&] { counts.Run(sink_fd, sender_done, sender_end_ns, flags.drain); });
  SendFlood(flows, size, flags.rate, start, send_end, &sent, &send_errors);
  sender_end_ns = MonotonicNs();
  sender_done = true;
  receiver.join();

  const double sent_s = static_cast<double>(sender_end_ns.load() - start) * 1e-9;
  ReportFlood(flags, size, counts, sent, send_errors, sent_s);
  for (int fd : flows) close(fd);
  close(sink_fd);
  return 0;
}

int PingPong(const net::SocketAddress& to, const net::SocketAddress& sink, size_t size) {
  const Duration timeout = kUsage.Or(ParseDuration(FLAGS_ping_timeout), "ping_timeout");
  if (FLAGS_pings < 1 || FLAGS_pings > 100000) kUsage.Fail("--pings must be in 1..100000");
  if (timeout <= Duration::Zero() || timeout > Duration::Seconds(60)) {
    kUsage.Fail("--ping_timeout must be in (0, 60s]");
  }
  const int sink_fd = MakeSocket(sink, nullptr, true, FLAGS_sink_netns);
  const int client_fd = MakeSocket(g_from, &to, true, FLAGS_client_netns);
  std::vector<uint8_t> out(size, 0x5a), in(65536);
  std::vector<double> rtts, raw_rtts;  // kernel-timestamped (sink hold removed) / app-seen
  int lost = 0;
  for (int i = 0; i < FLAGS_pings; ++i) {
    const int64_t sent_ns = MonotonicNs();
    Header h{kMagic, 0, static_cast<uint64_t>(i), sent_ns, 0};
    std::memcpy(out.data(), &h, sizeof(h));
    if (send(client_fd, out.data(), size, 0) < 0) {
      ++lost;
      continue;
    }
    const int64_t deadline = sent_ns + timeout.ns();
    bool answered = false;
    while (!answered) {
      const int64_t left = deadline - MonotonicNs();
      if (left <= 0) break;
      pollfd p[2] = {{sink_fd, POLLIN, 0}, {client_fd, POLLIN, 0}};
      timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
      if (ppoll(p, 2, &ts, nullptr) <= 0) continue;
      if (p[0].revents & POLLIN) {  // echo, noting how long it was held here
        sockaddr_storage from{};
        socklen_t fl = 0;
        int64_t arrival = 0;
        ssize_t n = RecvStamped(sink_fd, in.data(), in.size(), &from, &fl, &arrival);
        if (n >= static_cast<ssize_t>(sizeof(Header))) {
          Header e;
          std::memcpy(&e, in.data(), sizeof(e));
          e.hold_ns = MonotonicNs() - arrival;
          std::memcpy(in.data(), &e, sizeof(e));
          sendto(sink_fd, in.data(), static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from),
                 fl);
        }
      }
      if (p[1].revents & POLLIN) {
        int64_t arrival = 0;
        ssize_t n = RecvStamped(client_fd, in.data(), in.size(), nullptr, nullptr, &arrival);
        Header r;
        if (n >= static_cast<ssize_t>(sizeof(r))) {
          std::memcpy(&r, in.data(), sizeof(r));
          if (r.magic == kMagic && r.seq == static_cast<uint64_t>(i)) {
            rtts.push_back(static_cast<double>(arrival - r.sent_ns - r.hold_ns) * 1e-6);
            raw_rtts.push_back(static_cast<double>(MonotonicNs() - r.sent_ns) * 1e-6);
            answered = true;
          }
        }
      }
    }
    if (!answered) ++lost;
  }
  std::vector<double> sorted = rtts;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) {
    return sorted.empty()
               ? 0.0
               : sorted[std::min(sorted.size() - 1,
                                 static_cast<size_t>(q * static_cast<double>(sorted.size())))];
  };
  double mean = 0, raw_mean = 0;
  for (double r : rtts) mean += r;
  for (double r : raw_rtts) raw_mean += r;
  if (!rtts.empty()) mean /= static_cast<double>(rtts.size());
  if (!raw_rtts.empty()) raw_mean /= static_cast<double>(raw_rtts.size());
  if (FLAGS_json) {
    nlohmann::json j;
    j["mode"] = "pingpong";
    j["size"] = size;
    j["pings"] = FLAGS_pings;
    j["answered"] = rtts.size();
    j["lost"] = lost;
    j["rtt_min_ms"] = sorted.empty() ? 0 : sorted.front();
    j["rtt_mean_ms"] = mean;
    j["rtt_p50_ms"] = pct(0.5);
    j["rtt_p99_ms"] = pct(0.99);
    j["rtt_max_ms"] = sorted.empty() ? 0 : sorted.back();
    j["app_rtt_mean_ms"] = raw_mean;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << absl::StrFormat(
        "%d pings of %d B: %d answered, %d lost; rtt min %.3f mean %.3f p50 %.3f p99 %.3f "
        "max %.3f ms (kernel timestamps); as the application saw it: mean %.3f ms\n",
        FLAGS_pings, size, rtts.size(), lost, sorted.empty() ? 0 : sorted.front(), mean, pct(0.5),
        pct(0.99), sorted.empty() ? 0 : sorted.back(), raw_mean);
  }
  close(sink_fd);
  close(client_fd);
  return 0;
}

int Main(int argc, char** argv) {
  InitTool(&argc, &argv,
           "longhaul-emu-load --to=127.0.0.1:PORT --sink=127.0.0.1:PORT "
           "[--mode=flood|pingpong] [flags]");
  if (argc > 1) kUsage.Fail(absl::StrCat("unexpected argument '", argv[1], "'"));
  if (FLAGS_to.empty() || FLAGS_sink.empty()) kUsage.Fail("--to and --sink are required");
  const net::SocketAddress to = kUsage.Or(net::SocketAddress::Parse(FLAGS_to), "to");
  const net::SocketAddress sink = kUsage.Or(net::SocketAddress::Parse(FLAGS_sink), "sink");
  if (!AllowedAddress(to) || !AllowedAddress(sink)) {
    kUsage.Fail("--to and --sink must be loopback or 198.18.0.0/15 addresses");
  }
  if (FLAGS_from.empty()) {
    g_from = to;
    g_from.set_port(0);
  } else {
    g_from = kUsage.Or(net::SocketAddress::Parse(FLAGS_from), "from");
    if (!AllowedAddress(g_from)) kUsage.Fail("--from must be a loopback or 198.18.0.0/15 address");
  }
  const ByteCount size = kUsage.Or(ParseByteCount(FLAGS_size), "size");
  if (size < sizeof(Header) || size > 65507) kUsage.Fail("--size must be in 32..65507 bytes");
  if (FLAGS_mode == "flood") return Flood(to, sink, size);
  if (FLAGS_mode == "pingpong") return PingPong(to, sink, size);
  kUsage.Fail(absl::StrCat("--mode: unknown '", FLAGS_mode, "' (flood, pingpong)"));
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) { return longhaul::Main(argc, argv); }
