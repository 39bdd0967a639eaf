// Packet protection in the plugin as NCCL drives it: init without a choice of keys fails
// naming the variables; bad files and contradictory choices fail init naming them; a
// pre-shared key and static keys carry messages (the listener's public key travels in
// its handle); a listener whose key is not allowed, or whose handle carries another kind
// of keys, is refused at connect; two processes with their own key pairs exchange data,
// and a process whose key the other does not allow is refused. Keys are generated into
// a temporary directory per test. nccl_plugin_fixture.h has the harness.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/nccl/nccl_plugin_fixture.h"
#include "transport/crypto/key_files.h"
#include "transport/nccl/plugin_handle.h"

namespace longhaul::nccl::plugin_test {
namespace {

class SecurityTest : public KeyedPluginTest {
 protected:
  // The allowed keys, labelled, in DIR/NAME.
  std::string Allowed(const std::string& name, const std::vector<crypto::Key32>& keys) {
    std::string text = "# the ranks\n";
    for (size_t i = 0; i < keys.size(); ++i) {
      absl::StrAppend(&text, crypto::ToHex(keys[i]), " rank-", i, "\n");
    }
    std::ofstream(Path(name)) << text;
    return Path(name);
  }
  ncclResult_t TryInit(void** ctx) {
    ncclNetCommConfig_v12_t config{-1};
    return net_->init(ctx, 3, &config, TestLogger, nullptr);
  }

  // A connection in `ctx`, messages both ways over it, closed, and the context finalized.
  void ExchangeAndFinalize(void* ctx) {
    Comms c = Connect(ctx);
    Exchange(&c);
    CloseAndFinalize(ctx, &c);
  }

  // Messages both ways over `c`, checked byte by byte.
  void Exchange(Comms* c) {
    uint32_t seed = 11;
    for (size_t size : {size_t{0}, size_t{5000}, size_t{3} << 20}) {
      std::vector<uint8_t> out(size), in(size + 8, 0xee);
      Fill(&out, ++seed);
      void* r = Recv(c->recv, in.data(), in.size(), 4);
      void* s = Send(c->send, out.data(), out.size(), 4);
      int got = -1;
      ASSERT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
      ASSERT_EQ(WaitDone(net_, r, &got), ncclSuccess);
      ASSERT_EQ(got, static_cast<int>(size));
      EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << size;
    }
  }
};

TEST_F(SecurityTest, NoChoiceOfKeysFailsInitNamingTheVariables) {
  void* ctx = nullptr;
  EXPECT_EQ(TryInit(&ctx), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout(
      "no keys: give NCCL_LONGHAUL_KEY and NCCL_LONGHAUL_PEER_KEY, or NCCL_LONGHAUL_PSK_FILE, "
      "or NCCL_LONGHAUL_INSECURE=1 for plaintext"));
}

TEST_F(SecurityTest, BadFilesAndContradictionsFailInit) {
  void* ctx = nullptr;
  setenv("NCCL_LONGHAUL_INSECURE", "1", 1);
  setenv("NCCL_LONGHAUL_PSK_FILE", Psk("a.psk").c_str(), 1);
  EXPECT_EQ(TryInit(&ctx), ncclInvalidUsage);
  EXPECT_TRUE(
      WarnedAbout("NCCL_LONGHAUL_INSECURE=1 (plaintext) was chosen together with keys "
                  "(NCCL_LONGHAUL_PSK_FILE): choose one"));
  setenv("NCCL_LONGHAUL_INSECURE", "yes", 1);
  EXPECT_EQ(TryInit(&ctx), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("NCCL_LONGHAUL_INSECURE=yes: expected a 0 or 1"));
  unsetenv("NCCL_LONGHAUL_INSECURE");
  chmod(Path("a.psk").c_str(), 0644);
  EXPECT_EQ(TryInit(&ctx), ncclInvalidUsage);
  EXPECT_TRUE(
      WarnedAbout(absl::StrCat("NCCL_LONGHAUL_PSK_FILE: ", Path("a.psk"),
                               " is readable by others (mode 0644): chmod 600 ", Path("a.psk"))));
  unsetenv("NCCL_LONGHAUL_PSK_FILE");
  NewKey("r0");
  setenv("NCCL_LONGHAUL_KEY", Path("r0.key").c_str(), 1);
  EXPECT_EQ(TryInit(&ctx), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("NCCL_LONGHAUL_KEY was given without NCCL_LONGHAUL_PEER_KEY"));
  setenv("NCCL_LONGHAUL_PEER_KEY", Path("missing").c_str(), 1);
  EXPECT_EQ(TryInit(&ctx), ncclInvalidUsage);
  EXPECT_TRUE(
      WarnedAbout(absl::StrCat("NCCL_LONGHAUL_PEER_KEY: ", Path("missing"), ": no such file")));
}

TEST_F(SecurityTest, PreSharedKeyCarriesMessages) {
  setenv("NCCL_LONGHAUL_PSK_FILE", Psk("job.psk").c_str(), 1);
  void* ctx = Init();
  EXPECT_TRUE(LoggedInfo("packet protection: Noise NNpsk0 (pre-shared key)"));
  ExchangeAndFinalize(ctx);
}

TEST_F(SecurityTest, StaticKeysTravelInTheHandle) {
  const crypto::Key32 mine = NewKey("r0");
  setenv("NCCL_LONGHAUL_KEY", Path("r0.key").c_str(), 1);
  setenv("NCCL_LONGHAUL_PEER_KEY", Allowed("ranks.pub", {NewKey("r1"), mine}).c_str(), 1);
  setenv("NCCL_LONGHAUL_PSK_FILE", Psk("job.psk").c_str(), 1);  // IKpsk1: both must match
  void* ctx = Init();
  EXPECT_TRUE(LoggedInfo("packet protection: Noise IKpsk1"));
  EXPECT_TRUE(LoggedInfo("2 allowed keys"));
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(h->public_key.has_value());
  EXPECT_EQ(*h->public_key, mine);
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  ExchangeAndFinalize(ctx);
}

TEST_F(SecurityTest, ListenerKeysThatDoNotFitAreRefusedAtConnect) {
  NewKey("r0");
  setenv("NCCL_LONGHAUL_KEY", Path("r0.key").c_str(), 1);
  // This rank's own key is not allowed: its own handles name a listener it refuses.
  setenv("NCCL_LONGHAUL_PEER_KEY", Allowed("others.pub", {NewKey("r1")}).c_str(), 1);
  void* ctx = Init();
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  void* send = nullptr;
  EXPECT_EQ(net_->connect(ctx, 0, handle, &send, nullptr), ncclInvalidUsage);
  EXPECT_EQ(send, nullptr);
  EXPECT_TRUE(WarnedAbout("(from its handle) is not in NCCL_LONGHAUL_PEER_KEY"));
  // A handle without a key (a listener without static keys) is refused too.
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  ASSERT_TRUE(h.ok());
  h->public_key.reset();
  char keyless[LH_NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_TRUE(EncodeHandle(*h, keyless).ok());
  EXPECT_EQ(net_->connect(ctx, 0, keyless, &send, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("the listener's handle carries no public key"));
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);

  // A rank with a pre-shared key only is given a handle that carries a key.
  unsetenv("NCCL_LONGHAUL_KEY");
  unsetenv("NCCL_LONGHAUL_PEER_KEY");
  setenv("NCCL_LONGHAUL_PSK_FILE", Psk("job.psk").c_str(), 1);
  Init(&ctx);
  EXPECT_EQ(net_->connect(ctx, 0, handle, &send, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("the listener uses static keys"));
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// One rank of a pair in its own process: listens, swaps handles over `fd`, connects to
// the other and sends it one message while receiving one. Returns 0 when both arrived
// intact, 30 when the connect failed (the other side refused), other codes for other
// failures.
int PairRank(const ncclNet_v12_t* net, int fd, int rank) {
  Rank me;
  if (const int failed = BeginRank(net, fd, 9, &me); failed != 0) return failed;
  void* const ctx = me.ctx;
  void* const listen = me.listen;
  void *send = nullptr, *recv = nullptr;
  const int connected = ConnectRank(net, me, &send, &recv);
  if (connected == 15) return 15;
  const bool refused = connected == 14;  // the other side refused the handshake
  char b = 0;
  if (refused) {
    // Tell the other side, which waits for a connection that never comes.
    b = 1;
    if (write(fd, &b, 1) != 1) return 16;
    net->closeListen(listen);
    net->finalize(ctx);
    return 30;
  }
  if (!send || !recv) {
    // The other side may have been refused: it says so.
    if (read(fd, &b, 1) == 1 && b == 1) {
      net->closeListen(listen);
      net->finalize(ctx);
      return 31;
    }
    return 17;
  }
  std::vector<uint8_t> out(70000), in(70000);
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<uint8_t>(k * 13 + rank);
  void *rreq = nullptr, *sreq = nullptr;
  void* d[1] = {in.data()};
  size_t s[1] = {in.size()};
  int t[1] = {2};
  if (net->irecv(recv, 1, d, s, t, nullptr, nullptr, &rreq) != ncclSuccess) return 18;
  while (!sreq) {
    if (net->isend(send, out.data(), out.size(), 2, nullptr, nullptr, &sreq) != ncclSuccess) {
      return 19;
    }
  }
  int size = 0;
  if (WaitDone(net, sreq, nullptr) != ncclSuccess) return 20;
  if (WaitDone(net, rreq, &size) != ncclSuccess || size != 70000) return 21;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] != static_cast<uint8_t>(k * 13 + (1 - rank))) return 22;
  }
  b = 0;
  if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) return 23;
  if (net->closeSend(send) || net->closeRecv(recv) || net->closeListen(listen)) return 24;
  if (net->finalize(ctx) != ncclSuccess) return 25;
  return 0;
}

// Runs PairRank in this process (rank 0, key r0) and a child (rank 1, key r1); returns
// both results.
std::pair<int, int> RunPair(const ncclNet_v12_t* net, const std::string& key0,
                            const std::string& key1) {
  int fd = -1;
  const pid_t pid = ForkChild(
      [&](int child_fd) {
        setenv("NCCL_LONGHAUL_KEY", key1.c_str(), 1);
        return PairRank(net, child_fd, 1);
      },
      &fd);
  if (pid < 0) return {-1, -1};
  setenv("NCCL_LONGHAUL_KEY", key0.c_str(), 1);
  const int mine = PairRank(net, fd, 0);
  close(fd);
  const int status = WaitChild(pid);
  return {mine, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST_F(SecurityTest, TwoProcessesWithTheirOwnKeyPairs) {
  const crypto::Key32 k0 = NewKey("r0"), k1 = NewKey("r1");
  setenv("NCCL_LONGHAUL_PEER_KEY", Allowed("ranks.pub", {k0, k1}).c_str(), 1);
  setenv("NCCL_LONGHAUL_CONNECT_TIMEOUT", "5s", 1);
  const auto [a, b] = RunPair(net_, Path("r0.key"), Path("r1.key"));
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 0);
  unsetenv("NCCL_LONGHAUL_CONNECT_TIMEOUT");
}

// The listener's side of a refusal: listens, passes its handle over `fd`, and accepts
// until the other process writes its result (one int). Returns that result, or -1 when
// a connection was accepted (it must not be) or nothing came back in time.
int ListenUntilTold(const ncclNet_v12_t* net, int fd) {
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{-1};
  if (net->init(&ctx, 9, &config, TestLogger, nullptr) != ncclSuccess) return -2;
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *recv = nullptr;
  if (net->listen(ctx, 0, handle, &listen) != ncclSuccess) return -3;
  if (write(fd, handle, sizeof(handle)) != sizeof(handle)) return -4;
  int result = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline && recv == nullptr) {
    net->accept(listen, &recv, nullptr);
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) == 1) {
      if (read(fd, &result, sizeof(result)) != sizeof(result)) result = -5;
      break;
    }
  }
  if (recv != nullptr) {
    result = -1;
    net->closeRecv(recv);
  }
  net->closeListen(listen);
  net->finalize(ctx);
  return result;
}

// The connecting side: connects with the handle from `fd` until connect fails or the
// deadline; 30 when it failed because the listener does not allow this key, 31 when it
// failed otherwise, 32 when it connected.
int ConnectOnce(const ncclNet_v12_t* net, int fd) {
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{-1};
  int result = 33;
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  if (net->init(&ctx, 9, &config, TestLogger, nullptr) == ncclSuccess &&
      read(fd, handle, sizeof(handle)) == sizeof(handle)) {
    void* send = nullptr;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    result = 34;
    while (Clock::now() < deadline) {
      if (net->connect(ctx, 0, handle, &send, nullptr) != ncclSuccess) {
        result = WarnedAbout("refused the client's keys") ? 30 : 31;
        break;
      }
      if (send != nullptr) {
        result = 32;
        net->closeSend(send);
        break;
      }
    }
    net->finalize(ctx);
  }
  if (write(fd, &result, sizeof(result)) != sizeof(result)) return 35;
  return result;
}

TEST_F(SecurityTest, AProcessWhoseKeyIsNotAllowedIsRefused) {
  // The listener allows r0 and r1; the intruder holds its own key pair and knows the
  // listener's key (it allows it), so the listener must refuse the handshake.
  const crypto::Key32 k0 = NewKey("r0"), k1 = NewKey("r1"), ki = NewKey("intruder");
  const std::string listener_allows = Allowed("ranks.pub", {k0, k1});
  const std::string intruder_allows = Allowed("intruder-view.pub", {k0, ki});
  setenv("NCCL_LONGHAUL_CONNECT_TIMEOUT", "5s", 1);
  int fd = -1;
  const pid_t pid = ForkChild(
      [&](int child_fd) {
        setenv("NCCL_LONGHAUL_KEY", Path("intruder.key").c_str(), 1);
        setenv("NCCL_LONGHAUL_PEER_KEY", intruder_allows.c_str(), 1);
        return ConnectOnce(net_, child_fd);
      },
      &fd);
  ASSERT_GE(pid, 0);
  setenv("NCCL_LONGHAUL_KEY", Path("r0.key").c_str(), 1);
  setenv("NCCL_LONGHAUL_PEER_KEY", listener_allows.c_str(), 1);
  const int told = ListenUntilTold(net_, fd);
  close(fd);
  const int status = WaitChild(pid);
  unsetenv("NCCL_LONGHAUL_CONNECT_TIMEOUT");
  EXPECT_EQ(told, 30) << "the intruder's connect must fail, refused for its key";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 30) << status;
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
