#include "transport/drivers/verbs/uc_link.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/queue_pair.h"
#include "transport/wire/packet.h"

namespace longhaul::verbs {
namespace {

static_assert(UcLinkState::kMaxBytes == wire::kMaxDriverState,
              "the UC link state is sized for the DRIVER_STATE frame");

constexpr uint32_t kSignalChunks = 16;
// The receiver retires a lane's oldest window after this long without a chunk on it
// while the sender says it waits on that lane (a few round trips at 58 ms).
constexpr Duration kIdleRetire = Duration::Milliseconds(200);

}  // namespace

absl::StatusOr<std::unique_ptr<UcLink>> UcLink::Create(const VerbsDevice& dev, ibv_pd* send_pd,
                                                       ibv_cq* send_cq, ibv_cq* recv_cq,
                                                       const std::vector<uint32_t>& ids,
                                                       UcRingGeometry g, uint32_t send_depth,
                                                       std::function<uint32_t()> next_id) {
  if (ids.empty() || ids.size() > UcLinkState::kMaxLanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("UC lanes: ", ids.size(), " asked for, 1 to ", UcLinkState::kMaxLanes));
  }
  std::unique_ptr<UcLink> l(new UcLink());
  l->send_depth_ = send_depth;
  l->dev_ = &dev;
  l->send_pd_ = send_pd;
  l->send_cq_ = send_cq;
  l->recv_cq_ = recv_cq;
  l->next_id_ = std::move(next_id);
  l->lanes_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    Lane& lane = l->lanes_[i];
    lane.id = lane.tx_id = ids[i];
    LH_ASSIGN_OR_RETURN(lane.rx, UcReceiveLane::Create(dev, send_cq, recv_cq, g, WrId(ids[i], 0)));
    LH_ASSIGN_OR_RETURN(lane.tx_qp,
                        UcQueuePair::Create(dev, send_pd, send_cq, recv_cq, send_depth, 1));
  }
  return l;
}

UcLink::~UcLink() {
  for (Lane& l : lanes_) {
    l.tx_qp.reset();
    l.rx.reset();
  }
}

UcLinkState UcLink::LocalState(const VerbsDevice& dev) const {
  UcLinkState s;
  s.gid = dev.gid();
  s.mtu = dev.active_mtu();
  for (const Lane& l : lanes_) {
    UcLaneState ls;
    ls.sender = UcQp{l.tx_qp->qpn(), l.tx_qp->send_psn()};
    ls.receiver = UcQp{l.rx->qpn(), l.rx->psn()};
    if (connected_) {
      const UcAdvert a = l.rx->advert(dev);
      ls.has_ring = true;
      ls.ring = a.ring;
      ls.geometry = a.geometry;
      ls.keys = a.keys;
      ls.grants = l.rx->Grants();
    }
    ls.waiting = l.waiting;
    ls.failed = l.failed;
    ls.generation = l.generation;
    ls.received = l.received;
    s.lanes.push_back(std::move(ls));
  }
  if (placements_) s.placements = placements_->Ads();
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
    // Both sides keep the smaller lane count; lanes beyond it are never connected.
    if (p.lanes.size() < lanes_.size()) lanes_.resize(p.lanes.size());
    piece_ = std::min(dev.active_mtu(), p.mtu);
    for (size_t i = 0; i < lanes_.size(); ++i) {
      Lane& l = lanes_[i];
      const UcLaneState& pl = p.lanes[i];
      l.rx->set_piece(piece_);
      // Lane i receives from the peer's writing QP i; our writing QP i feeds its lane i.
      l.peer_receiver = UcPeer{p.gid, pl.receiver.qpn, pl.receiver.psn};
      l.peer_generation = pl.generation;
      absl::Status s = l.rx->Connect(dev, UcPeer{p.gid, pl.sender.qpn, pl.sender.psn});
      if (s.ok()) s = l.tx_qp->Connect(dev, l.peer_receiver);
      if (!s.ok()) {
        failed_ = true;
        return s;
      }
    }
    std::vector<UcPlacements::Lane> pl;
    for (Lane& l : lanes_) pl.push_back(UcPlacements::Lane{l.rx->pd(), &l.rx->qp(), l.id});
    placements_ = std::make_unique<UcPlacements>(std::move(pl));
    connected_ = true;
    changed_ = true;
    sent_grant_version_ = 0;
    for (const Lane& l : lanes_) sent_grant_version_ += l.rx->grant_version();
  }
  for (size_t i = 0; i < lanes_.size() && i < p.lanes.size(); ++i) {
    Lane& l = lanes_[i];
    const UcLaneState& pl = p.lanes[i];
    if (pl.generation > kMaxReplacements) {
      // More replacements than a peer makes: a hostile peer making this side reset its
      // queue pair over and over.
      return absl::InvalidArgumentError(absl::StrCat(
          "UC link state: lane ", i, " generation ", pl.generation, " beyond the ",
          kMaxReplacements, " replacements a lane gets"));
    }
    if (pl.generation > l.peer_generation) {
      // The peer replaced its writer: this lane's receiving QP follows it.
      LH_RETURN_IF_ERROR(l.rx->Reconnect(dev, UcPeer{p.gid, pl.sender.qpn, pl.sender.psn}));
      l.peer_generation = pl.generation;
      if (placements_) placements_->OnLaneReset(static_cast<uint32_t>(i));
    }
    if (pl.has_ring) {
      if (!l.tx) {
        l.tx.emplace(pl.geometry, pl.keys);
        l.peer_ring = pl.ring;
        l.peer_slots = pl.geometry.slots;
        l.peer_slot_bytes = pl.geometry.slot_bytes;
      }
      l.tx->Grant(pl.grants);
    }
    l.peer_waiting = pl.waiting.has_value();
    if (pl.received != l.peer_received) {  // the peer got chunks of this lane
      l.peer_received = pl.received;
      l.unconfirmed = 0;
      l.unconfirmed_since = Time::Infinite();
    }
  }
  // The peer's advertised buffers; those it withdrew are kept a while for the
  // late-duplicate test mode (replayed writes through keys no longer valid).
  for (const UcPlacementAd& old : peer_placements_) {
    const bool kept = std::any_of(p.placements.begin(), p.placements.end(),
                                  [&](const UcPlacementAd& a) { return a.key == old.key; });
    if (!kept && replay_every_ > 0) {
      old_peer_placements_.push_back(old);
      if (old_peer_placements_.size() > 8) old_peer_placements_.pop_front();
    }
  }
  peer_placements_ = p.placements;
  return absl::OkStatus();
}

uint32_t UcLink::peer_slot_bytes() const {
  uint32_t least = 0;
  for (const Lane& l : lanes_) {
    if (l.tx && (least == 0 || l.peer_slot_bytes < least)) least = l.peer_slot_bytes;
  }
  return least;
}

bool UcLink::ready() const {
  if (failed_) return false;
  for (const Lane& l : lanes_) {
    if (l.writable()) return true;
  }
  return false;
}

const UcPlacementAd* UcLink::PeerAd(const Direct& d) const {
  for (const UcPlacementAd& a : peer_placements_) {
    if (a.key != d.key) continue;
    if (d.message_offset > a.length || d.hole_length > a.length - d.message_offset ||
        a.keys.size() < lanes_.size()) {
      return nullptr;
    }
    return &a;
  }
  return nullptr;
}

bool UcLink::CanPlace(const Direct& d) const {
  return d.hole_length > 0 && d.descriptor != nullptr && PeerAd(d) != nullptr;
}

absl::StatusOr<bool> UcLink::Post(std::span<const ibv_sge> gather, uint32_t len,
                                  uint32_t slot, const Direct* direct) {
  const uint32_t n = lane_count();
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = (next_lane_ + k) % n;
    Lane& l = lanes_[i];
    if (!l.writable()) continue;
    absl::StatusOr<bool> posted = PostOn(l, gather, len, slot, direct);
    if (!posted.ok()) {
      Fail(l);
      continue;
    }
    if (*posted) {
      next_lane_ = (i + 1) % n;
      return true;
    }
  }
  if (!ready()) return absl::FailedPreconditionError("every UC lane of the connection failed");
  return false;
}

absl::Status UcLink::PostDirect(Lane& l, std::span<const ibv_sge> gather, uint32_t len,
                                const Direct& d, uint64_t payload_addr, uint32_t payload_key,
                                uint64_t ring_addr, uint32_t ring_key, uint32_t immediate,
                                uint64_t wr_id, bool signaled, uint32_t* wrs) {
  GatherPart areas[kMaxGather];
  for (size_t i = 0; i < gather.size() && i < kMaxGather; ++i) {
    areas[i] = GatherPart{gather[i].addr, gather[i].length, gather[i].lkey};
  }
  const std::span<const GatherPart> all(areas, std::min<size_t>(gather.size(), kMaxGather));
  const uint32_t hole_end = d.hole_offset + d.hole_length;
  // The tail: the bytes before the payload, those after it, the descriptor.
  GatherPart payload[kMaxGather], tail[2 * kMaxGather + 1];
  const int np = SliceGather(all, d.hole_offset, hole_end, payload);
  const int nb = SliceGather(all, 0, d.hole_offset, tail);
  const int na = nb < 0 ? -1
                        : SliceGather(all, hole_end, len,
                                      std::span<GatherPart>(tail + nb, kMaxGather));
  if (np < 0 || nb < 0 || na < 0) {
    return absl::InvalidArgumentError("direct UC chunk: its gather list is shorter than it");
  }
  const UcDirectDescriptor desc{len,          d.hole_offset,     d.hole_length,
                                d.key,        d.message_id,      d.message_offset,
                                d.message_length};
  desc.Encode(d.descriptor);
  tail[nb + na] = GatherPart{reinterpret_cast<uintptr_t>(d.descriptor),
                             UcDirectDescriptor::kBytes, d.descriptor_lkey};
  const uint32_t tail_bytes = desc.tail_bytes();
  const uint32_t tail_pieces = (tail_bytes + piece_ - 1) / piece_;
  const UcQueuePair::Segment segs[] = {
      {std::span<const GatherPart>(payload, np), d.hole_length, payload_addr, payload_key},
      {std::span<const GatherPart>(tail, nb + na + 1), tail_bytes, ring_addr, ring_key}};
  return l.tx_qp->PostSegments(segs, piece_, WithPieces(immediate, tail_pieces) | kImmediateDirect,
                               wr_id, signaled, wrs);
}

absl::StatusOr<bool> UcLink::PostOn(Lane& l, std::span<const ibv_sge> gather, uint32_t len,
                                    uint32_t slot, const Direct* direct) {
  const UcPlacementAd* ad = direct != nullptr && CanPlace(*direct) ? PeerAd(*direct) : nullptr;
  // A direct chunk's writes: its payload's, then the tail's (the rest and the descriptor).
  const uint32_t pieces =
      ad == nullptr
          ? std::max<uint32_t>(1, (len + piece_ - 1) / piece_)
          : (direct->hole_length + piece_ - 1) / piece_ +
                (len - direct->hole_length + UcDirectDescriptor::kBytes + piece_ - 1) / piece_;
  std::optional<UcLaneSender::Write> w = l.tx->Peek();
  if (!w) {  // no window granted for the lane's next chunk's lap yet
    if (!l.waiting) {
      ++counters_.grant_waits;
      l.waiting = l.tx->next_chunk();
      changed_ = true;
    }
    return false;
  }
  if (l.send_wrs + pieces > send_depth_) return false;  // its completions free it
  if (l.waiting) {
    l.waiting.reset();
    changed_ = true;
  }
  l.tx->Next();
  const bool signaled = ++l.unsignalled >= kSignalChunks || l.send_wrs + pieces > send_depth_ / 2;
  if (signaled) l.unsignalled = 0;
  uint32_t wrs = 0;
  // Test mode: a key the receiving NIC does not know, silently dropped there (a stall).
  const bool stall = stall_after_ > 0 && counters_.chunks_sent >= stall_after_ &&
                     &l == &lanes_[0] && l.generation == 0;
  const uint32_t ring_key = stall ? w->rkey ^ 0x80000000u : w->rkey;
  absl::Status s =
      ad != nullptr
          ? PostDirect(l, gather, len, *direct, ad->address + direct->message_offset,
                       ad->keys[&l - lanes_.data()], l.peer_ring + w->offset, ring_key,
                       w->immediate, WrId(l.tx_id, slot), signaled, &wrs)
          : l.tx_qp->PostPieces(gather, len, piece_, l.peer_ring + w->offset, ring_key,
                                w->immediate, WrId(l.tx_id, slot), signaled, &wrs);
  if (!s.ok()) {
    ++counters_.send_errors;
    return s;
  }
  if (ad != nullptr) {
    ++counters_.direct_chunks;
    counters_.direct_bytes += direct->hole_length;
  }
  ++counters_.chunks_sent;
  ++l.chunks;
  if (l.unconfirmed++ == 0) l.unconfirmed_since = Time::FromNanoseconds(MonotonicNs());
  counters_.chunk_bytes_sent += len;
  const uint64_t lap_back = uint64_t{l.peer_slots} + 1;
  if (replay_every_ > 0 && counters_.chunks_sent % replay_every_ == 0 && w->chunk >= lap_back &&
      l.send_wrs + 2 * wrs <= send_depth_) {
    // A late duplicate: this chunk's bytes with the placement of the chunk one lap and
    // one slot back. Unsignalled: its work requests complete with this slot's.
    const UcLaneSender::Write old = l.tx->Place(w->chunk - lap_back);
    uint32_t more = 0;
    // A direct chunk's duplicate writes its payload through a withdrawn advertisement
    // (a buffer the peer took back and may have reused) when one is known.
    const UcPlacementAd* late = ad;
    if (ad != nullptr && !old_peer_placements_.empty()) {
      const UcPlacementAd& o = old_peer_placements_.back();
      if (o.keys.size() >= lanes_.size() && o.length >= direct->hole_length) late = &o;
    }
    // The descriptor stays the chunk's own (its bytes may not have been read yet).
    const uint64_t late_addr =
        late == ad && ad != nullptr ? ad->address + direct->message_offset
                                    : (late != nullptr ? late->address : 0);
    const absl::Status r =
        ad != nullptr
            ? PostDirect(l, gather, len, *direct, late_addr, late->keys[&l - lanes_.data()],
                         l.peer_ring + old.offset, old.rkey,
                         old.immediate, WrId(l.tx_id, slot), false, &more)
            : l.tx_qp->PostPieces(gather, len, piece_, l.peer_ring + old.offset, old.rkey,
                                  old.immediate, WrId(l.tx_id, slot), false, &more);
    if (r.ok()) {
      wrs += more;
      ++counters_.replays;
    }
  }
  l.posted.push_back(slot);
  l.slot_wrs.push_back(wrs);
  l.send_wrs += wrs;
  if (fail_after_ > 0 && counters_.chunks_sent == fail_after_) {
    // Test mode: the QP errs as for a local protection error; its work requests flush.
    (void)l.tx_qp->ForceError();
  }
  return true;
}

void UcLink::Fail(Lane& l) {
  if (l.failed) return;
  l.failed = true;
  l.waiting.reset();
  ++counters_.lanes_failed;
  changed_ = true;
  (void)l.tx_qp->ForceError();  // whatever it still holds flushes
  if (l.replacements < kMaxReplacements && l.tx) {
    l.replace_at = Time::FromNanoseconds(MonotonicNs()) + kReplaceAfter;
  }
}

void UcLink::Replace(Lane& l, std::vector<uint32_t>* freed) {
  l.replace_at = Time::Infinite();
  ++l.replacements;
  absl::StatusOr<std::unique_ptr<UcQueuePair>> q =
      UcQueuePair::Create(*dev_, send_pd_, send_cq_, recv_cq_, send_depth_, 1);
  if (!q.ok() || !(*q)->Connect(*dev_, l.peer_receiver).ok()) return;  // stays failed
  // The old QP goes first: no work request of it can complete after this, so its slots
  // are free; its completions still queued carry its id, which no longer maps to this lane.
  l.tx_qp = std::move(*q);
  freed->insert(freed->end(), l.posted.begin(), l.posted.end());
  l.posted.clear();
  l.slot_wrs.clear();
  l.send_wrs = 0;
  l.unsignalled = 0;
  const uint32_t old_id = l.tx_id;
  l.tx_id = next_id_();
  l.unconfirmed = 0;
  l.unconfirmed_since = Time::Infinite();
  id_changes_.push_back(IdChange{static_cast<uint32_t>(&l - lanes_.data()), old_id, l.tx_id});
  ++l.generation;
  l.failed = false;
  ++counters_.lanes_replaced;
  changed_ = true;
}

void UcLink::OnSendCompletion(uint32_t lane, const ibv_wc& wc, std::vector<uint32_t>* freed) {
  if (lane >= lanes_.size()) return;
  if (WrSlot(wc.wr_id) & kPlacementWr) {  // a placement window's bind, on the receiving QP
    if (placements_) placements_->OnBindCompletion(lane, wc);
    return;
  }
  Lane& l = lanes_[lane];
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR) ++counters_.send_errors;
    Fail(l);
  }
  const uint32_t done = WrSlot(wc.wr_id);
  while (!l.posted.empty()) {
    const uint32_t s = l.posted.front();
    l.posted.pop_front();
    l.send_wrs -= l.slot_wrs.front();
    l.slot_wrs.pop_front();
    freed->push_back(s);
    if (s == done) break;
  }
}

void UcLink::ReleaseSlots(std::vector<uint32_t>* freed) {
  for (Lane& l : lanes_) {
    freed->insert(freed->end(), l.posted.begin(), l.posted.end());
    l.posted.clear();
    l.slot_wrs.clear();
    l.send_wrs = 0;
  }
}

bool UcLink::has_inflight() const {
  for (const Lane& l : lanes_) {
    if (!l.posted.empty()) return true;
  }
  return false;
}

std::optional<std::span<const uint8_t>> UcLink::OnReceive(
    uint32_t lane, const ibv_wc& wc, Time now, std::optional<UcDirectDescriptor>* direct) {
  if (lane >= lanes_.size()) return std::nullopt;
  Lane& l = lanes_[lane];
  uint64_t chunk = 0;
  std::optional<std::span<const uint8_t>> c = l.rx->OnReceive(wc, &chunk, direct);
  if (c) {
    ++counters_.chunks_received;
    ++l.received;
    l.last_chunk = now;
  }
  return c;
}

absl::Status UcLink::Maintain(Time now, std::vector<uint32_t>* freed) {
  if (!connected_) return absl::OkStatus();
  uint64_t version = 0;
  absl::Status status;
  uint64_t received = 0;
  for (Lane& l : lanes_) {
    if (l.failed && now >= l.replace_at) Replace(l, freed);
    if (l.writable() && l.unconfirmed >= kStallChunks && now - l.unconfirmed_since >= kStallAfter) {
      ++counters_.lanes_stalled;
      Fail(l);  // taken out; replaced kReplaceAfter later
    }
    received += l.received;
    if (l.peer_waiting && now - l.last_chunk >= kIdleRetire && now - l.last_idle >= kIdleRetire) {
      l.rx->OnIdle();
      ++counters_.idle_retirements;
      l.last_idle = now;
    }
    if (absl::Status s = l.rx->Maintain(); !s.ok() && status.ok()) status = s;
    version += l.rx->grant_version();
  }
  if (version != sent_grant_version_) {
    sent_grant_version_ = version;
    changed_ = true;
  }
  // The per-lane counts reach the peer at least every kCountEvery while they move.
  if (changed_) {
    published_received_ = received;
    counts_at_ = now;
  } else if (received != published_received_ && now - counts_at_ >= kCountEvery) {
    published_received_ = received;
    counts_at_ = now;
    changed_ = true;
  }
  return status;
}

bool UcLink::peer_waiting() const {
  for (const Lane& l : lanes_) {
    if (l.peer_waiting) return true;
  }
  return false;
}

std::vector<uint64_t> UcLink::lane_chunks() const {
  std::vector<uint64_t> out;
  for (const Lane& l : lanes_) out.push_back(l.chunks);
  return out;
}

UcReceiveLane::Stats UcLink::receive_stats() const {
  UcReceiveLane::Stats sum;
  for (const Lane& l : lanes_) {
    const UcReceiveLane::Stats s = l.rx->stats();
    sum.lane.delivered += s.lane.delivered;
    sum.lane.stale_completions += s.lane.stale_completions;
    sum.lane.given_up += s.lane.given_up;
    sum.lane.rebinds += s.lane.rebinds;
    sum.receives_posted += s.receives_posted;
    sum.bind_errors += s.bind_errors;
  }
  return sum;
}

}  // namespace longhaul::verbs
