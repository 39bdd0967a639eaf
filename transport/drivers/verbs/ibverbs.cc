#include "transport/drivers/verbs/ibverbs.h"

#include <dlfcn.h>

#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace longhaul::verbs {
namespace {

constexpr char kLibrary[] = "libibverbs.so.1";
constexpr char kInstall[] = " (Debian: apt-get install libibverbs1 ibverbs-providers)";

struct Loaded {
  IbverbsApi api{};
  absl::Status status;
};

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* out, absl::Status* status) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && status->ok()) {
    *status = absl::FailedPreconditionError(
        absl::StrCat("the verbs datapath needs rdma-core's ", kLibrary, ": it has no ", name,
                     kInstall));
  }
  return *out != nullptr;
}

Loaded Load() {
  Loaded l;
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    l.status = absl::FailedPreconditionError(absl::StrCat(
        "the verbs datapath needs rdma-core's ", kLibrary, ": ", why ? why : "not found",
        kInstall));
    return l;
  }
  IbverbsApi& a = l.api;
  absl::Status* s = &l.status;
  Resolve(lib, "ibv_get_device_list", &a.get_device_list, s);
  Resolve(lib, "ibv_free_device_list", &a.free_device_list, s);
  Resolve(lib, "ibv_get_device_name", &a.get_device_name, s);
  Resolve(lib, "ibv_open_device", &a.open_device, s);
  Resolve(lib, "ibv_close_device", &a.close_device, s);
  Resolve(lib, "ibv_query_device", &a.query_device, s);
  Resolve(lib, "ibv_query_port", &a.query_port, s);
  Resolve(lib, "_ibv_query_gid_ex", &a.query_gid_ex, s);
  Resolve(lib, "ibv_alloc_pd", &a.alloc_pd, s);
  Resolve(lib, "ibv_dealloc_pd", &a.dealloc_pd, s);
  Resolve(lib, "ibv_reg_mr", &a.reg_mr, s);
  Resolve(lib, "ibv_dereg_mr", &a.dereg_mr, s);
  Resolve(lib, "ibv_create_comp_channel", &a.create_comp_channel, s);
  Resolve(lib, "ibv_destroy_comp_channel", &a.destroy_comp_channel, s);
  Resolve(lib, "ibv_create_cq", &a.create_cq, s);
  Resolve(lib, "ibv_destroy_cq", &a.destroy_cq, s);
  Resolve(lib, "ibv_get_cq_event", &a.get_cq_event, s);
  Resolve(lib, "ibv_ack_cq_events", &a.ack_cq_events, s);
  Resolve(lib, "ibv_create_qp", &a.create_qp, s);
  Resolve(lib, "ibv_modify_qp", &a.modify_qp, s);
  Resolve(lib, "ibv_destroy_qp", &a.destroy_qp, s);
  Resolve(lib, "ibv_create_ah", &a.create_ah, s);
  Resolve(lib, "ibv_destroy_ah", &a.destroy_ah, s);
  Resolve(lib, "ibv_wc_status_str", &a.wc_status_str, s);
  return l;  // the library stays loaded for the life of the process
}

// In static storage, never destroyed (driver threads may still call through the table
// while the process exits) and never on the heap (the NCCL plugin that holds it can be
// unloaded: a heap block reachable only from its statics would be lost at each dlclose).
const Loaded& Once() {
  alignas(Loaded) static unsigned char storage[sizeof(Loaded)];
  static const Loaded* loaded = new (storage) Loaded(Load());
  return *loaded;
}

}  // namespace

absl::StatusOr<const IbverbsApi*> LoadIbverbs() {
  const Loaded& l = Once();
  if (!l.status.ok()) return l.status;
  return &l.api;
}

const IbverbsApi& Ibverbs() {
  const Loaded& l = Once();
  CHECK(l.status.ok()) << "Ibverbs() before a successful LoadIbverbs(): " << l.status;
  return l.api;
}

}  // namespace longhaul::verbs
