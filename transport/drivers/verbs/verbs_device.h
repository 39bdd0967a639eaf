// VerbsDevice: an opened RDMA device for the verbs driver: the ibv_context, its
// protection domain, and the port and GID the driver sends from. Open() chooses them
// (docs/rdma.md section 2):
//   - the device by name, or else the one whose port has a RoCE v2 GID carrying the
//     local IPv4 address (any such device when the address is 0.0.0.0);
//   - the port must be ACTIVE; its active MTU bounds every datagram;
//   - the GID index as given, or else the RoCE v2 GID that maps the local IPv4 address
//     (::ffff:a.b.c.d), or the first RoCE v2 IPv4-mapped GID for 0.0.0.0.
// libibverbs errno values are turned into absl::Status here, once.
//
// Ownership: owns the context and the PD (queue pairs, CQs and MRs made from them must
// be destroyed first). Thread-compatible: the driver thread uses it alone.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/datapath/options.h"
#include "transport/drivers/verbs/peer_address.h"

namespace longhaul::verbs {

// Names of the RDMA devices present (ibv_get_device_list), in its order.
std::vector<std::string> ListDeviceNames();

// A failed verbs call as a Status naming what was attempted; ENOMEM and EAGAIN mention
// the memlock limit (ulimit -l), which registered memory and queue pairs count against.
absl::Status VerbsError(int err, const std::string& what);

class VerbsDevice {
 public:
  // `local_ipv4` (network order) is the address the driver sends from, 0 for any.
  // Errors: NotFound (no device, an unknown name: the message lists the present ones,
  // no device for the address), FailedPrecondition (port not ACTIVE, no RoCE v2 GID, a
  // GID index that is not RoCE v2), InvalidArgument (bad port or GID index), and the
  // errors of ibv_open_device / ibv_alloc_pd.
  static absl::StatusOr<std::unique_ptr<VerbsDevice>> Open(const VerbsOptions& options,
                                                           uint32_t local_ipv4);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const Gid& gid() const { return gid_; }
  // The port's active MTU in bytes (the largest UD message).
  uint32_t active_mtu() const { return active_mtu_; }
  uint32_t max_qp_wr() const { return max_qp_wr_; }
  // Scatter/gather entries a work request may carry (ibv_device_attr::max_sge).
  uint32_t max_sge() const { return max_sge_; }
  uint32_t max_cqe() const { return max_cqe_; }
  uint32_t max_inline() const { return 64; }
  // "rxe0 port 1 gid 1 (198.18.1.1, RoCE v2), active MTU 4096"
  std::string Describe() const;

 private:
  VerbsDevice() = default;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  uint8_t port_ = 1;
  int gid_index_ = 0;
  Gid gid_{};
  uint32_t active_mtu_ = 0;
  uint32_t max_qp_wr_ = 0;
  uint32_t max_sge_ = 1;
  uint32_t max_cqe_ = 0;
};

}  // namespace longhaul::verbs
