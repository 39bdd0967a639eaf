// longhaul-tcp-peer: longhaul-perf's workloads (bulk, open-loop messages, a timed transfer)
// over one TCP connection, with the congestion control chosen per socket, for the
// side-by-side comparison of tools/bench/wan-compare (docs/comparison.md).
//
//   longhaul-tcp-peer --server [--bind=ADDR] [--port=5302] [--one_off]
//   longhaul-tcp-peer --client=HOST [--port=5302] [--cc=bbr|cubic|...]
//                     [--workload=bulk --time=SEC [--omit=SEC]]
//                     [--workload=messages --message_size=SIZE --load=F --rate=R
//                      (--messages=N | --time=SEC)]
//                     [--workload=transfer --bytes=SIZE]
//
// The client sends, the server receives and measures; the client prints one JSON object
// (iperf3-shaped: end.sum_received.bits_per_second is the goodput; mct_* for messages,
// completion_s for transfers, sum_sent.retransmits from TCP_INFO). Bulk TCP goodput in
// wan-compare comes from iperf3; this peer is for what iperf3 cannot measure.
//
// Exit status: 0 success, 1 runtime failure (the JSON has "error"), 2 bad flags.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // the kernel's full struct tcp_info (glibc's is older)
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "tools/bench/peers/peer_common/peer_flags.h"
#include "tools/bench/peers/peer_common/peer_workload.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"

constexpr int kDefaultPort = 5302;
DEFINE_int32(port, kDefaultPort, "TCP port to listen on / connect to");
DEFINE_string(cc, "", "TCP congestion control of the socket (bbr, cubic, ...); empty: default");
DEFINE_bool(nodelay, true, "TCP_NODELAY (a message's tail is not held back by Nagle)");
DEFINE_string(connect_timeout, "10s", "client: give up connecting after this long");

namespace longhaul::bench {
namespace {

constexpr PeerUsage kUsage = {
    "longhaul-tcp-peer", "longhaul-perf's workloads over one TCP connection (docs/comparison.md)",
    kDefaultPort, "[--cc=bbr|cubic]"};

class TcpStream : public ByteStream {
 public:
  explicit TcpStream(int fd) : fd_(fd) {
    timeval tv{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  ~TcpStream() override { close(fd_); }

  absl::Status SendAll(const uint8_t* p, size_t n, bool more) override {
    size_t off = 0;
    while (off < n) {
      ssize_t w = send(fd_, p + off, n - off, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (deadline_ns() != 0 && MonotonicNs() >= deadline_ns()) {
            return absl::DeadlineExceededError("the peer stopped reading (send timed out)");
          }
          continue;
        }
        return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
      }
      off += static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> RecvSome(uint8_t* p, size_t n) override {
    while (true) {
      ssize_t r = recv(fd_, p, n, 0);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::DeadlineExceededError("no data");
      return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
    }
  }

  nlohmann::json Stats() override {
    tcp_info ti{};
    if (!Info(&ti)) return nlohmann::json();
    nlohmann::json j = {
        {"total_retrans", ti.tcpi_total_retrans}, {"rtt_ms", ti.tcpi_rtt / 1000.0},
        {"rttvar_ms", ti.tcpi_rttvar / 1000.0}, {"min_rtt_ms", ti.tcpi_min_rtt / 1000.0},
        {"snd_cwnd", ti.tcpi_snd_cwnd}, {"snd_mss", ti.tcpi_snd_mss}, {"rcv_mss", ti.tcpi_rcv_mss},
        {"pmtu", ti.tcpi_pmtu}, {"lost", ti.tcpi_lost}, {"reordering", ti.tcpi_reordering},
        {"delivery_rate_bps", static_cast<double>(ti.tcpi_delivery_rate) * 8},
        {"bytes_acked", ti.tcpi_bytes_acked}, {"bytes_received", ti.tcpi_bytes_received},
        {"segs_out", ti.tcpi_segs_out}, {"data_segs_out", ti.tcpi_data_segs_out},
        {"busy_time_us", ti.tcpi_busy_time}, {"rwnd_limited_us", ti.tcpi_rwnd_limited},
        {"sndbuf_limited_us", ti.tcpi_sndbuf_limited}};
    char cc[32] = {};
    socklen_t cl = sizeof(cc);
    if (getsockopt(fd_, IPPROTO_TCP, TCP_CONGESTION, cc, &cl) == 0) j["congestion"] = cc;
    return j;
  }

  int64_t Retransmissions() override {
    tcp_info ti{};
    if (!Info(&ti)) return -1;
    return ti.tcpi_total_retrans;
  }
  double MinRttSeconds() override {
    tcp_info ti{};
    if (!Info(&ti)) return 0;
    return ti.tcpi_min_rtt * 1e-6;
  }
  int64_t PayloadPerPacket() override {
    tcp_info ti{};
    if (!Info(&ti)) return 1448;
    return ti.tcpi_snd_mss;
  }
  int64_t UnackedBytes() override {
    int n = 0;
    return ioctl(fd_, SIOCOUTQ, &n) == 0 ? n : 0;
  }
  int64_t HeaderBytesPerPacket() override {
    tcp_info ti{};
    if (!Info(&ti)) return 52;
    // IP + TCP headers and options: the path MTU less the payload of a full segment.
    return ti.tcpi_pmtu > ti.tcpi_snd_mss ? ti.tcpi_pmtu - ti.tcpi_snd_mss : 52;
  }

 private:
  // The kernel's TCP_INFO for the socket into *ti; false when it gave none.
  bool Info(tcp_info* ti) const {
    socklen_t len = sizeof(*ti);
    return getsockopt(fd_, IPPROTO_TCP, TCP_INFO, ti, &len) == 0;
  }

  int fd_;
};

absl::Status SetCc(int fd) {
  if (FLAGS_cc.empty()) return absl::OkStatus();
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, FLAGS_cc.data(), FLAGS_cc.size()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cc=", FLAGS_cc, ": the kernel refused it (", strerror(errno),
        "); see /proc/sys/net/ipv4/tcp_available_congestion_control"));
  }
  return absl::OkStatus();
}

int RunClientMain(const WorkloadOptions& base) {
  absl::StatusOr<sockaddr_in> to = Ipv4(FLAGS_client, FLAGS_port, "--client");
  if (!to.ok()) return Fail(to.status(), FLAGS_json);
  absl::StatusOr<Duration> ct = ParseDuration(FLAGS_connect_timeout);
  if (!ct.ok()) return Fail(absl::InvalidArgumentError(ct.status().message()), FLAGS_json);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(absl::InternalError(strerror(errno)), FLAGS_json);
  if (absl::Status s = SetCc(fd); !s.ok()) {
    close(fd);
    return Fail(s, FLAGS_json);
  }
  int one = FLAGS_nodelay ? 1 : 0;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (FLAGS_bind != "0.0.0.0") {
    absl::StatusOr<sockaddr_in> local = Ipv4(FLAGS_bind, 0, "--bind");
    if (!local.ok() || bind(fd, reinterpret_cast<const sockaddr*>(&*local), sizeof(*local)) != 0) {
      close(fd);
      return Fail(local.ok() ? absl::UnavailableError(absl::StrCat("bind ", FLAGS_bind, ": ",
                                                                   strerror(errno)))
                             : local.status(),
                  FLAGS_json);
    }
  }
  WorkloadOptions o = base;
  // connect() waits at most --connect_timeout (SO_SNDTIMEO bounds a blocking connect).
  timeval tv{static_cast<time_t>(ct->ns() / 1'000'000'000),
             static_cast<suseconds_t>((ct->ns() / 1000) % 1'000'000)};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  o.connect_start_realtime_ns = RealtimeNs();
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*to), sizeof(*to)) != 0) {
    const int e = errno;
    close(fd);
    return Fail(absl::UnavailableError(absl::StrCat("unable to connect to ", FLAGS_client, ":",
                                                    FLAGS_port, ": ", strerror(e))),
                FLAGS_json);
  }
  o.connect_done_realtime_ns = RealtimeNs();
  TcpStream stream(fd);  // sets 1 s send/receive timeouts for the bounded loops
  absl::StatusOr<nlohmann::json> r = RunClient(stream, o);
  if (!r.ok()) return Fail(r.status(), FLAGS_json);
  (*r)["start"]["peer"] = "tcp";
  (*r)["start"]["connecting_to"] = {{"host", FLAGS_client}, {"port", FLAGS_port}};
  (*r)["start"]["congestion"] = (*r)["end"]["sender_stats"].value("congestion", FLAGS_cc);
  return PrintClientResult(*r);
}

int RunServerMain() {
  absl::StatusOr<ServerFlags> f = ServerFlagsFromCommandLine(FLAGS_port);
  if (!f.ok()) return Fail(f.status(), false);
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(lfd, reinterpret_cast<const sockaddr*>(&f->at), sizeof(f->at)) != 0 ||
      listen(lfd, 4) != 0) {
    const int e = errno;
    close(lfd);
    return Fail(absl::UnavailableError(absl::StrCat("listen on ", FLAGS_bind, ":", FLAGS_port,
                                                    ": ", strerror(e))),
                false);
  }
  std::cout << nlohmann::json({{"event", "listening"}, {"port", FLAGS_port}}).dump() << std::endl;
  const int status = ServeClients(
      f->accept_timeout, [&](Duration timeout) -> absl::StatusOr<std::unique_ptr<ByteStream>> {
        pollfd p{lfd, POLLIN, 0};
        const int n = poll(&p, 1, static_cast<int>(timeout.ns() / 1'000'000));
        if (n == 0) return absl::DeadlineExceededError("no client");
        if (n < 0) {
          if (errno == EINTR) return nullptr;
          return absl::UnavailableError(absl::StrCat("poll: ", strerror(errno)));
        }
        int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return nullptr;
        (void)SetCc(fd);
        return std::make_unique<TcpStream>(fd);
      });
  close(lfd);
  return status;
}

int Main(int argc, char** argv) {
  ParsePeerFlags(argc, argv, kUsage);
  return ServeOrSend(RunServerMain, RunClientMain);
}

}  // namespace
}  // namespace longhaul::bench

int main(int argc, char** argv) { return longhaul::bench::Main(argc, argv); }
