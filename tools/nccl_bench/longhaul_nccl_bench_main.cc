// longhaul-nccl-bench: ring allreduce of floats over an NCCL net plugin between N rank
// processes on this machine, reported like nccl-tests' all_reduce_perf. docs/nccl.md.
//
// The parent process spawns the ranks (fork + exec of itself with --rank), splits them
// into two data centres (ranks 0..N/2-1 and N/2..N-1), exchanges the plugin handles (the
// ring edges that cross between the data centres are redirected through a longhaul-emu
// UDP relay per edge when --link is given), then runs the size sweep: per size, every
// rank runs warm-up and timed iterations of a chunked, pipelined ring allreduce
// (reduce-scatter then allgather), then one more untimed iteration whose result is
// verified against the expected sum. Each rank loads the plugin with dlopen as NCCL does.
// Everything is bounded by --timeout; children and emulators are killed on any error.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gflags/gflags.h"
#include "nlohmann/json.hpp"
#include "tools/nccl_bench/plugin_loader.h"
#include "transport/base/parse.h"
#include "transport/core/profile/profile.h"
#include "transport/nccl/nccl_net_abi.h"
#include "transport/nccl/plugin_handle.h"
#include "transport/sim/link_spec.h"

extern char** environ;

DEFINE_int32(ranks, 2, "rank processes (2..16), split into two data centres");
DEFINE_string(link, "",
              "link spec of the edges between the data centres (through longhaul-emu), e.g. "
              "rate=1gbit,rtt=58ms,loss=1e-3; empty: direct loopback");
DEFINE_string(min_bytes, "1MiB", "smallest message size (bytes per rank)");
DEFINE_string(max_bytes, "64MiB", "largest message size");
DEFINE_int32(step_factor, 2, "size multiplier between steps");
DEFINE_int32(iters, 20, "timed iterations per size (1..1000)");
DEFINE_int32(warmup_iters, 1, "untimed iterations per size before the timed ones");
DEFINE_string(slice_bytes, "4MiB", "pipelining unit: largest message one ring step sends");
DEFINE_int32(recv_ahead, 16, "receives each rank keeps posted (1..32)");
DEFINE_int32(idle_nap_us, 200,
             "a rank with nothing to do yields 32 times, then sleeps this long per poll (the "
             "ranks share the cores with the transport's threads)");
DEFINE_bool(check, true, "verify one more allreduce per size against the expected sum");
DEFINE_bool(json, false, "print one JSON object instead of the table");
DEFINE_string(plugin, "",
              "net plugin to load (path or name, as NCCL_NET_PLUGIN); default: "
              "NCCL_NET_PLUGIN, else <bin>/../lib/libnccl-net-longhaul.so");
DEFINE_string(emu, "", "longhaul-emu binary (default: next to this binary)");
DEFINE_string(timeout, "600s", "bound on the whole run");
DEFINE_bool(recommend, false,
            "print the NCCL settings recommended for --link=SPEC or --profile=FILE and exit");
DEFINE_string(profile, "", "longhaul profile for the ranks (sets NCCL_LONGHAUL_PROFILE)");
DEFINE_int32(rank, -1, "internal: run as this rank");
DEFINE_int32(ctrl_fd, -1, "internal: control socket of a rank");

namespace longhaul::nccl {
namespace {

using Clock = std::chrono::steady_clock;

// ---- control messages between the parent and the ranks (SOCK_SEQPACKET) ----

enum MsgType : uint32_t { kHello = 1, kPeer, kReady, kRun, kResult, kError, kExit };
constexpr int kMaxIters = 1000;

struct HelloMsg {
  uint32_t type = kHello;
  int32_t version = 0;
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  char device[64];
  int32_t speed_mbps = 0;
  float latency_us = 0;
};
struct PeerMsg {
  uint32_t type = kPeer;
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
};
struct RunMsg {
  uint32_t type = kRun;
  uint64_t bytes = 0;
  int32_t iters = 0;
  int32_t warmup = 0;
};
struct ResultMsg {
  uint32_t type = kResult;
  int64_t wrong = 0;
  int32_t iters = 0;
  double iter_us[kMaxIters];
};
struct ErrorMsg {
  uint32_t type = kError;
  char text[1024];
};

bool SendMsg(int fd, const void* m, size_t n) {
  return send(fd, m, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

// Receives one message (up to `cap` bytes) within `deadline`; returns its size, 0 on
// EOF, -1 on timeout or error.
ssize_t RecvMsg(int fd, void* buf, size_t cap, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (rc < 0 && errno != EINTR) return -1;
    if (rc <= 0) continue;
    ssize_t n = recv(fd, buf, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

// ---- the rank process ----

void RankLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  static const bool info = getenv("NCCL_DEBUG") && strcasecmp(getenv("NCCL_DEBUG"), "INFO") == 0;
  if (level != NCCL_LOG_WARN && !(info && level == NCCL_LOG_INFO)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] %s\n", FLAGS_rank, buf);
}

// A ring allreduce over one send comm (to rank+1) and one recv comm (from rank-1).
class Ring {
 public:
  Ring(const ncclNet_v12_t* net, void* send, void* recv, int rank, int n, size_t slice_bytes,
       int recv_ahead)
      : net_(net),
        send_(send),
        recv_(recv),
        rank_(rank),
        n_(n),
        slice_elems_(std::max<size_t>(1, slice_bytes / sizeof(float))),
        ahead_(std::clamp(recv_ahead, 1, 32)) {}

  absl::Status Allocate(size_t max_count) {
    sendbuf_.assign(max_count, 0.0f);
    recvbuf_.assign(max_count, 0.0f);
    tmp_.resize(ahead_);
    for (auto& t : tmp_) t.assign(slice_elems_, 0.0f);
    for (size_t i = 0; i < max_count; ++i) sendbuf_[i] = Value(i, rank_);
    return absl::OkStatus();
  }

  static float Value(size_t i, int rank) {
    return static_cast<float>(((i % 251) + 1) * (rank + 1) % 1021);
  }

  // One allreduce of `count` floats; error on a plugin failure or the deadline.
  absl::Status Run(size_t count, Clock::time_point deadline) {
    const size_t chunk_max = (count + n_ - 1) / n_;
    const size_t nslices = std::max<size_t>(1, (chunk_max + slice_elems_ - 1) / slice_elems_);
    const size_t total = 2 * (n_ - 1) * nslices;
    std::vector<void*> rreq(total, nullptr);
    std::vector<void*> sreq;
    sreq.reserve(32);
    size_t sreq_head = 0;
    size_t next_send = 0, next_post = 0, next_proc = 0;
    int idle = 0;
    auto chunk_of = [&](size_t step, bool sending) -> size_t {
      const int s = static_cast<int>(step);
      int c;
      if (s < n_ - 1) {
        c = sending ? rank_ - s : rank_ - s - 1;
      } else {
        const int a = s - (n_ - 1);
        c = sending ? rank_ + 1 - a : rank_ - a;
      }
      return static_cast<size_t>(((c % n_) + n_) % n_);
    };
    auto range = [&](size_t m, bool sending, size_t* begin, size_t* len) {
      const size_t step = m / nslices, j = m % nslices;
      const size_t c = chunk_of(step, sending);
      const size_t cs = count * c / n_, ce = count * (c + 1) / n_;
      const size_t b = std::min(ce, cs + j * slice_elems_);
      const size_t e = std::min(ce, b + slice_elems_);
      *begin = b;
      *len = e - b;
    };
    while (next_proc < total || next_send < total || sreq_head < sreq.size()) {
      if (Clock::now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("allreduce of ", count, " floats did not finish in time (", next_proc, "/",
                         total, " receives, ", next_send, "/", total, " sends)"));
      }
      bool progress = false;
      // Post receives ahead.
      while (next_post < total && next_post - next_proc < static_cast<size_t>(ahead_)) {
        size_t b, len;
        range(next_post, false, &b, &len);
        const bool rs = next_post / nslices < static_cast<size_t>(n_ - 1);
        void* dst = rs ? tmp_[next_post % ahead_].data() : recvbuf_.data() + b;
        size_t bytes = len * sizeof(float);
        int tag = (rank_ - 1 + n_) % n_;
        void* req = nullptr;
        ncclResult_t r = net_->irecv(recv_, 1, &dst, &bytes, &tag, nullptr, nullptr, &req);
        if (r != ncclSuccess) return absl::InternalError(absl::StrCat("irecv: ncclResult ", r));
        if (req == nullptr) break;
        rreq[next_post++] = req;
        progress = true;
      }
      // Complete receives in order; reduce-scatter adds our contribution.
      while (next_proc < next_post) {
        int done = 0, size = 0;
        ncclResult_t r = net_->test(rreq[next_proc], &done, &size);
        if (r != ncclSuccess)
          return absl::InternalError(absl::StrCat("test(recv): ncclResult ", r));
        if (!done) break;
        size_t b, len;
        range(next_proc, false, &b, &len);
        if (static_cast<size_t>(size) != len * sizeof(float)) {
          return absl::InternalError(
              absl::StrCat("received ", size, " bytes, expected ", len * sizeof(float)));
        }
        if (next_proc / nslices < static_cast<size_t>(n_ - 1)) {
          const float* t = tmp_[next_proc % ahead_].data();
          const float* in = sendbuf_.data() + b;
          float* out = recvbuf_.data() + b;
          for (size_t i = 0; i < len; ++i) out[i] = in[i] + t[i];
        }
        ++next_proc;
        progress = true;
      }
      // Sends whose data is ready (step 0: our own; later: what the previous step reduced).
      while (next_send < total && (next_send < nslices || next_send - nslices < next_proc) &&
             sreq.size() - sreq_head < 30) {
        size_t b, len;
        range(next_send, true, &b, &len);
        const float* src = next_send < nslices ? sendbuf_.data() + b : recvbuf_.data() + b;
        void* req = nullptr;
        ncclResult_t r = net_->isend(send_, const_cast<float*>(src), len * sizeof(float), rank_,
                                     nullptr, nullptr, &req);
        if (r != ncclSuccess) return absl::InternalError(absl::StrCat("isend: ncclResult ", r));
        if (req == nullptr) break;  // back-pressure
        sreq.push_back(req);
        ++next_send;
        progress = true;
      }
      while (sreq_head < sreq.size()) {
        int done = 0;
        ncclResult_t r = net_->test(sreq[sreq_head], &done, nullptr);
        if (r != ncclSuccess)
          return absl::InternalError(absl::StrCat("test(send): ncclResult ", r));
        if (!done) break;
        ++sreq_head;
        progress = true;
      }
      if (sreq_head == sreq.size()) {
        sreq.clear();
        sreq_head = 0;
      }
      // Idle: yield, then nap briefly (the driver threads and other ranks share the cores).
      if (progress) {
        idle = 0;
      } else if (++idle < 32) {
        sched_yield();
      } else {
        timespec ts{0, static_cast<long>(std::clamp(FLAGS_idle_nap_us, 0, 10000)) * 1000};
        nanosleep(&ts, nullptr);
      }
    }
    return absl::OkStatus();
  }

  // Poisons the result, runs once more and counts wrong elements.
  absl::StatusOr<int64_t> Check(size_t count, Clock::time_point deadline) {
    std::fill(recvbuf_.begin(), recvbuf_.begin() + count, std::nanf(""));
    if (absl::Status s = Run(count, deadline); !s.ok()) return s;
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int r = 0; r < n_; ++r) expected += Value(i, r);
      if (recvbuf_[i] != expected) ++wrong;
    }
    return wrong;
  }

 private:
  const ncclNet_v12_t* net_;
  void* send_;
  void* recv_;
  int rank_, n_;
  size_t slice_elems_;
  int ahead_;
  std::vector<float> sendbuf_, recvbuf_;
  std::vector<std::vector<float>> tmp_;
};

int RankFail(int fd, const std::string& text) {
  ErrorMsg e;
  snprintf(e.text, sizeof(e.text), "rank %d: %s", FLAGS_rank, text.c_str());
  SendMsg(fd, &e, sizeof(e));
  return 1;
}

int RankMain(const std::string& plugin_path, Clock::time_point deadline) {
  const int fd = FLAGS_ctrl_fd;
  const int n = FLAGS_ranks;
  absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(plugin_path);
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
  absl::StatusOr<ByteCount> max_bytes = ParseByteCount(FLAGS_max_bytes);
  absl::StatusOr<ByteCount> slice = ParseByteCount(FLAGS_slice_bytes);
  Ring ring(net, send, recv, FLAGS_rank, n, *slice, FLAGS_recv_ahead);
  if (absl::Status s = ring.Allocate(*max_bytes / sizeof(float)); !s.ok()) {
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
    if (FLAGS_check) {
      absl::StatusOr<int64_t> wrong = ring.Check(count, deadline);
      if (!wrong.ok()) return RankFail(fd, std::string(wrong.status().message()));
      result->wrong = *wrong;
    }
    if (!SendMsg(fd, result.get(), sizeof(ResultMsg))) return 1;
  }
  net->closeSend(send);
  net->closeRecv(recv);
  net->finalize(ctx);
  UnloadNetPlugin(&*p);
  return 0;
}

// ---- the parent ----

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string stderr_path;
};

// Spawns `argv` with stdout to a pipe (returned in *out_fd) and stderr to a file.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, int* out_fd,
                            const std::string& err_path, int keep_fd = -1) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int out[2] = {-1, -1};
  if (out_fd != nullptr) {
    if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  }
  if (!err_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  (void)keep_fd;
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (out_fd != nullptr) {
    close(out[1]);
    *out_fd = out[0];
  }
  if (rc != 0) {
    if (out_fd != nullptr) close(*out_fd);
    return absl::InternalError(absl::StrCat("cannot start ", args[0], ": ", strerror(rc)));
  }
  return pid;
}

// NCCL settings for a link of `rate` and `rtt` (docs/nccl.md, "NCCL settings").
int Recommend() {
  Bandwidth rate;
  Duration rtt;
  std::string source;
  if (!FLAGS_profile.empty()) {
    absl::StatusOr<TransportConfig> c = LoadProfile(FLAGS_profile, TransportConfig{});
    if (!c.ok()) {
      fprintf(stderr, "longhaul-nccl-bench: %s\n", std::string(c.status().message()).c_str());
      return 2;
    }
    rate = c->rate;
    rtt = c->initial_rtt;
    source = absl::StrCat("profile ", FLAGS_profile);
  } else if (!FLAGS_link.empty()) {
    absl::StatusOr<sim::LinkSpec> s = sim::ParseLinkSpec(FLAGS_link);
    if (!s.ok()) {
      fprintf(stderr, "longhaul-nccl-bench: --link: %s\n",
              std::string(s.status().message()).c_str());
      return 2;
    }
    rate = s->rate;
    rtt = s->rtt;
    source = absl::StrCat("link ", s->ToString());
  } else {
    fprintf(stderr, "longhaul-nccl-bench: --recommend needs --link=SPEC or --profile=FILE\n");
    return 2;
  }
  if (rate.IsZero()) {
    fprintf(stderr, "longhaul-nccl-bench: the profile sets no rate (rate=0): give --link\n");
    return 2;
  }
  const double bdp = rate.BytesPerSecond() * rtt.seconds();
  // One channel per 10 Gbit/s (a proxy thread copies at a few GB/s), at least 2.
  const int channels = std::clamp(static_cast<int>(std::ceil(rate.bps() / 10e9)), 2, 16);
  // The channels of a peer share one connection: together they need about 2 x BDP of
  // credit (a round trip of data plus a repair round), each comm its share.
  const uint64_t credit = std::clamp<uint64_t>(static_cast<uint64_t>(2 * bdp / channels),
                                               uint64_t{16} << 20, uint64_t{1} << 30);
  // Messages of at least 500 us at a channel's share of the rate (<= 2000 per second per
  // channel), a power of two in [512 KiB, 8 MiB]; NCCL_BUFFSIZE holds 8 of them.
  const double per_channel = rate.BytesPerSecond() / channels;
  uint64_t chunk = uint64_t{512} << 10;
  while (chunk < per_channel * 500e-6 && chunk < (uint64_t{8} << 20)) chunk *= 2;
  auto line = [](const std::string& cmd, const std::string& why) {
    printf("%-58s # %s\n", cmd.c_str(), why.c_str());
  };
  printf("# NCCL over longhaul, %s: rate %s, RTT %s, BDP %.2f MB\n", source.c_str(),
         FormatBandwidth(rate).c_str(), FormatDuration(rtt).c_str(), bdp / 1e6);
  line("export NCCL_NET_PLUGIN=longhaul", "libnccl-net-longhaul.so on LD_LIBRARY_PATH");
  line("export NCCL_NET=longhaul", "fail instead of falling back to IB/Socket");
  if (!FLAGS_profile.empty()) {
    line(absl::StrCat("export NCCL_LONGHAUL_PROFILE=", FLAGS_profile), "the tuned transport");
  }
  line(absl::StrCat("export NCCL_LONGHAUL_CREDIT=", FormatByteCount(credit)),
       "per comm; x channels >= 2 x BDP in flight per peer");
  line("export NCCL_PROTO=Simple", "LL/LL128 save microseconds, not milliseconds");
  line("export NCCL_ALGO=Ring", "bandwidth-optimal; trees add long-haul hops");
  line(absl::StrCat("export NCCL_MIN_NCHANNELS=", channels, " NCCL_MAX_NCHANNELS=", channels),
       "one per 10 Gbit/s; one longhaul connection per peer");
  line(absl::StrCat("export NCCL_BUFFSIZE=", 8 * chunk),
       absl::StrCat("8 steps of ", FormatByteCount(chunk), " messages"));
  line(absl::StrCat("export NCCL_P2P_NET_CHUNKSIZE=", chunk),
       "send/recv operations in the same message size");
  printf("# receiver memory bound: credit x channels = %s per peer and direction\n",
         FormatByteCount(credit * channels).c_str());
  return 0;
}

struct Emulator {
  pid_t pid = -1;
  int out_fd = -1;
  uint16_t port = 0;
  std::string edge;
  std::string err_path;
};

class Parent {
 public:
  ~Parent() { Cleanup(); }

  int Run(int argc, char** argv);

 private:
  int Fail(const std::string& text) {
    if (FLAGS_json) {
      nlohmann::json j;
      j["error"] = text;
      printf("%s\n", j.dump(2).c_str());
    } else {
      fprintf(stderr, "longhaul-nccl-bench: %s\n", text.c_str());
    }
    Cleanup();
    return 1;
  }
  void Cleanup() {
    for (Child& c : children_) {
      if (c.fd >= 0) close(c.fd);
      c.fd = -1;
    }
    for (Child& c : children_) Reap(&c.pid);
    for (Emulator& e : emus_) {
      if (e.pid > 0) kill(e.pid, SIGTERM);
    }
    for (Emulator& e : emus_) {
      Reap(&e.pid);
      if (e.out_fd >= 0) close(e.out_fd);
      e.out_fd = -1;
      if (!e.err_path.empty()) unlink(e.err_path.c_str());
    }
    for (Child& c : children_) {
      if (!c.stderr_path.empty()) unlink(c.stderr_path.c_str());
    }
  }
  // Waits up to 5 s for `*pid`, then kills it.
  static void Reap(pid_t* pid) {
    if (*pid <= 0) return;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (waitpid(*pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(*pid, SIGKILL);
        waitpid(*pid, &status, 0);
        break;
      }
      timespec ts{0, 5 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    *pid = -1;
  }
  absl::StatusOr<uint16_t> StartEmulator(const std::string& emu, const std::string& link,
                                         const PluginHandle& target, int edge_from, int edge_to,
                                         Clock::time_point deadline);
  std::string ChildStderr(int rank) {
    std::ifstream f(children_[rank].stderr_path);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (s.size() > 2000) s = s.substr(s.size() - 2000);
    return s;
  }

  std::vector<Child> children_;
  std::vector<Emulator> emus_;
};

absl::StatusOr<uint16_t> Parent::StartEmulator(const std::string& emu, const std::string& link,
                                               const PluginHandle& target, int edge_from,
                                               int edge_to, Clock::time_point deadline) {
  Emulator e;
  e.edge = absl::StrCat(edge_from, "->", edge_to);
  char tmpl[] = "/tmp/lh-nccl-bench-emu-XXXXXX";
  int tfd = mkstemp(tmpl);
  if (tfd >= 0) close(tfd);
  e.err_path = tmpl;
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now());
  std::vector<std::string> args = {emu,
                                   absl::StrCat("--link=", link),
                                   "--listen=127.0.0.1:0",
                                   absl::StrCat("--forward=", target.address, ":", target.port),
                                   "--json",
                                   absl::StrCat("--max_time=", left.count() + 30, "s"),
                                   absl::StrCat("--seed=", edge_from + 1)};
  absl::StatusOr<pid_t> pid = Spawn(args, &e.out_fd, e.err_path);
  if (!pid.ok()) return pid.status();
  e.pid = *pid;
  emus_.push_back(e);
  Emulator& me = emus_.back();
  // Read JSON lines until "ready".
  std::string buf;
  const auto ready_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(20));
  while (Clock::now() < ready_deadline) {
    pollfd p{me.out_fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char tmp[4096];
    ssize_t n = read(me.out_fd, tmp, sizeof(tmp));
    if (n <= 0) break;
    buf.append(tmp, n);
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("event", "") == "ready") {
        me.port = static_cast<uint16_t>(j.value("listen_port", 0));
        if (me.port != 0) return me.port;
      }
    }
  }
  std::ifstream f(me.err_path);
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return absl::UnavailableError(
      absl::StrCat("longhaul-emu for edge ", me.edge, " did not become ready: ", err));
}

int Parent::Run(int argc, char** argv) {
  const int n = FLAGS_ranks;
  if (n < 2 || n > 16) return Fail("--ranks must be in [2, 16]");
  absl::StatusOr<ByteCount> min_b = ParseByteCount(FLAGS_min_bytes);
  absl::StatusOr<ByteCount> max_b = ParseByteCount(FLAGS_max_bytes);
  absl::StatusOr<ByteCount> slice = ParseByteCount(FLAGS_slice_bytes);
  absl::StatusOr<Duration> timeout = ParseDuration(FLAGS_timeout);
  if (!min_b.ok()) return Fail(absl::StrCat("--min_bytes: ", min_b.status().message()));
  if (!max_b.ok()) return Fail(absl::StrCat("--max_bytes: ", max_b.status().message()));
  if (!slice.ok() || *slice < 4 || *slice > (ByteCount{1} << 30)) {
    return Fail("--slice_bytes must be a size in [4B, 1GiB]");
  }
  if (!timeout.ok() || timeout->ns() <= 0) return Fail("--timeout must be a positive duration");
  if (*min_b > *max_b || *max_b > (ByteCount{8} << 30) || *min_b < 4) {
    return Fail("need 4 <= --min_bytes <= --max_bytes <= 8GiB");
  }
  if (FLAGS_step_factor < 2) return Fail("--step_factor must be >= 2");
  if (FLAGS_iters < 1 || FLAGS_iters > kMaxIters) return Fail("--iters must be in [1, 1000]");
  if (FLAGS_warmup_iters < 0 || FLAGS_warmup_iters > 100)
    return Fail("--warmup_iters must be in [0, 100]");
  if (FLAGS_recv_ahead < 1 || FLAGS_recv_ahead > 32) return Fail("--recv_ahead must be in [1, 32]");
  const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout->ns());

  // The plugin, checked here once so a missing library is one clear error.
  std::string plugin = FLAGS_plugin;
  if (plugin.empty() && getenv("NCCL_NET_PLUGIN")) plugin = getenv("NCCL_NET_PLUGIN");
  if (plugin.empty()) plugin = SelfDir() + "/../lib/libnccl-net-longhaul.so";
  {
    absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(plugin);
    if (!p.ok()) return Fail(absl::StrCat("plugin not usable: ", p.status().message()));
    plugin = p->path;
    UnloadNetPlugin(&*p);
    if (plugin.find('/') != std::string::npos) {
      char real[PATH_MAX];
      if (realpath(plugin.c_str(), real) != nullptr) plugin = real;
    }
  }
  // The link and the emulator.
  std::string emu;
  sim::LinkSpec spec;
  if (!FLAGS_link.empty()) {
    absl::StatusOr<sim::LinkSpec> s = sim::ParseLinkSpec(FLAGS_link);
    if (!s.ok()) return Fail(absl::StrCat("--link: ", s.status().message()));
    spec = *s;
    emu = FLAGS_emu.empty() ? SelfDir() + "/longhaul-emu" : FLAGS_emu;
    if (access(emu.c_str(), X_OK) != 0) {
      return Fail(absl::StrCat("longhaul-emu not found at ", emu,
                               " (build the longhaul-emu target or pass --emu=PATH)"));
    }
  }
  // Environment of the ranks: loopback only; without a profile, transport settings for
  // the link (or for loopback).
  setenv("NCCL_LONGHAUL_IFNAME", "lo", 0);
  const bool has_profile = getenv("NCCL_LONGHAUL_PROFILE") != nullptr;
  if (!has_profile) {
    if (!FLAGS_link.empty()) {
      setenv("NCCL_LONGHAUL_RATE", spec.rate.ToString().c_str(), 0);
      setenv("NCCL_LONGHAUL_INITIAL_RTT", FormatDuration(spec.rtt).c_str(), 0);
      if (!getenv("NCCL_LONGHAUL_SEGMENT")) {
        setenv("NCCL_LONGHAUL_MTU", absl::StrCat(spec.mtu).c_str(), 0);
      }
      setenv("NCCL_LONGHAUL_PACING_BURST", "1ms", 0);
      // Window and receive window as longhaul-tune sizes them for a lossy path (1.5 and 3
      // BDPs): a window far above the BDP would keep FEC auto from ever seeing the sender
      // backlogged (it then sends parity all the time). Credit: two BDPs plus 8 slices
      // (credit returns a whole message at a time).
      const double bdp = spec.rate.BytesPerSecond() * spec.rtt.seconds();
      const uint64_t mib = uint64_t{1} << 20;
      auto mib_up = [&](double b) { return (static_cast<uint64_t>(b) + mib - 1) / mib; };
      setenv("NCCL_LONGHAUL_WINDOW",
             absl::StrCat(std::max<uint64_t>(4, mib_up(1.5 * bdp)), "MiB").c_str(), 0);
      setenv("NCCL_LONGHAUL_RECV_WINDOW",
             absl::StrCat(std::max<uint64_t>(8, mib_up(3 * bdp)), "MiB").c_str(), 0);
      setenv("NCCL_LONGHAUL_CREDIT",
             absl::StrCat(std::max<uint64_t>(16, mib_up(2 * bdp + 8.0 * *slice)), "MiB").c_str(),
             0);
    } else {
      // Loopback: no link to pace for; BBR capped at 40 Gbit/s, datagrams that fill the
      // loopback MTU (65536), and the driver sleeps instead of spinning for pacing
      // deadlines (the cores are shared with the ranks).
      setenv("NCCL_LONGHAUL_CC", "bbr", 0);
      setenv("NCCL_LONGHAUL_RATE", "40gbit", 0);
      if (!getenv("NCCL_LONGHAUL_SEGMENT")) setenv("NCCL_LONGHAUL_MTU", "65000", 0);
      setenv("NCCL_LONGHAUL_SPIN", "0", 0);
    }
  }
  std::vector<std::string> env_shown;
  for (char** e = environ; *e; ++e) {
    if (strncmp(*e, "NCCL_LONGHAUL_", 14) == 0) env_shown.push_back(*e);
  }
  std::sort(env_shown.begin(), env_shown.end());

  // Ranks.
  const std::string self =
      SelfDir() + "/" + std::string(strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0]);
  std::string self_exe;
  {
    char buf[4096];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    self_exe = k > 0 ? std::string(buf, k) : self;
  }
  children_.resize(n);
  for (int r = 0; r < n; ++r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return Fail("socketpair failed");
    }
    char tmpl[] = "/tmp/lh-nccl-bench-rank-XXXXXX";
    int tfd = mkstemp(tmpl);
    if (tfd >= 0) close(tfd);
    children_[r].stderr_path = tmpl;
    // The child's end must survive exec: dup it without CLOEXEC.
    int child_fd = dup(sv[1]);
    close(sv[1]);
    std::vector<std::string> args = {self_exe,
                                     absl::StrCat("--rank=", r),
                                     absl::StrCat("--ctrl_fd=", child_fd),
                                     absl::StrCat("--ranks=", n),
                                     absl::StrCat("--plugin=", plugin),
                                     absl::StrCat("--max_bytes=", *max_b),
                                     absl::StrCat("--slice_bytes=", *slice),
                                     absl::StrCat("--recv_ahead=", FLAGS_recv_ahead),
                                     absl::StrCat("--idle_nap_us=", FLAGS_idle_nap_us),
                                     absl::StrCat("--check=", FLAGS_check ? "true" : "false"),
                                     absl::StrCat("--timeout=", FLAGS_timeout)};
    absl::StatusOr<pid_t> pid = Spawn(args, nullptr, children_[r].stderr_path);
    close(child_fd);
    if (!pid.ok()) {
      close(sv[0]);
      return Fail(std::string(pid.status().message()));
    }
    children_[r].pid = *pid;
    children_[r].fd = sv[0];
  }
  // The error of rank r (its message, or how it failed), with the stderr of every rank
  // that wrote any (the first failure is often another rank's).
  auto rank_error = [&](int r, ssize_t got, const void* buf) -> std::string {
    std::string text;
    if (got > 0 && *static_cast<const uint32_t*>(buf) == kError) {
      text = static_cast<const ErrorMsg*>(buf)->text;
    } else {
      text = absl::StrCat("rank ", r, got == 0 ? " exited" : " did not answer in time");
    }
    for (int k = 0; k < n; ++k) {
      std::string err = ChildStderr(k);
      if (!err.empty()) absl::StrAppend(&text, "\n--- stderr of rank ", k, ":\n", err);
    }
    return text;
  };
  // Waits for one message from every rank, in any order; the first error ends the wait.
  auto gather = [&](std::vector<std::unique_ptr<ResultMsg>>* out, size_t expect,
                    uint32_t type) -> std::string {
    out->clear();
    out->resize(n);
    std::vector<bool> have(n, false);
    int left = n;
    while (left > 0) {
      std::vector<pollfd> fds;
      std::vector<int> who;
      for (int r = 0; r < n; ++r) {
        if (!have[r]) {
          fds.push_back({children_[r].fd, POLLIN, 0});
          who.push_back(r);
        }
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (ms.count() <= 0) return rank_error(who[0], -1, nullptr);
      int rc = poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms.count(), 1000)));
      if (rc < 0 && errno != EINTR) return "poll failed";
      for (size_t i = 0; rc > 0 && i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int r = who[i];
        (*out)[r] = std::make_unique<ResultMsg>();
        ssize_t got = recv(children_[r].fd, (*out)[r].get(), sizeof(ResultMsg), 0);
        if (got != static_cast<ssize_t>(expect) || (*out)[r]->type != type) {
          return rank_error(r, got, (*out)[r].get());
        }
        have[r] = true;
        --left;
      }
    }
    return "";
  };
  // Handles.
  std::vector<HelloMsg> hellos(n);
  {
    std::vector<std::unique_ptr<ResultMsg>> got;
    if (std::string e = gather(&got, sizeof(HelloMsg), kHello); !e.empty()) return Fail(e);
    for (int r = 0; r < n; ++r)
      memcpy(static_cast<void*>(&hellos[r]), got[r].get(), sizeof(HelloMsg));
  }
  const int half = n / 2;
  auto dc = [&](int r) { return r < half ? 0 : 1; };
  std::vector<std::string> crossing;
  for (int r = 0; r < n; ++r) {
    const int next = (r + 1) % n;
    PeerMsg peer;
    memcpy(peer.handle, hellos[next].handle, sizeof(peer.handle));
    if (!FLAGS_link.empty() && dc(r) != dc(next)) {
      absl::StatusOr<PluginHandle> h = DecodeHandle(peer.handle);
      if (!h.ok()) return Fail(absl::StrCat("rank ", next, "'s handle: ", h.status().message()));
      absl::StatusOr<uint16_t> port = StartEmulator(emu, FLAGS_link, *h, r, next, deadline);
      if (!port.ok()) return Fail(std::string(port.status().message()));
      if (absl::Status s = RedirectHandle(peer.handle, "127.0.0.1", *port); !s.ok()) {
        return Fail(std::string(s.message()));
      }
      crossing.push_back(absl::StrCat(r, "->", next));
    }
    if (!SendMsg(children_[r].fd, &peer, sizeof(peer))) return Fail(rank_error(r, 0, nullptr));
  }
  {
    std::vector<std::unique_ptr<ResultMsg>> got;
    if (std::string e = gather(&got, sizeof(uint32_t), kReady); !e.empty()) return Fail(e);
  }
  // Header.
  const std::string load_before = LoadAverage();
  if (!FLAGS_json) {
    printf("# longhaul-nccl-bench: %d ranks, data centres: ranks 0-%d | %d-%d\n", n, half - 1, half,
           n - 1);
    if (FLAGS_link.empty()) {
      printf("# link: none (direct loopback)\n");
    } else {
      printf("# link: %s through longhaul-emu on edges %s\n", spec.ToString().c_str(),
             absl::StrJoin(crossing, ", ").c_str());
    }
    printf("# plugin: %s (ncclNetPlugin_v%d), device %s, speed %d Mbps, latency %.0f us\n",
           plugin.c_str(), hellos[0].version, hellos[0].device, hellos[0].speed_mbps,
           hellos[0].latency_us);
    printf("# env: %s\n", absl::StrJoin(env_shown, " ").c_str());
    printf("# slice %s, %d receives ahead, %d warm-up + %d timed iterations, load average %s\n",
           FormatByteCount(*slice).c_str(), FLAGS_recv_ahead, FLAGS_warmup_iters, FLAGS_iters,
           load_before.c_str());
    printf("#\n");
    printf("#%12s %12s %8s %6s %6s %12s %8s %8s %7s %12s %12s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "p50", "p99");
    printf("#%12s %12s %8s %6s %6s %12s %8s %8s %7s %12s %12s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)");
    fflush(stdout);
  }
  nlohmann::json results = nlohmann::json::array();
  double bw_sum = 0;
  int bw_count = 0;
  int64_t wrong_total = 0;
  for (ByteCount bytes = *min_b; bytes <= *max_b; bytes *= FLAGS_step_factor) {
    const size_t count = bytes / sizeof(float);
    RunMsg run;
    run.bytes = count * sizeof(float);
    run.iters = FLAGS_iters;
    run.warmup = FLAGS_warmup_iters;
    for (int r = 0; r < n; ++r) {
      if (!SendMsg(children_[r].fd, &run, sizeof(run))) return Fail(rank_error(r, 0, nullptr));
    }
    std::vector<std::unique_ptr<ResultMsg>> res;
    if (std::string e = gather(&res, sizeof(ResultMsg), kResult); !e.empty()) return Fail(e);
    // Per iteration: the mean over ranks (nccl-tests' -a 1); the time is their mean.
    std::vector<double> iter(FLAGS_iters, 0.0);
    int64_t wrong = 0;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < FLAGS_iters; ++i) iter[i] += res[r]->iter_us[i] / n;
      wrong += res[r]->wrong;
    }
    wrong_total += wrong;
    double mean = 0;
    for (double t : iter) mean += t / FLAGS_iters;
    std::vector<double> sorted = iter;
    std::sort(sorted.begin(), sorted.end());
    auto pct = [&](double q) {
      size_t idx = static_cast<size_t>(std::ceil(q * sorted.size())) - 1;
      return sorted[std::min(idx, sorted.size() - 1)];
    };
    const double p50 = pct(0.5), p99 = pct(0.99);
    const double algbw = static_cast<double>(run.bytes) / 1e9 / (mean * 1e-6);
    const double busbw = algbw * 2.0 * (n - 1) / n;
    bw_sum += busbw;
    ++bw_count;
    if (!FLAGS_json) {
      printf(" %12llu %12zu %8s %6s %6d %12.1f %8.3f %8.3f %7lld %12.1f %12.1f\n",
             static_cast<unsigned long long>(run.bytes), count, "float", "sum", -1, mean, algbw,
             busbw, static_cast<long long>(wrong), p50, p99);
      fflush(stdout);
    }
    results.push_back({{"size", run.bytes},
                       {"count", count},
                       {"type", "float"},
                       {"redop", "sum"},
                       {"time_us", mean},
                       {"algbw_GBps", algbw},
                       {"busbw_GBps", busbw},
                       {"wrong", wrong},
                       {"p50_us", p50},
                       {"p99_us", p99},
                       {"p99_over_p50", p50 > 0 ? p99 / p50 : 0},
                       {"iter_us", iter}});
    if (bytes > *max_b / FLAGS_step_factor) break;
  }
  for (int r = 0; r < n; ++r) {
    uint32_t ex = kExit;
    SendMsg(children_[r].fd, &ex, sizeof(ex));
  }
  const double avg = bw_count ? bw_sum / bw_count : 0;
  const std::string load_after = LoadAverage();
  if (FLAGS_json) {
    nlohmann::json j;
    j["ranks"] = n;
    j["data_centres"] = {{"a", {0, half - 1}}, {"b", {half, n - 1}}};
    j["link"] = FLAGS_link.empty() ? nlohmann::json(nullptr)
                                   : nlohmann::json::parse(spec.ToJson(), nullptr, false);
    j["emulated_edges"] = crossing;
    j["plugin"] = plugin;
    j["plugin_version"] = hellos[0].version;
    j["device"] = hellos[0].device;
    j["env"] = env_shown;
    j["slice_bytes"] = *slice;
    j["iters"] = FLAGS_iters;
    j["warmup_iters"] = FLAGS_warmup_iters;
    j["results"] = results;
    j["out_of_bounds"] = wrong_total;
    j["avg_busbw_GBps"] = avg;
    j["load_average_before"] = load_before;
    j["load_average_after"] = load_after;
    printf("%s\n", j.dump(2).c_str());
  } else {
    printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
           wrong_total == 0 ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %.3f\n", avg);
    printf("# load average after   : %s\n", load_after.c_str());
  }
  Cleanup();
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace
}  // namespace longhaul::nccl

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "ring allreduce over the longhaul NCCL net plugin between N rank processes\n"
      "  longhaul-nccl-bench --ranks=N [--link=SPEC] [--min_bytes=SIZE] [--max_bytes=SIZE]\n"
      "                      [--iters=N] [--json]\n"
      "Ranks 0..N/2-1 and N/2..N-1 form two data centres; with --link the ring edges\n"
      "between them go through longhaul-emu. Columns as nccl-tests' all_reduce_perf\n"
      "(busbw = algbw x 2(n-1)/n), plus p50/p99 of the per-iteration time. Transport\n"
      "settings come from NCCL_LONGHAUL_PROFILE / NCCL_LONGHAUL_<KEY> (docs/nccl.md).");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  signal(SIGPIPE, SIG_IGN);
  if (FLAGS_recommend) return longhaul::nccl::Recommend();
  if (!FLAGS_profile.empty()) setenv("NCCL_LONGHAUL_PROFILE", FLAGS_profile.c_str(), 1);
  if (FLAGS_rank >= 0) {
    absl::StatusOr<longhaul::Duration> t = longhaul::ParseDuration(FLAGS_timeout);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::nanoseconds(t.ok() ? t->ns() : int64_t{600} * 1000000000);
    return longhaul::nccl::RankMain(FLAGS_plugin, deadline);
  }
  longhaul::nccl::Parent parent;
  return parent.Run(argc, argv);
}
