#include "transport/drivers/verbs/uc_queue_pair.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/ibverbs.h"

namespace longhaul::verbs {

absl::StatusOr<std::unique_ptr<LanePd>> LanePd::Create(const VerbsDevice& dev) {
  std::unique_ptr<LanePd> p(new LanePd());
  p->pd_ = Ibverbs().alloc_pd(dev.context());
  if (p->pd_ == nullptr) return VerbsError(errno, "ibv_alloc_pd (a UC lane's domain)");
  return p;
}

LanePd::~LanePd() {
  if (pd_ != nullptr) Ibverbs().dealloc_pd(pd_);
}

absl::StatusOr<std::unique_ptr<UcRing>> UcRing::Create(const VerbsDevice& dev, ibv_pd* pd,
                                                       UcRingGeometry g) {
  LH_RETURN_IF_ERROR(g.Validate());
  std::unique_ptr<UcRing> r(new UcRing());
  r->g_ = g;
  r->mem_.reset(new (std::nothrow) uint8_t[g.ring_bytes()]);
  if (!r->mem_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("UC ring: no memory for ", g.ring_bytes(), " bytes"));
  }
  std::memset(r->mem_.get(), 0, g.ring_bytes());
  r->mr_ = Ibverbs().reg_mr(pd, r->mem_.get(), g.ring_bytes(),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
  if (r->mr_ == nullptr) {
    return VerbsError(errno, absl::StrCat("ibv_reg_mr of a ", g.ring_bytes(), "-byte UC ring"));
  }
  for (uint32_t w = 0; w < g.windows; ++w) {
    ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
    if (mw == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          dev.name(), " has no memory windows (ibv_alloc_mw: ", std::strerror(errno),
          "); the UC datapath needs them (use qp_type=ud)"));
    }
    r->mws_.push_back(mw);
  }
  r->lap0_keys_.assign(g.windows, 0);
  return r;
}

UcRing::~UcRing() {
  for (ibv_mw* mw : mws_) ibv_dealloc_mw(mw);
  if (mr_ != nullptr) Ibverbs().dereg_mr(mr_);
}

absl::StatusOr<std::unique_ptr<UcQueuePair>> UcQueuePair::Create(const VerbsDevice& dev,
                                                                 ibv_pd* pd, ibv_cq* send_cq,
                                                                 ibv_cq* recv_cq,
                                                                 uint32_t send_depth,
                                                                 uint32_t recv_depth) {
  std::unique_ptr<UcQueuePair> q(new UcQueuePair());
  ibv_qp_init_attr ia{};
  ia.send_cq = send_cq;
  ia.recv_cq = recv_cq;
  ia.qp_type = IBV_QPT_UC;
  ia.cap.max_send_wr = send_depth;
  ia.cap.max_recv_wr = recv_depth;
  q->max_send_sge_ = std::clamp<uint32_t>(dev.max_sge(), 1, kMaxGather);
  ia.cap.max_send_sge = q->max_send_sge_;
  ia.cap.max_recv_sge = 1;
  q->qp_ = Ibverbs().create_qp(pd, &ia);
  if (q->qp_ == nullptr) {
    return VerbsError(errno, absl::StrCat("ibv_create_qp (UC queue pairs, ", send_depth,
                                          " send and ", recv_depth, " receive work requests)"));
  }
  LH_RETURN_IF_ERROR(q->ToInit(dev));
  std::random_device rd;
  q->psn_ = rd() & 0xffffff;
  return q;
}

absl::Status UcQueuePair::ToInit(const VerbsDevice& dev) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = dev.port();
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  const int err = Ibverbs().modify_qp(
      qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (err != 0) return VerbsError(err, "ibv_modify_qp (UC to INIT)");
  return absl::OkStatus();
}

absl::Status UcQueuePair::Reset(const VerbsDevice& dev) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  const int err = Ibverbs().modify_qp(qp_, &a, IBV_QP_STATE);
  if (err != 0) return VerbsError(err, "ibv_modify_qp (UC to RESET)");
  return ToInit(dev);
}

UcQueuePair::~UcQueuePair() {
  if (qp_ != nullptr) Ibverbs().destroy_qp(qp_);
}

namespace {

ibv_mtu MtuEnum(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

}  // namespace

absl::Status UcQueuePair::Connect(const VerbsDevice& dev, const UcPeer& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = MtuEnum(dev.active_mtu());
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn & 0xffffff;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid.data(), 16);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev.gid_index());
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = dev.port();
  int err = Ibverbs().modify_qp(qp_, &a,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN);
  if (err != 0) return VerbsError(err, "ibv_modify_qp (UC to RTR)");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn_;
  err = Ibverbs().modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (err != 0) return VerbsError(err, "ibv_modify_qp (UC to RTS)");
  return absl::OkStatus();
}

absl::Status UcQueuePair::PostReceives(uint32_t n, uint64_t wr_id) {
  if (n == 0) return absl::OkStatus();
  std::vector<ibv_recv_wr> wrs(n);
  for (uint32_t i = 0; i < n; ++i) {
    wrs[i].wr_id = wr_id;
    wrs[i].sg_list = nullptr;
    wrs[i].num_sge = 0;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  const int err = ibv_post_recv(qp_, wrs.data(), &bad);
  if (err != 0) return VerbsError(err, absl::StrCat("ibv_post_recv (", n, " UC receives)"));
  return absl::OkStatus();
}

absl::Status UcQueuePair::PostWrite(const uint8_t* local, uint32_t len, uint32_t lkey,
                                    uint64_t remote_addr, uint32_t rkey, uint32_t immediate,
                                    uint64_t wr_id, bool signaled) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(local);
  sge.length = len;
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.imm_data = htobe32(immediate);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  const int err = ibv_post_send(qp_, &wr, &bad);
  if (err != 0) return VerbsError(err, "ibv_post_send (UC write with immediate)");
  return absl::OkStatus();
}

absl::Status UcQueuePair::PostPieces(const uint8_t* local, uint32_t len, uint32_t piece,
                                     uint32_t lkey, uint64_t remote_addr, uint32_t rkey,
                                     uint32_t immediate, uint64_t wr_id, bool signaled,
                                     uint32_t* wrs) {
  const ibv_sge whole{reinterpret_cast<uintptr_t>(local), len, lkey};
  return PostPieces(std::span<const ibv_sge>(&whole, 1), len, piece, remote_addr, rkey,
                    immediate, wr_id, signaled, wrs);
}

absl::Status UcQueuePair::PostPieces(std::span<const ibv_sge> gather, uint32_t len,
                                     uint32_t piece, uint64_t remote_addr, uint32_t rkey,
                                     uint32_t immediate, uint64_t wr_id, bool signaled,
                                     uint32_t* wrs) {
  const uint32_t n = len == 0 || piece == 0 ? 1 : (len + piece - 1) / piece;
  if (n > kMaxPieces) {
    return absl::InvalidArgumentError(
        absl::StrCat("UC chunk of ", len, " bytes is more than ", kMaxPieces, " pieces of ", piece));
  }
  if (gather.size() > max_send_sge_) {
    return absl::InvalidArgumentError(absl::StrCat("UC chunk gathered from ", gather.size(),
                                                   " entries; the queue pair takes ",
                                                   max_send_sge_));
  }
  GatherPart areas[kMaxGather];
  for (size_t i = 0; i < gather.size(); ++i) {
    areas[i] = GatherPart{gather[i].addr, gather[i].length, gather[i].lkey};
  }
  GatherPart parts[kMaxPieces + kMaxGather];
  std::array<uint32_t, kMaxPieces> per_piece{};
  if (SplitGather(std::span<const GatherPart>(areas, gather.size()), len, piece, parts,
                  per_piece) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("UC chunk of ", len, " bytes gathered from fewer bytes"));
  }
  ibv_sge sges[kMaxPieces + kMaxGather];
  ibv_send_wr ws[kMaxPieces];
  uint32_t next_sge = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t off = i * piece;
    ibv_sge* first = &sges[next_sge];
    for (uint32_t k = 0; k < per_piece[i]; ++k, ++next_sge) {
      sges[next_sge] = ibv_sge{parts[next_sge].addr, parts[next_sge].length, parts[next_sge].key};
    }
    ws[i] = ibv_send_wr{};
    ws[i].wr_id = wr_id;
    ws[i].sg_list = first;
    ws[i].num_sge = static_cast<int>(per_piece[i]);
    ws[i].opcode = i + 1 < n ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
    ws[i].send_flags = i + 1 == n && signaled ? IBV_SEND_SIGNALED : 0;
    ws[i].wr.rdma.remote_addr = remote_addr + off;
    ws[i].wr.rdma.rkey = rkey;
    ws[i].next = i + 1 < n ? &ws[i + 1] : nullptr;
  }
  ws[n - 1].imm_data = htobe32(WithPieces(immediate, n));
  ibv_send_wr* bad = nullptr;
  const int err = ibv_post_send(qp_, ws, &bad);
  if (err != 0) return VerbsError(err, "ibv_post_send (UC chunk in single-packet writes)");
  *wrs = n;
  return absl::OkStatus();
}

absl::Status UcQueuePair::PostSegments(std::span<const Segment> segments, uint32_t piece,
                                       uint32_t immediate, uint64_t wr_id, bool signaled,
                                       uint32_t* wrs) {
  if (segments.empty() || segments.size() > kMaxSegments || piece == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("UC chunk in ", segments.size(), " segments (1 to ", kMaxSegments, ")"));
  }
  constexpr uint32_t kMaxWrs = kMaxSegments * kMaxPieces;
  GatherPart parts[kMaxWrs + kMaxSegments * kMaxGather];
  ibv_sge sges[kMaxWrs + kMaxSegments * kMaxGather];
  ibv_send_wr ws[kMaxWrs];
  uint32_t n = 0, next_part = 0;
  for (const Segment& seg : segments) {
    if (seg.areas.size() > max_send_sge_) {
      return absl::InvalidArgumentError(absl::StrCat("UC chunk segment gathered from ",
                                                     seg.areas.size(), " entries; the queue pair takes ",
                                                     max_send_sge_));
    }
    std::array<uint32_t, kMaxPieces> per_piece{};
    const uint32_t k = SplitGather(
        seg.areas, seg.len, piece,
        std::span<GatherPart>(parts + next_part, kMaxPieces + kMaxGather), per_piece);
    if (k == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "UC chunk segment of ", seg.len, " bytes: more than ", kMaxPieces,
          " pieces of ", piece, " or gathered from fewer bytes"));
    }
    for (uint32_t i = 0; i < k; ++i, ++n) {
      ibv_sge* first = &sges[next_part];
      for (uint32_t p = 0; p < per_piece[i]; ++p, ++next_part) {
        sges[next_part] = ibv_sge{parts[next_part].addr, parts[next_part].length, parts[next_part].key};
      }
      ws[n] = ibv_send_wr{};
      ws[n].wr_id = wr_id;
      ws[n].sg_list = first;
      ws[n].num_sge = static_cast<int>(per_piece[i]);
      ws[n].opcode = IBV_WR_RDMA_WRITE;
      ws[n].wr.rdma.remote_addr = seg.remote_addr + uint64_t{i} * piece;
      ws[n].wr.rdma.rkey = seg.rkey;
      if (n > 0) ws[n - 1].next = &ws[n];
    }
  }
  ws[n - 1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  ws[n - 1].imm_data = htobe32(immediate);
  ws[n - 1].send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  ibv_send_wr* bad = nullptr;
  const int err = ibv_post_send(qp_, ws, &bad);
  if (err != 0) return VerbsError(err, "ibv_post_send (direct UC chunk)");
  *wrs = n;
  return absl::OkStatus();
}

absl::Status UcQueuePair::ForceError() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  const int err = Ibverbs().modify_qp(qp_, &a, IBV_QP_STATE);
  if (err != 0) return VerbsError(err, "ibv_modify_qp (UC to ERR)");
  return absl::OkStatus();
}

absl::Status UcQueuePair::PostBind(UcRing& ring, uint32_t w, uint64_t lap, uint64_t wr_id) {
  ibv_mw* mw = ring.window(w);
  const uint32_t per = ring.geometry().slots_per_window();
  ibv_mw_bind b{};
  b.wr_id = wr_id;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info.mr = ring.mr();
  b.bind_info.addr = ring.address() + uint64_t{w} * per * ring.geometry().slot_bytes;
  b.bind_info.length = uint64_t{per} * ring.geometry().slot_bytes;
  b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  const int err = ibv_bind_mw(qp_, mw, &b);
  if (err != 0) {
    return VerbsError(err, absl::StrCat("ibv_bind_mw (window ", w, " for lap ", lap, ")"));
  }
  if (lap == 0) {
    ring.lap0_keys_[w] = mw->rkey;
  } else if (mw->rkey != KeyForLap(ring.lap0_keys_[w], lap)) {
    return absl::InternalError(absl::StrCat("window ", w, " bound for lap ", lap, " got key ",
                                            mw->rkey, ", not the lap's ",
                                            KeyForLap(ring.lap0_keys_[w], lap)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> UcQueuePair::BindWindow(ibv_mw* mw, ibv_mr* mr, uint64_t addr,
                                                 uint64_t len, uint64_t wr_id) {
  ibv_mw_bind b{};
  b.wr_id = wr_id;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info.mr = mr;
  b.bind_info.addr = addr;
  b.bind_info.length = len;
  b.bind_info.mw_access_flags = len == 0 ? 0 : IBV_ACCESS_REMOTE_WRITE;
  const int err = ibv_bind_mw(qp_, mw, &b);
  if (err != 0) {
    return VerbsError(err, len == 0 ? "ibv_bind_mw (unbinding a placement window)"
                                    : "ibv_bind_mw (a placement window)");
  }
  return mw->rkey;
}

}  // namespace longhaul::verbs
