// nccl_verbs_rank: one rank of a 2-rank allreduce through the longhaul NCCL net plugin,
// one per guest in the rdma tier (tests/rdma/rdma_test.py), so the ring's two edges cross
// the soft-RoCE link (NCCL_LONGHAUL_DATAPATH=verbs in the environment).
//
// The rank itself is longhaul-nccl-bench's (tools/nccl_bench/rank.h: loads the plugin as
// NCCL does, listen / connect / accept, the pipelined ring allreduce, a verified run per
// size), driven over its control socketpair by this process in place of the bench's
// parent, which cannot span two hosts. The two processes swap their ranks' plugin
// handles over one TCP connection: rank 0 listens on CONTROL (HOST:PORT), rank 1
// connects to it. Every size is run by both ranks in the same order.
//
//   nccl_verbs_rank RANK CONTROL PLUGIN SIZES [ITERS]
//     SIZES: comma-separated bytes per rank (multiples of 4), e.g. 4096,1048576,4194304
//
// Prints one line per size ("size 1048576: 2 iterations, 612345 us mean, 1.71 Mbit/s
// algbw, 0 wrong") and exits 0 when every size ran and every element of the verified
// run was the exact sum, 1 otherwise (the reason is printed), 2 for bad arguments.
// Bounded: 600 s in all, 60 s to find the peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tools/nccl_bench/control.h"
#include "tools/nccl_bench/rank.h"

namespace longhaul::nccl::bench {
namespace {

constexpr auto kTotal = std::chrono::seconds(600);
constexpr auto kFindPeer = std::chrono::seconds(60);

bool ParseHostPort(const std::string& s, sockaddr_in* out) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  *out = {};
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(std::atoi(s.c_str() + colon + 1)));
  return inet_pton(AF_INET, s.substr(0, colon).c_str(), &out->sin_addr) == 1;
}

// Rank 0: accepts one connection on `addr`; rank 1: connects to it (retried). -1 on
// failure or at `deadline`.
int ControlConnection(int rank, const sockaddr_in& addr, Clock::time_point deadline) {
  if (rank == 0) {
    const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 || listen(l, 1) != 0) {
      std::perror("control: bind/listen");
      close(l);
      return -1;
    }
    std::printf("control listening\n");
    std::fflush(stdout);
    while (Clock::now() < deadline) {
      pollfd p{l, POLLIN, 0};
      if (poll(&p, 1, 200) == 1) {
        const int c = accept(l, nullptr, nullptr);
        close(l);
        return c;
      }
    }
    close(l);
    return -1;
  }
  while (Clock::now() < deadline) {
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(c, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return c;
    close(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the peer is not up yet
  }
  return -1;
}

bool SendAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool RecvAll(int fd, void* p, size_t n, Clock::time_point deadline) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    if (Clock::now() >= deadline) return false;
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 200) != 1) continue;
    const ssize_t r = recv(fd, c, n, 0);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The next control message from the rank; prints a kError's text. nullptr on failure.
std::unique_ptr<ResultMsg> Next(int fd, uint32_t want, Clock::time_point deadline) {
  auto m = std::make_unique<ResultMsg>();  // the largest message
  const ssize_t n = RecvMsg(fd, m.get(), sizeof(ResultMsg), deadline);
  if (n < static_cast<ssize_t>(sizeof(uint32_t))) {
    std::printf("the rank went away (no control message)\n");
    return nullptr;
  }
  if (m->type == kError) {
    std::printf("%s\n", reinterpret_cast<ErrorMsg*>(m.get())->text);
    return nullptr;
  }
  if (m->type != want) {
    std::printf("unexpected control message %u (wanted %u)\n", m->type, want);
    return nullptr;
  }
  return m;
}

int Main(int argc, char** argv) {
  if (argc < 5 || argc > 6) {
    std::fprintf(stderr, "usage: nccl_verbs_rank RANK CONTROL PLUGIN SIZES [ITERS]\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  sockaddr_in control{};
  if ((rank != 0 && rank != 1) || !ParseHostPort(argv[2], &control)) {
    std::fprintf(stderr, "nccl_verbs_rank: RANK must be 0 or 1, CONTROL numeric HOST:PORT\n");
    return 2;
  }
  std::vector<uint64_t> sizes;
  for (const char* p = argv[4]; *p != '\0';) {
    char* end = nullptr;
    const uint64_t v = std::strtoull(p, &end, 10);
    if (end == p || v == 0 || v % 4 != 0) {
      std::fprintf(stderr, "nccl_verbs_rank: SIZES must be positive multiples of 4\n");
      return 2;
    }
    sizes.push_back(v);
    p = *end == ',' ? end + 1 : end;
  }
  const int iters = argc == 6 ? std::atoi(argv[5]) : 2;
  if (iters < 1 || iters > kMaxIters) {
    std::fprintf(stderr, "nccl_verbs_rank: ITERS must be in [1, %d]\n", kMaxIters);
    return 2;
  }
  const auto deadline = Clock::now() + kTotal;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    std::perror("socketpair");
    return 1;
  }
  RankOptions ro;
  ro.rank = rank;
  ro.ranks = 2;
  ro.ctrl_fd = pair[1];
  ro.plugin = argv[3];
  ro.max_bytes = 0;
  for (uint64_t s : sizes) ro.max_bytes = std::max<ByteCount>(ro.max_bytes, s);
  ro.slice_bytes = 4 << 20;
  std::thread rank_thread([&] { RankMain(ro, deadline); });
  const int fd = pair[0];
  int peer = -1;
  // A failure ends the process at once: the rank thread may be inside a ring step that
  // only its deadline would end.
  auto fail = [](const char* why) {
    if (why != nullptr) std::printf("%s\n", why);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(1);
    return 1;
  };
  HelloMsg hello;
  if (RecvMsg(fd, &hello, sizeof(hello), deadline) != sizeof(hello) || hello.type != kHello) {
    return fail("the rank did not start (see its error above)");
  }
  std::printf("rank %d: plugin v%d device %s\n", rank, hello.version, hello.device);
  peer = ControlConnection(rank, control, std::min(deadline, Clock::now() + kFindPeer));
  if (peer < 0) return fail("no control connection to the other rank within 60 s");
  PeerMsg pm;
  if (!SendAll(peer, hello.handle, sizeof(hello.handle)) ||
      !RecvAll(peer, pm.handle, sizeof(pm.handle), deadline)) {
    return fail("handle exchange with the other rank failed");
  }
  if (!SendMsg(fd, &pm, sizeof(pm))) return fail("the rank went away");
  uint32_t ready = 0;
  if (RecvMsg(fd, &ready, sizeof(ready), deadline) != sizeof(ready) || ready != kReady) {
    return fail("the ring did not connect");
  }
  std::printf("rank %d: ring connected\n", rank);
  std::fflush(stdout);
  int64_t wrong_total = 0;
  for (uint64_t bytes : sizes) {
    RunMsg run;
    run.bytes = bytes;
    run.iters = iters;
    run.warmup = 1;
    if (!SendMsg(fd, &run, sizeof(run))) return fail("the rank went away");
    std::unique_ptr<ResultMsg> r = Next(fd, kResult, deadline);
    if (r == nullptr) return fail(nullptr);
    double sum = 0;
    for (int i = 0; i < r->iters; ++i) sum += r->iter_us[i];
    const double mean_us = sum / r->iters;
    std::printf("size %llu: %d iterations, %.0f us mean, %.2f Mbit/s algbw, %lld wrong\n",
                static_cast<unsigned long long>(bytes), r->iters, mean_us,
                static_cast<double>(bytes) * 8 / mean_us, static_cast<long long>(r->wrong));
    std::fflush(stdout);
    wrong_total += r->wrong;
  }
  if (wrong_total != 0) return fail("allreduce WRONG");
  uint32_t exit_msg = kExit;
  SendMsg(fd, &exit_msg, sizeof(exit_msg));
  rank_thread.join();  // it closes its comms and finalizes the plugin
  close(peer);
  close(pair[0]);
  close(pair[1]);
  std::printf("allreduce intact\n");
  return 0;
}

}  // namespace
}  // namespace longhaul::nccl::bench

int main(int argc, char** argv) { return longhaul::nccl::bench::Main(argc, argv); }
