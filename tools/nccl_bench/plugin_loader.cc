#include "tools/nccl_bench/plugin_loader.h"

#include <dlfcn.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace longhaul::nccl {

absl::StatusOr<LoadedPlugin> LoadNetPlugin(const std::string& name_or_path) {
  std::vector<std::string> tried;
  std::vector<std::string> errors;
  LoadedPlugin p;
  auto attempt = [&](const std::string& name) {
    tried.push_back(name);
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      errors.push_back(e ? e : "unknown dlopen error");
      return false;
    }
    p.library = h;
    p.path = name;
    return true;
  };
  bool ok = attempt(name_or_path);
  if (!ok && name_or_path.find('/') == std::string::npos &&
      !(absl::StartsWith(name_or_path, "lib") && absl::EndsWith(name_or_path, ".so"))) {
    ok = attempt(absl::StrCat("libnccl-net-", name_or_path, ".so"));
  }
  if (!ok) {
    return absl::NotFoundError(absl::StrCat("cannot load the net plugin (tried ",
                                            absl::StrJoin(tried, ", "),
                                            "): ", absl::StrJoin(errors, "; ")));
  }
  for (int v = 12; v >= 8; --v) {
    std::string sym = absl::StrCat("ncclNetPlugin_v", v);
    void* t = dlsym(p.library, sym.c_str());
    if (t == nullptr) continue;
    p.version = v;
    p.symbol = sym;
    p.table = t;
    if (v == 12) p.v12 = static_cast<const ncclNet_v12_t*>(t);
    if (v == 11) p.v11 = static_cast<const ncclNet_v11_t*>(t);
    return p;
  }
  dlclose(p.library);
  return absl::FailedPreconditionError(
      absl::StrCat(p.path, " exports no ncclNetPlugin_v8..v12 symbol: not an NCCL net plugin"));
}

int UnloadNetPlugin(LoadedPlugin* p) {
  if (p->library == nullptr) return 0;
  int rc = dlclose(p->library);
  *p = LoadedPlugin{};
  return rc;
}

}  // namespace longhaul::nccl
