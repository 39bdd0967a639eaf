// longhaul's NCCL net plugin, in C++: the operations behind the ncclNetPlugin_v8..v12
// tables (exports.cc adapts each ABI version onto these and converts absl::Status to
// ncclResult_t once, in StatusToNccl).
//
// Model (docs/nccl.md has the reasoning):
// - One process-wide runtime, reference-counted by Init/Finalize (one Init per NCCL
//   communicator for v11+), owns one longhaul Endpoint (one driver thread, created at the
//   first listen or connect) and is torn down (driver thread joined) by the last
//   Finalize, or when the library is unloaded.
// - Devices are network interfaces (NCCL_LONGHAUL_IFNAME, else NCCL_SOCKET_IFNAME; the
//   default is the first interface that is up and not loopback, else loopback). Each
//   device listens on one UDP port for every listen comm.
// - Comms are multiplexed: all send comms from this process to one remote plugin
//   instance share one longhaul connection (one handshake, one pacer, one FEC stream and
//   one congestion state per peer pair and direction). Each NCCL send is one longhaul
//   message: a 32-byte frame header (comm, tag, size) and the payload.
// - No round trip per message: a receiver grants `credit` bytes per comm ahead of time
//   (carried in the handle). The sender copies each message into a staging buffer,
//   sends it at once and completes the request; it returns a NULL request only when the
//   comm's unconsumed bytes would exceed the credit. The receiver buffers messages that
//   arrive before their irecv (at most `credit` bytes per comm: it ends a comm whose
//   sender goes beyond), copies them into the posted buffers and returns credit as they
//   are consumed.
// - A listen comm is named by a random 64-bit id and bound to NCCL's comm id (v11+) and
//   to the first peer that opens it; OPENs that do not fit are refused (link.h,
//   docs/nccl.md section 5).
//
// Thread-safety: every function may be called from any thread (NCCL's service and
// progress threads run at the same time); one comm's data calls are serialised by the
// comm. Pointers are validated by a magic value; NULL and foreign objects give
// InvalidArgument.
//
// Files (docs/nccl.md, section 3):
//   net_plugin.cc    these operations' setup half (init .. accept, regMr, closes) and
//                    StatusToNccl; data_path.cc the data path (isend, irecv, test)
//   comms.h          the objects handed to NCCL (comms, requests, registrations)
//   runtime.h        the process-wide runtime: endpoint, connections, listen comms
//   link.h           one longhaul connection and its frame routing (driver thread)
//   frames.h         the frame header inside longhaul messages
//   buffer_pool.h    staging buffers of copied sends
//   settings.h       the NCCL_LONGHAUL_* table, parsing and the docs' list
//   devices.h        interfaces -> devices
//   plugin_log.h     NCCL's logger
//   plugin_handle.h  the 128-byte connection handle
//   exports.cc       the ncclNetPlugin_v8..v12 tables (adapters onto this header)
//
// Errors (absl::Status, mapped by StatusToNccl): InvalidArgument (bad device, comm,
// request or handle: NCCL misused the plugin), ResourceExhausted (more than 32 requests
// in flight on a comm), OutOfRange (a message larger than the posted receive),
// FailedPrecondition (bad configuration: environment or profile), Aborted (the peer
// closed or the connection failed), Unavailable / Internal (network and system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/nccl/nccl_net_abi.h"
#include "transport/nccl/plugin_log.h"

namespace longhaul::nccl {

inline constexpr int kMaxRequests = LH_NCCL_NET_MAX_REQUESTS;  // per comm
inline constexpr int kMaxRecvs = 8;  // buffers an irecv accepts (a grouped receive)
// What getProperties advertises as maxRecvs: 1, so that NCCL never groups receives. NCCL
// groups the receives of several connections that share one recvComm (shared comms, on
// only when maxRecvs > 1: src/transport/net.cc, sendProxyConnect/recvProxyConnect), and
// their senders interleave freely (a sender's step k+1 may go before another sender's
// step k). NCCL's IB transport makes a sender wait until the receiver's group for the
// step is posted; this plugin's sends go eagerly (no round trip per message), so the
// receiver would see messages for a later group first. With maxRecvs 1 every
// connection has its own comm (they still share one longhaul connection per peer).
inline constexpr int kAdvertisedMaxRecvs = 1;
inline constexpr size_t kMaxP2pBytes = LH_NCCL_MAX_NET_SIZE;  // 1 GiB per message
inline constexpr int kMaxComms = 65536;

// What getProperties reports for a device.
struct DeviceProperties {
  std::string name;      // interface name
  std::string address;   // numeric address the device listens on
  std::string pci_path;  // realpath of /sys/class/net/<if>/device; empty: virtual
  int speed_mbps = 0;
  float latency_us = 0;  // one-way: the profile's RTT / 2; 0 when no profile gives one
  uint64_t guid = 0;
};

// Counts one user (communicator) of the runtime, creating it (reading the environment,
// the profile and the interfaces) for the first. `ctx` (may be NULL) receives a context
// to pass to Listen/Connect/Finalize.
absl::Status Init(uint64_t comm_id, int traffic_class, void** ctx);
// Drops the user of `ctx` (NULL: an Init without context). The last one stops the
// driver thread after waiting (at most NCCL_LONGHAUL_LINGER, default 5s) for data in
// flight to be acknowledged.
absl::Status Finalize(void* ctx);
// Tears the runtime down whatever the count (library unload). Idempotent.
void Shutdown();
// Whether a runtime exists and, if so, whether its driver thread runs (tests).
bool RuntimeAlive();

absl::StatusOr<int> Devices();
absl::StatusOr<DeviceProperties> GetProperties(int dev);

absl::Status Listen(void* ctx, int dev, void* handle, void** listen_comm);
// Non-blocking: *send_comm stays NULL until the connection is established; call again
// with the same handle.
absl::Status Connect(void* ctx, int dev, const void* handle, void** send_comm);
// Non-blocking: *recv_comm stays NULL until a peer connected to this listen comm.
absl::Status Accept(void* listen_comm, void** recv_comm);

absl::Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
absl::Status DeregMr(void* comm, void* mhandle);

// *request = NULL (and OK) means "not now" (credit exhausted): call again later.
// `mhandle`: regMr's handle of the memory (may be NULL): an in-place send from it names
// its registration (zero copy, docs/nccl.md section 3, "Zero copy").
absl::Status Isend(void* send_comm, const void* data, size_t size, int tag, void* mhandle,
                   void** request);
// n in [1, kMaxRecvs]; sizes are maxima. Matching is in order: messages fill the oldest
// irecv, each the first unfilled buffer of that irecv whose tag matches (n == 1: any tag).
absl::Status Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** request);
// Completes a request: *done = 1 and sizes[i] (if sizes != NULL) = bytes received into
// buffer i (a send: sizes[0] = bytes sent). The request is then free again. Errors end
// the request as well.
absl::Status Test(void* request, int* done, int* sizes);
// closeRecv's first step: the comm's irecv buffers still offered to the connection
// (placement) are withdrawn, waiting (at most 10 s) until no write of the peer can
// reach them.
struct RecvComm;
void WithdrawOffers(RecvComm* c);

absl::Status CloseSend(void* send_comm);
absl::Status CloseRecv(void* recv_comm);
absl::Status CloseListen(void* listen_comm);

// The ncclResult_t of a status (the one place foreign error codes are produced).
ncclResult_t StatusToNccl(const absl::Status& s);

}  // namespace longhaul::nccl
