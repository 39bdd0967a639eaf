// The UC datapath's verbs objects (docs/rdma.md section 7): a lane's protection domain
// (LanePd), its receive ring with one memory window per ring window (UcRing), and a UC
// queue pair that writes chunks with immediate, posts zero-length receives and rebinds the
// ring's windows (UcQueuePair). Where each chunk goes and when a window is rebound is
// uc_lane.h's; these only do what it decides.
//
// Memory windows are type 1, rebound in place by ibv_bind_mw (each bind advances the key's
// low byte, which uc_lane.h's KeyForLap follows): rxe, the testbed's device, cannot
// invalidate a type-2 window from a UC queue pair (its local invalidate is RC-only), and
// a bound type-2 window must be invalidated before it is bound again. A type-1 window is
// reachable from any queue pair of its protection domain, so each lane has its own domain
// holding only its ring and its queue pair: no other connection's queue pair, and so no
// other peer, can write through a lane's keys.
//
// Ownership: LanePd owns its ibv_pd; UcRing its memory, MR and windows; UcQueuePair its
// ibv_qp; the domain must outlive the others, and the queue pair goes before the ring.
// Thread-compatible: one engine thread uses them.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/drivers/verbs/peer_address.h"
#include "transport/drivers/verbs/uc_lane.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

class LanePd {
 public:
  static absl::StatusOr<std::unique_ptr<LanePd>> Create(const VerbsDevice& dev);
  ~LanePd();
  LanePd(const LanePd&) = delete;
  LanePd& operator=(const LanePd&) = delete;
  ibv_pd* pd() const { return pd_; }

 private:
  LanePd() = default;
  ibv_pd* pd_ = nullptr;
};

class UcRing {
 public:
  // Allocates and registers g.ring_bytes() in `pd` (local and remote write, MW bind) and
  // one type-1 memory window per window of `g` (unbound: PostBind binds them). Errors:
  // InvalidArgument (geometry), FailedPrecondition "<device> has no memory windows" when
  // the device cannot allocate them, ibv_reg_mr's refusal naming the memlock limit.
  static absl::StatusOr<std::unique_ptr<UcRing>> Create(const VerbsDevice& dev, ibv_pd* pd,
                                                        UcRingGeometry g);
  ~UcRing();
  UcRing(const UcRing&) = delete;
  UcRing& operator=(const UcRing&) = delete;

  const UcRingGeometry& geometry() const { return g_; }
  uint8_t* base() const { return mem_.get(); }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(mem_.get()); }
  ibv_mr* mr() const { return mr_; }
  ibv_mw* window(uint32_t w) const { return mws_[w]; }
  // The window's rkey as last bound.
  uint32_t window_key(uint32_t w) const { return mws_[w]->rkey; }
  // Its key for lap 0 (what the sender is told), once bound for lap 0.
  uint32_t lap0_key(uint32_t w) const { return lap0_keys_[w]; }

 private:
  UcRing() = default;
  UcRingGeometry g_;
  std::unique_ptr<uint8_t[]> mem_;
  ibv_mr* mr_ = nullptr;
  std::vector<ibv_mw*> mws_;
  std::vector<uint32_t> lap0_keys_;
  friend class UcQueuePair;
};

struct UcPeer {
  Gid gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the peer's first send PSN
};

// Gather entries a chunk may need: the datagram's own bytes around up to four payloads
// sent from the application's memory (wire::kMaxDeferredPayloads; docs/rdma.md 7.14).
inline constexpr uint32_t kMaxGather = 9;

class UcQueuePair {
 public:
  // A UC queue pair in `pd` on `dev`'s port, in INIT with remote write allowed. Errors:
  // the refused call (ibv_create_qp: "UC queue pairs" named, for devices without them).
  static absl::StatusOr<std::unique_ptr<UcQueuePair>> Create(const VerbsDevice& dev, ibv_pd* pd,
                                                             ibv_cq* send_cq, ibv_cq* recv_cq,
                                                             uint32_t send_depth,
                                                             uint32_t recv_depth);
  ~UcQueuePair();
  UcQueuePair(const UcQueuePair&) = delete;
  UcQueuePair& operator=(const UcQueuePair&) = delete;

  uint32_t qpn() const { return qp_->qp_num; }
  uint32_t send_psn() const { return psn_; }
  ibv_qp* qp() const { return qp_; }

  // INIT -> RTR (to `peer` over RoCE v2 from the device's GID, path MTU = active MTU)
  // -> RTS. Errors name the transition.
  absl::Status Connect(const VerbsDevice& dev, const UcPeer& peer);

  // Posts `n` zero-length receives (what each write with immediate consumes).
  absl::Status PostReceives(uint32_t n, uint64_t wr_id);

  // RDMA WRITE WITH IMMEDIATE of [local, local + len) (registered under `lkey`) to
  // `remote_addr` through `rkey`.
  absl::Status PostWrite(const uint8_t* local, uint32_t len, uint32_t lkey, uint64_t remote_addr,
                         uint32_t rkey, uint32_t immediate, uint64_t wr_id, bool signaled);

  // The same chunk as single-packet writes of `piece` bytes (the path MTU or less), in
  // one post list: RDMA WRITEs, the last one WITH IMMEDIATE (`immediate` with its pieces
  // field set) and, when `signaled`, the only one signalled. At most kMaxPieces pieces
  // (InvalidArgument otherwise). Returns the work requests posted through `wrs`.
  absl::Status PostPieces(const uint8_t* local, uint32_t len, uint32_t piece, uint32_t lkey,
                          uint64_t remote_addr, uint32_t rkey, uint32_t immediate,
                          uint64_t wr_id, bool signaled, uint32_t* wrs);
  // The same, gathered: the chunk's `len` bytes are the concatenation of `gather` (at
  // most kMaxGather entries and max_send_sge(): InvalidArgument otherwise; zero copy,
  // docs/rdma.md 7.14), each piece carrying the entries' parts it covers.
  absl::Status PostPieces(std::span<const ibv_sge> gather, uint32_t len, uint32_t piece,
                          uint64_t remote_addr, uint32_t rkey, uint32_t immediate,
                          uint64_t wr_id, bool signaled, uint32_t* wrs);
  // A chunk written to several places (receive-side placement, docs/rdma.md 7.15): each
  // segment's `len` bytes, gathered from `areas`, go to [remote_addr, remote_addr + len)
  // through `rkey`, cut into single-packet RDMA WRITEs of `piece` bytes, all in one post
  // list; the last write of the last segment is WITH IMMEDIATE (`immediate` as given) and,
  // when `signaled`, the only one signalled. InvalidArgument when a segment is more than
  // kMaxPieces pieces, its areas hold fewer bytes or need more gather entries than the
  // queue pair takes, or there are more than kMaxSegments segments.
  struct Segment {
    std::span<const GatherPart> areas;
    uint32_t len = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
  };
  static constexpr uint32_t kMaxSegments = 4;
  absl::Status PostSegments(std::span<const Segment> segments, uint32_t piece,
                            uint32_t immediate, uint64_t wr_id, bool signaled, uint32_t* wrs);
  // Gather entries per work request this queue pair takes (min(kMaxGather, the device's)).
  uint32_t max_send_sge() const { return max_send_sge_; }

  // RESET -> INIT again (posted work requests are dropped without completions), ready for
  // Connect to another peer QP (a lane whose writer was replaced). Errors name the step.
  absl::Status Reset(const VerbsDevice& dev);

  // Moves the queue pair to the error state: its outstanding work requests complete with
  // flush errors (a lane being taken out; also a test mode's injected fault).
  absl::Status ForceError();

  // Binds `ring`'s window `w` for `lap` (its first bind is lap 0, every later one the next
  // lap), signalled with `wr_id`; the window's previous key stops working when the bind
  // executes. Internal error if the device's new key is not KeyForLap(lap-0 key, lap).
  absl::Status PostBind(UcRing& ring, uint32_t w, uint64_t lap, uint64_t wr_id);
  // Binds type-1 window `mw` over [addr, addr + len) of `mr` for remote write, or, with
  // `len` 0, to nothing; signalled with `wr_id`. Returns the window's new key (each bind
  // advances its low byte; the old key stops working when it executes).
  absl::StatusOr<uint32_t> BindWindow(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len,
                                      uint64_t wr_id);

 private:
  UcQueuePair() = default;
  absl::Status ToInit(const VerbsDevice& dev);
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint32_t max_send_sge_ = 1;
};

}  // namespace longhaul::verbs
