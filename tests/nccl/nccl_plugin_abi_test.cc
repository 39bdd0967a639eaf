// The plugin's C ABI as NCCL sees it: the exported tables and their mandatory slots, the
// properties of every version filled to their exact layout, the handle, error paths
// (bad configuration, devices, handles, objects, too many requests, a send larger than
// its receive), a relay named by NCCL_LONGHAUL_ADVERTISE and the v9..v11 adapters
// carrying messages. nccl_plugin_fixture.h has
// the harness.
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "tests/nccl/nccl_plugin_fixture.h"
#include "transport/nccl/plugin_handle.h"

namespace longhaul::nccl::plugin_test {
namespace {

using ::testing::HasSubstr;

// ---- exports and layouts ----

TEST_F(PluginTest, ExportsEveryVersionWithTheMandatorySlots) {
  const char* names[] = {"ncclNetPlugin_v8", "ncclNetPlugin_v9", "ncclNetPlugin_v10",
                         "ncclNetPlugin_v11", "ncclNetPlugin_v12"};
  for (const char* n : names) {
    void* t = dlsym(plugin_.library, n);
    ASSERT_NE(t, nullptr) << n;
    // Every table starts with the name; the first slots are never NULL.
    const void* const* slots = static_cast<const void* const*>(t);
    EXPECT_STREQ(static_cast<const char*>(slots[0]), "longhaul") << n;
    for (int i = 1; i <= 16; ++i) EXPECT_NE(slots[i], nullptr) << n << " slot " << i;
  }
  EXPECT_NE(net_->finalize, nullptr);
  auto* v11 = static_cast<const ncclNet_v11_t*>(dlsym(plugin_.library, "ncclNetPlugin_v11"));
  EXPECT_NE(v11->finalize, nullptr);
  EXPECT_EQ(net_->getDeviceMr, nullptr);
  EXPECT_EQ(net_->irecvConsumed, nullptr);
  EXPECT_EQ(net_->makeVDevice, nullptr);
  EXPECT_EQ(net_->setNetAttr, nullptr);
  EXPECT_EQ(dlsym(plugin_.library, "ncclNetPlugin_v13"), nullptr);
}

// getProperties(0) of a plugin table `net` into a Props followed by 32 guard bytes, all 0xab
// before the call: the call succeeds and leaves the guard untouched (it fills exactly its
// version's layout). nullopt when the table is missing or the call fails.
template <typename Props, typename Net>
std::optional<Props> GuardedProperties(const Net* net) {
  EXPECT_NE(net, nullptr);
  if (net == nullptr) return std::nullopt;
  struct {
    Props p;
    uint8_t guard[32];
  } guarded;
  memset(&guarded, 0xab, sizeof(guarded));
  const ncclResult_t r = net->getProperties(0, &guarded.p);
  EXPECT_EQ(r, ncclSuccess);
  if (r != ncclSuccess) return std::nullopt;
  for (uint8_t g : guarded.guard) EXPECT_EQ(g, 0xab);
  return guarded.p;
}

TEST_F(PluginTest, PropertiesOfEveryVersionFillTheirLayoutExactly) {
  setenv("NCCL_LONGHAUL_RATE", "2gbit", 1);
  setenv("NCCL_LONGHAUL_INITIAL_RTT", "58ms", 1);
  void* ctx = Init();
  // v12: 128 bytes, then guard bytes that must stay untouched.
  std::optional<ncclNetProperties_v12_t> v12 = GuardedProperties<ncclNetProperties_v12_t>(net_);
  ASSERT_TRUE(v12);
  EXPECT_STREQ(v12->name, "lo");
  EXPECT_EQ(v12->pciPath, nullptr);  // loopback is virtual
  EXPECT_EQ(v12->ptrSupport, LH_NCCL_PTR_HOST);
  EXPECT_EQ(v12->speed, 2000);
  EXPECT_FLOAT_EQ(v12->latency, 29000.0f);
  EXPECT_EQ(v12->maxRecvs, 1) << "NCCL must not group receives (net_plugin.h)";
  EXPECT_GT(v12->maxComms, 0);
  EXPECT_EQ(v12->netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(v12->netDeviceVersion, 0);
  EXPECT_EQ(v12->vProps.ndevs, 1);
  EXPECT_EQ(v12->vProps.devs[0], 0);
  EXPECT_EQ(v12->maxP2pBytes, size_t{1} << 30);
  EXPECT_GT(v12->maxCollBytes, 0u);
  EXPECT_EQ(v12->maxMultiRequestSize, 1);
  EXPECT_EQ(v12->railId, -1);
  EXPECT_EQ(v12->planeId, -1);

  std::optional<ncclNetProperties_v11_t> p11 = GuardedProperties<ncclNetProperties_v11_t>(
      static_cast<const ncclNet_v11_t*>(dlsym(plugin_.library, "ncclNetPlugin_v11")));
  ASSERT_TRUE(p11);
  EXPECT_EQ(p11->speed, 2000);
  EXPECT_EQ(p11->maxP2pBytes, size_t{1} << 30);
  EXPECT_EQ(p11->maxMultiRequestSize, 1);

  std::optional<ncclNetProperties_v9_t> p9 = GuardedProperties<ncclNetProperties_v9_t>(
      static_cast<const ncclNet_v9_t*>(dlsym(plugin_.library, "ncclNetPlugin_v9")));
  ASSERT_TRUE(p9);
  EXPECT_EQ(p9->maxRecvs, 1);
  EXPECT_EQ(p9->maxCollBytes, size_t{1} << 30);

  std::optional<ncclNetProperties_v8_t> p8 = GuardedProperties<ncclNetProperties_v8_t>(
      static_cast<const ncclNet_v8_t*>(dlsym(plugin_.library, "ncclNetPlugin_v8")));
  ASSERT_TRUE(p8);
  EXPECT_EQ(p8->speed, 2000);
  EXPECT_EQ(p8->netDeviceVersion, 0);
  EXPECT_EQ(p8->maxRecvs, 1);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// Listens on `ctx` (the listen comm in *listen) and decodes the handle it gave; an error
// status when the listen failed.
absl::StatusOr<PluginHandle> ListenHandle(const ncclNet_v12_t* net, void* ctx, void** listen) {
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  if (net->listen(ctx, 0, handle, listen) != ncclSuccess) {
    return absl::InternalError("listen failed");
  }
  return DecodeHandle(handle);
}

TEST_F(PluginTest, HandleCarriesAddressPortAndCredit) {
  setenv("NCCL_LONGHAUL_CREDIT", "3MiB", 1);
  void* ctx = Init();
  void* listen = nullptr;
  absl::StatusOr<PluginHandle> h = ListenHandle(net_, ctx, &listen);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->address, "127.0.0.1");
  EXPECT_NE(h->port, 0);
  EXPECT_EQ(h->credit, 3u << 20);
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// A UDP relay on loopback, as longhaul-emu's relay mode is without a link: datagrams to
// its port go to `target` from its own socket; the answers go back to the last client.
// Counts both directions. The thread polls in 50 ms steps and stops with the object.
class LoopbackRelay {
 public:
  explicit LoopbackRelay(uint16_t target) {
    front_ = Bound(0);
    back_ = Bound(0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(target);
    connect(back_, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    thread_ = std::thread([this] { Run(); });
  }
  ~LoopbackRelay() {
    stop_ = true;
    thread_.join();
    close(front_);
    close(back_);
  }
  uint16_t port() const { return Port(front_); }
  int forward() const { return forward_.load(); }
  int reverse() const { return reverse_.load(); }

  // A port that was free a moment ago (bound, read, closed).
  static uint16_t FreePort() {
    const int fd = Bound(0);
    const uint16_t p = Port(fd);
    close(fd);
    return p;
  }

 private:
  static int Bound(uint16_t port) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    return fd;
  }
  static uint16_t Port(int fd) {
    sockaddr_in a{};
    socklen_t n = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    return ntohs(a.sin_port);
  }
  void Run() {
    std::vector<uint8_t> buf(65536);
    sockaddr_in client{};
    socklen_t client_len = 0;
    while (!stop_) {
      pollfd p[2] = {{front_, POLLIN, 0}, {back_, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      if (p[0].revents & POLLIN) {
        sockaddr_in from{};
        socklen_t len = sizeof(from);
        const ssize_t n =
            recvfrom(front_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n >= 0) {
          client = from;
          client_len = len;
          send(back_, buf.data(), n, 0);
          ++forward_;
        }
      }
      if (p[1].revents & POLLIN) {
        const ssize_t n = recv(back_, buf.data(), buf.size(), 0);
        if (n >= 0 && client_len > 0) {
          sendto(front_, buf.data(), n, 0, reinterpret_cast<sockaddr*>(&client), client_len);
          ++reverse_;
        }
      }
    }
  }

  int front_ = -1;
  int back_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> forward_{0};
  std::atomic<int> reverse_{0};
  std::thread thread_;
};

// NCCL_LONGHAUL_ADVERTISE: the handle names the relay, the connection runs through it.
TEST_F(PluginTest, AdvertisedAddressPutsARelayInFrontOfTheListener) {
  const uint16_t listen_port = LoopbackRelay::FreePort();
  LoopbackRelay relay(listen_port);
  setenv("NCCL_LONGHAUL_PORT", std::to_string(listen_port).c_str(), 1);
  setenv("NCCL_LONGHAUL_ADVERTISE", ("127.0.0.1:" + std::to_string(relay.port())).c_str(), 1);
  void* ctx = Init();
  Comms c = Connect(ctx);
  void* listen = nullptr;
  absl::StatusOr<PluginHandle> h = ListenHandle(net_, ctx, &listen);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->address, "127.0.0.1");
  EXPECT_EQ(h->port, relay.port());
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  std::vector<uint8_t> out(3 << 20), in(3 << 20);
  Fill(&out, 77);
  void* r = Recv(c.recv, in.data(), in.size(), 1);
  void* s = Send(c.send, out.data(), out.size(), 1);
  EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  EXPECT_EQ(WaitDone(net_, r, nullptr), ncclSuccess);
  EXPECT_EQ(in, out);
  CloseAndFinalize(ctx, &c);
  EXPECT_GT(relay.forward(), 100) << "the handshake and the data crossed the relay";
  EXPECT_GT(relay.reverse(), 0) << "and the acknowledgements came back through it";
}

// ---- error paths ----

TEST_F(PluginTest, BadProfileKeyFailsInitNamingTheVariable) {
  setenv("NCCL_LONGHAUL_FEC", "bogus", 1);
  void* ctx = nullptr;
  EXPECT_EQ(InitResult(&ctx, 1), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("NCCL_LONGHAUL_FEC=bogus"));
}

TEST_F(PluginTest, BadDeviceBadHandleAndBadObjects) {
  void* ctx = Init();
  ncclNetProperties_v12_t props;
  EXPECT_EQ(net_->getProperties(1, &props), ncclInternalError);
  EXPECT_EQ(net_->getProperties(-1, &props), ncclInternalError);
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE] = {};
  void* comm = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(net_->listen(ctx, 7, handle, &comm), ncclInternalError);
  EXPECT_EQ(comm, nullptr);
  // A handle that no listen wrote.
  void* send = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(net_->connect(ctx, 0, handle, &send, nullptr), ncclInternalError);
  EXPECT_EQ(send, nullptr);
  EXPECT_TRUE(WarnedAbout("not a longhaul handle"));
  EXPECT_EQ(net_->connect(ctx, 3, handle, &send, nullptr), ncclInternalError);
  // Objects that are not ours.
  uint64_t junk[64] = {};
  void* req = nullptr;
  int done = 0;
  EXPECT_EQ(net_->test(nullptr, &done, nullptr), ncclInternalError);
  EXPECT_EQ(net_->test(junk, &done, nullptr), ncclInternalError);
  EXPECT_EQ(net_->isend(junk, junk, 8, 0, nullptr, nullptr, &req), ncclInternalError);
  EXPECT_EQ(net_->isend(nullptr, junk, 8, 0, nullptr, nullptr, &req), ncclInternalError);
  EXPECT_EQ(net_->closeSend(junk), ncclInternalError);
  EXPECT_EQ(net_->closeRecv(nullptr), ncclInternalError);
  EXPECT_EQ(net_->accept(junk, &comm, nullptr), ncclInternalError);
  // iflush: host memory needs none; a NULL request means "done".
  req = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(net_->iflush(nullptr, 1, nullptr, nullptr, nullptr, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
  // finalize without init
  EXPECT_NE(net_->finalize(nullptr), ncclSuccess);
}

TEST_F(PluginTest, TooManyRequestsAndBadRegistration) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  void* mh = nullptr;
  char buf[64] = {};
  EXPECT_EQ(net_->regMr(c.send, buf, sizeof(buf), LH_NCCL_PTR_CUDA, &mh), ncclInternalError);
  ASSERT_EQ(net_->regMr(c.send, buf, sizeof(buf), LH_NCCL_PTR_HOST, &mh), ncclSuccess);
  ASSERT_NE(mh, nullptr);
  EXPECT_EQ(net_->deregMr(c.send, mh), ncclSuccess);

  std::vector<void*> sends;
  for (int i = 0; i < LH_NCCL_NET_MAX_REQUESTS; ++i) sends.push_back(Send(c.send, buf, 8, 1));
  void* extra = nullptr;
  EXPECT_EQ(net_->isend(c.send, buf, 8, 1, nullptr, nullptr, &extra), ncclInternalError);
  EXPECT_EQ(extra, nullptr);
  std::vector<void*> recvs;
  std::vector<std::vector<char>> rbufs(LH_NCCL_NET_MAX_REQUESTS + 1, std::vector<char>(8));
  for (int i = 0; i < LH_NCCL_NET_MAX_REQUESTS; ++i)
    recvs.push_back(Recv(c.recv, rbufs[i].data(), 8, 1));
  EXPECT_EQ(net_->irecv(c.recv, 1, nullptr, nullptr, nullptr, nullptr, nullptr, &extra),
            ncclInternalError);
  void* d[1] = {rbufs.back().data()};
  size_t s[1] = {8};
  int t[1] = {1};
  EXPECT_EQ(net_->irecv(c.recv, 1, d, s, t, nullptr, nullptr, &extra), ncclInternalError);
  // More buffers than an irecv accepts (8; NCCL is told maxRecvs 1 and never groups).
  void* d9[9];
  size_t s9[9];
  int t9[9];
  for (int i = 0; i < 9; ++i) {
    d9[i] = buf;
    s9[i] = 8;
    t9[i] = i;
  }
  EXPECT_EQ(net_->irecv(c.recv, 9, d9, s9, t9, nullptr, nullptr, &extra), ncclInternalError);
  for (void* r : sends) EXPECT_EQ(WaitDone(net_, r, nullptr), ncclSuccess);
  for (void* r : recvs) EXPECT_EQ(WaitDone(net_, r, nullptr), ncclSuccess);
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, SendLargerThanPostedReceiveIsInvalidUsageAndTheCommGoesOn) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  std::vector<uint8_t> big(2000), small(1000), next(16), got(64);
  Fill(&big, 1);
  Fill(&next, 2);
  void* r = Recv(c.recv, small.data(), small.size(), 0);
  void* s = Send(c.send, big.data(), big.size(), 0);
  EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  int size = -1;
  EXPECT_EQ(WaitDone(net_, r, &size), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("larger than the posted receive"));
  // The next message matches the next receive.
  r = Recv(c.recv, got.data(), got.size(), 0);
  s = Send(c.send, next.data(), next.size(), 0);
  EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess);
  EXPECT_EQ(size, 16);
  EXPECT_EQ(memcmp(got.data(), next.data(), 16), 0);
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, InterfaceListMatchingNothingFailsInitListingInterfaces) {
  setenv("NCCL_LONGHAUL_IFNAME", "=no-such-if0", 1);
  void* ctx = nullptr;
  EXPECT_EQ(InitResult(&ctx, 1), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("NCCL_LONGHAUL_IFNAME==no-such-if0 matches no interface"));
  EXPECT_TRUE(WarnedAbout("lo (127.0.0.1)"));
  setenv("NCCL_LONGHAUL_IFNAME", "lo", 1);
}

TEST_F(PluginTest, HandleCodecRejectsDamage) {
  char buf[kHandleBytes];
  PluginHandle h{"127.0.0.1", 4242, 7, 9, 1 << 20};
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  absl::StatusOr<PluginHandle> back = DecodeHandle(buf);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->port, 4242);
  EXPECT_EQ(back->instance, 7u);
  EXPECT_EQ(back->listen_id, 9u);
  ASSERT_TRUE(RedirectHandle(buf, "127.0.0.1", 5000).ok());
  EXPECT_EQ(DecodeHandle(buf)->port, 5000);
  EXPECT_EQ(DecodeHandle(buf)->listen_id, 9u);
  char bad[kHandleBytes];
  memcpy(bad, buf, sizeof(bad));
  bad[0] ^= 1;  // magic
  EXPECT_FALSE(DecodeHandle(bad).ok());
  memcpy(bad, buf, sizeof(bad));
  bad[4] = 9;  // version
  EXPECT_FALSE(DecodeHandle(bad).ok());
  memcpy(bad, buf, sizeof(bad));
  memset(bad + 32, 'x', 48);  // address not terminated
  EXPECT_FALSE(DecodeHandle(bad).ok());
  memcpy(bad, buf, sizeof(bad));
  bad[6] = bad[7] = 0;  // port 0
  EXPECT_FALSE(DecodeHandle(bad).ok());
  EXPECT_FALSE(EncodeHandle(PluginHandle{std::string(60, '1'), 1, 0, 0, 1}, buf).ok());
  // Version 3 (the layout of version 2): the listener's public key at offset 80, flag bit
  // 0 at 112; kept by a redirect; unknown flags refused.
  EXPECT_FALSE(back->public_key.has_value());
  std::array<uint8_t, 32> key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i + 1);
  h.public_key = key;
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  EXPECT_EQ(buf[4], 3);
  EXPECT_EQ(memcmp(buf + 80, key.data(), 32), 0);
  EXPECT_EQ(buf[112], 1);
  ASSERT_TRUE(RedirectHandle(buf, "127.0.0.2", 6000).ok());
  back = DecodeHandle(buf);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->address, "127.0.0.2");
  EXPECT_EQ(back->public_key, key);
  memcpy(bad, buf, sizeof(bad));
  bad[112] = 3;
  EXPECT_THAT(std::string(DecodeHandle(bad).status().message()), HasSubstr("unknown flags"));
  memcpy(bad, buf, sizeof(bad));
  bad[4] = 2;  // a plugin from before listen ids were random (and frames of version 2)
  EXPECT_THAT(std::string(DecodeHandle(bad).status().message()),
              HasSubstr("every rank must load the same plugin"));
  bad[4] = 1;  // a plugin from before keys travelled in handles
  EXPECT_THAT(std::string(DecodeHandle(bad).status().message()),
              HasSubstr("every rank must load the same plugin"));
}

// v9, v10 and v11 tables: connect, one message each way through the adapters.
TEST_F(PluginTest, V9V10V11TablesCarryMessages) {
  auto* v9 = static_cast<const ncclNet_v9_t*>(dlsym(plugin_.library, "ncclNetPlugin_v9"));
  auto* v10 = static_cast<const ncclNet_v10_t*>(dlsym(plugin_.library, "ncclNetPlugin_v10"));
  auto* v11 = static_cast<const ncclNet_v11_t*>(dlsym(plugin_.library, "ncclNetPlugin_v11"));
  ASSERT_TRUE(v9 && v10 && v11);
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{-1};
  ASSERT_EQ(v11->init(&ctx, 5, &config, TestLogger, nullptr), ncclSuccess);
  ASSERT_EQ(v10->init(TestLogger, nullptr), ncclSuccess);  // one more user, no context
  for (int version : {9, 10, 11}) {
    char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    if (version == 11) {
      ASSERT_EQ(v11->listen(ctx, 0, handle, &listen), ncclSuccess);
    } else {
      ASSERT_EQ(v9->listen(0, handle, &listen), ncclSuccess);
    }
    ncclNetCommConfig_v10_t cc{-1};
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while ((!send || !recv) && Clock::now() < deadline) {
      if (!send) {
        ncclResult_t r = version == 9    ? v9->connect(0, handle, &send, nullptr)
                         : version == 10 ? v10->connect(0, &cc, handle, &send, nullptr)
                                         : v11->connect(ctx, 0, handle, &send, nullptr);
        ASSERT_EQ(r, ncclSuccess);
      }
      if (!recv) {
        ASSERT_EQ(v9->accept(listen, &recv, nullptr), ncclSuccess);
      }
    }
    ASSERT_TRUE(send && recv) << version;
    uint64_t out = 0x5150 + version, in = 0;
    void* d[1] = {&in};
    size_t s[1] = {sizeof(in)};
    int t[1] = {3};
    void *rreq = nullptr, *sreq = nullptr;
    if (version == 9) {
      ASSERT_EQ(v9->irecv(recv, 1, d, s, t, nullptr, &rreq), ncclSuccess);
      while (!sreq) {
        ASSERT_EQ(v9->isend(send, &out, sizeof(out), 3, nullptr, &sreq), ncclSuccess);
      }
    } else {
      ASSERT_EQ(v10->irecv(recv, 1, d, s, t, nullptr, nullptr, &rreq), ncclSuccess);
      while (!sreq) {
        ASSERT_EQ(v10->isend(send, &out, sizeof(out), 3, nullptr, nullptr, &sreq), ncclSuccess);
      }
    }
    int size = 0;
    ASSERT_EQ(WaitDone(net_, rreq, &size), ncclSuccess);
    EXPECT_EQ(size, 8);
    EXPECT_EQ(in, out);
    ASSERT_EQ(WaitDone(net_, sreq, nullptr), ncclSuccess);
    EXPECT_EQ(v9->closeSend(send), ncclSuccess);
    EXPECT_EQ(v9->closeRecv(recv), ncclSuccess);
    EXPECT_EQ(v9->closeListen(listen), ncclSuccess);
  }
  EXPECT_EQ(v11->finalize(ctx), ncclSuccess);
  // v10 has no finalize; finalize(NULL) drops a user that has no context.
  EXPECT_EQ(v11->finalize(nullptr), ncclSuccess);
  EXPECT_NE(v11->finalize(nullptr), ncclSuccess);  // no user left
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
