// The NCCL net plugin driven through its C ABI, as NCCL's proxy threads and
// aws-ofi-nccl's functional tests drive it: dlopen(RTLD_NOW | RTLD_LOCAL), dlsym of the
// newest table, init / devices / getProperties / listen, connect and accept retried until
// non-NULL, isend / irecv retried while NULL, test polled. Traffic stays on loopback
// (NCCL_LONGHAUL_IFNAME=lo). Every wait is bounded.
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tools/nccl_bench/plugin_loader.h"
#include "transport/nccl/nccl_net_abi.h"
#include "transport/nccl/plugin_handle.h"

namespace longhaul::nccl {
namespace {

using Clock = std::chrono::steady_clock;

std::mutex g_log_mu;
std::vector<std::string> g_warnings;

void TestLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> l(g_log_mu);
  g_warnings.push_back(buf);
}

bool WarnedAbout(const std::string& text) {
  std::lock_guard<std::mutex> l(g_log_mu);
  for (const std::string& w : g_warnings) {
    if (absl::StrContains(w, text)) return true;
  }
  return false;
}

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

// Polls test() until done or the deadline; returns the last result (ncclInProgress on
// timeout).
ncclResult_t WaitDone(const ncclNet_v12_t* net, void* req, int* sizes,
                      std::chrono::seconds timeout = std::chrono::seconds(30)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int done = 0;
    ncclResult_t r = net->test(req, &done, sizes);
    if (r != ncclSuccess) return r;
    if (done) return ncclSuccess;
  }
  return ncclInProgress;
}

void Fill(std::vector<uint8_t>* v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& b : *v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NCCL_LONGHAUL_IFNAME", "lo", 1);
    setenv("NCCL_LONGHAUL_RATE", "5gbit", 1);
    absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(LONGHAUL_NCCL_PLUGIN);
    ASSERT_TRUE(p.ok()) << p.status();
    plugin_ = *p;
    ASSERT_EQ(plugin_.version, 12);
    net_ = plugin_.v12;
    ASSERT_NE(net_, nullptr);
  }
  void TearDown() override {
    UnloadNetPlugin(&plugin_);
    unsetenv("NCCL_LONGHAUL_RATE");
    unsetenv("NCCL_LONGHAUL_INITIAL_RTT");
    unsetenv("NCCL_LONGHAUL_FEC");
    unsetenv("NCCL_LONGHAUL_CREDIT");
    unsetenv("NCCL_LONGHAUL_COPY_MAX");
  }

  void Init(void** ctx) {
    ncclNetCommConfig_v12_t config{-1};
    ASSERT_EQ(net_->init(ctx, 42, &config, TestLogger, nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net_->devices(&ndev), ncclSuccess);
    ASSERT_EQ(ndev, 1);
  }

  struct Comms {
    void* listen = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    int connect_nulls = 0;
  };
  // listen, then connect and accept retried until both are non-NULL (bounded).
  void Connect(void* ctx, Comms* c) {
    char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
    ASSERT_EQ(net_->listen(ctx, 0, handle, &c->listen), ncclSuccess);
    ASSERT_NE(c->listen, nullptr);
    ncclNetDeviceHandle_v12_t* dev_handle = nullptr;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while ((c->send == nullptr || c->recv == nullptr) && Clock::now() < deadline) {
      if (c->send == nullptr) {
        ASSERT_EQ(net_->connect(ctx, 0, handle, &c->send, &dev_handle), ncclSuccess);
        if (c->send == nullptr) ++c->connect_nulls;
      }
      if (c->recv == nullptr) {
        ASSERT_EQ(net_->accept(c->listen, &c->recv, &dev_handle), ncclSuccess);
      }
    }
    ASSERT_NE(c->send, nullptr);
    ASSERT_NE(c->recv, nullptr);
  }
  void Close(void* ctx, Comms* c) {
    if (c->send) {
      EXPECT_EQ(net_->closeSend(c->send), ncclSuccess);
    }
    if (c->recv) {
      EXPECT_EQ(net_->closeRecv(c->recv), ncclSuccess);
    }
    if (c->listen) {
      EXPECT_EQ(net_->closeListen(c->listen), ncclSuccess);
    }
    *c = Comms{};
  }
  // isend retried while NULL (bounded).
  void* Send(void* comm, void* data, size_t size, int tag) {
    void* req = nullptr;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (req == nullptr && Clock::now() < deadline) {
      EXPECT_EQ(net_->isend(comm, data, size, tag, nullptr, nullptr, &req), ncclSuccess);
    }
    EXPECT_NE(req, nullptr);
    return req;
  }
  void* Recv(void* comm, void* data, size_t size, int tag) {
    void* req = nullptr;
    void* d[1] = {data};
    size_t s[1] = {size};
    int t[1] = {tag};
    EXPECT_EQ(net_->irecv(comm, 1, d, s, t, nullptr, nullptr, &req), ncclSuccess);
    EXPECT_NE(req, nullptr);
    return req;
  }

  void MessageMatrix();

  LoadedPlugin plugin_;
  const ncclNet_v12_t* net_ = nullptr;
};

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

TEST_F(PluginTest, PropertiesOfEveryVersionFillTheirLayoutExactly) {
  setenv("NCCL_LONGHAUL_RATE", "2gbit", 1);
  setenv("NCCL_LONGHAUL_INITIAL_RTT", "58ms", 1);
  void* ctx = nullptr;
  Init(&ctx);
  // v12: 128 bytes, then guard bytes that must stay untouched.
  struct {
    ncclNetProperties_v12_t p;
    uint8_t guard[32];
  } v12;
  memset(&v12, 0xab, sizeof(v12));
  ASSERT_EQ(net_->getProperties(0, &v12.p), ncclSuccess);
  EXPECT_STREQ(v12.p.name, "lo");
  EXPECT_EQ(v12.p.pciPath, nullptr);  // loopback is virtual
  EXPECT_EQ(v12.p.ptrSupport, LH_NCCL_PTR_HOST);
  EXPECT_EQ(v12.p.speed, 2000);
  EXPECT_FLOAT_EQ(v12.p.latency, 29000.0f);
  EXPECT_EQ(v12.p.maxRecvs, 8);
  EXPECT_GT(v12.p.maxComms, 0);
  EXPECT_EQ(v12.p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(v12.p.netDeviceVersion, 0);
  EXPECT_EQ(v12.p.vProps.ndevs, 1);
  EXPECT_EQ(v12.p.vProps.devs[0], 0);
  EXPECT_EQ(v12.p.maxP2pBytes, size_t{1} << 30);
  EXPECT_GT(v12.p.maxCollBytes, 0u);
  EXPECT_EQ(v12.p.maxMultiRequestSize, 1);
  EXPECT_EQ(v12.p.railId, -1);
  EXPECT_EQ(v12.p.planeId, -1);
  for (uint8_t g : v12.guard) EXPECT_EQ(g, 0xab);

  auto* v11 = static_cast<const ncclNet_v11_t*>(dlsym(plugin_.library, "ncclNetPlugin_v11"));
  struct {
    ncclNetProperties_v11_t p;
    uint8_t guard[32];
  } p11;
  memset(&p11, 0xab, sizeof(p11));
  ASSERT_EQ(v11->getProperties(0, &p11.p), ncclSuccess);
  EXPECT_EQ(p11.p.speed, 2000);
  EXPECT_EQ(p11.p.maxP2pBytes, size_t{1} << 30);
  EXPECT_EQ(p11.p.maxMultiRequestSize, 1);
  for (uint8_t g : p11.guard) EXPECT_EQ(g, 0xab);

  auto* v9 = static_cast<const ncclNet_v9_t*>(dlsym(plugin_.library, "ncclNetPlugin_v9"));
  struct {
    ncclNetProperties_v9_t p;
    uint8_t guard[32];
  } p9;
  memset(&p9, 0xab, sizeof(p9));
  ASSERT_EQ(v9->getProperties(0, &p9.p), ncclSuccess);
  EXPECT_EQ(p9.p.maxRecvs, 8);
  EXPECT_EQ(p9.p.maxCollBytes, size_t{1} << 30);
  for (uint8_t g : p9.guard) EXPECT_EQ(g, 0xab);

  auto* v8 = static_cast<const ncclNet_v8_t*>(dlsym(plugin_.library, "ncclNetPlugin_v8"));
  struct {
    ncclNetProperties_v8_t p;
    uint8_t guard[32];
  } p8;
  memset(&p8, 0xab, sizeof(p8));
  ASSERT_EQ(v8->getProperties(0, &p8.p), ncclSuccess);
  EXPECT_EQ(p8.p.speed, 2000);
  EXPECT_EQ(p8.p.netDeviceVersion, 0);
  for (uint8_t g : p8.guard) EXPECT_EQ(g, 0xab);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, HandleCarriesAddressPortAndCredit) {
  setenv("NCCL_LONGHAUL_CREDIT", "3MiB", 1);
  void* ctx = nullptr;
  Init(&ctx);
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->address, "127.0.0.1");
  EXPECT_NE(h->port, 0);
  EXPECT_EQ(h->credit, 3u << 20);
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// ---- error paths ----

TEST_F(PluginTest, BadProfileKeyFailsInitNamingTheVariable) {
  setenv("NCCL_LONGHAUL_FEC", "bogus", 1);
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{-1};
  EXPECT_EQ(net_->init(&ctx, 1, &config, TestLogger, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(WarnedAbout("NCCL_LONGHAUL_FEC=bogus"));
}

TEST_F(PluginTest, BadDeviceBadHandleAndBadObjects) {
  void* ctx = nullptr;
  Init(&ctx);
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
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
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
  // More buffers than maxRecvs in one grouped receive.
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
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, SendLargerThanPostedReceiveIsInvalidUsageAndTheCommGoesOn) {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
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
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, InterfaceListMatchingNothingFailsInitListingInterfaces) {
  setenv("NCCL_LONGHAUL_IFNAME", "=no-such-if0", 1);
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{-1};
  EXPECT_EQ(net_->init(&ctx, 1, &config, TestLogger, nullptr), ncclInvalidUsage);
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

// ---- semantics ----

TEST_F(PluginTest, ConnectAndAcceptAreRetriedUntilReady) {
  void* ctx = nullptr;
  Init(&ctx);
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  // Nobody connected yet: accept says "not yet".
  void* recv = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(net_->accept(listen, &recv, nullptr), ncclSuccess);
  EXPECT_EQ(recv, nullptr);
  // The first connect starts the handshake and returns NULL.
  void* send = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(net_->connect(ctx, 0, handle, &send, nullptr), ncclSuccess);
  EXPECT_EQ(send, nullptr);
  Comms c;
  c.listen = listen;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while ((c.send == nullptr || c.recv == nullptr) && Clock::now() < deadline) {
    if (!c.send) {
      ASSERT_EQ(net_->connect(ctx, 0, handle, &c.send, nullptr), ncclSuccess);
    }
    if (!c.recv) {
      ASSERT_EQ(net_->accept(listen, &c.recv, nullptr), ncclSuccess);
    }
  }
  ASSERT_NE(c.send, nullptr);
  ASSERT_NE(c.recv, nullptr);
  // A second comm on the same listen comm (a listen comm may accept more than once),
  // multiplexed on the same connection.
  Comms c2;
  const auto deadline2 = Clock::now() + std::chrono::seconds(20);
  while ((c2.send == nullptr || c2.recv == nullptr) && Clock::now() < deadline2) {
    if (!c2.send) {
      ASSERT_EQ(net_->connect(ctx, 0, handle, &c2.send, nullptr), ncclSuccess);
    }
    if (!c2.recv) {
      ASSERT_EQ(net_->accept(listen, &c2.recv, nullptr), ncclSuccess);
    }
  }
  ASSERT_NE(c2.send, nullptr);
  ASSERT_NE(c2.recv, nullptr);
  // Messages of each comm reach that comm's receiver.
  uint32_t a = 0xaaaa, b = 0xbbbb, ga = 0, gb = 0;
  void* rb = Recv(c2.recv, &gb, 4, 0);
  void* ra = Recv(c.recv, &ga, 4, 0);
  Send(c.send, &a, 4, 0);
  Send(c2.send, &b, 4, 0);
  EXPECT_EQ(WaitDone(net_, ra, nullptr), ncclSuccess);
  EXPECT_EQ(WaitDone(net_, rb, nullptr), ncclSuccess);
  EXPECT_EQ(ga, 0xaaaau);
  EXPECT_EQ(gb, 0xbbbbu);
  Close(ctx, &c2);
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// Sends up to NCCL_LONGHAUL_COPY_MAX (1 MiB) are copied and complete at once; larger
// ones go in place and complete when acknowledged: the matrix covers both.
void PluginTest::MessageMatrix() {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  const size_t kSizes[] = {0, 1, 7, 4096, 8191, 65537, 1 << 20, (16 << 20) + 3, 64 << 20};
  const size_t kSlack[] = {0, 1, 4096};
  uint32_t seed = 10;
  for (size_t send_size : kSizes) {
    for (size_t slack : kSlack) {
      const size_t recv_size = std::min<size_t>(send_size + slack, size_t{64} << 20);
      if (recv_size < send_size) continue;
      std::vector<uint8_t> out(send_size), in(recv_size + 1, 0xee);
      Fill(&out, ++seed);
      void* r = Recv(c.recv, in.data(), recv_size, 3);
      void* s = Send(c.send, out.data(), send_size, 3);
      int ssize = -1, rsize = -1;
      ASSERT_EQ(WaitDone(net_, s, &ssize), ncclSuccess);
      ASSERT_EQ(WaitDone(net_, r, &rsize), ncclSuccess) << send_size << " into " << recv_size;
      EXPECT_EQ(ssize, static_cast<int>(send_size));
      EXPECT_EQ(rsize, static_cast<int>(send_size)) << "receive sizes are maxima";
      if (send_size > 0) {
        ASSERT_EQ(memcmp(in.data(), out.data(), send_size), 0) << send_size;
      }
      // Nothing written past the message.
      for (size_t i = send_size; i < in.size(); ++i) ASSERT_EQ(in[i], 0xee) << i;
    }
  }
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, MessageMatrixZeroTo64MiB) { MessageMatrix(); }

TEST_F(PluginTest, MessageMatrixEverySendInPlace) {
  setenv("NCCL_LONGHAUL_COPY_MAX", "0", 1);
  MessageMatrix();
}

TEST_F(PluginTest, MessageMatrixEverySendCopied) {
  setenv("NCCL_LONGHAUL_COPY_MAX", "1GiB", 1);
  MessageMatrix();
}

TEST_F(PluginTest, DataArrivingBeforeItsReceiveIsBuffered) {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  // Sends first (eager, no receive posted), receives later.
  std::vector<std::vector<uint8_t>> out(8, std::vector<uint8_t>(100000));
  std::vector<void*> sends;
  for (int i = 0; i < 8; ++i) {
    Fill(&out[i], 100 + i);
    sends.push_back(Send(c.send, out[i].data(), out[i].size(), 0));
  }
  for (void* s : sends) EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  for (int i = 0; i < 8; ++i) {
    std::vector<uint8_t> in(200000);
    int size = 0;
    void* r = Recv(c.recv, in.data(), in.size(), 0);
    ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess);
    EXPECT_EQ(size, 100000);
    EXPECT_EQ(memcmp(in.data(), out[i].data(), out[i].size()), 0) << i;
  }
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, CreditBoundsUnreceivedDataWithNullRequests) {
  setenv("NCCL_LONGHAUL_CREDIT", "1MiB", 1);
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  std::vector<uint8_t> chunk(256 << 10);
  Fill(&chunk, 5);
  // Without receives, at most 1 MiB (the credit) is accepted; then isend says "not now".
  int accepted = 0;
  void* req = nullptr;
  std::vector<void*> done_reqs;
  for (int i = 0; i < 16; ++i) {
    req = nullptr;
    ASSERT_EQ(net_->isend(c.send, chunk.data(), chunk.size(), 0, nullptr, nullptr, &req),
              ncclSuccess);
    if (req == nullptr) break;
    ++accepted;
    ASSERT_EQ(WaitDone(net_, req, nullptr), ncclSuccess);
  }
  EXPECT_GE(accepted, 3);
  EXPECT_LE(accepted, 4);
  EXPECT_EQ(req, nullptr);
  // Receiving returns the credit: every message arrives and sending resumes.
  std::vector<uint8_t> in(chunk.size());
  for (int i = 0; i < accepted + 4; ++i) {
    void* r = Recv(c.recv, in.data(), in.size(), 0);
    if (i >= accepted) {
      void* s = Send(c.send, chunk.data(), chunk.size(), 0);
      ASSERT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
    }
    int size = 0;
    ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess) << i;
    EXPECT_EQ(size, static_cast<int>(chunk.size()));
    EXPECT_EQ(memcmp(in.data(), chunk.data(), chunk.size()), 0);
  }
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, GroupedReceiveMatchesByTagAndReportsEachSize) {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  constexpr int kN = 4;
  std::vector<std::vector<uint8_t>> in(kN, std::vector<uint8_t>(4096, 0));
  void* data[kN];
  size_t sizes[kN];
  int tags[kN];
  for (int i = 0; i < kN; ++i) {
    data[i] = in[i].data();
    sizes[i] = in[i].size();
    tags[i] = 10 + i;
  }
  void* r = nullptr;
  ASSERT_EQ(net_->irecv(c.recv, kN, data, sizes, tags, nullptr, nullptr, &r), ncclSuccess);
  ASSERT_NE(r, nullptr);
  // Sends in another tag order with distinct sizes.
  const int order[kN] = {2, 0, 3, 1};
  std::vector<std::vector<uint8_t>> out(kN);
  for (int k = 0; k < kN; ++k) {
    const int i = order[k];
    out[i].resize(100 * (i + 1));
    Fill(&out[i], 50 + i);
    void* s = Send(c.send, out[i].data(), out[i].size(), 10 + i);
    EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  }
  int got[64] = {};
  ASSERT_EQ(WaitDone(net_, r, got), ncclSuccess);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got[i], 100 * (i + 1)) << i;
    EXPECT_EQ(memcmp(in[i].data(), out[i].data(), out[i].size()), 0) << i;
  }
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, ThirtyTwoInFlightTestedInAnyOrder) {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  constexpr int kN = LH_NCCL_NET_MAX_REQUESTS;
  std::vector<std::vector<uint8_t>> in(kN, std::vector<uint8_t>(5200)),
      out(kN, std::vector<uint8_t>(5000));
  std::vector<void*> rreq(kN), sreq(kN);
  for (int i = 0; i < kN; ++i) rreq[i] = Recv(c.recv, in[i].data(), 5200, 1);
  for (int i = 0; i < kN; ++i) {
    Fill(&out[i], 200 + i);
    sreq[i] = Send(c.send, out[i].data(), 5000, 1);
  }
  // Newest first.
  for (int i = kN - 1; i >= 0; --i) {
    int size = 0;
    ASSERT_EQ(WaitDone(net_, rreq[i], &size), ncclSuccess);
    EXPECT_EQ(size, 5000);
    ASSERT_EQ(WaitDone(net_, sreq[i], &size), ncclSuccess);
    EXPECT_EQ(size, 5000);
  }
  for (int i = 0; i < kN; ++i) EXPECT_EQ(memcmp(in[i].data(), out[i].data(), 5000), 0) << i;
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// NCCL's threads at once: four comms on one connection, each driven by its own thread
// (sends and receives of varied sizes, up to 8 in flight, verified), while another thread
// calls getProperties and regMr/deregMr as NCCL's service thread does.
TEST_F(PluginTest, CommsDrivenFromSeveralThreadsShareOneConnection) {
  void* ctx = nullptr;
  Init(&ctx);
  constexpr int kComms = 4;
  std::vector<Comms> comms(kComms);
  for (Comms& c : comms) Connect(ctx, &c);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread service([&] {
    for (int i = 0; i < 100000 && !stop.load(); ++i) {
      ncclNetProperties_v12_t props;
      if (net_->getProperties(0, &props) != ncclSuccess) ++failures;
      void* mh = nullptr;
      char b[16];
      if (net_->regMr(comms[i % kComms].recv, b, sizeof(b), LH_NCCL_PTR_HOST, &mh) != ncclSuccess ||
          net_->deregMr(comms[i % kComms].recv, mh) != ncclSuccess) {
        ++failures;
      }
    }
  });
  auto drive = [&](int k) {
    constexpr int kMessages = 200;
    std::vector<std::vector<uint8_t>> out(8), in(8);
    void* sreq[8] = {};
    void* rreq[8] = {};
    size_t sizes[8] = {};
    int sent = 0, received = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (received < kMessages && Clock::now() < deadline) {
      // Keep up to 8 receives and 8 sends posted; slot i holds message (m % 8).
      for (int i = 0; i < 8; ++i) {
        if (rreq[i] == nullptr && sent < kMessages && sreq[i] == nullptr && sent % 8 == i) {
          sizes[i] = (static_cast<size_t>(sent) * 7919 + k * 104729) % (256 << 10);
          out[i].resize(sizes[i]);
          Fill(&out[i], 1000 * k + sent);
          in[i].assign((256 << 10) + 1, 0);
          void* d[1] = {in[i].data()};
          size_t cap[1] = {in[i].size()};
          int t[1] = {k};
          if (net_->irecv(comms[k].recv, 1, d, cap, t, nullptr, nullptr, &rreq[i]) != ncclSuccess) {
            ++failures;
            return;
          }
          while (sreq[i] == nullptr && Clock::now() < deadline) {
            if (net_->isend(comms[k].send, out[i].data(), sizes[i], k, nullptr, nullptr,
                            &sreq[i]) != ncclSuccess) {
              ++failures;
              return;
            }
          }
          ++sent;
        }
      }
      for (int i = 0; i < 8; ++i) {
        int done = 0, size = 0;
        if (sreq[i] != nullptr) {
          if (net_->test(sreq[i], &done, &size) != ncclSuccess) ++failures;
          if (done) sreq[i] = nullptr;
        }
        if (rreq[i] != nullptr && sreq[i] == nullptr) {
          done = 0;
          if (net_->test(rreq[i], &done, &size) != ncclSuccess) ++failures;
          if (done) {
            if (static_cast<size_t>(size) != sizes[i] ||
                (sizes[i] > 0 && memcmp(in[i].data(), out[i].data(), sizes[i]) != 0)) {
              ++failures;
            }
            rreq[i] = nullptr;
            ++received;
          }
        }
      }
    }
    if (received != kMessages) ++failures;
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < kComms; ++k) threads.emplace_back(drive, k);
  for (std::thread& t : threads) t.join();
  stop.store(true);
  service.join();
  EXPECT_EQ(failures.load(), 0);
  for (Comms& c : comms) Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, CloseWithRequestsOutstandingDoesNotHang) {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  std::vector<uint8_t> big(8 << 20), in(4096);
  for (int i = 0; i < 4; ++i) Send(c.send, big.data(), big.size(), 0);
  for (int i = 0; i < 4; ++i) Recv(c.recv, in.data(), in.size(), 0);  // too small: never tested
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
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
    EXPECT_EQ(ThreadCount(), before);
    EXPECT_EQ(UnloadNetPlugin(&plugin_), 0);
    EXPECT_EQ(ThreadCount(), before);
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
    if (net_->init(&ctx, 1, &config, nullptr, nullptr) != ncclSuccess) _exit(1);
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
  void* ctx = nullptr;
  Init(&ctx);
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
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  auto run_rank = [&](int fd, int rank) -> int {
    void* ctx = nullptr;
    ncclNetCommConfig_v12_t config{-1};
    if (net_->init(&ctx, 7, &config, TestLogger, nullptr) != ncclSuccess) return 10;
    char mine[LH_NCCL_NET_HANDLE_MAXSIZE], peer[LH_NCCL_NET_HANDLE_MAXSIZE];
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    if (net_->listen(ctx, 0, mine, &listen) != ncclSuccess) return 11;
    if (write(fd, mine, sizeof(mine)) != sizeof(mine)) return 12;
    if (read(fd, peer, sizeof(peer)) != sizeof(peer)) return 13;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while ((!send || !recv) && Clock::now() < deadline) {
      if (!send && net_->connect(ctx, 0, peer, &send, nullptr) != ncclSuccess) return 14;
      if (!recv && net_->accept(listen, &recv, nullptr) != ncclSuccess) return 15;
    }
    if (!send || !recv) return 16;
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
    if (net_->closeSend(send) || net_->closeRecv(recv) || net_->closeListen(listen)) return 24;
    if (net_->finalize(ctx) != ncclSuccess) return 25;
    return 0;
  };
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    _exit(run_rank(sv[1], 1));
  }
  close(sv[1]);
  const int mine = run_rank(sv[0], 0);
  close(sv[0]);
  int status = 0;
  // Bounded: the child ends itself within its own deadlines; kill it if it does not.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  pid_t w = 0;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT_EQ(mine, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace longhaul::nccl
