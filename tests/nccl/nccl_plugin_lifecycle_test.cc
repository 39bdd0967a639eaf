// The plugin's lifecycle: closes with requests outstanding, per-communicator init and
// finalize and unload (no thread left), the v8 table (no finalize), a receiver process
// that vanishes, and two processes exchanging handles in a ring (OFI's ring test).
// nccl_plugin_fixture.h has the harness.
#include <dlfcn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "tests/nccl/nccl_plugin_fixture.h"

namespace longhaul::nccl::plugin_test {
namespace {

TEST_F(PluginTest, CloseWithRequestsOutstandingDoesNotHang) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  std::vector<uint8_t> big(8 << 20), in(4096);
  for (int i = 0; i < 4; ++i) Send(c.send, big.data(), big.size(), 0);
  for (int i = 0; i < 4; ++i) Recv(c.recv, in.data(), in.size(), 0);  // too small: never tested
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, PerCommunicatorInitFinalizeAndUnloadLeaveNoThread) {
  UnloadNetPlugin(&plugin_);
  const int before = ThreadCount();
  ASSERT_GT(before, 0);
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(LONGHAUL_NCCL_PLUGIN);
    ASSERT_TRUE(p.ok()) << p.status();
    plugin_ = *p;
    net_ = plugin_.v12;
    // Two communicators: the runtime lives until the last finalize.
    void* ctx1 = nullptr;
    void* ctx2 = nullptr;
    Init(&ctx1);
    Init(&ctx2);
    Comms c;
    Connect(ctx1, &c);
    EXPECT_GT(ThreadCount(), before);  // the driver thread runs
    uint64_t v = 0x1234 + round, got = 0;
    void* r = Recv(c.recv, &got, sizeof(got), 0);
    Send(c.send, &v, sizeof(v), 0);
    ASSERT_EQ(WaitDone(net_, r, nullptr), ncclSuccess);
    EXPECT_EQ(got, v);
    Close(ctx1, &c);
    EXPECT_EQ(net_->finalize(ctx1), ncclSuccess);
    EXPECT_GT(ThreadCount(), before);  // ctx2 still uses it
    EXPECT_EQ(net_->finalize(ctx2), ncclSuccess);
    EXPECT_LE(ThreadCountOnceAtMost(before), before);
    EXPECT_EQ(UnloadNetPlugin(&plugin_), 0);
    EXPECT_LE(ThreadCountOnceAtMost(before), before);
  }
  // For TearDown.
  absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(LONGHAUL_NCCL_PLUGIN);
  ASSERT_TRUE(p.ok());
  plugin_ = *p;
}

TEST_F(PluginTest, OlderVersionTablesWork) {
  // v8: int sizes, no contexts, no finalize (the runtime goes at unload).
  auto* v8 = static_cast<const ncclNet_v8_t*>(dlsym(plugin_.library, "ncclNetPlugin_v8"));
  ASSERT_EQ(v8->init(TestLogger), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(v8->devices(&ndev), ncclSuccess);
  ASSERT_EQ(ndev, 1);
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *send = nullptr, *recv = nullptr;
  ASSERT_EQ(v8->listen(0, handle, &listen), ncclSuccess);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while ((!send || !recv) && Clock::now() < deadline) {
    if (!send) {
      ASSERT_EQ(v8->connect(0, handle, &send, nullptr), ncclSuccess);
    }
    if (!recv) {
      ASSERT_EQ(v8->accept(listen, &recv, nullptr), ncclSuccess);
    }
  }
  ASSERT_TRUE(send && recv);
  char out[300], in[512];
  memset(out, 0x5a, sizeof(out));
  void* d[1] = {in};
  int s[1] = {sizeof(in)};
  int t[1] = {0};
  void* rreq = nullptr;
  void* sreq = nullptr;
  ASSERT_EQ(v8->irecv(recv, 1, d, s, t, nullptr, &rreq), ncclSuccess);
  while (sreq == nullptr)
    ASSERT_EQ(v8->isend(send, out, sizeof(out), 0, nullptr, &sreq), ncclSuccess);
  int done = 0, size = 0;
  const auto d2 = Clock::now() + std::chrono::seconds(20);
  while (!done && Clock::now() < d2) ASSERT_EQ(v8->test(rreq, &done, &size), ncclSuccess);
  EXPECT_EQ(size, 300);
  EXPECT_EQ(memcmp(in, out, 300), 0);
  done = 0;
  ASSERT_EQ(v8->test(sreq, &done, &size), ncclSuccess);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(v8->isend(send, out, -1, 0, nullptr, &sreq), ncclInternalError);
  EXPECT_EQ(v8->closeSend(send), ncclSuccess);
  EXPECT_EQ(v8->closeRecv(recv), ncclSuccess);
  EXPECT_EQ(v8->closeListen(listen), ncclSuccess);
  // No finalize in v8: TearDown's dlclose stops the runtime.
}

// A receiver process that dies: an in-place send never gets acknowledged; test reports
// an error once the connection is declared dead, and closeSend returns (bounded by
// NCCL_LONGHAUL_LINGER, then the connection is aborted so longhaul lets go of the memory).
TEST_F(PluginTest, PeerGoneInPlaceSendFailsAndCloseReturns) {
  setenv("NCCL_LONGHAUL_COPY_MAX", "0", 1);
  setenv("NCCL_LONGHAUL_LINGER", "300ms", 1);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    void* ctx = nullptr;
    ncclNetCommConfig_v12_t config{-1};
    char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
    void *listen = nullptr, *recv = nullptr;
    // The fixture's comm id (Init: 42): both ends of a comm belong to one communicator,
    // and a listen comm refuses OPENs from another.
    if (net_->init(&ctx, 42, &config, nullptr, nullptr) != ncclSuccess) _exit(1);
    if (net_->listen(ctx, 0, handle, &listen) != ncclSuccess) _exit(2);
    if (write(sv[1], handle, sizeof(handle)) != sizeof(handle)) _exit(3);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!recv && Clock::now() < deadline) {
      if (net_->accept(listen, &recv, nullptr) != ncclSuccess) _exit(4);
    }
    char b = 0;
    if (write(sv[1], &b, 1) != 1) _exit(5);
    // Wait for the parent's go, then vanish without closing anything.
    if (read(sv[1], &b, 1) != 1) _exit(6);
    kill(getpid(), SIGKILL);
  }
  close(sv[1]);
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_EQ(read(sv[0], handle, sizeof(handle)), static_cast<ssize_t>(sizeof(handle)));
  void* ctx = Init();
  void* send = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!send && Clock::now() < deadline) {
    ASSERT_EQ(net_->connect(ctx, 0, handle, &send, nullptr), ncclSuccess);
  }
  ASSERT_NE(send, nullptr);
  char b = 0;
  ASSERT_EQ(read(sv[0], &b, 1), 1);   // accepted
  ASSERT_EQ(write(sv[0], &b, 1), 1);  // die now
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  close(sv[0]);
  std::vector<uint8_t> big(32 << 20, 1);
  void* req = nullptr;
  ASSERT_EQ(net_->isend(send, big.data(), big.size(), 0, nullptr, nullptr, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  // The peer is gone: the request ends with an error (connection refused / unreachable),
  // never with success.
  EXPECT_NE(WaitDone(net_, req, nullptr, std::chrono::seconds(60)), ncclSuccess);
  EXPECT_EQ(net_->closeSend(send), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
  unsetenv("NCCL_LONGHAUL_LINGER");
}

// Two processes, the handles exchanged over a socketpair, a ring of two (each sends to
// and receives from the other), as the OFI ring test does: 32 receives of 5200 bytes and
// 32 sends of 5000 bytes with tag 1, sizes checked on both sides.
TEST_F(PluginTest, TwoProcessesExchangeHandlesAndRing) {
  auto run_rank = [&](int fd, int rank) -> int {
    Rank me;
    if (const int failed = BeginRank(net_, fd, 7, &me); failed != 0) return failed;
    void *send = nullptr, *recv = nullptr;
    if (const int failed = ConnectRank(net_, me, &send, &recv); failed != 0) return failed;
    constexpr int kN = LH_NCCL_NET_MAX_REQUESTS;
    std::vector<std::vector<uint8_t>> in(kN, std::vector<uint8_t>(5200)),
        out(kN, std::vector<uint8_t>(5000));
    std::vector<void*> rreq(kN, nullptr), sreq(kN, nullptr);
    for (int i = 0; i < kN; ++i) {
      void* d[1] = {in[i].data()};
      size_t s[1] = {5200};
      int t[1] = {1};
      if (net_->irecv(recv, 1, d, s, t, nullptr, nullptr, &rreq[i]) != ncclSuccess) return 17;
    }
    for (int i = 0; i < kN; ++i) {
      for (size_t k = 0; k < 5000; ++k) out[i][k] = static_cast<uint8_t>(k * 7 + i + rank);
      while (!sreq[i]) {
        if (net_->isend(send, out[i].data(), 5000, 1, nullptr, nullptr, &sreq[i]) != ncclSuccess)
          return 18;
      }
    }
    int pending = 2 * kN;
    const auto d2 = Clock::now() + std::chrono::seconds(30);
    while (pending > 0 && Clock::now() < d2) {
      for (int i = 0; i < kN; ++i) {
        for (void** r : {&rreq[i], &sreq[i]}) {
          if (*r == nullptr) continue;
          int done = 0, size = 0;
          if (net_->test(*r, &done, &size) != ncclSuccess) return 19;
          if (done) {
            if (size != 5000) return 20;
            *r = nullptr;
            --pending;
          }
        }
      }
    }
    if (pending) return 21;
    const int peer_rank = 1 - rank;
    for (int i = 0; i < kN; ++i) {
      for (size_t k = 0; k < 5000; ++k) {
        if (in[i][k] != static_cast<uint8_t>(k * 7 + i + peer_rank)) return 22;
      }
    }
    // Barrier before closing so neither side closes under the other's receives.
    char b = 0;
    if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) return 23;
    if (net_->closeSend(send) || net_->closeRecv(recv) || net_->closeListen(me.listen)) return 24;
    if (net_->finalize(me.ctx) != ncclSuccess) return 25;
    return 0;
  };
  int fd = -1;
  const pid_t pid = ForkChild([&](int child_fd) { return run_rank(child_fd, 1); }, &fd);
  ASSERT_GE(pid, 0);
  const int mine = run_rank(fd, 0);
  close(fd);
  // Bounded: the child ends itself within its own deadlines; kill it if it does not.
  const int status = WaitChild(pid);
  EXPECT_EQ(mine, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
