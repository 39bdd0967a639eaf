// The plugin's log: every line goes to NCCL's logger (ncclDebugLogger_t, set by init)
// prefixed "NET/longhaul: ", or, before init gave one (or when NCCL passed NULL), warnings
// go to stderr and info lines are dropped.
//
// Thread-safe: the logger is an atomic pointer, set once per init and kept until the
// library is unloaded; the functions may be called from any thread, including the
// driver thread. Lines are cut at 1023 bytes.
#pragma once

#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl {

// Sets the logger (NULL leaves the current one). Kept until unload.
void SetLogger(ncclDebugLogger_t logger);
// Logs through NCCL's logger (printf format): WARN with every subsystem flag, INFO
// under NET and INIT.
void LogWarn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void LogInfo(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace longhaul::nccl
