// The fixture of the NCCL plugin tests (label nccl): the plugin loaded as NCCL loads it
// (dlopen(RTLD_NOW | RTLD_LOCAL), dlsym of the newest table; LONGHAUL_NCCL_PLUGIN is its
// path), with helpers that drive it as NCCL's proxy threads and aws-ofi-nccl's functional
// tests do: init / devices / listen, connect and accept retried until non-NULL, isend
// retried while NULL, test polled. Traffic stays on loopback (NCCL_LONGHAUL_IFNAME=lo).
// The tests run in plaintext (NCCL_LONGHAUL_INSECURE=1) unless they choose keys
// (nccl_plugin_security_test.cc). Every wait is bounded.
//
// The test files: nccl_plugin_abi_test.cc (exports, layouts, handles, error paths, the
// v9..v11 adapters), nccl_plugin_data_test.cc (semantics of the data path),
// nccl_plugin_lifecycle_test.cc (closes, init/finalize/unload, a vanished peer, two
// processes), nccl_plugin_security_test.cc (keys: none, a pre-shared key, static keys in
// the handles, refused keys), nccl_plugin_binding_test.cc (who may open a listen comm:
// random listen ids, comm ids, bounded pending OPENs, a third rank refused; the receiver
// enforcing its credit), nccl_plugin_engines_test.cc (NCCL_LONGHAUL_ENGINES: comms on
// several engines, pinning, bad values). They link into one binary, nccl_plugin_test, and
// run in that order.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/key_files.h"
#include "tests/support/temp_dir.h"
#include "tools/nccl_bench/plugin_loader.h"
#include "transport/crypto/key_files.h"
#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl::plugin_test {

using Clock = std::chrono::steady_clock;

// NCCL's logger for the plugin: keeps every warning and info line (thread-safe).
void TestLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                const char* fmt, ...);
// Whether a warning so far contains `text`.
bool WarnedAbout(const std::string& text);
// Whether an info line so far contains `text`.
bool LoggedInfo(const std::string& text);
// The info lines so far that contain `text`, oldest first.
std::vector<std::string> InfosContaining(const std::string& text);
// The latest warning ("" if none).
std::string LastWarning();
// Warnings so far that contain `text`.
int CountWarnings(const std::string& text);

// One rank of a two-process test, once started: its context, its listen comm and the
// other rank's handle.
struct Rank {
  void* ctx = nullptr;
  void* listen = nullptr;
  char peer[LH_NCCL_NET_HANDLE_MAXSIZE] = {};
};

// Begins a rank: init (with `comm_id`), listen, and the handles swapped with the other
// rank over `fd`. Returns 0, or the step that failed: 10 init, 11 listen, 12 sending the
// handle, 13 receiving the other's.
int BeginRank(const ncclNet_v12_t* net, int fd, uint64_t comm_id, Rank* r);

// Connects a begun rank to the other (connect to its handle, accept on the own listen
// comm), retried until both comms are non-NULL, for 20 s at most. Returns 0 when both are
// up, 14 when a connect failed, 15 when an accept failed, 16 when the time ran out.
int ConnectRank(const ncclNet_v12_t* net, const Rank& r, void** send, void** recv);

// Forks a child that runs `child(fd)` on its end of a new socketpair (SOCK_SEQPACKET) and
// exits with what it returns. Returns the child's pid (-1 on failure) and the parent's
// end of the socketpair in *fd.
pid_t ForkChild(const std::function<int(int fd)>& child, int* fd);

// Waits up to `bound` for the child process `pid` (which ends itself within its own
// deadlines) and kills it if it has not exited by then. Returns its wait status.
int WaitChild(pid_t pid, std::chrono::seconds bound = std::chrono::seconds(60));

// Threads of this process (/proc/self/task); -1 if unreadable.
int ThreadCount();
// ThreadCount() once it is at most `expected`, or after 5 s whatever it is then. A joined
// thread can still be listed in /proc/self/task for a moment (the kernel wakes the joiner
// before it has finished the thread's exit), so a count right after a join may be one high.
int ThreadCountOnceAtMost(int expected);

// Polls test() until done or the deadline; returns the last result (ncclInProgress on
// timeout).
ncclResult_t WaitDone(const ncclNet_v12_t* net, void* req, int* sizes,
                      std::chrono::seconds timeout = std::chrono::seconds(30));

// Deterministic bytes from `seed` (xorshift).
void Fill(std::vector<uint8_t>* v, uint32_t seed);

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NCCL_LONGHAUL_IFNAME", "lo", 1);
    setenv("NCCL_LONGHAUL_RATE", "5gbit", 1);
    setenv("NCCL_LONGHAUL_INSECURE", "1", 1);
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
    unsetenv("NCCL_LONGHAUL_PORT");
    unsetenv("NCCL_LONGHAUL_ADVERTISE");
    unsetenv("NCCL_LONGHAUL_INSECURE");
    unsetenv("NCCL_LONGHAUL_KEY");
    unsetenv("NCCL_LONGHAUL_PEER_KEY");
    unsetenv("NCCL_LONGHAUL_PSK_FILE");
  }

  // init (comm id `comm_id`) into *ctx; returns what it returned.
  ncclResult_t InitResult(void** ctx, uint64_t comm_id) {
    ncclNetCommConfig_v12_t config{-1};
    return net_->init(ctx, comm_id, &config, TestLogger, nullptr);
  }
  // Init into a fresh context and returns it.
  void* Init() {
    void* ctx = nullptr;
    Init(&ctx);
    return ctx;
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
    ConnectTo(ctx, handle, c->listen, c, &dev_handle);
  }
  // Connect to `handle` and accept on `listen` (c->listen is left as it is), retried until
  // both are non-NULL (bounded); `dev_handle` is what connect and accept are given.
  void ConnectTo(void* ctx, char* handle, void* listen, Comms* c,
                 ncclNetDeviceHandle_v12_t** dev_handle = nullptr) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while ((c->send == nullptr || c->recv == nullptr) && Clock::now() < deadline) {
      if (c->send == nullptr) {
        ASSERT_EQ(net_->connect(ctx, 0, handle, &c->send, dev_handle), ncclSuccess);
        if (c->send == nullptr) ++c->connect_nulls;
      }
      if (c->recv == nullptr) {
        ASSERT_EQ(net_->accept(listen, &c->recv, dev_handle), ncclSuccess);
      }
    }
    ASSERT_NE(c->send, nullptr);
    ASSERT_NE(c->recv, nullptr);
  }
  Comms Connect(void* ctx) {
    Comms c;
    Connect(ctx, &c);
    return c;
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
  // Close, then finalize the context.
  void CloseAndFinalize(void* ctx, Comms* c) {
    Close(ctx, c);
    EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
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

// A PluginTest with packet protection left to the test (NCCL_LONGHAUL_INSECURE unset)
// and a temporary directory for key files, removed at the end.
class KeyedPluginTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    unsetenv("NCCL_LONGHAUL_INSECURE");
    ASSERT_TRUE(tmp_.ok());
  }
  void TearDown() override {
    PluginTest::TearDown();
    unsetenv("NCCL_LONGHAUL_CONNECT_TIMEOUT");
  }
  // A fresh key pair in DIR/NAME.key; returns its public key.
  crypto::Key32 NewKey(const std::string& name) {
    return ::longhaul::testing::WritePrivateKey(Path(name + ".key"));
  }
  // A fresh pre-shared key in DIR/NAME; returns the file's path.
  std::string Psk(const std::string& name) {
    ::longhaul::testing::WritePsk(Path(name));
    return Path(name);
  }
  std::string Path(const std::string& name) const { return tmp_.Path(name); }
  ::longhaul::testing::TempDir tmp_{"lh-nccl-keys"};
  const std::string dir_ = tmp_.path();
};

}  // namespace longhaul::nccl::plugin_test
