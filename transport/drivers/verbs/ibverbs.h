// rdma-core's libibverbs, loaded at run time (dlopen) rather than linked: a binary with
// the verbs datapath (longhaul-perf, the NCCL plugin) then starts on a machine without
// rdma-core and uses UDP there; choosing verbs on it fails with an error naming the
// library. The host's own libibverbs is the one that matches its RDMA providers.
//
// Ibverbs() holds the exported entry points the verbs driver calls; the fast-path calls
// (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are inline functions of
// <infiniband/verbs.h> that go through the device context's own table and need nothing
// from here. Thread-safe: loaded once, never unloaded.
#pragma once

#include <infiniband/verbs.h>

#include "absl/status/statusor.h"

namespace longhaul::verbs {

struct IbverbsApi {
  decltype(&::ibv_get_device_list) get_device_list;
  decltype(&::ibv_free_device_list) free_device_list;
  decltype(&::ibv_get_device_name) get_device_name;
  decltype(&::ibv_open_device) open_device;
  decltype(&::ibv_close_device) close_device;
  decltype(&::ibv_query_device) query_device;
  decltype(&::ibv_query_port) query_port;  // the old layout; QueryPort below chooses
  decltype(&::_ibv_query_gid_ex) query_gid_ex;  // ibv_query_gid_ex's exported body
  decltype(&::ibv_alloc_pd) alloc_pd;
  decltype(&::ibv_dealloc_pd) dealloc_pd;
  decltype(&::ibv_reg_mr) reg_mr;
  decltype(&::ibv_dereg_mr) dereg_mr;
  decltype(&::ibv_create_comp_channel) create_comp_channel;
  decltype(&::ibv_destroy_comp_channel) destroy_comp_channel;
  decltype(&::ibv_create_cq) create_cq;
  decltype(&::ibv_destroy_cq) destroy_cq;
  decltype(&::ibv_get_cq_event) get_cq_event;
  decltype(&::ibv_ack_cq_events) ack_cq_events;
  decltype(&::ibv_create_qp) create_qp;
  decltype(&::ibv_modify_qp) modify_qp;
  decltype(&::ibv_destroy_qp) destroy_qp;
  decltype(&::ibv_create_ah) create_ah;
  decltype(&::ibv_destroy_ah) destroy_ah;
  decltype(&::ibv_wc_status_str) wc_status_str;
};

// Loads libibverbs.so.1 on the first call. FailedPrecondition when it cannot be loaded
// or lacks an entry point: "the verbs datapath needs rdma-core's libibverbs.so.1: <why>
// (Debian: apt-get install libibverbs1 ibverbs-providers)".
absl::StatusOr<const IbverbsApi*> LoadIbverbs();

// The loaded entry points; only after LoadIbverbs() has succeeded (checked: aborts
// otherwise, a programming error).
const IbverbsApi& Ibverbs();

// ibv_query_gid_ex through the loaded library (the header's inline wrapper).
inline int QueryGidEx(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry) {
  return Ibverbs().query_gid_ex(ctx, port, index, entry, 0, sizeof(*entry));
}

// ibv_query_port through the loaded library: the device's extended entry point where it
// has one, the exported one otherwise (what the header's inline wrapper does).
inline int QueryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  if (verbs_context* v = verbs_get_ctx_op(ctx, query_port); v != nullptr) {
    return v->query_port(ctx, port, attr, sizeof(*attr));
  }
  *attr = ibv_port_attr{};
  return Ibverbs().query_port(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace longhaul::verbs
