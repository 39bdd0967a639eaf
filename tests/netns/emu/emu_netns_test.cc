// longhaul-emu's TUN mode: two network namespaces (named lh-test-<pid>-<n>-a/b, unique
// per run, always removed) joined through the emulated link. Traffic only between
// 198.18.0.1 and 198.18.0.2 inside those namespaces. Skips, saying why, without root
// (CAP_NET_ADMIN + CAP_SYS_ADMIN) or /dev/net/tun.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/emu/emu_process.h"
#include "transport/emu/netns.h"
#include "transport/emu/tun_device.h"

namespace longhaul::emu::testing {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;

constexpr milliseconds kWait(20000);

int OpenNetns(const std::string& name) {
  return open(NetnsPath(name).c_str(), O_RDONLY | O_CLOEXEC);
}

// A UDP socket created inside namespace `name`, bound to `ip`:0.
int UdpSocketIn(const std::string& name, const char* ip, int type = SOCK_DGRAM) {
  int ns = OpenNetns(name);
  EXPECT_GE(ns, 0) << name;
  int fd = -1;
  absl::Status s = RunInNetns(ns, [&]() -> absl::Status {
    fd = socket(AF_INET, type | SOCK_CLOEXEC | (type == SOCK_DGRAM ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return absl::InternalError(strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return absl::InternalError(absl::StrCat("bind ", ip, ": ", strerror(errno)));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  close(ns);
  return fd;
}

sockaddr_in Addr(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a.sin_addr);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

class EmuNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = CheckTunModePrivileges(); !s.ok()) {
      GTEST_SKIP() << "TUN-mode tests skipped: " << s.message();
    }
    static int counter = 0;
    const std::string base = absl::StrCat("lh-test-", getpid(), "-", counter++);
    a_ = base + "-a";
    b_ = base + "-b";
  }
  void TearDown() override {
    // Whatever happened, leave no namespace of ours behind.
    if (proc_ != nullptr) {
      proc_->Signal(SIGKILL);
      (void)proc_->Wait(kWait);
    }
    for (const std::string& n : {a_, b_}) {
      if (!n.empty() && NetnsExists(n)) (void)DeleteNetns(n);
    }
  }

  // Starts the emulator on a_/b_ and waits for its ready line.
  Json Start(const std::string& link, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {absl::StrCat("--link=", link), "--tun",
                                     absl::StrCat("--netns=", a_, ",", b_), "--json",
                                     "--max_time=120s"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<EmuProcess>> p = EmuProcess::Start(LONGHAUL_EMU_BIN, args);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return Json();
    proc_ = *std::move(p);
    absl::StatusOr<Json> ready = proc_->WaitEvent("ready", kWait);
    EXPECT_TRUE(ready.ok()) << ready.status() << "\nstderr: " << proc_->Stderr();
    return ready.ok() ? *ready : Json();
  }

  Json Stop(int sig = SIGTERM) {
    proc_->Signal(sig);
    absl::StatusOr<Json> fin = proc_->WaitEvent("final", kWait);
    EXPECT_TRUE(fin.ok()) << fin.status() << "\nstderr: " << proc_->Stderr();
    absl::StatusOr<int> st = proc_->Wait(kWait);
    EXPECT_TRUE(st.ok());
    if (st.ok()) {
      EXPECT_EQ(*st, 0) << proc_->Stderr();
    }
    return fin.ok() ? *fin : Json();
  }

  std::string a_, b_;
  std::unique_ptr<EmuProcess> proc_;
};

TEST_F(EmuNetnsTest, UdpPingPongCrossesTheLinkWithTheModelledDelayAndCleanupRemovesAll) {
  Json ready = Start("rate=1gbit,rtt=20ms");
  ASSERT_FALSE(ready.is_null());
  EXPECT_TRUE(ready["netns"][0]["created"].get<bool>());
  EXPECT_TRUE(ready["netns"][1]["created"].get<bool>());
  EXPECT_EQ(ready["mtu"].get<int>(), 9000);
  ASSERT_TRUE(NetnsExists(a_));
  ASSERT_TRUE(NetnsExists(b_));
  int sa = UdpSocketIn(a_, "198.18.0.1");
  int sb = UdpSocketIn(b_, "198.18.0.2");
  ASSERT_GE(sa, 0);
  ASSERT_GE(sb, 0);
  sockaddr_in to_b = Addr("198.18.0.2", LocalPort(sb));
  for (int i = 0; i < 10; ++i) {
    const std::string msg = absl::StrCat("ping ", i);
    const auto t0 = Clock::now();
    ASSERT_EQ(
        sendto(sa, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&to_b), sizeof(to_b)),
        static_cast<ssize_t>(msg.size()))
        << strerror(errno);
    std::string from;
    auto got = RecvWithTimeout(sb, milliseconds(5000), nullptr, &from);
    ASSERT_TRUE(got.has_value()) << "ping " << i << " did not reach B";
    EXPECT_EQ(std::string(got->begin(), got->end()), msg);
    EXPECT_GE(Clock::now() - t0, milliseconds(10)) << "one-way delay below rtt/2";
    sockaddr_in back = Addr("198.18.0.1", std::stoi(from));
    sendto(sb, got->data(), got->size(), 0, reinterpret_cast<sockaddr*>(&back), sizeof(back));
    ASSERT_TRUE(RecvWithTimeout(sa, milliseconds(5000)).has_value()) << "pong " << i;
    EXPECT_GE(Clock::now() - t0, milliseconds(20)) << "round trip below the link's rtt";
  }
  close(sa);
  close(sb);
  Json fin = Stop();
  EXPECT_GE(fin["forward"]["model"]["offered"].get<uint64_t>(), 10u);
  EXPECT_GE(fin["reverse"]["model"]["offered"].get<uint64_t>(), 10u);
  EXPECT_EQ(fin["own_drops"].get<uint64_t>(), 0u);
  EXPECT_EQ(fin["netns_deleted"], Json::array({a_, b_}));
  EXPECT_FALSE(NetnsExists(a_));
  EXPECT_FALSE(NetnsExists(b_));
}

TEST_F(EmuNetnsTest, TcpStreamCrossesALossyLinkIntact) {
  ASSERT_FALSE(Start("rate=1gbit,rtt=4ms,loss=0.01").is_null());
  int ls = UdpSocketIn(b_, "198.18.0.2", SOCK_STREAM);
  int c = UdpSocketIn(a_, "198.18.0.1", SOCK_STREAM);
  ASSERT_GE(ls, 0);
  ASSERT_GE(c, 0);
  ASSERT_EQ(listen(ls, 1), 0);
  timeval tv{10, 0};
  setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in to = Addr("198.18.0.2", LocalPort(ls));
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0) << strerror(errno);
  int s = accept(ls, nullptr, nullptr);
  ASSERT_GE(s, 0);
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  constexpr size_t kBytes = 4 << 20;
  std::vector<uint8_t> data(kBytes);
  for (size_t i = 0; i < kBytes; ++i) data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  std::thread sender([&] {
    size_t off = 0;
    while (off < kBytes) {
      ssize_t n = send(c, data.data() + off, kBytes - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    shutdown(c, SHUT_WR);
  });
  std::vector<uint8_t> got;
  got.reserve(kBytes);
  uint8_t buf[65536];
  while (got.size() <= kBytes) {
    ssize_t n = recv(s, buf, sizeof(buf), 0);
    if (n <= 0) break;  // end of stream, or the 10 s receive timeout
    got.insert(got.end(), buf, buf + n);
  }
  sender.join();
  EXPECT_EQ(got.size(), kBytes);
  EXPECT_TRUE(got == data) << "stream corrupted";
  close(s);
  close(c);
  close(ls);
  Json fin = Stop();
  EXPECT_GT(fin["forward"]["model"]["dropped_loss"].get<uint64_t>(), 0u);
}

TEST_F(EmuNetnsTest, ExistingNamespaceIsReusedAndKeptAndTheDeviceGoesAway) {
  absl::StatusOr<NetnsHandle> pre = OpenOrCreateNetns(a_);
  ASSERT_TRUE(pre.ok()) << pre.status();
  ASSERT_TRUE(pre->created);
  Json ready = Start("rate=1gbit,rtt=2ms");
  ASSERT_FALSE(ready.is_null());
  EXPECT_FALSE(ready["netns"][0]["created"].get<bool>());
  EXPECT_TRUE(ready["netns"][1]["created"].get<bool>());
  absl::StatusOr<bool> dev = InterfaceExistsInNetns(pre->fd, "lhemu0");
  ASSERT_TRUE(dev.ok());
  EXPECT_TRUE(*dev);
  int sa = UdpSocketIn(a_, "198.18.0.1");
  int sb = UdpSocketIn(b_, "198.18.0.2");
  sockaddr_in to_b = Addr("198.18.0.2", LocalPort(sb));
  ASSERT_EQ(sendto(sa, "x", 1, 0, reinterpret_cast<sockaddr*>(&to_b), sizeof(to_b)), 1);
  EXPECT_TRUE(RecvWithTimeout(sb, milliseconds(5000)).has_value());
  close(sa);
  close(sb);
  Json fin = Stop(SIGINT);
  EXPECT_EQ(fin["netns_deleted"], Json::array({b_}));
  EXPECT_TRUE(NetnsExists(a_)) << "a namespace that existed before was deleted";
  EXPECT_FALSE(NetnsExists(b_));
  dev = InterfaceExistsInNetns(pre->fd, "lhemu0");
  ASSERT_TRUE(dev.ok());
  EXPECT_FALSE(*dev) << "the TUN device outlived the emulator";
  close(pre->fd);
  EXPECT_TRUE(DeleteNetns(a_).ok());
}

TEST_F(EmuNetnsTest, CeMarksArriveWithAValidIpv4Checksum) {
  // 100 Mbit/s: a burst of 100 x 1 KB builds a queue, and everything above 1 byte is
  // marked. The receiving kernel drops packets with a bad header checksum, so every
  // marked packet that arrives proves the checksum was fixed.
  constexpr int kN = 100;
  ASSERT_FALSE(Start("rate=100mbit,ecn=1,queue=10MB").is_null());
  int sa = UdpSocketIn(a_, "198.18.0.1");
  int sb = UdpSocketIn(b_, "198.18.0.2");
  int ect0 = 2;
  ASSERT_EQ(setsockopt(sa, IPPROTO_IP, IP_TOS, &ect0, sizeof(ect0)), 0);
  sockaddr_in to_b = Addr("198.18.0.2", LocalPort(sb));
  std::vector<uint8_t> payload(1000, 0x42);
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(sendto(sa, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to_b),
                     sizeof(to_b)),
              1000);
  }
  int ce = 0, ect = 0;
  for (int i = 0; i < kN; ++i) {
    uint8_t tos = 0;
    auto d = RecvWithTimeout(sb, milliseconds(5000), &tos);
    ASSERT_TRUE(d.has_value()) << "datagram " << i << " lost (bad checksum after CE?)";
    EXPECT_EQ(*d, payload);
    if ((tos & 3) == 3) ++ce;
    if ((tos & 3) == 2) ++ect;
  }
  close(sa);
  close(sb);
  Json fin = Stop();
  EXPECT_GT(ce, 0);
  EXPECT_EQ(ce + ect, kN);
  EXPECT_EQ(static_cast<uint64_t>(ce), fin["forward"]["model"]["ce_marked"].get<uint64_t>());
}

TEST_F(EmuNetnsTest, EveryPacketIsReadOrCountedAsTheEmulatorsOwnDrop) {
  // An unpaced burst may outrun the emulator; the TUN device then drops what it could not
  // hand over. Either way nothing vanishes uncounted: read + own rx drops = sent.
  ASSERT_FALSE(Start("rate=100gbit,queue=1GB", {"--stats_interval=20ms"}).is_null());
  int sa = UdpSocketIn(a_, "198.18.0.1");
  int sb = UdpSocketIn(b_, "198.18.0.2");
  sockaddr_in to_b = Addr("198.18.0.2", LocalPort(sb));
  std::vector<uint8_t> payload(8000, 0x17);
  uint64_t sent = 0;
  for (int i = 0; i < 20000; ++i) {
    if (sendto(sa, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to_b),
               sizeof(to_b)) == static_cast<ssize_t>(payload.size())) {
      ++sent;
    }
  }
  ASSERT_GT(sent, 0u);
  absl::StatusOr<Json> s = proc_->WaitStats(
      [sent](const Json& j) {
        const auto& e = j["forward"]["emulator"];
        return e["received"].get<uint64_t>() + e["rx_overflow"].get<uint64_t>() >= sent;
      },
      kWait);
  EXPECT_TRUE(s.ok()) << s.status();
  close(sa);
  close(sb);
  Json fin = Stop();
  const Json& e = fin["forward"]["emulator"];
  EXPECT_EQ(e["received"].get<uint64_t>() + e["rx_overflow"].get<uint64_t>(), sent);
  EXPECT_EQ(fin["forward"]["model"]["offered"].get<uint64_t>(), e["received"].get<uint64_t>());
}

TEST_F(EmuNetnsTest, SecondEmulatorOnTheSameNamespacesFailsClearlyAndTheFirstKeepsWorking) {
  ASSERT_FALSE(Start("rate=1gbit").is_null());
  absl::StatusOr<RunResult> second = RunToCompletion(
      LONGHAUL_EMU_BIN,
      {"--link=rate=1gbit", "--tun", absl::StrCat("--netns=", a_, ",", b_), "--max_time=5s"},
      kWait);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, 1) << second->stderr_text;
  EXPECT_NE(second->stderr_text.find("in use"), std::string::npos) << second->stderr_text;
  EXPECT_TRUE(NetnsExists(a_)) << "the failed emulator removed a namespace it did not create";
  int sa = UdpSocketIn(a_, "198.18.0.1");
  int sb = UdpSocketIn(b_, "198.18.0.2");
  sockaddr_in to_b = Addr("198.18.0.2", LocalPort(sb));
  ASSERT_EQ(sendto(sa, "y", 1, 0, reinterpret_cast<sockaddr*>(&to_b), sizeof(to_b)), 1);
  EXPECT_TRUE(RecvWithTimeout(sb, milliseconds(5000)).has_value());
  close(sa);
  close(sb);
  Stop();
  EXPECT_FALSE(NetnsExists(a_));
  EXPECT_FALSE(NetnsExists(b_));
}

TEST_F(EmuNetnsTest, BadNamespaceFlagsExitWithStatusTwo) {
  for (const std::string& netns : {std::string("only-one"), absl::StrCat(a_, ",", a_),
                                   std::string("a/b,c"), std::string(",x")}) {
    absl::StatusOr<RunResult> r = RunToCompletion(
        LONGHAUL_EMU_BIN, {"--link=rate=1gbit", "--tun", absl::StrCat("--netns=", netns)}, kWait);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 2) << netns << ": " << r->stderr_text;
    EXPECT_NE(r->stderr_text.find("--netns"), std::string::npos) << r->stderr_text;
  }
  EXPECT_FALSE(NetnsExists(a_));
}

}  // namespace
}  // namespace longhaul::emu::testing
