#include "tests/nccl/nccl_plugin_fixture.h"

#include <dirent.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
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

}  // namespace longhaul::nccl::plugin_test
