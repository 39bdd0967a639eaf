// The exported tables ncclNetPlugin_v8 .. ncclNetPlugin_v12: thin adapters from each ABI
// version onto transport/nccl/net_plugin.h. This is the one place where absl::Status
// becomes ncclResult_t (and where the error text goes to NCCL's logger).
//
// Only these five symbols are exported (exports.map); everything else is hidden. The
// tables are non-const objects: a namespace-scope const object would have internal
// linkage in C++ and not be exported.

#include <cstring>
#include <mutex>
#include <string>

#include "transport/nccl/nccl_net_abi.h"
#include "transport/nccl/net_plugin.h"

namespace longhaul::nccl {
namespace {

constexpr char kPluginName[] = "longhaul";

ncclResult_t Result(const char* op, const absl::Status& s) {
  if (s.ok()) return ncclSuccess;
  ncclResult_t r = StatusToNccl(s);
  LogWarn("%s failed (ncclResult %d): %s", op, static_cast<int>(r),
          std::string(s.message()).c_str());
  return r;
}

// Per-device name and PCI path strings live as long as the library (NCCL keeps the
// pointers of getProperties).
struct DeviceStrings {
  char name[64];
  char pci[512];
};
DeviceStrings g_strings[64];
std::mutex g_strings_mu;  // getProperties runs on several NCCL threads

// Common properties; each version copies what it has.
ncclResult_t FillCommon(int dev, ncclNetProperties_v12_t* p) {
  if (p == nullptr) return Result("getProperties", absl::InvalidArgumentError("NULL props"));
  absl::StatusOr<DeviceProperties> d = GetProperties(dev);
  if (!d.ok()) return Result("getProperties", d.status());
  std::memset(p, 0, sizeof(*p));
  const int slot = dev % 64;
  {
    // Rewritten only when the device changed (a re-initialised runtime), so pointers that
    // NCCL holds keep reading the same text.
    std::lock_guard<std::mutex> l(g_strings_mu);
    if (d->name != g_strings[slot].name) {
      snprintf(g_strings[slot].name, sizeof(g_strings[slot].name), "%s", d->name.c_str());
    }
    if (d->pci_path != g_strings[slot].pci) {
      snprintf(g_strings[slot].pci, sizeof(g_strings[slot].pci), "%s", d->pci_path.c_str());
    }
  }
  p->name = g_strings[slot].name;
  p->pciPath = d->pci_path.empty() ? nullptr : g_strings[slot].pci;
  p->guid = d->guid;
  p->ptrSupport = LH_NCCL_PTR_HOST;
  p->regIsGlobal = 1;  // registration is bookkeeping only, valid on any comm
  p->forceFlush = 0;
  p->speed = d->speed_mbps;
  p->port = 0;
  p->latency = d->latency_us;
  p->maxComms = kMaxComms;
  p->maxRecvs = kAdvertisedMaxRecvs;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = LH_NCCL_NET_DEVICE_INVALID_VERSION;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = kMaxP2pBytes;
  p->maxCollBytes = kMaxP2pBytes;
  p->maxMultiRequestSize = 1;
  p->railId = LH_NCCL_NET_ID_UNDEF;
  p->planeId = LH_NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

// ---- version-independent entry points ----

ncclResult_t InitNoCtx(ncclDebugLogger_t log) {
  SetLogger(log);
  return Result("init", Init(0, LH_NCCL_NET_TRAFFIC_CLASS_UNDEF, nullptr));
}
ncclResult_t InitV10(ncclDebugLogger_t log, ncclProfilerCallback_t) { return InitNoCtx(log); }
ncclResult_t InitV11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t log, ncclProfilerCallback_t) {
  SetLogger(log);
  if (ctx == nullptr) return Result("init", absl::InvalidArgumentError("NULL ctx"));
  return Result("init", Init(comm_id, config ? config->trafficClass : -1, ctx));
}
ncclResult_t InitV12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                     ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  return InitV11(ctx, comm_id, reinterpret_cast<ncclNetCommConfig_v11_t*>(config), log, prof);
}
ncclResult_t FinalizeCtx(void* ctx) { return Result("finalize", Finalize(ctx)); }

ncclResult_t DevicesImpl(int* ndev) {
  if (ndev == nullptr) return Result("devices", absl::InvalidArgumentError("NULL ndev"));
  absl::StatusOr<int> n = Devices();
  if (!n.ok()) return Result("devices", n.status());
  *ndev = *n;
  return ncclSuccess;
}

ncclResult_t GetPropertiesV8(int dev, ncclNetProperties_v8_t* props) {
  ncclNetProperties_v12_t p;
  if (ncclResult_t r = FillCommon(dev, &p); r != ncclSuccess) return r;
  if (props == nullptr) return ncclInternalError;
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  return ncclSuccess;
}
template <typename Props>
void CopyV9Fields(const ncclNetProperties_v12_t& p, Props* props) {
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = p.vProps.devs[0];
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
}
ncclResult_t GetPropertiesV9(int dev, ncclNetProperties_v9_t* props) {
  ncclNetProperties_v12_t p;
  if (ncclResult_t r = FillCommon(dev, &p); r != ncclSuccess) return r;
  if (props == nullptr) return ncclInternalError;
  std::memset(props, 0, sizeof(*props));
  CopyV9Fields(p, props);
  return ncclSuccess;
}
ncclResult_t GetPropertiesV11(int dev, ncclNetProperties_v11_t* props) {
  ncclNetProperties_v12_t p;
  if (ncclResult_t r = FillCommon(dev, &p); r != ncclSuccess) return r;
  if (props == nullptr) return ncclInternalError;
  std::memset(props, 0, sizeof(*props));
  CopyV9Fields(p, props);
  props->maxMultiRequestSize = p.maxMultiRequestSize;
  return ncclSuccess;
}
ncclResult_t GetPropertiesV12(int dev, ncclNetProperties_v12_t* props) {
  return FillCommon(dev, props);
}

ncclResult_t ListenCtx(void* ctx, int dev, void* handle, void** listen_comm) {
  return Result("listen", Listen(ctx, dev, handle, listen_comm));
}
ncclResult_t ListenNoCtx(int dev, void* handle, void** listen_comm) {
  return ListenCtx(nullptr, dev, handle, listen_comm);
}
ncclResult_t ConnectCtx(void* ctx, int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v12_t** /*dev_comm: host plugin, no offload*/) {
  return Result("connect", Connect(ctx, dev, handle, send_comm));
}
ncclResult_t ConnectV8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t** d) {
  return ConnectCtx(nullptr, dev, handle, send_comm, d);
}
ncclResult_t ConnectV10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v10_t** d) {
  return ConnectCtx(nullptr, dev, handle, send_comm, d);
}
ncclResult_t AcceptImpl(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v12_t**) {
  return Result("accept", Accept(listen_comm, recv_comm));
}
ncclResult_t RegMrImpl(void* comm, void* data, size_t size, int type, void** mhandle) {
  return Result("regMr", RegMr(comm, data, size, type, mhandle));
}
ncclResult_t RegMrDmaBufImpl(void*, void*, size_t, int, uint64_t, int, void** mhandle) {
  if (mhandle != nullptr) *mhandle = nullptr;
  return Result("regMrDmaBuf", absl::InvalidArgumentError(
                                   "dmabuf registration is not supported (host memory only)"));
}
ncclResult_t DeregMrImpl(void* comm, void* mhandle) {
  return Result("deregMr", DeregMr(comm, mhandle));
}

ncclResult_t IsendV8(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) {
    if (request) *request = nullptr;
    return Result("isend", absl::InvalidArgumentError("negative size"));
  }
  return Result("isend", Isend(comm, data, static_cast<size_t>(size), tag, mhandle, request));
}
ncclResult_t IsendV9(void* comm, void* data, size_t size, int tag, void* mhandle,
                     void** request) {
  return Result("isend", Isend(comm, data, size, tag, mhandle, request));
}
ncclResult_t IsendV10(void* comm, void* data, size_t size, int tag, void* mhandle, void*,
                      void** request) {
  return Result("isend", Isend(comm, data, size, tag, mhandle, request));
}
ncclResult_t IrecvV8(void* comm, int n, void** data, int* sizes, int* tags, void**,
                     void** request) {
  if (n < 1 || n > kMaxRecvs || sizes == nullptr) {
    if (request) *request = nullptr;
    return Result("irecv", absl::InvalidArgumentError("n outside [1, 8] or NULL sizes"));
  }
  size_t s[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) {
      if (request) *request = nullptr;
      return Result("irecv", absl::InvalidArgumentError("negative size"));
    }
    s[i] = static_cast<size_t>(sizes[i]);
  }
  return Result("irecv", Irecv(comm, n, data, s, tags, request));
}
ncclResult_t IrecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void**,
                     void** request) {
  return Result("irecv", Irecv(comm, n, data, sizes, tags, request));
}
ncclResult_t IrecvV10(void* comm, int n, void** data, size_t* sizes, int* tags, void**, void**,
                      void** request) {
  return Result("irecv", Irecv(comm, n, data, sizes, tags, request));
}
// Host memory needs no flush: a NULL request means "nothing to wait for".
ncclResult_t IflushImpl(void*, int, void**, int*, void**, void** request) {
  if (request != nullptr) *request = nullptr;
  return ncclSuccess;
}
ncclResult_t TestImpl(void* request, int* done, int* sizes) {
  return Result("test", Test(request, done, sizes));
}
ncclResult_t CloseSendImpl(void* comm) { return Result("closeSend", CloseSend(comm)); }
ncclResult_t CloseRecvImpl(void* comm) { return Result("closeRecv", CloseRecv(comm)); }
ncclResult_t CloseListenImpl(void* comm) { return Result("closeListen", CloseListen(comm)); }

}  // namespace
}  // namespace longhaul::nccl

using namespace longhaul::nccl;  // NOLINT: the tables below name the adapters

extern "C" {

__attribute__((visibility("default"))) ncclNet_v12_t ncclNetPlugin_v12 = {
    kPluginName, InitV12,   DevicesImpl,     GetPropertiesV12, ListenCtx,       ConnectCtx,
    AcceptImpl,  RegMrImpl, RegMrDmaBufImpl, DeregMrImpl,      IsendV10,        IrecvV10,
    IflushImpl,  TestImpl,  CloseSendImpl,   CloseRecvImpl,    CloseListenImpl, nullptr,
    nullptr,     nullptr,   FinalizeCtx,     nullptr,
};

__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    kPluginName, InitV11,   DevicesImpl,     GetPropertiesV11, ListenCtx,       ConnectCtx,
    AcceptImpl,  RegMrImpl, RegMrDmaBufImpl, DeregMrImpl,      IsendV10,        IrecvV10,
    IflushImpl,  TestImpl,  CloseSendImpl,   CloseRecvImpl,    CloseListenImpl, nullptr,
    nullptr,     nullptr,   FinalizeCtx,     nullptr,
};

__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = {
    kPluginName,   InitV10,         DevicesImpl, GetPropertiesV9, ListenNoCtx,
    ConnectV10,    AcceptImpl,      RegMrImpl,   RegMrDmaBufImpl, DeregMrImpl,
    IsendV10,      IrecvV10,        IflushImpl,  TestImpl,        CloseSendImpl,
    CloseRecvImpl, CloseListenImpl, nullptr,     nullptr,         nullptr,
};

__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    kPluginName,   InitNoCtx,       DevicesImpl, GetPropertiesV9, ListenNoCtx,
    ConnectV8,     AcceptImpl,      RegMrImpl,   RegMrDmaBufImpl, DeregMrImpl,
    IsendV9,       IrecvV9,         IflushImpl,  TestImpl,        CloseSendImpl,
    CloseRecvImpl, CloseListenImpl, nullptr,     nullptr,         nullptr,
};

__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    kPluginName,   InitNoCtx,       DevicesImpl, GetPropertiesV8, ListenNoCtx,
    ConnectV8,     AcceptImpl,      RegMrImpl,   RegMrDmaBufImpl, DeregMrImpl,
    IsendV8,       IrecvV8,         IflushImpl,  TestImpl,        CloseSendImpl,
    CloseRecvImpl, CloseListenImpl, nullptr,     nullptr,
};

}  // extern "C"
