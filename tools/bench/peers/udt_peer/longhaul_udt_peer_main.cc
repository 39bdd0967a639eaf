// longhaul-udt-peer: a UDT4 (libudt, Debian libudt-dev) client and server, memory to
// memory, running longhaul-perf's workloads (bulk, open-loop messages, a timed transfer)
// for the side-by-side comparison of tools/bench/wan-compare (docs/comparison.md).
//
//   longhaul-udt-peer --server [--bind=ADDR] [--port=5303] [--one_off]
//   longhaul-udt-peer --client=HOST [--port=5303] [--rate=1gbit --rtt=58ms]
//                     [--workload=bulk --time=SEC [--omit=SEC]] [--workload=messages ...]
//                     [--workload=transfer --bytes=SIZE]
//
// UDT runs its own congestion control (DAIMD) on one connection in stream mode. Its flow
// window and buffers are raised so they never limit it (a fair peer): UDT_MSS = --mss
// (9000: 9000-byte IP packets, 8956 payload bytes), UDT_FC >= 65536 packets and >= the
// buffer in packets, UDT_SNDBUF = UDT_RCVBUF = max(256 MiB, 8 x BDP of --rate x --rtt),
// UDP_SNDBUF = UDP_RCVBUF = max(64 MiB, 2 x BDP) (the host's net.core.rmem_max/wmem_max
// must allow them: the JSON shows what getsockopt reports). All are set before
// bind/connect (UDT_FC first), as UDT requires.
//
// Exit status: 0 success, 1 runtime failure (the JSON has "error"), 2 bad flags.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <udt/udt.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "tools/bench/peers/peer_common/peer_flags.h"
#include "tools/bench/peers/peer_common/peer_workload.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"

constexpr int kDefaultPort = 5303;
DEFINE_int32(port, kDefaultPort, "UDP port of the UDT server");
DEFINE_int32(mss, 9000, "UDT_MSS: IP packet size of UDT's data packets (the link's MTU)");
DEFINE_string(rtt, "58ms", "the link's round-trip time (sizes the window and buffers)");
DEFINE_string(buffer, "0", "UDT_SNDBUF/UDT_RCVBUF (0: max(256MiB, 8 x BDP))");
DEFINE_string(udp_buffer, "0", "UDP_SNDBUF/UDP_RCVBUF (0: max(64MiB, 2 x BDP))");

namespace longhaul::bench {
namespace {

constexpr int kUdtHeaderBytes = 16;
constexpr int kIpUdpHeaderBytes = 28;
constexpr PeerUsage kUsage = {
    "longhaul-udt-peer", "a UDT4 peer running longhaul-perf's workloads (docs/comparison.md)",
    kDefaultPort, "[--rate=R --rtt=T]"};

std::string UdtError() {
  return absl::StrCat(UDT::getlasterror_desc(), " (UDT error ", UDT::getlasterror_code(), ")");
}

class UdtStream : public ByteStream {
 public:
  explicit UdtStream(UDTSOCKET s) : s_(s) {
    int ms = 1000;
    UDT::setsockopt(s_, 0, UDT_SNDTIMEO, &ms, sizeof(ms));
    UDT::setsockopt(s_, 0, UDT_RCVTIMEO, &ms, sizeof(ms));
  }
  ~UdtStream() override {
    linger l{1, 1};  // everything was delivered before the result; do not hold the exit
    UDT::setsockopt(s_, 0, UDT_LINGER, &l, sizeof(l));
    UDT::close(s_);
  }

  absl::Status SendAll(const uint8_t* p, size_t n, bool) override {
    size_t off = 0;
    while (off < n) {
      const int chunk = static_cast<int>(std::min<size_t>(n - off, 64 << 20));
      int w = UDT::send(s_, reinterpret_cast<const char*>(p) + off, chunk, 0);
      if (w == UDT::ERROR) {
        if (UDT::getlasterror_code() == CUDTException::ETIMEOUT) {
          if (deadline_ns() != 0 && MonotonicNs() >= deadline_ns()) {
            return absl::DeadlineExceededError("the peer stopped reading (send timed out)");
          }
          continue;
        }
        return absl::UnavailableError(absl::StrCat("UDT::send: ", UdtError()));
      }
      off += static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> RecvSome(uint8_t* p, size_t n) override {
    const int len = static_cast<int>(std::min<size_t>(n, 64 << 20));
    int r = UDT::recv(s_, reinterpret_cast<char*>(p), len, 0);
    if (r == UDT::ERROR) {
      const int code = UDT::getlasterror_code();
      if (code == CUDTException::ETIMEOUT) return absl::DeadlineExceededError("no data");
      if (code == CUDTException::ECONNLOST || code == CUDTException::ENOCONN) return size_t{0};
      return absl::UnavailableError(absl::StrCat("UDT::recv: ", UdtError()));
    }
    if (r == 0) {
      // UDT4 returns 0 on a receive timeout in some versions: closed only if not connected.
      if (UDT::getsockstate(s_) == CONNECTED) return absl::DeadlineExceededError("no data");
      return size_t{0};
    }
    return static_cast<size_t>(r);
  }

  nlohmann::json Stats() override {
    UDT::TRACEINFO t{};
    if (UDT::perfmon(s_, &t, false) == UDT::ERROR) return nlohmann::json();
    return nlohmann::json{{"pkt_sent_total", t.pktSentTotal},
                          {"pkt_recv_total", t.pktRecvTotal},
                          {"pkt_snd_loss_total", t.pktSndLossTotal},
                          {"pkt_rcv_loss_total", t.pktRcvLossTotal},
                          {"pkt_retrans_total", t.pktRetransTotal},
                          {"pkt_sent_nak_total", t.pktSentNAKTotal},
                          {"pkt_recv_nak_total", t.pktRecvNAKTotal},
                          {"rtt_ms", t.msRTT},
                          {"bandwidth_mbps", t.mbpsBandwidth},
                          {"pkt_snd_period_us", t.usPktSndPeriod},
                          {"flow_window_pkts", t.pktFlowWindow},
                          {"congestion_window_pkts", t.pktCongestionWindow},
                          {"flight_size_pkts", t.pktFlightSize},
                          {"avail_snd_buf_bytes", t.byteAvailSndBuf},
                          {"avail_rcv_buf_bytes", t.byteAvailRcvBuf},
                          {"options", options_}};
  }
  int64_t Retransmissions() override {
    UDT::TRACEINFO t{};
    if (UDT::perfmon(s_, &t, false) == UDT::ERROR) return -1;
    return t.pktRetransTotal;
  }
  // UDT keeps no minimum RTT; its smoothed RTT is the best it offers.
  double MinRttSeconds() override {
    UDT::TRACEINFO t{};
    if (UDT::perfmon(s_, &t, false) == UDT::ERROR) return 0;
    return t.msRTT * 1e-3;
  }
  int64_t PayloadPerPacket() override { return FLAGS_mss - kIpUdpHeaderBytes - kUdtHeaderBytes; }
  int64_t HeaderBytesPerPacket() override { return kIpUdpHeaderBytes + kUdtHeaderBytes; }
  // UDT_SNDDATA is the sender buffer's occupancy in packets (sent-unacknowledged or
  // unsent).
  int64_t UnackedBytes() override {
    int pkts = 0;
    int len = sizeof(pkts);
    if (UDT::getsockopt(s_, 0, UDT_SNDDATA, &pkts, &len) == UDT::ERROR) return 0;
    return static_cast<int64_t>(pkts) * PayloadPerPacket();
  }

  void set_options(nlohmann::json o) { options_ = std::move(o); }

 private:
  UDTSOCKET s_;
  nlohmann::json options_;
};

struct Sizes {
  int fc_packets = 0;
  int udt_buffer = 0;
  int udp_buffer = 0;
};

absl::StatusOr<Sizes> ChooseSizes() {
  absl::StatusOr<Bandwidth> rate = ParseBandwidth(FLAGS_rate);
  if (!rate.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--rate: ", rate.status().message()));
  }
  absl::StatusOr<Duration> rtt = ParseDuration(FLAGS_rtt);
  if (!rtt.ok()) return absl::InvalidArgumentError(absl::StrCat("--rtt: ", rtt.status().message()));
  if (FLAGS_mss < 100 || FLAGS_mss > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mss=", FLAGS_mss, " is outside [100, 65535]"));
  }
  const double bdp = rate->bps() / 8 * static_cast<double>(rtt->ns()) * 1e-9;
  constexpr double kIntMax = 2147483647.0;
  Sizes s;
  double udt = std::max<double>(256 << 20, 8 * bdp);
  double udp = std::max<double>(64 << 20, 2 * bdp);
  for (auto [flag, out] : {std::pair{&FLAGS_buffer, &udt}, std::pair{&FLAGS_udp_buffer, &udp}}) {
    absl::StatusOr<ByteCount> b = ParseByteCount(*flag);
    if (!b.ok()) return absl::InvalidArgumentError(b.status().message());
    if (*b > 0) *out = static_cast<double>(*b);
  }
  s.udt_buffer = static_cast<int>(std::min(udt, kIntMax));
  s.udp_buffer = static_cast<int>(std::min(udp, kIntMax));
  const int payload = FLAGS_mss - kIpUdpHeaderBytes - kUdtHeaderBytes;
  s.fc_packets = std::max(65536, s.udt_buffer / payload + 1);
  return s;
}

// Sets the window and buffers (UDT_FC first), before bind/connect. Returns what
// getsockopt reports back, for the JSON.
absl::StatusOr<nlohmann::json> Configure(UDTSOCKET u, const Sizes& s) {
  auto set = [&](UDT::SOCKOPT opt, int v, const char* name) -> absl::Status {
    if (UDT::setsockopt(u, 0, opt, &v, sizeof(v)) == UDT::ERROR) {
      return absl::InternalError(absl::StrCat("setting ", name, "=", v, ": ", UdtError()));
    }
    return absl::OkStatus();
  };
  for (absl::Status st : {set(UDT_MSS, FLAGS_mss, "UDT_MSS"), set(UDT_FC, s.fc_packets, "UDT_FC"),
                          set(UDT_SNDBUF, s.udt_buffer, "UDT_SNDBUF"),
                          set(UDT_RCVBUF, s.udt_buffer, "UDT_RCVBUF"),
                          set(UDP_SNDBUF, s.udp_buffer, "UDP_SNDBUF"),
                          set(UDP_RCVBUF, s.udp_buffer, "UDP_RCVBUF")}) {
    if (!st.ok()) return st;
  }
  nlohmann::json j;
  auto get = [&](UDT::SOCKOPT opt, const char* name) {
    int v = 0;
    int len = sizeof(v);
    if (UDT::getsockopt(u, 0, opt, &v, &len) != UDT::ERROR) j[name] = v;
  };
  get(UDT_MSS, "UDT_MSS");
  get(UDT_FC, "UDT_FC");
  get(UDT_SNDBUF, "UDT_SNDBUF");
  get(UDT_RCVBUF, "UDT_RCVBUF");
  get(UDP_SNDBUF, "UDP_SNDBUF");
  get(UDP_RCVBUF, "UDP_RCVBUF");
  return j;
}

int RunClientMain(WorkloadOptions o, const Sizes& sizes) {
  absl::StatusOr<sockaddr_in> to = Ipv4(FLAGS_client, FLAGS_port, "--client");
  if (!to.ok()) return Fail(to.status(), FLAGS_json);
  UDTSOCKET u = UDT::socket(AF_INET, SOCK_STREAM, 0);
  if (u == UDT::INVALID_SOCK) return Fail(absl::InternalError(UdtError()), FLAGS_json);
  absl::StatusOr<nlohmann::json> opts = Configure(u, sizes);
  if (!opts.ok()) {
    UDT::close(u);
    return Fail(opts.status(), FLAGS_json);
  }
  if (FLAGS_bind != "0.0.0.0") {
    absl::StatusOr<sockaddr_in> local = Ipv4(FLAGS_bind, 0, "--bind");
    if (!local.ok() ||
        UDT::bind(u, reinterpret_cast<const sockaddr*>(&*local), sizeof(*local)) == UDT::ERROR) {
      UDT::close(u);
      return Fail(local.ok() ? absl::UnavailableError(absl::StrCat("bind: ", UdtError()))
                             : local.status(),
                  FLAGS_json);
    }
  }
  o.connect_start_realtime_ns = RealtimeNs();
  // UDT's connect is bounded by its own connection timeout (about 3 s without answer).
  if (UDT::connect(u, reinterpret_cast<const sockaddr*>(&*to), sizeof(*to)) == UDT::ERROR) {
    const std::string e = UdtError();
    UDT::close(u);
    return Fail(absl::UnavailableError(absl::StrCat("unable to connect to ", FLAGS_client, ":",
                                                    FLAGS_port, ": ", e)),
                FLAGS_json);
  }
  o.connect_done_realtime_ns = RealtimeNs();
  absl::StatusOr<nlohmann::json> r;
  {
    UdtStream stream(u);
    stream.set_options(*opts);
    r = RunClient(stream, o);
  }
  if (!r.ok()) return Fail(r.status(), FLAGS_json);
  (*r)["start"]["peer"] = "udt";
  (*r)["start"]["connecting_to"] = {{"host", FLAGS_client}, {"port", FLAGS_port}};
  (*r)["start"]["udt_options"] = *opts;
  return PrintClientResult(*r);
}

int RunServerMain(const Sizes& sizes) {
  absl::StatusOr<ServerFlags> f = ServerFlagsFromCommandLine(FLAGS_port);
  if (!f.ok()) return Fail(f.status(), false);
  UDTSOCKET l = UDT::socket(AF_INET, SOCK_STREAM, 0);
  absl::StatusOr<nlohmann::json> opts = Configure(l, sizes);  // accepted sockets inherit them
  if (!opts.ok()) return Fail(opts.status(), false);
  if (UDT::bind(l, reinterpret_cast<const sockaddr*>(&f->at), sizeof(f->at)) == UDT::ERROR ||
      UDT::listen(l, 4) == UDT::ERROR) {
    const std::string e = UdtError();
    UDT::close(l);
    return Fail(absl::UnavailableError(
                    absl::StrCat("listen on ", FLAGS_bind, ":", FLAGS_port, ": ", e)),
                false);
  }
  // Accept with a bound wait: a non-blocking listener polled with UDT's epoll.
  bool no = false;
  UDT::setsockopt(l, 0, UDT_RCVSYN, &no, sizeof(no));
  const int eid = UDT::epoll_create();
  int ev = UDT_EPOLL_IN;
  UDT::epoll_add_usock(eid, l, &ev);
  std::cout << nlohmann::json({{"event", "listening"}, {"port", FLAGS_port}, {"options", *opts}})
                   .dump()
            << std::endl;
  const int status = ServeClients(
      f->accept_timeout, [&](Duration timeout) -> absl::StatusOr<std::unique_ptr<ByteStream>> {
        std::set<UDTSOCKET> readable;
        const int n = UDT::epoll_wait(eid, &readable, nullptr, timeout.ns() / 1'000'000);
        if (n <= 0 || readable.empty()) return absl::DeadlineExceededError("no client");
        sockaddr_in peer{};
        int len = sizeof(peer);
        UDTSOCKET u = UDT::accept(l, reinterpret_cast<sockaddr*>(&peer), &len);
        if (u == UDT::INVALID_SOCK) return nullptr;
        bool yes = true;
        UDT::setsockopt(u, 0, UDT_RCVSYN, &yes, sizeof(yes));
        UDT::setsockopt(u, 0, UDT_SNDSYN, &yes, sizeof(yes));
        auto stream = std::make_unique<UdtStream>(u);
        stream->set_options(*opts);
        return stream;
      });
  UDT::epoll_release(eid);
  UDT::close(l);
  return status;
}

int Main(int argc, char** argv) {
  ParsePeerFlags(argc, argv, kUsage);
  absl::StatusOr<Sizes> sizes = ChooseSizes();
  if (!sizes.ok()) return Fail(sizes.status(), FLAGS_json && !FLAGS_server);
  UDT::startup();
  const int rc =
      ServeOrSend([&] { return RunServerMain(*sizes); },
                  [&](const WorkloadOptions& o) { return RunClientMain(o, *sizes); });
  UDT::cleanup();
  return rc;
}

}  // namespace
}  // namespace longhaul::bench

int main(int argc, char** argv) { return longhaul::bench::Main(argc, argv); }
