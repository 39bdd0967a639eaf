// Loads an NCCL net plugin the way NCCL does: dlopen(name) with RTLD_NOW | RTLD_LOCAL,
// then (for a bare name) libnccl-net-<name>.so; dlsym of ncclNetPlugin_v12, v11, ...
// v8, newest first. Used by longhaul-nccl-bench and the plugin tests.
//
// Not thread-safe (call from one thread); the loaded tables are read-only.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl {

struct LoadedPlugin {
  void* library = nullptr;  // dlopen handle; Unload() closes it
  std::string path;         // what dlopen accepted
  int version = 0;          // of the newest table found (8..12)
  std::string symbol;       // "ncclNetPlugin_v12"
  // The newest table, as v11/v12 (identical function lists) when version >= 11.
  const ncclNet_v12_t* v12 = nullptr;  // version 12
  const ncclNet_v11_t* v11 = nullptr;  // version 11
  const void* table = nullptr;         // the table of `version`, any version
};

// NotFound naming every file tried and dlerror()'s text; FailedPrecondition when the
// library has no ncclNetPlugin_v8..v12 symbol.
absl::StatusOr<LoadedPlugin> LoadNetPlugin(const std::string& name_or_path);
// dlclose; 0 on success.
int UnloadNetPlugin(LoadedPlugin* p);

}  // namespace longhaul::nccl
