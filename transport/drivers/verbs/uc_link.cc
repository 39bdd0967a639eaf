#include "transport/drivers/verbs/uc_link.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/queue_pair.h"

namespace longhaul::verbs {
namespace {

constexpr uint32_t kSignalChunks = 16;
// The receiver retires its oldest window after this long without a chunk while the
// sender says it waits (a few round trips at 58 ms).
constexpr Duration kIdleRetire = Duration::Milliseconds(200);

}  // namespace

absl::StatusOr<std::unique_ptr<UcLink>> UcLink::Create(const VerbsDevice& dev, ibv_pd* send_pd,
                                                       ibv_cq* send_cq, ibv_cq* recv_cq,
                                                       uint32_t id, UcRingGeometry g,
                                                       uint32_t send_depth) {
  std::unique_ptr<UcLink> l(new UcLink());
  l->id_ = id;
  l->send_depth_ = send_depth;
  LH_ASSIGN_OR_RETURN(l->rx_, UcReceiveLane::Create(dev, send_cq, recv_cq, g, WrId(id, 0)));
  LH_ASSIGN_OR_RETURN(l->tx_qp_,
                      UcQueuePair::Create(dev, send_pd, send_cq, recv_cq, send_depth, 1));
  return l;
}

UcLink::~UcLink() {
  tx_qp_.reset();
  rx_.reset();
}

UcLinkState UcLink::LocalState(const VerbsDevice& dev) const {
  UcLinkState s;
  s.gid = dev.gid();
  s.mtu = dev.active_mtu();
  s.sender = UcQp{tx_qp_->qpn(), tx_qp_->send_psn()};
  s.receiver = UcQp{rx_->qpn(), rx_->psn()};
  if (connected_) {
    const UcAdvert a = rx_->advert(dev);
    s.has_ring = true;
    s.ring = a.ring;
    s.geometry = a.geometry;
    s.keys = a.keys;
    s.grants = rx_->Grants();
  }
  s.waiting = waiting_;
  return s;
}

absl::Status UcLink::OnPeerState(const VerbsDevice& dev, std::span<const uint8_t> bytes) {
  absl::StatusOr<UcLinkState> st = UcLinkState::Decode(bytes);
  if (!st.ok()) {
    ++counters_.bad_peer_states;
    return st.status();
  }
  if (failed_) return absl::OkStatus();
  const UcLinkState& p = *st;
  if (!connected_) {
    piece_ = std::min(dev.active_mtu(), p.mtu);
    rx_->set_piece(piece_);
    // The lane receives from the peer's sending QP; ours sends to the peer's lane.
    absl::Status s = rx_->Connect(dev, UcPeer{p.gid, p.sender.qpn, p.sender.psn});
    if (s.ok()) s = tx_qp_->Connect(dev, UcPeer{p.gid, p.receiver.qpn, p.receiver.psn});
    if (!s.ok()) {
      failed_ = true;
      return s;
    }
    connected_ = true;
    changed_ = true;
    sent_grant_version_ = rx_->grant_version();
  }
  if (p.has_ring) {
    if (!tx_) {
      tx_.emplace(p.geometry, p.keys);
      peer_ring_ = p.ring;
      peer_slots_ = p.geometry.slots;
    }
    tx_->Grant(p.grants);
  }
  peer_waiting_ = p.waiting.has_value();
  return absl::OkStatus();
}

absl::StatusOr<bool> UcLink::Post(const uint8_t* buf, uint32_t len, uint32_t lkey,
                                  uint32_t slot) {
  if (!ready()) return absl::FailedPreconditionError("UC link is not ready");
  const uint32_t pieces = std::max<uint32_t>(1, (len + piece_ - 1) / piece_);
  std::optional<UcLaneSender::Write> w = tx_->Peek();
  if (!w) {  // no window granted for the next chunk's lap yet
    if (!waiting_) {
      ++counters_.grant_waits;
      waiting_ = tx_->next_chunk();
      changed_ = true;
    }
    return false;
  }
  if (send_wrs_ + pieces > send_depth_) return false;  // its completions free it
  if (waiting_) {
    waiting_.reset();
    changed_ = true;
  }
  tx_->Next();
  const bool signaled = ++unsignalled_ >= kSignalChunks || send_wrs_ + pieces > send_depth_ / 2;
  if (signaled) unsignalled_ = 0;
  uint32_t wrs = 0;
  absl::Status s = tx_qp_->PostPieces(buf, len, piece_, lkey, peer_ring_ + w->offset, w->rkey,
                                      w->immediate, WrId(id_, slot), signaled, &wrs);
  if (!s.ok()) {
    ++counters_.send_errors;
    failed_ = true;
    return s;
  }
  ++counters_.chunks_sent;
  counters_.chunk_bytes_sent += len;
  const uint64_t lap_back = uint64_t{peer_slots_} + 1;
  if (replay_every_ > 0 && counters_.chunks_sent % replay_every_ == 0 && w->chunk >= lap_back &&
      send_wrs_ + 2 * wrs <= send_depth_) {
    // Unsignalled: its work requests complete with this chunk's signalled ones, if any,
    // or with a later chunk's (the send queue completes in order).
    const UcLaneSender::Write old = tx_->Place(w->chunk - lap_back);
    uint32_t more = 0;
    if (tx_qp_->PostPieces(buf, len, piece_, lkey, peer_ring_ + old.offset, old.rkey,
                           old.immediate, WrId(id_, slot), false, &more)
            .ok()) {
      wrs += more;
      ++counters_.replays;
    }
  }
  posted_.push_back(slot);
  slot_wrs_.push_back(wrs);
  send_wrs_ += wrs;
  return true;
}

void UcLink::OnSendCompletion(const ibv_wc& wc, std::vector<uint32_t>* freed) {
  if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
    ++counters_.send_errors;
    failed_ = true;  // a UC QP errs only for local reasons; the connection goes on over UD
  }
  const uint32_t done = WrSlot(wc.wr_id);
  while (!posted_.empty()) {
    const uint32_t s = posted_.front();
    posted_.pop_front();
    send_wrs_ -= slot_wrs_.front();
    slot_wrs_.pop_front();
    freed->push_back(s);
    if (s == done) break;
  }
}

void UcLink::ReleaseSlots(std::vector<uint32_t>* freed) {
  freed->insert(freed->end(), posted_.begin(), posted_.end());
  posted_.clear();
  slot_wrs_.clear();
  send_wrs_ = 0;
}

std::optional<std::span<const uint8_t>> UcLink::OnReceive(const ibv_wc& wc, Time now) {
  uint64_t chunk = 0;
  std::optional<std::span<const uint8_t>> c = rx_->OnReceive(wc, &chunk);
  if (c) {
    ++counters_.chunks_received;
    last_chunk_ = now;
  }
  return c;
}

absl::Status UcLink::Maintain(Time now) {
  if (!connected_) return absl::OkStatus();
  if (peer_waiting_ && now - last_chunk_ >= kIdleRetire && now - last_idle_ >= kIdleRetire) {
    rx_->OnIdle();
    ++counters_.idle_retirements;
    last_idle_ = now;
  }
  absl::Status s = rx_->Maintain();
  if (rx_->grant_version() != sent_grant_version_) {
    sent_grant_version_ = rx_->grant_version();
    changed_ = true;
  }
  return s;
}

}  // namespace longhaul::verbs
