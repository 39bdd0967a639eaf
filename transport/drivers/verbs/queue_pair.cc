#include "transport/drivers/verbs/queue_pair.h"

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/ibverbs.h"

namespace longhaul::verbs {

bool SourceGid(const uint8_t* grh, Gid* gid) {
  if ((grh[0] >> 4) == 6) {
    std::memcpy(gid->data(), grh + 8, 16);
    return true;
  }
  if ((grh[20] >> 4) == 4) {
    uint32_t v4;
    std::memcpy(&v4, grh + 20 + 12, 4);
    *gid = Ipv4MappedGid(v4);
    return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<UdQueuePair>> UdQueuePair::Create(
    const VerbsDevice& dev, ibv_cq* send_cq, ibv_cq* recv_cq, uint32_t id, uint32_t recv_depth,
    uint32_t send_depth, uint32_t slot_size, EndpointStats* stats) {
  std::unique_ptr<UdQueuePair> q(new UdQueuePair());
  q->id_ = id;
  q->slot_size_ = slot_size;
  q->recv_depth_ = recv_depth;
  q->send_depth_ = send_depth;
  ibv_qp_init_attr ia{};
  ia.send_cq = send_cq;
  ia.recv_cq = recv_cq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = send_depth;
  ia.cap.max_recv_wr = recv_depth;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = dev.max_inline();
  q->qp_ = Ibverbs().create_qp(dev.pd(), &ia);
  if (q->qp_ == nullptr) {
    // Some devices refuse inline data: retry without.
    ia.cap.max_inline_data = 0;
    q->qp_ = Ibverbs().create_qp(dev.pd(), &ia);
  }
  if (q->qp_ == nullptr) {
    return VerbsError(errno, absl::StrCat("ibv_create_qp (UD, ", send_depth, " send and ",
                                          recv_depth, " receive work requests)"));
  }
  q->qpn_ = q->qp_->qp_num;
  q->max_inline_ = ia.cap.max_inline_data;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = dev.port();
  a.qkey = kQkey;
  int err = Ibverbs().modify_qp(q->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  if (err == 0) {
    a = {};
    a.qp_state = IBV_QPS_RTR;
    err = Ibverbs().modify_qp(q->qp_, &a, IBV_QP_STATE);
  }
  if (err == 0) {
    a = {};
    a.qp_state = IBV_QPS_RTS;
    std::random_device rd;
    a.sq_psn = rd() & 0xffffff;
    err = Ibverbs().modify_qp(q->qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  }
  if (err != 0) return VerbsError(err, "ibv_modify_qp (UD to RTS)");
  q->recv_mem_.assign(static_cast<size_t>(slot_size + kGrhBytes) * recv_depth, 0);
  q->recv_mr_ =
      Ibverbs().reg_mr(dev.pd(), q->recv_mem_.data(), q->recv_mem_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (q->recv_mr_ == nullptr) {
    return VerbsError(errno,
                      absl::StrCat("ibv_reg_mr of a ", q->recv_mem_.size(), "-byte receive ring"));
  }
  for (uint32_t s = 0; s < recv_depth; ++s) q->refill_.push_back(s);
  LH_RETURN_IF_ERROR(q->Refill(stats));
  return q;
}

UdQueuePair::~UdQueuePair() {
  if (qp_ != nullptr) Ibverbs().destroy_qp(qp_);
  if (recv_mr_ != nullptr) Ibverbs().dereg_mr(recv_mr_);
}

absl::Status UdQueuePair::Refill(EndpointStats* stats) {
  if (refill_.empty()) return absl::OkStatus();
  const size_t n = refill_.size();
  recv_wrs_.resize(n);
  recv_sges_.resize(n);
  const size_t recv_slot = slot_size_ + kGrhBytes;
  for (size_t i = 0; i < n; ++i) {
    recv_sges_[i].addr = reinterpret_cast<uintptr_t>(recv_mem_.data() + refill_[i] * recv_slot);
    recv_sges_[i].length = static_cast<uint32_t>(recv_slot);
    recv_sges_[i].lkey = recv_mr_->lkey;
    recv_wrs_[i] = {};
    recv_wrs_[i].wr_id = WrId(id_, refill_[i]);
    recv_wrs_[i].sg_list = &recv_sges_[i];
    recv_wrs_[i].num_sge = 1;
    recv_wrs_[i].next = i + 1 < n ? &recv_wrs_[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  ++stats->recv_syscalls;
  const int err = ibv_post_recv(qp_, recv_wrs_.data(), &bad);
  refill_.clear();
  if (err != 0) return VerbsError(err, "ibv_post_recv");
  return absl::OkStatus();
}

int UdQueuePair::PostChain(const SendArena& arena, std::vector<uint32_t>* free_slots,
                           EndpointStats* stats) {
  const size_t n = chain.size();
  if (n == 0) return 0;
  send_wrs_.resize(n);
  send_sges_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const SendWr& w = chain[i];
    send_sges_[i].addr = reinterpret_cast<uintptr_t>(arena.Slot(w.slot));
    send_sges_[i].length = w.len;
    send_sges_[i].lkey = arena.lkey;
    ibv_send_wr& wr = send_wrs_[i];
    wr = {};
    wr.wr_id = WrId(id_, w.slot);
    wr.sg_list = &send_sges_[i];
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = w.ah;
    wr.wr.ud.remote_qpn = w.remote_qpn;
    wr.wr.ud.remote_qkey = kQkey;
    if (++unsignaled_run_ >= kSignalEvery || i + 1 == n) {
      wr.send_flags |= IBV_SEND_SIGNALED;
      unsignaled_run_ = 0;
    }
    if (w.len <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
    wr.next = i + 1 < n ? &send_wrs_[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ++stats->send_syscalls;
  if (n > 1) ++stats->gso_sends;
  const int err = ibv_post_send(qp_, send_wrs_.data(), &bad);
  size_t posted = n;
  if (err != 0) {
    posted = bad != nullptr ? static_cast<size_t>(bad - send_wrs_.data()) : 0;
    stats->send_errors += n - posted;
  }
  for (size_t i = 0; i < n; ++i) {
    if (i < posted) {
      inflight_.push_back(chain[i].slot);
      ++stats->datagrams_sent;
      stats->bytes_sent += chain[i].len;
    } else {
      free_slots->push_back(chain[i].slot);
    }
  }
  // A refused post list may have left the last posted WR unsignalled: its slots return
  // with the next signalled one.
  chain.clear();
  return err;
}

void UdQueuePair::Completed(uint32_t slot, std::vector<uint32_t>* free_slots) {
  while (!inflight_.empty()) {
    const uint32_t s = inflight_.front();
    inflight_.pop_front();
    free_slots->push_back(s);
    if (s == slot) break;
  }
}

void UdQueuePair::ReleaseSlots(std::vector<uint32_t>* free_slots) {
  for (uint32_t s : inflight_) free_slots->push_back(s);
  for (const SendWr& w : chain) free_slots->push_back(w.slot);
  for (const SendWr& w : backlog) free_slots->push_back(w.slot);
  inflight_.clear();
  chain.clear();
  backlog.clear();
}

}  // namespace longhaul::verbs
