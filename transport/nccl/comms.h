// The objects the plugin hands to NCCL as opaque pointers: listen, send and recv comms,
// requests, memory registrations and (v11+) contexts. Each starts with a magic value
// (the first 4 bytes) so that every entry point can tell its own objects from NULL and
// foreign ones (a close sets the magic to kDeadMagic before freeing the object).
//
// Ownership: created by listen/connect/accept/regMr/init and deleted by the matching
// close/deregMr/finalize; each comm owns its kMaxRequests request slots (a request
// pointer stays valid until its comm closes). Comms hold the Runtime and their Link.
//
// Thread-safety: one comm's data calls are serialised by its `mu` (NCCL's progress and
// service threads may call concurrently); the shared parts (SendState, RecvState) are
// described in link.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "transport/nccl/link.h"
#include "transport/nccl/net_plugin.h"
#include "transport/nccl/runtime.h"

namespace longhaul::nccl {

inline constexpr uint32_t kListenMagic = 0x4c484c53;  // "LHLS"
inline constexpr uint32_t kSendMagic = 0x4c485344;    // "LHSD"
inline constexpr uint32_t kRecvMagic = 0x4c485256;    // "LHRV"
inline constexpr uint32_t kRequestMagic = 0x4c485251;
inline constexpr uint32_t kMrMagic = 0x4c484d52;
inline constexpr uint32_t kCtxMagic = 0x4c484358;
inline constexpr uint32_t kDeadMagic = 0xdeadbeef;

// Credit charged per message on top of its bytes, so zero-byte messages are bounded too.
inline constexpr uint64_t kMessageOverhead = 64;

struct Context {
  uint32_t magic = kCtxMagic;
  uint64_t comm_id = 0;
  int traffic_class = -1;
};

struct Request {
  uint32_t magic = kRequestMagic;
  enum class Kind : uint8_t { kFree, kSend, kRecv } kind = Kind::kFree;
  void* comm = nullptr;
  bool done = false;
  absl::Status error;
  size_t send_size = 0;
  std::shared_ptr<ZeroCopyWait> in_place;  // sends above copy_max
  int n = 0;
  int nfilled = 0;
  void* data[kMaxRecvs] = {};
  size_t capacity[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  size_t got[kMaxRecvs] = {};
  bool filled[kMaxRecvs] = {};
  // Placement (n == 1): the key its buffer was offered under (0: not offered or ended),
  // whether its withdrawal was asked for, and whether the request is complete but for
  // that (its message arrived elsewhere and was copied, or it failed: NCCL gets the
  // buffer once no write of the peer can reach it).
  uint64_t offer = 0;
  bool withdrawing = false;
  bool settling = false;
};

struct ListenComm {
  uint32_t magic = kListenMagic;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<ListenState> state;
};

struct SendComm {
  uint32_t magic = kSendMagic;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<Link> link;
  std::shared_ptr<SendState> state;
  std::mutex mu;
  uint64_t sent = 0;  // cumulative credit charged
  uint64_t seq = 0;   // messages sent (OfferKey)
  Request requests[kMaxRequests];
};

struct RecvComm {
  uint32_t magic = kRecvMagic;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<Link> link;
  std::shared_ptr<RecvState> state;
  uint64_t credit = 0;
  std::mutex mu;
  std::deque<Request*> posted;
  uint64_t consumed = 0;  // cumulative
  uint64_t reported = 0;  // cumulative, sent in kCredit frames
  uint64_t seq = 0;       // messages the posted irecvs take (OfferKey of the next one)
  bool offering = false;  // irecv buffers are offered (Runtime::zero_copy)
  Request requests[kMaxRequests];
};

struct MrHandle {
  uint32_t magic = kMrMagic;
  void* data = nullptr;
  size_t size = 0;
  // Zero copy: the endpoint's registration of [data, data + size) (Runtime::
  // RegisterMemory; 0: none, sends from it copy) and the runtime that holds it.
  uint64_t region = 0;
  std::shared_ptr<Runtime> rt;
};

}  // namespace longhaul::nccl
