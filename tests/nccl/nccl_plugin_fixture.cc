#include "tests/nccl/nccl_plugin_fixture.h"

#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"

namespace longhaul::nccl::plugin_test {

namespace {

std::mutex g_log_mu;
std::vector<std::string> g_warnings;
std::vector<std::string> g_infos;

}  // namespace

void TestLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> l(g_log_mu);
  (level == NCCL_LOG_WARN ? g_warnings : g_infos).push_back(buf);
}

bool LoggedInfo(const std::string& text) {
  std::lock_guard<std::mutex> l(g_log_mu);
  for (const std::string& w : g_infos) {
    if (absl::StrContains(w, text)) return true;
  }
  return false;
}

std::vector<std::string> InfosContaining(const std::string& text) {
  std::lock_guard<std::mutex> l(g_log_mu);
  std::vector<std::string> out;
  for (const std::string& i : g_infos) {
    if (absl::StrContains(i, text)) out.push_back(i);
  }
  return out;
}

bool WarnedAbout(const std::string& text) {
  std::lock_guard<std::mutex> l(g_log_mu);
  for (const std::string& w : g_warnings) {
    if (absl::StrContains(w, text)) return true;
  }
  return false;
}

std::string LastWarning() {
  std::lock_guard<std::mutex> l(g_log_mu);
  return g_warnings.empty() ? std::string() : g_warnings.back();
}

int CountWarnings(const std::string& text) {
  std::lock_guard<std::mutex> l(g_log_mu);
  int n = 0;
  for (const std::string& w : g_warnings) n += absl::StrContains(w, text) ? 1 : 0;
  return n;
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

int ThreadCountOnceAtMost(int expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int n = ThreadCount();
  while (n > expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = ThreadCount();
  }
  return n;
}

ncclResult_t WaitDone(const ncclNet_v12_t* net, void* req, int* sizes,
                      std::chrono::seconds timeout) {
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

int BeginRank(const ncclNet_v12_t* net, int fd, uint64_t comm_id, Rank* r) {
  ncclNetCommConfig_v12_t config{-1};
  if (net->init(&r->ctx, comm_id, &config, TestLogger, nullptr) != ncclSuccess) return 10;
  char mine[LH_NCCL_NET_HANDLE_MAXSIZE];
  if (net->listen(r->ctx, 0, mine, &r->listen) != ncclSuccess) return 11;
  if (write(fd, mine, sizeof(mine)) != sizeof(mine)) return 12;
  if (read(fd, r->peer, sizeof(r->peer)) != sizeof(r->peer)) return 13;
  return 0;
}

int ConnectRank(const ncclNet_v12_t* net, const Rank& r, void** send, void** recv) {
  char peer[LH_NCCL_NET_HANDLE_MAXSIZE];
  memcpy(peer, r.peer, sizeof(peer));
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while ((!*send || !*recv) && Clock::now() < deadline) {
    if (!*send && net->connect(r.ctx, 0, peer, send, nullptr) != ncclSuccess) return 14;
    if (!*recv && net->accept(r.listen, recv, nullptr) != ncclSuccess) return 15;
  }
  return *send && *recv ? 0 : 16;
}

pid_t ForkChild(const std::function<int(int fd)>& child, int* fd) {
  int sv[2];
  *fd = -1;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    _exit(child(sv[1]));
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return -1;
  }
  *fd = sv[0];
  return pid;
}

int WaitChild(pid_t pid, std::chrono::seconds bound) {
  int status = 0;
  const auto deadline = Clock::now() + bound;
  pid_t w = 0;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  return status;
}

}  // namespace longhaul::nccl::plugin_test
