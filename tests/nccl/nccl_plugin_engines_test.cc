// NCCL_LONGHAUL_ENGINES: the plugin's endpoint with several engines (driver threads). A
// peer's comms take its lanes in turn, one connection per engine, so they land on every
// engine; data on every comm arrives intact while all of them move at once; connects to
// one listen comm stay on one lane; ENGINE_CPUS pins the engine threads; bad values are
// refused at init naming the variable. The engine of each comm is read from the plugin's
// INFO lines ("send comm 3 to ...: lane 1, engine 1 of 2"). nccl_plugin_fixture.h has
// the harness.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/nccl/nccl_plugin_fixture.h"

namespace longhaul::nccl::plugin_test {
namespace {

class PluginEnginesTest : public PluginTest {
 protected:
  void TearDown() override {
    PluginTest::TearDown();
    unsetenv("NCCL_LONGHAUL_ENGINES");
    unsetenv("NCCL_LONGHAUL_ENGINE_CPUS");
    unsetenv("NCCL_LONGHAUL_DATAPATH");
  }
  // The INFO lines logged from now on (earlier tests' lines are skipped).
  void MarkLog() { first_info_ = InfosContaining("").size(); }
  std::vector<std::string> Infos(const std::string& text) {
    std::vector<std::string> all = InfosContaining("");
    std::vector<std::string> out;
    for (size_t i = first_info_; i < all.size(); ++i) {
      if (absl::StrContains(all[i], text)) out.push_back(all[i]);
    }
    return out;
  }
  // The engines named by this test's "<kind> comm" INFO lines ("..., engine 1 of 2"),
  // each checked to say "of `engines`".
  std::multiset<int> CommEngines(const std::string& kind, int engines) {
    std::multiset<int> out;
    for (const std::string& line : Infos(kind + " comm ")) {
      const size_t at = line.rfind("engine ");
      unsigned engine = 0, of = 0;
      EXPECT_NE(at, std::string::npos) << line;
      if (at == std::string::npos) continue;
      EXPECT_EQ(sscanf(line.c_str() + at, "engine %u of %u", &engine, &of), 2) << line;
      EXPECT_EQ(of, static_cast<unsigned>(engines)) << line;
      out.insert(static_cast<int>(engine));
    }
    return out;
  }
  size_t first_info_ = 0;
};

// The CPUs this process may run on.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  }
  return out;
}

TEST_F(PluginEnginesTest, CommsSpreadOverTwoEnginesAndEveryByteArrives) {
  setenv("NCCL_LONGHAUL_ENGINES", "2", 1);
  MarkLog();
  void* ctx = Init();
  constexpr int kPairs = 6;
  std::vector<Comms> pairs(kPairs);
  for (Comms& c : pairs) {
    Connect(ctx, &c);
    ASSERT_FALSE(HasFatalFailure());
  }
  EXPECT_EQ(Infos("endpoint: 2 engines (threads lh-engine-0..1, not pinned)").size(), 1u);
  EXPECT_EQ(Infos("engines 2").size(), 1u) << "the init line names the setting";
  // Client side: lanes in turn, one connection per engine (the Endpoint places them in
  // turn), so 3 comms on each engine. Server side: wherever the port's steering put them.
  EXPECT_EQ(Infos("lane 0, engine").size(), 3u);
  EXPECT_EQ(Infos("lane 1, engine").size(), 3u);
  const std::multiset<int> send_engines = CommEngines("send", 2);
  EXPECT_EQ(send_engines.count(0), 3u);
  EXPECT_EQ(send_engines.count(1), 3u);
  const std::multiset<int> recv_engines = CommEngines("recv", 2);
  EXPECT_EQ(recv_engines.size(), static_cast<size_t>(kPairs));
  for (int e : recv_engines) EXPECT_LT(e, 2);
  EXPECT_EQ(Infos(" up on engine ").size(), 2u) << "one connection per lane";

  // Every pair moves at once (one thread each, as NCCL's channels would): copied and
  // in-place messages (above COPY_MAX, 1 MiB), every byte compared.
  const size_t kSizes[] = {65536 + 11, (3 << 20) + 5, 1000, (2 << 20) + 1};
  std::vector<int> failures(kPairs, 0);
  std::vector<std::thread> threads;
  for (int p = 0; p < kPairs; ++p) {
    threads.emplace_back([&, p] {
      uint32_t seed = 100 * (p + 1);
      for (int round = 0; round < 2; ++round) {
        for (size_t size : kSizes) {
          std::vector<uint8_t> out(size), in(size);
          Fill(&out, ++seed);
          void* r = Recv(pairs[p].recv, in.data(), in.size(), p);
          void* s = Send(pairs[p].send, out.data(), out.size(), p);
          int ssize = -1, rsize = -1;
          if (r == nullptr || s == nullptr || WaitDone(net_, s, &ssize) != ncclSuccess ||
              WaitDone(net_, r, &rsize) != ncclSuccess || rsize != static_cast<int>(size) ||
              memcmp(in.data(), out.data(), size) != 0) {
            ++failures[p];
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int p = 0; p < kPairs; ++p) EXPECT_EQ(failures[p], 0) << "pair " << p;
  for (Comms& c : pairs) Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// NCCL retries a connect with the same handle until it gets a comm, and a listen comm
// may take several: every connect to one listen comm takes the same lane (without static
// keys a listen comm is bound to its first OPEN's connection and refuses others).
TEST_F(PluginEnginesTest, ConnectsToOneListenCommShareALane) {
  setenv("NCCL_LONGHAUL_ENGINES", "2", 1);
  MarkLog();
  const int refused_before = CountWarnings("refused the OPEN");
  void* ctx = Init();
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  Comms a, b;
  ConnectTo(ctx, handle, listen, &a);
  ASSERT_FALSE(HasFatalFailure());
  ConnectTo(ctx, handle, listen, &b);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(Infos("lane 0, engine").size(), 2u);
  EXPECT_TRUE(Infos("lane 1, engine").empty());
  EXPECT_EQ(CountWarnings("refused the OPEN"), refused_before);
  std::vector<uint8_t> out(5000), in(5000);
  Fill(&out, 7);
  void* r = Recv(b.recv, in.data(), in.size(), 1);
  void* s = Send(b.send, out.data(), out.size(), 1);
  EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  EXPECT_EQ(WaitDone(net_, r, nullptr), ncclSuccess);
  EXPECT_EQ(in, out);
  Close(ctx, &a);
  Close(ctx, &b);
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginEnginesTest, AutoIsOnePerAllowedCpuAtMostEight) {
  setenv("NCCL_LONGHAUL_ENGINES", "0", 1);
  MarkLog();
  void* ctx = Init();
  Comms c = Connect(ctx);
  ASSERT_FALSE(HasFatalFailure());
  const size_t cpus = std::min<size_t>(std::max<size_t>(AllowedCpus().size(), 1), 8);
  EXPECT_EQ(Infos(absl::StrCat("endpoint: ", cpus, " engine")).size(), 1u);
  EXPECT_EQ(Infos("engines auto").size(), 1u);
  EXPECT_EQ(CommEngines("send", static_cast<int>(cpus)).size(), 1u);
  CloseAndFinalize(ctx, &c);
}

// Engine i runs on ENGINE_CPUS[i mod count]: both engines on the first CPU this process
// may use, as the kernel reports for the lh-engine-<i> threads.
TEST_F(PluginEnginesTest, EngineCpusPinTheEngineThreads) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::string cpu = absl::StrCat(allowed.front());
  setenv("NCCL_LONGHAUL_ENGINES", "2", 1);
  setenv("NCCL_LONGHAUL_ENGINE_CPUS", cpu.c_str(), 1);
  MarkLog();
  void* ctx = Init();
  Comms c = Connect(ctx);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(
      Infos(absl::StrCat("endpoint: 2 engines (threads lh-engine-0..1, pinned to CPUs ", cpu, ")"))
          .size(),
      1u);
  int engine_threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (!absl::StartsWith(name, "lh-engine-")) continue;
    ++engine_threads;
    std::ifstream status(task.path() / "status");
    std::string line, list;
    while (std::getline(status, line)) {
      absl::string_view v(line);
      if (absl::ConsumePrefix(&v, "Cpus_allowed_list:")) {
        list = std::string(absl::StripAsciiWhitespace(v));
      }
    }
    EXPECT_EQ(list, cpu) << name;
  }
  EXPECT_EQ(engine_threads, 2);
  CloseAndFinalize(ctx, &c);
}

// A bad value fails init (ncclInvalidUsage) with a warning naming the variable, the value
// and what is accepted; nothing is left running.
TEST_F(PluginEnginesTest, BadValuesAreRefusedNamingTheVariable) {
  struct Case {
    const char* engines;
    const char* cpus;
    const char* datapath;
    const char* warning;
  };
  const Case cases[] = {
      {"65", nullptr, nullptr, "NCCL_LONGHAUL_ENGINES=65: expected a count in [0, 64]"},
      {"two", nullptr, nullptr, "NCCL_LONGHAUL_ENGINES=two: expected a count in [0, 64]"},
      {"-1", nullptr, nullptr, "NCCL_LONGHAUL_ENGINES=-1: expected a count in [0, 64]"},
      {"2", "1,x", nullptr,
       "NCCL_LONGHAUL_ENGINE_CPUS=1,x: expected a CPU list (numbers in [0, 1023]) (bad CPU 'x' "
       "in '1,x' (a CPU number, or a range FIRST-LAST))"},
      {"2", nullptr, "verbs",
       "NCCL_LONGHAUL_ENGINES=2: more than one engine needs NCCL_LONGHAUL_DATAPATH=udp"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.warning);
    setenv("NCCL_LONGHAUL_ENGINES", c.engines, 1);
    if (c.cpus) setenv("NCCL_LONGHAUL_ENGINE_CPUS", c.cpus, 1);
    if (c.datapath) setenv("NCCL_LONGHAUL_DATAPATH", c.datapath, 1);
    void* ctx = nullptr;
    EXPECT_EQ(InitResult(&ctx, 42), ncclInvalidUsage);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_TRUE(WarnedAbout(c.warning)) << LastWarning();
    unsetenv("NCCL_LONGHAUL_ENGINE_CPUS");
    unsetenv("NCCL_LONGHAUL_DATAPATH");
  }
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
