#include "transport/nccl/plugin_log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace longhaul::nccl {
namespace {

// Constant-initialised and trivially destructible: usable from any static destructor.
std::atomic<ncclDebugLogger_t> g_logger{nullptr};

void LogV(ncclDebugLogLevel level, unsigned long flags, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  ncclDebugLogger_t logger = g_logger.load();
  if (logger != nullptr) {
    logger(level, flags, "longhaul", 0, "NET/longhaul: %s", buf);
  } else if (level == NCCL_LOG_WARN) {
    fprintf(stderr, "NET/longhaul: %s\n", buf);
  }
}

}  // namespace

void SetLogger(ncclDebugLogger_t logger) {
  if (logger != nullptr) g_logger.store(logger);
}

void LogWarn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  LogV(NCCL_LOG_WARN, LH_NCCL_ALL, fmt, ap);
  va_end(ap);
}

void LogInfo(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  LogV(NCCL_LOG_INFO, LH_NCCL_NET | LH_NCCL_INIT, fmt, ap);
  va_end(ap);
}

}  // namespace longhaul::nccl
