// The NCCL operations that set up and tear down: init/finalize (the process-wide
// runtime), devices, listen/connect/accept, memory registration and the closes; and the
// one conversion of absl::Status to ncclResult_t. The data path (isend/irecv/test) is in
// data_path.cc.
#include "transport/nccl/net_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "longhaul/version.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/crypto/key_files.h"
#include "transport/crypto/primitives.h"
#include "transport/endpoint/security_config.h"
#include "transport/nccl/comms.h"
#include "transport/nccl/devices.h"
#include "transport/nccl/frames.h"
#include "transport/nccl/plugin_handle.h"
#include "transport/nccl/runtime.h"
#include "transport/nccl/settings.h"

namespace longhaul::nccl {
namespace {

// The runtime between the first Init and the last Finalize, and its number of users.
std::mutex g_mu;
std::shared_ptr<Runtime> g_rt;
int g_users = 0;

// glog and gflags are not made to be unloaded: gflags keeps its flag registry (glog's
// flags, about 8 KB) on the heap, reachable only from its own globals, so a process that
// loads and closes the plugin without using them itself (NCCL, longhaul-nccl-bench) would
// lose that memory at each dlclose (LeakSanitizer found it). They stay loaded instead.
struct PinLoggingLibraries {
  PinLoggingLibraries() {
    for (const char* soname : {"libglog.so.1", "libgflags.so.2.2"}) {
      dlopen(soname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // no-op when not loaded
    }
  }
} g_pin_logging_libraries;

// Library unload (dlclose) or process exit: stop the driver thread if a user never
// finalized (v8..v10 have no finalize). Defined after the globals above, in the same
// file, so that it is destroyed before them.
struct UnloadGuard {
  ~UnloadGuard() { Shutdown(); }
} g_unload_guard;

std::shared_ptr<Runtime> CurrentRuntime() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_rt;
}

std::string KeyPrefix(const crypto::Key32& k) { return crypto::ToHex(k).substr(0, 16) + "..."; }

// "Noise IK (static keys), key 3f2a9c0d1e2b4f5a..., 4 allowed keys (ranks.pub)".
std::string SecurityText(const crypto::LoadedKeys& keys) {
  const endpoint::SecurityConfig& s = keys.security;
  if (s.insecure) {
    return "insecure (plaintext, NCCL_LONGHAUL_INSECURE=1): packets are neither encrypted nor "
           "authenticated";
  }
  std::string text = endpoint::SecurityModeName(s.mode());
  if (s.key) absl::StrAppend(&text, ", key ", KeyPrefix(s.key->public_key));
  if (!s.peer_keys.empty()) {
    absl::StrAppend(&text, ", ", s.peer_keys.size(), " allowed keys (", keys.peer_key_path, ")");
  }
  return text;
}

// With static keys a connect authenticates the listener by the key in its handle, which
// must be one this rank allows; the other modes carry none.
absl::Status CheckListenerKey(const Runtime& rt, const PluginHandle& h) {
  const endpoint::SecurityConfig& s = rt.keys.security;
  const bool static_keys = !s.insecure && s.key.has_value();
  if (static_keys && !h.public_key) {
    return absl::FailedPreconditionError(
        "connect: the listener's handle carries no public key: it runs without static keys "
        "while this rank has NCCL_LONGHAUL_KEY; give every rank the same kind of keys");
  }
  if (!static_keys && h.public_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        "connect: the listener uses static keys (key ", KeyPrefix(*h.public_key),
        " in its handle) but this rank has no NCCL_LONGHAUL_KEY; give every rank the same "
        "kind of keys"));
  }
  if (static_keys &&
      std::find(s.peer_keys.begin(), s.peer_keys.end(), *h.public_key) == s.peer_keys.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "connect: the listener's public key ", crypto::ToHex(*h.public_key),
        " (from its handle) is not in NCCL_LONGHAUL_PEER_KEY (", rt.keys.peer_key_path, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Init(uint64_t comm_id, int traffic_class, void** ctx) {
  std::lock_guard<std::mutex> l(g_mu);
  if (!g_rt) {
    LH_ASSIGN_OR_RETURN(Settings s, ReadSettingsFromEnvironment());
    LH_ASSIGN_OR_RETURN(crypto::LoadedKeys keys, LoadPluginKeys(s));
    LH_ASSIGN_OR_RETURN(std::vector<DeviceProperties> devs, FindDevices(s));
    auto rt = std::make_shared<Runtime>();
    rt->settings = std::move(s);
    rt->keys = std::move(keys);
    rt->devices = std::move(devs);
    LH_ASSIGN_OR_RETURN(rt->instance, RandomId());
    g_rt = rt;
    g_users = 0;
    std::string names;
    for (const DeviceProperties& d : rt->devices) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", d.name, " (", d.address, ")");
    }
    LogInfo("%s", VersionLine("libnccl-net-longhaul").c_str());
    LogInfo("using %s; rate %s, cc %s, fec %s, segment %llu, credit %s per comm, engines %s%s%s",
            names.c_str(), FormatBandwidth(rt->settings.config.rate).c_str(),
            CongestionControlName(rt->settings.config.cc), FecModeName(rt->settings.config.fec),
            static_cast<unsigned long long>(rt->settings.config.segment),
            FormatByteCount(rt->settings.credit).c_str(),
            rt->settings.engines == 0 ? "auto" : absl::StrCat(rt->settings.engines).c_str(),
            rt->settings.profile_path.empty() ? "" : ", profile ",
            rt->settings.profile_path.c_str());
    LogInfo("packet protection: %s", SecurityText(rt->keys).c_str());
  }
  if (g_users == 0 && g_rt->settings.profile_path.empty() && !g_rt->settings.rate_given) {
    LogWarn(
        "no NCCL_LONGHAUL_PROFILE or NCCL_LONGHAUL_RATE: every peer connection is paced at "
        "the default %s; measure the link with longhaul-tune and set "
        "NCCL_LONGHAUL_PROFILE (docs/nccl.md)",
        FormatBandwidth(g_rt->settings.config.rate).c_str());
  }
  ++g_users;
  if (ctx != nullptr) {
    auto* c = new Context;
    c->comm_id = comm_id;
    c->traffic_class = traffic_class;
    *ctx = c;
  }
  return absl::OkStatus();
}

absl::Status Finalize(void* ctx) {
  std::shared_ptr<Runtime> to_stop;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (ctx != nullptr) {
      auto* c = static_cast<Context*>(ctx);
      if (c->magic != kCtxMagic)
        return absl::InvalidArgumentError("finalize: not a plugin context");
      c->magic = kDeadMagic;
      delete c;
    }
    if (!g_rt || g_users <= 0) return absl::InvalidArgumentError("finalize without init");
    if (--g_users == 0) to_stop = std::move(g_rt);
  }
  if (to_stop) to_stop->Stop();
  return absl::OkStatus();
}

void Shutdown() {
  std::shared_ptr<Runtime> to_stop;
  {
    std::lock_guard<std::mutex> l(g_mu);
    to_stop = std::move(g_rt);
    g_users = 0;
  }
  if (to_stop) to_stop->Stop();
}

bool RuntimeAlive() {
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  return rt && rt->driver_running();
}

absl::StatusOr<int> Devices() {
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("devices: the plugin is not initialized");
  return static_cast<int>(rt->devices.size());
}

absl::StatusOr<DeviceProperties> GetProperties(int dev) {
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("getProperties: the plugin is not initialized");
  if (dev < 0 || dev >= static_cast<int>(rt->devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "getProperties: device ", dev, " does not exist (", rt->devices.size(), " devices)"));
  }
  return rt->devices[dev];
}

absl::Status Listen(void* ctx, int dev, void* handle, void** listen_comm) {
  if (listen_comm == nullptr || handle == nullptr) {
    return absl::InvalidArgumentError("listen: NULL handle or listenComm");
  }
  *listen_comm = nullptr;
  if (ctx != nullptr && static_cast<Context*>(ctx)->magic != kCtxMagic) {
    return absl::InvalidArgumentError("listen: not a plugin context");
  }
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("listen: the plugin is not initialized");
  if (dev < 0 || dev >= static_cast<int>(rt->devices.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen: device ", dev, " does not exist (", rt->devices.size(), " devices)"));
  }
  LH_ASSIGN_OR_RETURN(uint16_t port, rt->ListenPort(dev));
  // Bound to NCCL's communicator where the ABI gives its id (v11+: the context).
  const auto* c = static_cast<const Context*>(ctx);
  absl::StatusOr<std::shared_ptr<ListenState>> added =
      rt->AddListen(dev, c != nullptr, c != nullptr ? c->comm_id : 0);
  if (!added.ok()) {
    return absl::Status(added.status().code(), absl::StrCat("listen: ", added.status().message()));
  }
  std::shared_ptr<ListenState> ls = *std::move(added);
  PluginHandle h;
  h.address = rt->devices[dev].address;
  h.port = port;
  if (!rt->settings.advertise.empty()) {
    // A relay in front of the listener (validated when the settings were read).
    absl::StatusOr<AddressPort> a = ParseAddressPort(rt->settings.advertise);
    if (!a.ok()) {
      rt->RemoveListen(ls->id);
      return a.status();
    }
    h.address = a->address;
    h.port = a->port;
  }
  h.instance = rt->instance;
  h.listen_id = ls->id;
  h.credit = rt->settings.credit;
  if (!rt->keys.security.insecure && rt->keys.security.key) {
    h.public_key = rt->keys.security.key->public_key;
  }
  if (absl::Status s = EncodeHandle(h, handle); !s.ok()) {
    rt->RemoveListen(ls->id);
    return s;
  }
  auto* lc = new ListenComm;
  lc->rt = rt;
  lc->state = ls;
  *listen_comm = lc;
  return absl::OkStatus();
}

absl::Status Connect(void* ctx, int dev, const void* handle, void** send_comm) {
  if (send_comm == nullptr) return absl::InvalidArgumentError("connect: NULL sendComm");
  *send_comm = nullptr;
  if (ctx != nullptr && static_cast<Context*>(ctx)->magic != kCtxMagic) {
    return absl::InvalidArgumentError("connect: not a plugin context");
  }
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("connect: the plugin is not initialized");
  if (dev < 0 || dev >= static_cast<int>(rt->devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat("connect: device ", dev, " does not exist (",
                                                   rt->devices.size(), " devices)"));
  }
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  if (!h.ok()) return absl::InvalidArgumentError(absl::StrCat("connect: ", h.status().message()));
  if (h->credit == 0) return absl::InvalidArgumentError("connect: handle grants no credit");
  LH_RETURN_IF_ERROR(CheckListenerKey(*rt, *h));
  auto state = std::make_shared<SendState>();
  state->credit = h->credit;
  LH_ASSIGN_OR_RETURN(std::shared_ptr<Link> link, rt->ClientLink(*h, state));
  if (state->id == 0) {  // not attached: the link was not ready yet
    const Link::State st = link->state();
    if (st == Link::State::kConnecting || st == Link::State::kReady) {
      return absl::OkStatus();  // NULL comm: NCCL calls again
    }
    return link->status();
  }
  OpenBody body;
  if (ctx != nullptr) {
    body.has_comm_id = true;
    body.comm_id = static_cast<const Context*>(ctx)->comm_id;
  }
  if (absl::Status s = link->SendOpen(state->id, h->listen_id, rt->instance, body); !s.ok()) {
    rt->ReleaseSender(link, state->id);
    return s;
  }
  auto* sc = new SendComm;
  sc->rt = rt;
  sc->link = link;
  sc->state = state;
  for (Request& r : sc->requests) r.comm = sc;
  *send_comm = sc;
  LogInfo("send comm %u to %s (listen %016llx): lane %u, engine %u of %u", state->id,
          link->key().c_str(), static_cast<unsigned long long>(h->listen_id), link->lane(),
          link->engine(), rt->engines());
  return absl::OkStatus();
}

absl::Status Accept(void* listen_comm, void** recv_comm) {
  if (recv_comm == nullptr) return absl::InvalidArgumentError("accept: NULL recvComm");
  *recv_comm = nullptr;
  auto* lc = static_cast<ListenComm*>(listen_comm);
  if (lc == nullptr || lc->magic != kListenMagic) {
    return absl::InvalidArgumentError("accept: not a listen comm");
  }
  ListenState::Pending p;
  {
    std::lock_guard<std::mutex> l(lc->state->mu);
    if (lc->state->pending.empty()) return absl::OkStatus();  // not yet
    p = std::move(lc->state->pending.front());
    lc->state->pending.pop_front();
  }
  auto* rc = new RecvComm;
  rc->rt = lc->rt;
  rc->link = std::move(p.link);
  rc->state = std::move(p.state);
  rc->credit = rc->state->credit;
  rc->offering = rc->rt->zero_copy();
  for (Request& r : rc->requests) r.comm = rc;
  *recv_comm = rc;
  LogInfo("recv comm %u from %s (listen %016llx): engine %u of %u", rc->state->id,
          rc->link->key().c_str(), static_cast<unsigned long long>(lc->state->id),
          rc->link->engine(), rc->rt->engines());
  return absl::OkStatus();
}

absl::Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return absl::InvalidArgumentError("regMr: NULL mhandle");
  *mhandle = nullptr;
  auto* any = static_cast<uint32_t*>(comm);
  if (any == nullptr || (*any != kSendMagic && *any != kRecvMagic)) {
    return absl::InvalidArgumentError("regMr: not a send or recv comm");
  }
  if (type != LH_NCCL_PTR_HOST) {
    return absl::InvalidArgumentError(
        absl::StrCat("regMr: memory type ", type, " is not supported (host memory only)"));
  }
  auto* mr = new MrHandle;
  mr->data = data;
  mr->size = size;
  // Zero copy: the endpoint registers it for the verbs datapath's UC lanes (0: copied).
  const std::shared_ptr<Runtime>& rt = *any == kSendMagic ? static_cast<SendComm*>(comm)->rt
                                                          : static_cast<RecvComm*>(comm)->rt;
  if (size > 0 && data != nullptr) mr->region = rt->RegisterMemory(data, size);
  mr->rt = rt;
  *mhandle = mr;
  return absl::OkStatus();
}

absl::Status DeregMr(void* comm, void* mhandle) {
  auto* mr = static_cast<MrHandle*>(mhandle);
  if (mr == nullptr || mr->magic != kMrMagic) {
    return absl::InvalidArgumentError("deregMr: not a memory handle of this plugin");
  }
  mr->magic = kDeadMagic;
  if (mr->rt) mr->rt->DeregisterMemory(mr->region);
  delete mr;
  return absl::OkStatus();
}

absl::Status CloseSend(void* send_comm) {
  auto* c = static_cast<SendComm*>(send_comm);
  if (c == nullptr || c->magic != kSendMagic) {
    return absl::InvalidArgumentError("closeSend: not a send comm");
  }
  c->magic = kDeadMagic;
  // Messages sent in place are read from NCCL's memory until acknowledged: wait for them
  // (bounded); if they cannot finish, abort the connection so longhaul lets go of them.
  auto in_flight = [c] {
    for (const Request& r : c->requests) {
      if (r.in_place && r.in_place->state.load() == 0) return true;
    }
    return false;
  };
  if (in_flight() && !c->rt->WaitFor([&] { return !in_flight(); }, c->rt->settings.linger)) {
    LogWarn("closeSend: data sent in place not acknowledged within %s; aborting the connection",
            FormatDuration(c->rt->settings.linger).c_str());
    c->link->AbortAndWait("send comm closed with data in flight", Duration::Seconds(10));
  }
  if (c->link->state() == Link::State::kReady) {
    c->link->SendControl(FrameKind::kClose, c->state->id, 0, 0).IgnoreError();
  }
  c->rt->ReleaseSender(c->link, c->state->id);
  delete c;
  return absl::OkStatus();
}

absl::Status CloseRecv(void* recv_comm) {
  auto* c = static_cast<RecvComm*>(recv_comm);
  if (c == nullptr || c->magic != kRecvMagic) {
    return absl::InvalidArgumentError("closeRecv: not a recv comm");
  }
  c->magic = kDeadMagic;
  WithdrawOffers(c);  // before NCCL may free its buffers
  c->link->RemoveReceiver(c->state->id);
  {
    std::lock_guard<std::mutex> l(c->state->mu);
    c->state->queue.clear();
  }
  delete c;
  return absl::OkStatus();
}

absl::Status CloseListen(void* listen_comm) {
  auto* lc = static_cast<ListenComm*>(listen_comm);
  if (lc == nullptr || lc->magic != kListenMagic) {
    return absl::InvalidArgumentError("closeListen: not a listen comm");
  }
  lc->magic = kDeadMagic;
  lc->rt->RemoveListen(lc->state->id);
  std::deque<ListenState::Pending> pending;
  {
    std::lock_guard<std::mutex> l(lc->state->mu);
    lc->state->closed = true;
    pending.swap(lc->state->pending);
  }
  // Connections that arrived but were never accepted: their comms are refused.
  for (ListenState::Pending& p : pending) {
    p.link->RemoveReceiver(p.state->id);
    p.link->SendReject(p.state->id, lc->state->id, RejectReason::kNoListen);
  }
  delete lc;
  return absl::OkStatus();
}

ncclResult_t StatusToNccl(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return ncclSuccess;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      return ncclInternalError;
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return ncclInvalidUsage;
    case absl::StatusCode::kAborted:
      return ncclRemoteError;
    default:
      return ncclSystemError;
  }
}

}  // namespace longhaul::nccl
