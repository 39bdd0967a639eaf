#include "transport/drivers/verbs/uc_lane_io.h"

#include <endian.h>

#include <cstring>

#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/ibverbs.h"

namespace longhaul::verbs {
namespace {

constexpr uint32_t kSignalEvery = 16;

}  // namespace

// ---- receiving end ----

absl::StatusOr<std::unique_ptr<UcReceiveLane>> UcReceiveLane::Create(const VerbsDevice& dev,
                                                                     ibv_cq* send_cq,
                                                                     ibv_cq* recv_cq,
                                                                     UcRingGeometry g,
                                                                     uint64_t recv_wr_id) {
  LH_RETURN_IF_ERROR(g.Validate());
  std::unique_ptr<UcReceiveLane> l(new UcReceiveLane(g));
  l->recv_wr_id_ = recv_wr_id;
  LH_ASSIGN_OR_RETURN(l->pd_, LanePd::Create(dev));
  LH_ASSIGN_OR_RETURN(l->ring_, UcRing::Create(dev, l->pd_->pd(), g));
  // Binds: at most one per window at a time, and lap 0's all at once. Receives: 2 x slots
  // posted, room for twice that: after a Reconnect the completions the old connection left
  // in the CQ (2 x slots at most) are reposted too.
  LH_ASSIGN_OR_RETURN(l->qp_, UcQueuePair::Create(dev, l->pd_->pd(), send_cq, recv_cq,
                                                  2 * g.windows + 8 + kPlacementBinds,
                                                  4 * g.slots));
  LH_RETURN_IF_ERROR(l->qp_->PostReceives(2 * g.slots, recv_wr_id));
  l->stats_.receives_posted = 2 * g.slots;
  return l;
}

absl::Status UcReceiveLane::Connect(const VerbsDevice& dev, const UcPeer& sender) {
  LH_RETURN_IF_ERROR(qp_->Connect(dev, sender));
  for (uint32_t w = 0; w < ring_->geometry().windows; ++w) {
    LH_RETURN_IF_ERROR(qp_->PostBind(*ring_, w, 0, kBindWr));
  }
  return absl::OkStatus();
}

absl::Status UcReceiveLane::Reconnect(const VerbsDevice& dev, const UcPeer& sender) {
  LH_RETURN_IF_ERROR(qp_->Reset(dev));
  const uint32_t n = 2 * ring_->geometry().slots;
  LH_RETURN_IF_ERROR(qp_->PostReceives(n, recv_wr_id_));
  stats_.receives_posted += n;
  used_receives_ = 0;
  return qp_->Connect(dev, sender);
}

UcAdvert UcReceiveLane::advert(const VerbsDevice& dev) const {
  UcAdvert a;
  a.gid = dev.gid();
  a.qpn = qp_->qpn();
  a.psn = qp_->send_psn();
  a.ring = ring_->address();
  a.geometry = ring_->geometry();
  for (uint32_t w = 0; w < a.geometry.windows; ++w) a.keys.push_back(ring_->lap0_key(w));
  return a;
}

std::optional<std::span<const uint8_t>> UcReceiveLane::OnReceive(
    const ibv_wc& wc, uint64_t* chunk, std::optional<UcDirectDescriptor>* direct) {
  ++used_receives_;
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
    ++stats_.lane.stale_completions;
    return std::nullopt;
  }
  const uint32_t imm = be32toh(wc.imm_data);
  if (ImmediateDirect(imm)) {
    // The tail: the datagram's bytes before its payload, those after it, the descriptor.
    const uint32_t slot_bytes = ring_->geometry().slot_bytes;
    const uint32_t pieces = ImmediatePieces(imm);
    const uint64_t tail = uint64_t{pieces - 1} * piece_ + wc.byte_len;
    if (direct == nullptr || piece_ == 0 || wc.byte_len > piece_ ||
        tail < UcDirectDescriptor::kBytes || tail > slot_bytes) {
      ++stats_.lane.stale_completions;
      return std::nullopt;
    }
    const UcLaneReceiver::Completion c = rx_.OnCompletion(imm & ~kImmediateDirect);
    if (!c.deliver) return std::nullopt;
    uint8_t* const slot = ring_->base() + c.offset;
    absl::StatusOr<UcDirectDescriptor> d = UcDirectDescriptor::Decode(
        slot + tail - UcDirectDescriptor::kBytes, static_cast<uint32_t>(tail), slot_bytes);
    if (!d.ok()) {
      ++stats_.lane.stale_completions;
      return std::nullopt;
    }
    // The bytes after the payload go behind its hole (a few: the checksum, a frame).
    const uint32_t after = d->length - d->hole_offset - d->hole_length;
    std::memmove(slot + d->hole_offset + d->hole_length, slot + d->hole_offset, after);
    *chunk = c.chunk;
    *direct = *d;
    return std::span<const uint8_t>(slot, d->length);
  }
  const uint32_t pieces = ImmediatePieces(imm);
  const uint64_t len =
      pieces == 1 ? wc.byte_len : uint64_t{pieces - 1} * piece_ + wc.byte_len;
  if ((pieces > 1 && (piece_ == 0 || wc.byte_len > piece_)) ||
      len > ring_->geometry().slot_bytes) {
    ++stats_.lane.stale_completions;
    return std::nullopt;
  }
  const UcLaneReceiver::Completion c = rx_.OnCompletion(imm);
  if (!c.deliver) return std::nullopt;
  *chunk = c.chunk;
  return std::span<const uint8_t>(ring_->base() + c.offset, len);
}

absl::Status UcReceiveLane::Maintain() {
  if (used_receives_ > 0) {
    LH_RETURN_IF_ERROR(qp_->PostReceives(used_receives_, recv_wr_id_));
    stats_.receives_posted += used_receives_;
    used_receives_ = 0;
  }
  // A window is rebound as soon as its bind is posted: until the bind executes the old
  // key still lands writes of the old lap, whose completions no longer match the
  // window's lap and are ignored; writes of the new lap land only after it executes.
  for (const UcLaneReceiver::Rebind& r : rx_.TakeRebinds()) {
    LH_RETURN_IF_ERROR(qp_->PostBind(*ring_, r.window, r.lap, kBindWr));
    rx_.Rebound(r);
  }
  return absl::OkStatus();
}

void UcReceiveLane::OnSendCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) ++stats_.bind_errors;
}

UcReceiveLane::Stats UcReceiveLane::stats() const {
  Stats s = stats_;
  const uint64_t stale_here = s.lane.stale_completions;
  s.lane = rx_.stats();
  s.lane.stale_completions += stale_here;
  return s;
}

// ---- sending end ----

absl::StatusOr<std::unique_ptr<UcSendLane>> UcSendLane::Create(const VerbsDevice& dev,
                                                               ibv_cq* send_cq, ibv_cq* recv_cq,
                                                               uint32_t buffers,
                                                               uint32_t slot_bytes) {
  if (buffers == 0 || slot_bytes == 0) {
    return absl::InvalidArgumentError("UC send lane: buffers and slot_bytes must be > 0");
  }
  std::unique_ptr<UcSendLane> l(new UcSendLane());
  l->buffers_ = buffers;
  l->slot_bytes_ = slot_bytes;
  LH_ASSIGN_OR_RETURN(l->pd_, LanePd::Create(dev));
  // Room for every buffer's write and a replay.
  LH_ASSIGN_OR_RETURN(l->qp_, UcQueuePair::Create(dev, l->pd_->pd(), send_cq, recv_cq,
                                                  buffers + 8, 1));
  const size_t bytes = size_t{buffers + 1} * slot_bytes;  // the last: replays
  l->arena_.reset(new (std::nothrow) uint8_t[bytes]);
  if (!l->arena_) return absl::ResourceExhaustedError("UC send lane: no memory for its arena");
  l->mr_ = Ibverbs().reg_mr(l->pd_->pd(), l->arena_.get(), bytes, IBV_ACCESS_LOCAL_WRITE);
  if (l->mr_ == nullptr) {
    return VerbsError(errno, absl::StrCat("ibv_reg_mr of a ", bytes, "-byte UC send arena"));
  }
  for (uint32_t s = 0; s < buffers; ++s) l->free_.push_back(s);
  return l;
}

UcSendLane::~UcSendLane() {
  qp_.reset();
  if (mr_ != nullptr) Ibverbs().dereg_mr(mr_);
}

absl::Status UcSendLane::Connect(const VerbsDevice& dev, const UcAdvert& receiver) {
  if (receiver.geometry.slot_bytes < slot_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("the receiver's slots hold ",
                                                   receiver.geometry.slot_bytes,
                                                   " bytes, fewer than a chunk's ", slot_bytes_));
  }
  LH_RETURN_IF_ERROR(receiver.geometry.Validate());
  if (receiver.keys.size() != receiver.geometry.windows) {
    return absl::InvalidArgumentError("the receiver's advert has a key count unlike its windows");
  }
  UcPeer peer{receiver.gid, receiver.qpn, receiver.psn};
  LH_RETURN_IF_ERROR(qp_->Connect(dev, peer));
  ring_ = receiver.ring;
  tx_.emplace(receiver.geometry, receiver.keys);
  return absl::OkStatus();
}

uint8_t* UcSendLane::Buffer() {
  if (free_.empty()) return nullptr;
  return arena_.get() + size_t{free_.front()} * slot_bytes_;
}

std::optional<uint64_t> UcSendLane::NextChunk() {
  if (!tx_) return std::nullopt;
  const std::optional<UcLaneSender::Write> w = tx_->Peek();
  if (!w) return std::nullopt;
  return w->chunk;
}

void UcSendLane::Grant(const std::vector<uint64_t>& laps) {
  if (tx_) tx_->Grant(laps);
}

absl::StatusOr<UcLaneSender::Write> UcSendLane::Post(uint32_t len) {
  if (free_.empty() || !tx_) return absl::FailedPreconditionError("UC send lane: no free buffer");
  if (len > slot_bytes_) return absl::InvalidArgumentError("UC chunk longer than a buffer");
  const std::optional<UcLaneSender::Write> w = tx_->Next();
  if (!w) {
    ++stats_.grant_waits;
    return absl::UnavailableError("UC send lane: waiting for a window grant");
  }
  const uint32_t slot = free_.front();
  free_.pop_front();
  const bool signaled = ++unsignalled_ >= kSignalEvery || free_.empty();
  if (signaled) unsignalled_ = 0;
  posted_.push_back(slot);
  LH_RETURN_IF_ERROR(qp_->PostWrite(arena_.get() + size_t{slot} * slot_bytes_, len, mr_->lkey,
                                    ring_ + w->offset, w->rkey, w->immediate, slot, signaled));
  ++stats_.chunks;
  stats_.bytes += len;
  return *w;
}

absl::Status UcSendLane::Replay(const UcLaneSender::Write& old, std::span<const uint8_t> data) {
  if (replay_busy_) return absl::FailedPreconditionError("UC send lane: a replay is in flight");
  if (data.size() > slot_bytes_) return absl::InvalidArgumentError("UC replay longer than a buffer");
  uint8_t* buf = arena_.get() + size_t{buffers_} * slot_bytes_;
  std::memcpy(buf, data.data(), data.size());
  LH_RETURN_IF_ERROR(qp_->PostWrite(buf, static_cast<uint32_t>(data.size()), mr_->lkey,
                                    ring_ + old.offset, old.rkey, old.immediate, kReplayWr, true));
  replay_busy_ = true;
  ++stats_.replays;
  return absl::OkStatus();
}

void UcSendLane::OnSendCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) ++stats_.send_errors;
  if (wc.wr_id == kReplayWr) {
    replay_busy_ = false;
    return;
  }
  const uint32_t done = static_cast<uint32_t>(wc.wr_id);
  while (!posted_.empty()) {
    const uint32_t s = posted_.front();
    posted_.pop_front();
    free_.push_back(s);
    if (s == done) break;
  }
}

}  // namespace longhaul::verbs
