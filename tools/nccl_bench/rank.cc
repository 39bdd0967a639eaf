#include "tools/nccl_bench/rank.h"

#include <strings.h>
#include <time.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tools/nccl_bench/plugin_loader.h"
#include "tools/nccl_bench/ring.h"
#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl::bench {
namespace {

// The rank of this process, for the logger (NCCL's logger has no user pointer).
int g_rank = -1;

void RankLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  static const bool info = getenv("NCCL_DEBUG") && strcasecmp(getenv("NCCL_DEBUG"), "INFO") == 0;
  if (level != NCCL_LOG_WARN && !(info && level == NCCL_LOG_INFO)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] %s\n", g_rank, buf);
}

int RankFail(int fd, const std::string& text) {
  ErrorMsg e;
  snprintf(e.text, sizeof(e.text), "rank %d: %s", g_rank, text.c_str());
  SendMsg(fd, &e, sizeof(e));
  return 1;
}

}  // namespace

int RankMain(const RankOptions& o, Clock::time_point deadline) {
  g_rank = o.rank;
  const int fd = o.ctrl_fd;
  const int n = o.ranks;
  absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(o.plugin);
  if (!p.ok()) return RankFail(fd, std::string(p.status().message()));
  if (p->version < 11) {
    return RankFail(fd, absl::StrCat(p->path, " exports only ", p->symbol,
                                     "; this benchmark drives the v11/v12 API"));
  }
  // v11 and v12 have the same function list; only getProperties' struct differs.
  const ncclNet_v12_t* net = static_cast<const ncclNet_v12_t*>(p->table);
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{LH_NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (ncclResult_t r = net->init(&ctx, 0x10c0, &config, RankLogger, nullptr); r != ncclSuccess) {
    return RankFail(fd,
                    absl::StrCat("plugin init failed (ncclResult ", r, "); see its warning above"));
  }
  int ndev = 0;
  if (net->devices(&ndev) != ncclSuccess || ndev < 1) return RankFail(fd, "plugin has no device");
  HelloMsg hello;
  hello.version = p->version;
  if (p->version == 12) {
    ncclNetProperties_v12_t props;
    if (net->getProperties(0, &props) != ncclSuccess) return RankFail(fd, "getProperties failed");
    snprintf(hello.device, sizeof(hello.device), "%s", props.name);
    hello.speed_mbps = props.speed;
    hello.latency_us = props.latency;
  }
  void* listen = nullptr;
  if (net->listen(ctx, 0, hello.handle, &listen) != ncclSuccess)
    return RankFail(fd, "listen failed");
  if (!SendMsg(fd, &hello, sizeof(hello))) return 1;
  PeerMsg peer;
  if (RecvMsg(fd, &peer, sizeof(peer), deadline) != sizeof(peer) || peer.type != kPeer) {
    return RankFail(fd, "no peer handle from the parent");
  }
  void* send = nullptr;
  void* recv = nullptr;
  const auto connect_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(60));
  while ((send == nullptr || recv == nullptr) && Clock::now() < connect_deadline) {
    if (send == nullptr && net->connect(ctx, 0, peer.handle, &send, nullptr) != ncclSuccess) {
      return RankFail(fd, "connect to the next rank failed");
    }
    if (recv == nullptr && net->accept(listen, &recv, nullptr) != ncclSuccess) {
      return RankFail(fd, "accept from the previous rank failed");
    }
    if (send == nullptr || recv == nullptr) {
      timespec ts{0, 200 * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  if (send == nullptr || recv == nullptr)
    return RankFail(fd, "ring connection not established in 60 s");
  net->closeListen(listen);
  Ring ring(net, send, recv, o.rank, n, o.slice_bytes, o.recv_ahead, o.idle_nap_us);
  if (absl::Status s = ring.Allocate(o.max_bytes / sizeof(float)); !s.ok()) {
    return RankFail(fd, std::string(s.message()));
  }
  uint32_t ready = kReady;
  if (!SendMsg(fd, &ready, sizeof(ready))) return 1;
  while (true) {
    RunMsg run;
    ssize_t got = RecvMsg(fd, &run, sizeof(run), deadline);
    if (got <= 0) return RankFail(fd, "lost the parent");
    if (run.type == kExit) break;
    if (run.type != kRun) return RankFail(fd, "unexpected control message");
    const size_t count = run.bytes / sizeof(float);
    for (int i = 0; i < run.warmup; ++i) {
      if (absl::Status s = ring.Run(count, deadline); !s.ok())
        return RankFail(fd, std::string(s.message()));
    }
    auto result = std::make_unique<ResultMsg>();
    result->iters = std::min(run.iters, kMaxIters);
    for (int i = 0; i < result->iters; ++i) {
      auto t0 = Clock::now();
      if (absl::Status s = ring.Run(count, deadline); !s.ok())
        return RankFail(fd, std::string(s.message()));
      result->iter_us[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
    if (o.check) {
      absl::StatusOr<int64_t> wrong = ring.Check(count, deadline);
      if (!wrong.ok()) return RankFail(fd, std::string(wrong.status().message()));
      result->wrong = *wrong;
    }
    if (!SendMsg(fd, result.get(), sizeof(ResultMsg))) return 1;
  }
  ring.Deregister();
  net->closeSend(send);
  net->closeRecv(recv);
  net->finalize(ctx);
  UnloadNetPlugin(&*p);
  return 0;
}

}  // namespace longhaul::nccl::bench
