// longhaul-emu's UDP relay on loopback, as a child process: relaying both ways, loss at
// the configured rate (and the same losses for the same seed), delay >= rtt, duplication
// and corruption counted, the emulator's own-drop counters, ECN, several clients, TCP
// relay, garbage input and bad flags. All traffic is on 127.0.0.1 with ports the kernel
// picks; every wait is bounded.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/emu/emu_process.h"

namespace longhaul::emu::testing {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;

constexpr milliseconds kStartTimeout(10000);
constexpr milliseconds kWait(20000);

// One emulator between a client socket and a sink socket, both the test's.
using Relay = EmuRelay;

Relay StartRelay(const std::string& link, int forward_port, std::vector<std::string> extra = {}) {
  return StartEmuRelay(LONGHAUL_EMU_BIN, link, forward_port, extra, "120s");
}

// Stops the emulator with SIGTERM and returns its final JSON line.
Json Finish(Relay& r) {
  r.proc->Signal(SIGTERM);
  absl::StatusOr<Json> fin = r.proc->WaitEvent("final", kWait);
  EXPECT_TRUE(fin.ok()) << fin.status() << "\nstderr: " << r.proc->Stderr();
  absl::StatusOr<int> st = r.proc->Wait(kWait);
  EXPECT_TRUE(st.ok());
  if (st.ok()) {
    EXPECT_EQ(*st, 0) << r.proc->Stderr();
  }
  return fin.ok() ? *fin : Json();
}

// A client socket connected to the emulator's listen port.
int ClientSocket(int emu_port) {
  int fd = BoundUdpSocket();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(emu_port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

void SendOrDie(int fd, const std::vector<uint8_t>& d) {
  ASSERT_EQ(send(fd, d.data(), d.size(), 0), static_cast<ssize_t>(d.size())) << strerror(errno);
}

// Payload: 8-byte sequence number, bytes derived from it, then an FNV-1a hash of all
// that, so any flipped bit shows (in the sequence number too).
uint64_t Fnv(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
std::vector<uint8_t> Payload(uint64_t seq, size_t size) {
  std::vector<uint8_t> d(std::max<size_t>(size, 16));
  std::memcpy(d.data(), &seq, sizeof(seq));
  for (size_t i = sizeof(seq); i + 8 < d.size(); ++i)
    d[i] = static_cast<uint8_t>(seq * 131 + i * 7 + 1);
  const uint64_t h = Fnv(d.data(), d.size() - 8);
  std::memcpy(d.data() + d.size() - 8, &h, 8);
  return d;
}
bool Intact(const std::vector<uint8_t>& d, uint64_t* seq) {
  if (d.size() < 16) return false;
  std::memcpy(seq, d.data(), sizeof(*seq));
  return d == Payload(*seq, d.size());
}

uint64_t U(const Json& j, const char* dir, const char* part, const char* key) {
  return j[dir][part][key].get<uint64_t>();
}

TEST(EmuE2eTest, RelaysBothWaysWithoutOwnDrops) {
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit,rtt=0", LocalPort(sink));
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  int echoed = 0;
  for (int i = 0; i < 100; ++i) {
    SendOrDie(client, Payload(i, 1000));
    std::string from;
    auto d = RecvWithTimeout(sink, milliseconds(5000), nullptr, &from);
    ASSERT_TRUE(d.has_value()) << "datagram " << i << " did not reach the sink";
    // Echo back to whoever sent it (the emulator's upstream socket for this client).
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(from)));
    ASSERT_EQ(sendto(sink, d->data(), d->size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(d->size()));
    auto back = RecvWithTimeout(client, milliseconds(5000));
    ASSERT_TRUE(back.has_value()) << "echo " << i << " did not come back";
    EXPECT_EQ(*back, Payload(i, 1000));
    ++echoed;
  }
  EXPECT_EQ(echoed, 100);
  Json fin = Finish(r);
  EXPECT_EQ(U(fin, "forward", "emulator", "released"), 100u);
  EXPECT_EQ(U(fin, "reverse", "emulator", "released"), 100u);
  EXPECT_EQ(U(fin, "forward", "model", "offered_bytes"), 100000u);
  EXPECT_EQ(fin["own_drops"].get<uint64_t>(), 0u);
  EXPECT_EQ(fin["clients"]["created"].get<uint64_t>(), 1u);
  close(client);
  close(sink);
}

// Sends payloads 0..n-1 of `size` bytes in windows of `window`, waiting (bounded) after
// each window until the emulator has read all sent so far, so neither the emulator's nor
// the sink's socket buffer overflows even when they are small (no root).
void SendPaced(Relay& r, int client, int n, size_t size, int window = 200) {
  for (int sent = 0; sent < n;) {
    const int end = std::min(n, sent + window);
    for (; sent < end; ++sent) SendOrDie(client, Payload(sent, size));
    absl::StatusOr<Json> s = r.proc->WaitStats(
        [sent](const Json& j) { return j["forward"]["emulator"]["received"].get<int>() >= sent; },
        kWait);
    ASSERT_TRUE(s.ok()) << s.status();
  }
}

struct LossRun {
  std::set<uint64_t> lost;
  uint64_t dropped_loss = 0;
};

// Sends n datagrams through a lossy link and reports which ones the sink did not get.
LossRun RunLoss(const std::string& link, int n) {
  LossRun out;
  int sink = BoundUdpSocket(32 << 20);
  Relay r = StartRelay(link, LocalPort(sink), {"--stats_interval=10ms"});
  EXPECT_GT(r.port, 0);
  if (r.port == 0) return out;
  int client = ClientSocket(r.port);
  SinkCollector collector(sink);
  SendPaced(r, client, n, 200);
  // Wait (bounded) until the emulator has offered everything and released what it kept.
  absl::StatusOr<Json> done = r.proc->WaitStats(
      [n](const Json& j) {
        return j["forward"]["model"]["offered"].get<int>() == n && j["forward"]["pending"] == 0;
      },
      kWait);
  EXPECT_TRUE(done.ok()) << done.status();
  Json fin = Finish(r);
  const uint64_t released = U(fin, "forward", "emulator", "released");
  collector.WaitFor(released, kWait);
  std::vector<SinkCollector::Datagram> got = collector.Finish();
  std::set<uint64_t> seen;
  for (const auto& d : got) {
    uint64_t seq;
    EXPECT_TRUE(Intact(d.bytes, &seq));
    seen.insert(seq);
  }
  for (int i = 0; i < n; ++i) {
    if (!seen.contains(i)) out.lost.insert(i);
  }
  out.dropped_loss = U(fin, "forward", "model", "dropped_loss");
  EXPECT_EQ(U(fin, "forward", "model", "dropped_queue"), 0u) << "the model saw a false burst";
  EXPECT_EQ(fin["own_drops"].get<uint64_t>(), 0u) << fin.dump();
  EXPECT_EQ(got.size(), U(fin, "forward", "emulator", "released"));
  EXPECT_EQ(U(fin, "forward", "emulator", "released") + out.dropped_loss, static_cast<uint64_t>(n));
  close(client);
  close(sink);
  return out;
}

TEST(EmuE2eTest, LossAtTheConfiguredRateAndTheSameLossesForTheSameSeed) {
  constexpr int kN = 4000;
  LossRun a = RunLoss("rate=10gbit,loss=0.1,seed=7", kN);
  // 400 expected; 5 standard deviations (sqrt(4000 * 0.1 * 0.9) = 19) either side.
  EXPECT_GE(a.dropped_loss, 305u);
  EXPECT_LE(a.dropped_loss, 495u);
  EXPECT_EQ(a.lost.size(), a.dropped_loss);
  LossRun b = RunLoss("rate=10gbit,loss=0.1,seed=7", kN);
  EXPECT_EQ(a.lost, b.lost) << "same seed, different losses";
  LossRun c = RunLoss("rate=10gbit,loss=0.1,seed=8", kN);
  EXPECT_NE(a.lost, c.lost) << "different seeds, same losses";
}

TEST(EmuE2eTest, PingPongDelayIsAtLeastTheRtt) {
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit,rtt=30ms", LocalPort(sink));
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    SendOrDie(client, Payload(i, 64));
    std::string from;
    auto d = RecvWithTimeout(sink, milliseconds(5000), nullptr, &from);
    ASSERT_TRUE(d.has_value());
    const auto one_way = Clock::now() - t0;
    EXPECT_GE(one_way, milliseconds(15)) << "one-way delay below rtt/2";
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(from)));
    sendto(sink, d->data(), d->size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    ASSERT_TRUE(RecvWithTimeout(client, milliseconds(5000)).has_value());
    EXPECT_GE(Clock::now() - t0, milliseconds(30)) << "round trip below the link's rtt";
  }
  Finish(r);
  close(client);
  close(sink);
}

TEST(EmuE2eTest, DuplicatesAndCorruptionAreDeliveredAndCounted) {
  constexpr int kN = 3000;
  int sink = BoundUdpSocket(32 << 20);
  Relay r = StartRelay("rate=10gbit,dup=0.05,corrupt=0.05,seed=3", LocalPort(sink),
                       {"--stats_interval=10ms"});
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  SinkCollector collector(sink);
  SendPaced(r, client, kN, 300);
  ASSERT_TRUE(r.proc
                  ->WaitStats(
                      [](const Json& j) {
                        return j["forward"]["model"]["offered"].get<int>() == kN &&
                               j["forward"]["pending"] == 0;
                      },
                      kWait)
                  .ok());
  Json fin = Finish(r);
  const uint64_t duplicated = U(fin, "forward", "model", "duplicated");
  const uint64_t corrupted = U(fin, "forward", "model", "corrupted");
  EXPECT_GT(duplicated, 50u);
  EXPECT_GT(corrupted, 50u);
  collector.WaitFor(kN + duplicated, kWait);
  std::vector<SinkCollector::Datagram> got = collector.Finish();
  EXPECT_EQ(got.size(), kN + duplicated);
  uint64_t bad = 0, dups = 0;
  std::set<uint64_t> seen;
  for (const auto& d : got) {
    uint64_t seq;
    if (!Intact(d.bytes, &seq)) {
      ++bad;
    } else if (!seen.insert(seq).second) {
      ++dups;
    }
  }
  EXPECT_EQ(bad, corrupted);
  // A duplicate whose first copy was corrupted arrives intact only once.
  EXPECT_LE(dups, duplicated);
  EXPECT_GE(dups + corrupted, duplicated);
  EXPECT_EQ(fin["own_drops"].get<uint64_t>(), 0u);
  close(client);
  close(sink);
}

TEST(EmuE2eTest, OwnDropsAreCountedApartFromModelledLoss) {
  // The smallest buffer holds 256 datagrams; with a 1 s delay the rest of a burst of
  // 1000 finds no buffer: the emulator's own drop, not the model's.
  constexpr int kN = 1000;
  int sink = BoundUdpSocket(32 << 20);
  Relay r =
      StartRelay("rate=10gbit,rtt=2s", LocalPort(sink), {"--buffer=1", "--stats_interval=50ms"});
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  SinkCollector collector(sink);
  for (int i = 0; i < kN; ++i) SendOrDie(client, Payload(i, 500));
  absl::StatusOr<Json> s = r.proc->WaitStats(
      [](const Json& j) { return j["forward"]["emulator"]["received"].get<int>() == kN; }, kWait);
  ASSERT_TRUE(s.ok()) << s.status();
  const uint64_t held = (*s)["forward"]["pending"].get<uint64_t>();
  EXPECT_EQ(held, (*s)["buffer"]["max_slots"].get<uint64_t>());
  EXPECT_EQ(U(*s, "forward", "emulator", "buffer_full"), kN - held);
  EXPECT_EQ(U(*s, "forward", "model", "offered"), held);
  EXPECT_EQ(U(*s, "forward", "model", "dropped_loss") + U(*s, "forward", "model", "dropped_queue"),
            0u);
  // The held ones still arrive after the delay.
  EXPECT_EQ(collector.WaitFor(held, kWait), held);
  Json fin = Finish(r);
  EXPECT_EQ(fin["own_drops"].get<uint64_t>(), kN - held);
  close(client);
  close(sink);
}

// Held-back datagrams are overtaken by later ones; jitter varies the delay without ever
// reordering.
TEST(EmuE2eTest, ReorderOvertakesAndJitterKeepsOrder) {
  struct Case {
    const char* link;
    bool expect_reorder;
  };
  for (const Case& c : {Case{"rate=1gbit,rtt=4ms,reorder=0.05,reorder_delay=5ms,seed=9", true},
                        Case{"rate=1gbit,rtt=4ms,jitter=3ms,seed=9", false}}) {
    constexpr int kN = 500;
    int sink = BoundUdpSocket(32 << 20);
    Relay r = StartRelay(c.link, LocalPort(sink));
    ASSERT_GT(r.port, 0);
    int client = ClientSocket(r.port);
    SinkCollector collector(sink);
    for (int i = 0; i < kN; ++i) SendOrDie(client, Payload(i, 300));
    ASSERT_EQ(collector.WaitFor(kN, kWait), static_cast<size_t>(kN)) << c.link;
    int late = 0;
    uint64_t max_seen = 0;
    for (const auto& d : collector.Finish()) {
      uint64_t seq;
      ASSERT_TRUE(Intact(d.bytes, &seq));
      if (seq < max_seen) ++late;
      max_seen = std::max(max_seen, seq);
    }
    Json fin = Finish(r);
    const uint64_t reordered = U(fin, "forward", "model", "reordered");
    if (c.expect_reorder) {
      EXPECT_GT(reordered, 5u) << c.link;
      // Each held-back datagram arrives after a later one, except possibly the last sent.
      EXPECT_LE(static_cast<uint64_t>(late), reordered);
      EXPECT_GE(static_cast<uint64_t>(late) + 1, reordered);
    } else {
      EXPECT_EQ(reordered, 0u);
      EXPECT_EQ(late, 0) << "jitter reordered datagrams";
    }
    close(client);
    close(sink);
  }
}

TEST(EmuE2eTest, LinkScheduleChangesTheLinkDuringTheRun) {
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit", LocalPort(sink),
                       {"--link_schedule=300ms:loss=1", "--stats_interval=20ms"});
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  SendOrDie(client, Payload(1, 100));
  ASSERT_TRUE(RecvWithTimeout(sink, milliseconds(5000)).has_value()) << "lost before the step";
  // Past the step (the stats clock starts slightly before the run's): everything is lost.
  ASSERT_TRUE(
      r.proc->WaitStats([](const Json& j) { return j["elapsed_s"].get<double>() > 0.5; }, kWait)
          .ok());
  for (int i = 0; i < 20; ++i) SendOrDie(client, Payload(i, 100));
  ASSERT_TRUE(
      r.proc
          ->WaitStats(
              [](const Json& j) { return j["forward"]["model"]["offered"].get<int>() == 21; },
              kWait)
          .ok());
  Json fin = Finish(r);
  EXPECT_EQ(U(fin, "forward", "model", "dropped_loss"), 20u);
  EXPECT_EQ(U(fin, "forward", "emulator", "released"), 1u);
  close(client);
  close(sink);
}

TEST(EmuE2eTest, EcnCodepointTravelsAndCeIsSetWhenTheQueueMarks) {
  constexpr int kN = 200;
  int sink = BoundUdpSocket(32 << 20);
  // 100 Mbit/s: a burst of 200 x 1 KB builds a queue; everything above 1 byte is marked.
  Relay r = StartRelay("rate=100mbit,ecn=1,queue=10MB", LocalPort(sink), {"--stats_interval=50ms"});
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  int ect0 = 2;
  ASSERT_EQ(setsockopt(client, IPPROTO_IP, IP_TOS, &ect0, sizeof(ect0)), 0);
  SinkCollector collector(sink);
  for (int i = 0; i < kN; ++i) SendOrDie(client, Payload(i, 1000));
  ASSERT_EQ(collector.WaitFor(kN, kWait), static_cast<size_t>(kN));
  int ce = 0, ect = 0;
  for (const auto& d : collector.Finish()) {
    if ((d.tos & 3) == 3) ++ce;
    if ((d.tos & 3) == 2) ++ect;
  }
  Json fin = Finish(r);
  EXPECT_GT(ce, 0);
  EXPECT_EQ(ce + ect, kN);
  EXPECT_EQ(static_cast<uint64_t>(ce), U(fin, "forward", "model", "ce_marked"));
  close(client);
  close(sink);
}

TEST(EmuE2eTest, EachClientFlowGetsItsOwnUpstreamSocketAndItsOwnAnswers) {
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit", LocalPort(sink));
  ASSERT_GT(r.port, 0);
  std::vector<int> clients = {ClientSocket(r.port), ClientSocket(r.port), ClientSocket(r.port)};
  std::set<std::string> upstream_ports;
  for (int round = 0; round < 5; ++round) {
    for (size_t c = 0; c < clients.size(); ++c) {
      SendOrDie(clients[c], Payload(c * 100 + round, 100));
      std::string from;
      auto d = RecvWithTimeout(sink, milliseconds(5000), nullptr, &from);
      ASSERT_TRUE(d.has_value());
      upstream_ports.insert(from);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      to.sin_port = htons(static_cast<uint16_t>(std::stoi(from)));
      sendto(sink, d->data(), d->size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
      auto back = RecvWithTimeout(clients[c], milliseconds(5000));
      ASSERT_TRUE(back.has_value()) << "client " << c << " got no answer";
      EXPECT_EQ(*back, Payload(c * 100 + round, 100)) << "answer went to the wrong client";
    }
  }
  EXPECT_EQ(upstream_ports.size(), 3u);
  Json fin = Finish(r);
  EXPECT_EQ(fin["clients"]["created"].get<uint64_t>(), 3u);
  EXPECT_EQ(fin["clients"]["evicted"].get<uint64_t>(), 0u);
  for (int c : clients) close(c);
  close(sink);
}

TEST(EmuE2eTest, ClientTableIsBounded) {
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit", LocalPort(sink), {"--max_clients=2"});
  ASSERT_GT(r.port, 0);
  std::vector<int> clients = {ClientSocket(r.port), ClientSocket(r.port), ClientSocket(r.port)};
  for (int round = 0; round < 3; ++round) {
    for (size_t c = 0; c < clients.size(); ++c) {
      SendOrDie(clients[c], Payload(c, 100));
      ASSERT_TRUE(RecvWithTimeout(sink, milliseconds(5000)).has_value());
    }
  }
  Json fin = Finish(r);
  EXPECT_LE(fin["clients"]["active"].get<uint64_t>(), 2u);
  EXPECT_EQ(fin["clients"]["created"].get<uint64_t>(), 9u);  // round-robin defeats LRU
  EXPECT_EQ(fin["clients"]["evicted"].get<uint64_t>(), 7u);
  for (int c : clients) close(c);
  close(sink);
}

TEST(EmuE2eTest, GarbageAndOddSizesAreRelayedOrDroppedAsTooBig) {
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit,mtu=1500", LocalPort(sink), {"--stats_interval=50ms"});
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  SendOrDie(client, {});  // empty datagram
  auto empty = RecvWithTimeout(sink, milliseconds(5000));
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
  std::vector<uint8_t> huge(65507, 0xee);  // far above the MTU
  SendOrDie(client, huge);
  std::vector<uint8_t> edge(1472, 0x11);  // exactly the MTU with 28 bytes of headers
  SendOrDie(client, edge);
  auto e = RecvWithTimeout(sink, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(*e, edge);
  for (int i = 0; i < 50; ++i) {
    std::vector<uint8_t> junk(1 + (i * 37) % 1400);
    for (size_t k = 0; k < junk.size(); ++k) junk[k] = static_cast<uint8_t>(k * i + 3);
    SendOrDie(client, junk);
    auto got = RecvWithTimeout(sink, milliseconds(5000));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, junk);
  }
  Json fin = Finish(r);
  EXPECT_EQ(U(fin, "forward", "model", "dropped_too_big"), 1u);
  EXPECT_EQ(U(fin, "forward", "emulator", "released"), 52u);
  EXPECT_EQ(fin["own_drops"].get<uint64_t>(), 0u);
  close(client);
  close(sink);
}

TEST(EmuE2eTest, TcpRelayJoinsAControlConnection) {
  // A TCP listener on the forward port (as iperf3's server has) and a UDP sink on it.
  int sink = BoundUdpSocket();
  const int port = LocalPort(sink);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
  ASSERT_EQ(listen(ls, 4), 0);
  Relay r = StartRelay("rate=1gbit", port, {"--tcp_relay"});
  ASSERT_GT(r.port, 0);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in e = a;
  e.sin_port = htons(static_cast<uint16_t>(r.port));
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&e), sizeof(e)), 0) << strerror(errno);
  pollfd p{ls, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  int s = accept(ls, nullptr, nullptr);
  ASSERT_GE(s, 0);
  const std::string hello(100000, 'h');  // more than one read's worth
  ASSERT_EQ(send(c, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  shutdown(c, SHUT_WR);
  std::string got;
  char buf[65536];
  while (true) {
    pollfd q{s, POLLIN, 0};
    ASSERT_EQ(poll(&q, 1, 5000), 1) << "relay stalled after " << got.size() << " bytes";
    ssize_t n = recv(s, buf, sizeof(buf), 0);
    ASSERT_GE(n, 0);
    if (n == 0) break;  // the half-close came through
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, hello);
  ASSERT_EQ(send(s, "bye", 3, 0), 3);
  close(s);
  pollfd q{c, POLLIN, 0};
  ASSERT_EQ(poll(&q, 1, 5000), 1);
  ASSERT_EQ(recv(c, buf, sizeof(buf), 0), 3);
  Json fin = Finish(r);
  EXPECT_EQ(fin["tcp_connections"].get<uint64_t>(), 1u);
  close(c);
  close(ls);
  close(sink);
}

// Runs of equal sizes (sent as UDP GSO messages by the relay), shorter datagrams ending
// runs, empty ones: every datagram arrives once, intact and in order, with and without
// GSO.
TEST(EmuE2eTest, BurstsOfMixedSizesArriveIntactAndInOrder) {
  for (const char* gso : {"--gso=true", "--gso=false"}) {
    constexpr int kN = 1500;
    int sink = BoundUdpSocket(32 << 20);
    Relay r = StartRelay("rate=10gbit,rtt=1ms", LocalPort(sink), {gso, "--stats_interval=10ms"});
    ASSERT_GT(r.port, 0);
    int client = ClientSocket(r.port);
    SinkCollector collector(sink);
    std::vector<std::vector<uint8_t>> sent;
    for (int i = 0; i < kN; ++i) {
      const int phase = i % 23;
      size_t size = phase < 15    ? 1200
                    : phase < 20  ? 8000
                    : phase == 20 ? 700
                    : phase == 21 ? 0
                                  : 16;
      std::vector<uint8_t> d = size >= 16 ? Payload(i, size) : std::vector<uint8_t>(size, 0x33);
      SendOrDie(client, d);
      sent.push_back(std::move(d));
      if (i % 200 == 199) {
        ASSERT_TRUE(r.proc
                        ->WaitStats(
                            [i](const Json& j) {
                              return j["forward"]["emulator"]["received"].get<int>() > i;
                            },
                            kWait)
                        .ok());
      }
    }
    ASSERT_EQ(collector.WaitFor(kN, kWait), static_cast<size_t>(kN)) << gso;
    std::vector<SinkCollector::Datagram> got = collector.Finish();
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(got[i].bytes, sent[i])
          << gso << ": datagram " << i << " differs or is out of order";
    }
    Json fin = Finish(r);
    EXPECT_EQ(fin["own_drops"].get<uint64_t>(), 0u);
    close(client);
    close(sink);
  }
}

TEST(EmuE2eTest, AnUnreadOutputPipeNeverStallsTheRelay) {
  // Stats every millisecond into a stdout pipe this test does not read while it runs
  // 200 ping-pongs over a 2 ms link (> 400 lines of > 1 KB: far more than a pipe holds).
  int sink = BoundUdpSocket();
  Relay r = StartRelay("rate=1gbit,rtt=2ms", LocalPort(sink), {"--stats_interval=1ms"});
  ASSERT_GT(r.port, 0);
  int client = ClientSocket(r.port);
  for (int i = 0; i < 200; ++i) {
    SendOrDie(client, Payload(i, 64));
    std::string from;
    auto d = RecvWithTimeout(sink, milliseconds(5000), nullptr, &from);
    ASSERT_TRUE(d.has_value()) << "the relay stalled at ping " << i;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(from)));
    sendto(sink, d->data(), d->size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    ASSERT_TRUE(RecvWithTimeout(client, milliseconds(5000)).has_value()) << "pong " << i;
  }
  Json fin = Finish(r);
  EXPECT_GT(fin["stats_lines_skipped"].get<uint64_t>(), 0u);
  close(client);
  close(sink);
}

TEST(EmuE2eTest, MaxTimeEndsTheRunByItself) {
  int sink = BoundUdpSocket();
  absl::StatusOr<RunResult> r = RunToCompletion(
      LONGHAUL_EMU_BIN,
      {"--link=rate=1gbit", "--listen=127.0.0.1:0",
       absl::StrCat("--forward=127.0.0.1:", LocalPort(sink)), "--max_time=200ms", "--json"},
      kWait);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 0) << r->stderr_text;
  EXPECT_NE(r->stdout_text.find("\"event\":\"final\""), std::string::npos) << r->stdout_text;
  close(sink);
}

TEST(EmuE2eTest, BadFlagsExitWithStatusTwoNamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--listen=127.0.0.1:0", "--forward=127.0.0.1:9"}, "--link is required"},
      {{"--link=rate=fast", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9"}, "'rate'"},
      {{"--link=rate=1gbit,bogus=1", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9"}, "bogus"},
      {{"--link=no-such-link", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9"}, "no-such-link"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1", "--forward=127.0.0.1:9"}, "--listen"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0", "--forward=127.0.0.1:0"}, "--forward"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0"}, "--forward"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9", "--frobnicate"},
       "unknown flag '--frobnicate'"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9", "--max_time=soon"},
       "--max_time"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9", "--buffer=lots"},
       "--buffer"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9", "--max_clients=0"},
       "--max_clients"},
      {{"--link=rate=1gbit", "--tun", "--listen=127.0.0.1:0"}, "--tun"},
      {{"--link=rate=1gbit", "--netns=a,b"}, "--netns"},
      {{"--link=rate=1gbit", "stray"}, "unexpected argument 'stray'"},
      {{"--link=rate=1gbit", "--listen=127.0.0.1:0", "--forward=127.0.0.1:9",
        "--link_schedule=2s:overhead=40"},
       "--link_schedule"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<RunResult> r = RunToCompletion(LONGHAUL_EMU_BIN, c.args, kWait);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 2) << c.message << ": " << r->stderr_text;
    EXPECT_NE(r->stderr_text.find(c.message), std::string::npos)
        << "expected '" << c.message << "' in: " << r->stderr_text;
  }
}

TEST(EmuE2eTest, ListenAddressInUseIsARuntimeErrorNamingTheAddress) {
  int taken = BoundUdpSocket();
  absl::StatusOr<RunResult> r =
      RunToCompletion(LONGHAUL_EMU_BIN,
                      {"--link=rate=1gbit", absl::StrCat("--listen=127.0.0.1:", LocalPort(taken)),
                       "--forward=127.0.0.1:9"},
                      kWait);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 1);
  EXPECT_NE(r->stderr_text.find(absl::StrCat("127.0.0.1:", LocalPort(taken))), std::string::npos)
      << r->stderr_text;
  close(taken);
}

}  // namespace
}  // namespace longhaul::emu::testing
