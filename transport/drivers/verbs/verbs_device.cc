#include "transport/drivers/verbs/verbs_device.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/ibverbs.h"

namespace longhaul::verbs {
namespace {

uint32_t MtuBytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 256;
}

const char* PortStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP:
      return "NOP";
    case IBV_PORT_DOWN:
      return "DOWN";
    case IBV_PORT_INIT:
      return "INIT";
    case IBV_PORT_ARMED:
      return "ARMED";
    case IBV_PORT_ACTIVE:
      return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "ACTIVE_DEFER";
  }
  return "?";
}

std::string Ipv4Text(uint32_t ipv4) {
  char t[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &ipv4, t, sizeof(t));
  return t;
}

struct DeviceList {
  DeviceList() { list = Ibverbs().get_device_list(&n); }
  ~DeviceList() {
    if (list != nullptr) Ibverbs().free_device_list(list);
  }
  ibv_device** list = nullptr;
  int n = 0;
};

// The RoCE v2 IPv4-mapped GID entries of a port.
struct RoceGid {
  int index;
  Gid gid;
  uint32_t ipv4;
};
std::vector<RoceGid> RoceV2Ipv4Gids(ibv_context* ctx, uint8_t port, int table_len) {
  std::vector<RoceGid> out;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry e{};
    if (QueryGidEx(ctx, port, i, &e) != 0) continue;
    if (e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    Gid g;
    std::memcpy(g.data(), e.gid.raw, 16);
    uint32_t v4;
    if (!GidToIpv4(g, &v4)) continue;
    out.push_back({i, g, v4});
  }
  return out;
}

std::string PresentList(const DeviceList& dl) {
  std::vector<std::string> names;
  for (int i = 0; i < dl.n; ++i) names.push_back(Ibverbs().get_device_name(dl.list[i]));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

std::vector<std::string> ListDeviceNames() {
  if (!LoadIbverbs().ok()) return {};
  DeviceList dl;
  std::vector<std::string> out;
  for (int i = 0; i < dl.n; ++i) out.push_back(Ibverbs().get_device_name(dl.list[i]));
  return out;
}

absl::Status VerbsError(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOMEM || err == EAGAIN) {
    absl::StrAppend(&msg,
                    " (registered memory and queue pairs count against the locked-memory "
                    "limit: raise it with 'ulimit -l unlimited' or memlock in "
                    "/etc/security/limits.conf)");
    return absl::ResourceExhaustedError(msg);
  }
  if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
  return absl::UnavailableError(msg);
}

absl::StatusOr<std::unique_ptr<VerbsDevice>> VerbsDevice::Open(const VerbsOptions& o,
                                                               uint32_t local_ipv4) {
  if (o.port == 0) return absl::InvalidArgumentError("verbs port must be >= 1");
  LH_RETURN_IF_ERROR(LoadIbverbs().status());
  DeviceList dl;
  if (dl.list == nullptr || dl.n == 0) {
    return absl::NotFoundError(absl::StrCat(
        o.device.empty() ? std::string("no RDMA device found")
                         : absl::StrCat("RDMA device '", o.device, "' not found; present: none"),
        " (ibv_get_device_list lists none: no NIC driver loaded; for "
        "soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0)"));
  }
  std::unique_ptr<VerbsDevice> d(new VerbsDevice());
  ibv_device* chosen = nullptr;
  if (!o.device.empty()) {
    for (int i = 0; i < dl.n; ++i) {
      if (o.device == Ibverbs().get_device_name(dl.list[i])) chosen = dl.list[i];
    }
    if (chosen == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("RDMA device '", o.device, "' not found; present: ", PresentList(dl)));
    }
  }
  // Without a name: the first device whose port carries the address as a RoCE v2 GID.
  for (int i = 0; i < dl.n; ++i) {
    ibv_device* dev = chosen != nullptr ? chosen : dl.list[i];
    ibv_context* ctx = Ibverbs().open_device(dev);
    if (ctx == nullptr) {
      if (chosen != nullptr) {
        return VerbsError(errno, absl::StrCat("ibv_open_device(", o.device, ")"));
      }
      continue;
    }
    ibv_port_attr pa{};
    if (QueryPort(ctx, o.port, &pa) != 0) {
      Ibverbs().close_device(ctx);
      if (chosen != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(o.device, " has no port ", static_cast<int>(o.port)));
      }
      continue;
    }
    std::vector<RoceGid> gids = RoceV2Ipv4Gids(ctx, o.port, pa.gid_tbl_len);
    int index = -1;
    Gid gid{};
    if (o.gid_index >= 0) {
      ibv_gid_entry e{};
      if (o.gid_index >= pa.gid_tbl_len || QueryGidEx(ctx, o.port, o.gid_index, &e) != 0) {
        Ibverbs().close_device(ctx);
        return absl::InvalidArgumentError(
            absl::StrCat(Ibverbs().get_device_name(dev), " port ", static_cast<int>(o.port),
                         " has no GID index ", o.gid_index, " (table of ", pa.gid_tbl_len, ")"));
      }
      if (e.gid_type != IBV_GID_TYPE_ROCE_V2) {
        Ibverbs().close_device(ctx);
        return absl::FailedPreconditionError(
            absl::StrCat(Ibverbs().get_device_name(dev), " GID index ", o.gid_index,
                         " is not a RoCE v2 GID (longhaul sends RoCE v2 UD datagrams)"));
      }
      index = o.gid_index;
      std::memcpy(gid.data(), e.gid.raw, 16);
    } else {
      for (const RoceGid& g : gids) {
        if (local_ipv4 == 0 || g.ipv4 == local_ipv4) {
          index = g.index;
          gid = g.gid;
          break;
        }
      }
    }
    if (index < 0) {
      const std::string name = Ibverbs().get_device_name(dev);
      Ibverbs().close_device(ctx);
      if (chosen == nullptr) continue;
      if (gids.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            name, " port ", static_cast<int>(o.port),
            " has no RoCE v2 GID with an IPv4 address (is its netdev up with an address?)"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat(name, " port ", static_cast<int>(o.port), " has no RoCE v2 GID for ",
                       Ipv4Text(local_ipv4), "; give --gid_index"));
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      const std::string name = Ibverbs().get_device_name(dev);
      Ibverbs().close_device(ctx);
      return absl::FailedPreconditionError(absl::StrCat(name, " port ", static_cast<int>(o.port),
                                                        " is ", PortStateName(pa.state),
                                                        ", not ACTIVE"));
    }
    ibv_device_attr da{};
    if (Ibverbs().query_device(ctx, &da) != 0) {
      const int e = errno;
      Ibverbs().close_device(ctx);
      return VerbsError(e, "ibv_query_device");
    }
    d->ctx_ = ctx;
    d->name_ = Ibverbs().get_device_name(dev);
    d->port_ = o.port;
    d->gid_index_ = index;
    d->gid_ = gid;
    d->active_mtu_ = MtuBytes(pa.active_mtu);
    d->max_qp_wr_ = static_cast<uint32_t>(da.max_qp_wr);
    d->max_sge_ = static_cast<uint32_t>(std::max(da.max_sge, 1));
    d->max_cqe_ = static_cast<uint32_t>(da.max_cqe);
    d->pd_ = Ibverbs().alloc_pd(ctx);
    if (d->pd_ == nullptr) return VerbsError(errno, absl::StrCat("ibv_alloc_pd(", d->name_, ")"));
    return d;
  }
  return absl::NotFoundError(
      absl::StrCat("no RDMA device has a RoCE v2 GID for ",
                   local_ipv4 == 0 ? "an IPv4 address" : Ipv4Text(local_ipv4),
                   "; present: ", PresentList(dl), " (name one with --device)"));
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) Ibverbs().dealloc_pd(pd_);
  if (ctx_ != nullptr) Ibverbs().close_device(ctx_);
}

std::string VerbsDevice::Describe() const {
  return absl::StrCat(name_, " port ", static_cast<int>(port_), " gid ", gid_index_, " (",
                      FormatGid(gid_), ", RoCE v2), active MTU ", active_mtu_);
}

}  // namespace longhaul::verbs
