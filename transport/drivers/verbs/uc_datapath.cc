#include "transport/drivers/verbs/uc_datapath.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/drivers/verbs/ibverbs.h"
#include "transport/wire/packet.h"

namespace longhaul::verbs {
namespace {

constexpr uint32_t kWindows = 8;
constexpr uint32_t kMinSlots = 64;
constexpr uint32_t kMaxSlots = 2048;
constexpr uint64_t kMaxRingBytes = uint64_t{128} << 20;       // one lane's
constexpr uint64_t kMaxTotalRingBytes = uint64_t{1} << 30;   // every connection's
constexpr uint32_t kSendDepth = 1024;  // work requests (pieces) of the writing QP
// Posted buffers smaller than this are not advertised (a window per buffer costs more).
constexpr ByteCount kMinPlacement = 4096;
// Chunk resizing (UcDatapath::Resize).
constexpr Duration kResizeEvery = Duration::Milliseconds(500);
constexpr uint64_t kResizePackets = 100;
constexpr double kShrinkAbove = 0.02;
constexpr double kGrowBelow = 0.005;

}  // namespace

uint32_t UcDatapath::ChunkBytes(const VerbsOptions& o, uint32_t mtu) {
  uint32_t c = o.uc_chunk > 0 ? o.uc_chunk : kMaxPieces * mtu;
  c = std::min<uint32_t>({c, kMaxPieces * mtu, static_cast<uint32_t>(wire::kMaxDatagramSize)});
  return std::max(c, mtu);
}

UcDatapath::UcDatapath(Env env, uint32_t chunk_bytes, const VerbsOptions& o)
    : env_(env),
      chunk_bytes_(chunk_bytes),
      lanes_(std::clamp<uint32_t>(o.uc_lanes, 1, UcLinkState::kMaxLanes)),
      replay_every_(o.uc_replay_every),
      fail_after_(o.uc_fail_lane_after),
      stall_after_(o.uc_stall_lane_after) {}

UcDatapath::~UcDatapath() { Clear(); }

UcRingGeometry UcDatapath::RingFor(const TransportConfig& c) const {
  const double bytes = 2.0 * c.rate.BytesPerSecond() * c.initial_rtt.seconds() / lanes_;
  uint64_t slots = static_cast<uint64_t>(bytes / chunk_bytes_) + 1;
  slots = std::min<uint64_t>(slots, kMaxRingBytes / chunk_bytes_);
  slots = std::clamp<uint64_t>(slots, kMinSlots, kMaxSlots);
  slots = (slots + kWindows - 1) / kWindows * kWindows;
  return UcRingGeometry{.slots = static_cast<uint32_t>(slots), .windows = kWindows,
                        .slot_bytes = chunk_bytes_};
}

void UcDatapath::OnConnectionUp(endpoint::ConnectionId id, Time now) {
  Connection* conn = env_.ep->ConnectionAt(id);
  const endpoint::ConnectionMeta* meta = env_.ep->MetaAt(id);
  if (conn == nullptr || meta == nullptr || entries_.contains(id)) return;
  // UD carries everything until the lanes are up.
  conn->SetDatagramLimit(env_.dev->active_mtu());
  env_.ep->Touch(id);
  // The client offers first; a server builds its lanes (and their memory) only for a
  // client that offered (OnPeerState), so a UD client costs it nothing.
  if (!meta->is_server) CreateLink(id, *conn, now);
}

UcDatapath::Entry* UcDatapath::CreateLink(endpoint::ConnectionId id, Connection& conn,
                                          Time now) {
  const UcRingGeometry g = RingFor(conn.config());
  const uint32_t send_depth = std::min(kSendDepth, env_.dev->max_qp_wr());
  const uint32_t recv_entries = lanes_ * 4 * g.slots;  // UcReceiveLane's queue
  const uint32_t send_entries =
      lanes_ * (send_depth + 2 * g.windows + 8 + UcReceiveLane::kPlacementBinds);
  const uint64_t ring_bytes = uint64_t{lanes_} * g.ring_bytes();
  absl::StatusOr<std::unique_ptr<UcLink>> link = absl::InternalError("not created");
  std::vector<uint32_t> ids;
  if (*env_.recv_cq_used + recv_entries > env_.cq_capacity ||
      *env_.send_cq_used + send_entries > env_.cq_capacity) {
    link = absl::ResourceExhaustedError(
        absl::StrCat("completion queues full (", env_.cq_capacity, " entries)"));
  } else if (ring_bytes_ + ring_bytes > kMaxTotalRingBytes) {
    // What peers can make this endpoint register and hold, bounded.
    link = absl::ResourceExhaustedError(absl::StrCat(
        "the UC rings of this endpoint's connections would pass ", kMaxTotalRingBytes >> 20,
        " MiB"));
  } else {
    for (uint32_t i = 0; i < lanes_; ++i) ids.push_back(env_.next_id());
    link = UcLink::Create(*env_.dev, env_.dev->pd(), env_.send_cq, env_.recv_cq, ids, g,
                          send_depth, env_.next_id);
  }
  if (!link.ok()) {
    ++lane_errors_;
    env_.log->Warn("uc-create", now,
                   absl::StrCat("verbs: no UC lane for connection ", id, ": ",
                                link.status().message(), "; it runs over UD"));
    return nullptr;
  }
  *env_.recv_cq_used += recv_entries;
  *env_.send_cq_used += send_entries;
  ring_bytes_ += ring_bytes;
  Entry& e = entries_[id];
  e.link = std::move(*link);
  e.link->set_replay_every(replay_every_);
  e.link->set_fail_after(fail_after_);
  e.link->set_stall_after(stall_after_);
  e.recv_entries = recv_entries;
  e.send_entries = send_entries;
  e.ring_bytes = ring_bytes;
  for (uint32_t i = 0; i < ids.size(); ++i) by_id_[ids[i]] = LaneRef{id, i};
  e.ids = std::move(ids);
  Publish(id, e);
  return &e;
}

void UcDatapath::Release(Entry& e) {
  for (const Held& h : e.held) env_.free_slots->push_back(h.slot);
  e.held.clear();
  e.link->ReleaseSlots(env_.free_slots);
  gone_.Add(*e.link);
  if (e.link->placements() != nullptr) {
    placements_withdrawn_ += e.link->placements()->counters().withdrawn;
  }
  *env_.recv_cq_used -= e.recv_entries;
  *env_.send_cq_used -= e.send_entries;
  ring_bytes_ -= e.ring_bytes;
  for (uint32_t lane_id : e.ids) by_id_.erase(lane_id);
  e.link.reset();
}

void UcDatapath::OnConnectionGone(endpoint::ConnectionId id) {
  declined_.erase(id);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Release(it->second);
  entries_.erase(it);
}

void UcDatapath::Clear() {
  for (auto& [id, e] : entries_) Release(e);
  entries_.clear();
  declined_.clear();
}

void UcDatapath::Publish(endpoint::ConnectionId id, Entry& e) {
  if (!e.link->changed()) return;
  Connection* conn = env_.ep->ConnectionAt(id);
  if (conn == nullptr) return;
  const std::vector<uint8_t> state = e.link->LocalState(*env_.dev).Encode();
  if (absl::Status s = conn->SetDriverState(state); !s.ok()) {
    Fail(id, e, s);
    return;
  }
  e.link->ClearChanged();
  env_.ep->Touch(id);
}

void UcDatapath::Fail(endpoint::ConnectionId id, Entry& e, const absl::Status& s) {
  ++lane_errors_;
  env_.log->Warn("uc-lane", Time::FromNanoseconds(MonotonicNs()),
                 absl::StrCat("verbs: UC lane of connection ", id, ": ", s.message(),
                              "; the connection goes on over UD"));
  // What waited for the lane is lost like on a wire (the core resends its data).
  for (const Held& h : e.held) env_.free_slots->push_back(h.slot);
  e.held.clear();
  Connection* conn = env_.ep->ConnectionAt(id);
  if (conn != nullptr && e.raised) {
    conn->SetDatagramLimit(env_.dev->active_mtu());
    conn->SetPayloadByReference(false);
  }
  e.raised = false;
  if (e.blocked) env_.ep->SetConnectionBlocked(id, false);
  e.blocked = false;
  env_.ep->Touch(id);
}

void UcDatapath::OnPeerState(endpoint::ConnectionId id) {
  Connection* conn = env_.ep->ConnectionAt(id);
  if (conn == nullptr) return;
  std::vector<uint8_t> bytes;
  if (!conn->TakePeerDriverState(&bytes)) return;
  auto it = entries_.find(id);
  Entry* found = it == entries_.end() ? nullptr : &it->second;
  if (found == nullptr && !declined_.contains(id)) {
    // A server's first offer from this client (OnConnectionUp): build its lanes now, once.
    const endpoint::ConnectionMeta* meta = env_.ep->MetaAt(id);
    if (meta != nullptr && meta->is_server) {
      found = CreateLink(id, *conn, Time::FromNanoseconds(MonotonicNs()));
      if (found == nullptr) declined_.insert(id);
    }
  }
  if (found == nullptr) return;  // no lanes here: the peer's offer is ignored (UD)
  Entry& e = *found;
  const bool was_ready = e.link->ready();
  if (absl::Status s = e.link->OnPeerState(*env_.dev, bytes); !s.ok()) {
    if (was_ready || !e.link->ready()) Fail(id, e, s);
    return;
  }
  Raise(id, e, *conn);
  Flush(id, e);
  Publish(id, e);
}

uint64_t UcDatapath::FillPayloads(uint8_t* buf, const endpoint::Transmit& t) {
  uint64_t copied = 0;
  for (const wire::DeferredPayload& d : t.referenced()) {
    std::memcpy(buf + d.offset, d.source, d.length);
    copied += d.length;
  }
  return copied;
}

UcDatapath::Gather UcDatapath::GatherFor(const endpoint::Transmit& t, uint32_t slot,
                                         uint32_t len, std::optional<UcLink::Direct>* direct) {
  static_assert(kMaxGather >= 2 * wire::kMaxDeferredPayloads + 1);
  uint8_t* buf = env_.arena.Slot(slot);
  Gather g;
  std::array<uint64_t, wire::kMaxDeferredPayloads> ids{};
  size_t id_count = 0;
  const uint32_t max_sge = std::min(env_.dev->max_sge(), kMaxGather);
  uint32_t done = 0;  // bytes of the datagram covered
  for (const wire::DeferredPayload& d : t.referenced()) {
    std::optional<uint32_t> lkey =
        env_.regions != nullptr ? env_.regions->Lookup(d.region, d.source, d.length)
                                : std::nullopt;
    // Room for this payload, the slot's bytes before it and those after the last one.
    if (!lkey || g.count + 3 > max_sge) {
      std::memcpy(buf + d.offset, d.source, d.length);
      payload_bytes_copied_ += d.length;
      continue;
    }
    if (d.offset > done) {
      g.sge[g.count++] = ibv_sge{reinterpret_cast<uintptr_t>(buf + done), d.offset - done,
                                 env_.arena.lkey};
    }
    g.sge[g.count++] = ibv_sge{reinterpret_cast<uintptr_t>(d.source), d.length, *lkey};
    done = d.offset + d.length;
    payload_bytes_referenced_ += d.length;
    if (t.referenced().size() == 1 && d.length >= UcDirectDescriptor::kBytes) {
      // The slot's bytes under the payload are unused: the descriptor goes there.
      *direct = UcLink::Direct{d.offset,
                               d.length,
                               d.placement_key != 0 ? (kOfferAdKey | d.placement_key)
                                                    : d.message_id,
                               d.message_id,
                               d.message_offset,
                               d.message_length,
                               buf + d.offset,
                               env_.arena.lkey};
    }
    if (std::find(ids.begin(), ids.begin() + id_count, d.region) == ids.begin() + id_count) {
      ids[id_count++] = d.region;
    }
  }
  if (len > done || g.count == 0) {
    g.sge[g.count++] =
        ibv_sge{reinterpret_cast<uintptr_t>(buf + done), len - done, env_.arena.lkey};
  }
  if (env_.regions != nullptr) {
    env_.regions->NoteSlot(slot, std::span<const uint64_t>(ids.data(), id_count));
  }
  return g;
}

bool UcDatapath::Take(const endpoint::Transmit& t, uint32_t slot, uint32_t len) {
  if (t.connection == 0 || len <= env_.dev->active_mtu()) return false;
  auto it = entries_.find(t.connection);
  if (it == entries_.end() || !it->second.link->ready()) return false;
  Entry& e = it->second;
  std::optional<UcLink::Direct> direct;
  const Gather g = GatherFor(t, slot, len, &direct);
  if (e.held.empty()) {
    absl::StatusOr<bool> posted = e.link->Post(g.span(), len, slot, direct ? &*direct : nullptr);
    if (!posted.ok()) {
      env_.free_slots->push_back(slot);
      Fail(t.connection, e, posted.status());
      return true;
    }
    if (*posted) {
      Publish(t.connection, e);
      return true;
    }
  }
  e.held.push_back(Held{slot, len, g, direct});
  if (!e.blocked) {
    e.blocked = true;
    env_.ep->SetConnectionBlocked(t.connection, true);
  }
  Publish(t.connection, e);  // says it waits
  return true;
}

void UcDatapath::Raise(endpoint::ConnectionId id, Entry& e, Connection& conn) {
  if (!e.link->ready() || e.raised) return;
  // The largest chunk both ends can take: ours, the peer's slots, 16 pieces of the
  // smaller MTU.
  e.max_chunk =
      std::min({chunk_bytes_, e.link->peer_slot_bytes(), kMaxPieces * e.link->piece()});
  conn.SetDatagramLimit(e.max_chunk);
  conn.SetPayloadByReference(true);  // registered payloads gathered from where they are
  e.raised = true;
  e.limit = e.max_chunk;
  e.sized_at = Time::FromNanoseconds(MonotonicNs());
  e.sent_mark = conn.stats().data_packets_sent;
  e.lost_mark = conn.stats().packets_lost;
  env_.ep->Touch(id);
  if (!e.opened) {
    e.opened = true;
    lanes_opened_ += e.link->lane_count();
    LOG(INFO) << "verbs: connection " << id << ": UC lane up, " << e.link->lane_count()
              << " lane(s), chunks of " << e.max_chunk << " bytes written as pieces of "
              << e.link->piece();
  }
}

void UcDatapath::Flush(endpoint::ConnectionId id, Entry& e) {
  while (!e.held.empty() && e.link->ready()) {
    const Held h = e.held.front();
    absl::StatusOr<bool> posted =
        e.link->Post(h.gather.span(), h.len, h.slot, h.direct ? &*h.direct : nullptr);
    if (!posted.ok()) {
      Fail(id, e, posted.status());
      return;
    }
    if (!*posted) break;
    e.held.pop_front();
  }
  if (e.held.empty() && e.blocked) {
    e.blocked = false;
    env_.ep->SetConnectionBlocked(id, false);
    env_.ep->Touch(id);
  }
}

bool UcDatapath::OnRecv(const ibv_wc& wc, Time now) {
  auto b = by_id_.find(WrQp(wc.wr_id));
  if (b == by_id_.end()) return false;
  const endpoint::ConnectionId id = b->second.connection;
  Entry& e = entries_.at(id);
  std::optional<UcDirectDescriptor> direct;
  std::optional<std::span<const uint8_t>> chunk =
      e.link->OnReceive(b->second.lane, wc, now, &direct);
  if (!chunk) return true;
  if (direct) {
    OnDirect(id, e, *chunk, *direct, now);
    return true;
  }
  const endpoint::ConnectionMeta* meta = env_.ep->MetaAt(id);
  if (meta == nullptr) return true;
  const endpoint::LocalId local = meta->is_server ? meta->listener : meta->locals.front();
  // The endpoint copies what it keeps: the slot is settled when this returns.
  env_.ep->OnDatagram(now, local, meta->peer, *chunk);
  return true;
}

void UcDatapath::OnDirect(endpoint::ConnectionId id, Entry& e, std::span<const uint8_t> chunk,
                          const UcDirectDescriptor& d, Time now) {
  const endpoint::ConnectionMeta* meta = env_.ep->MetaAt(id);
  UcPlacements* p = e.link->placements();
  std::optional<UcPlacements::Buffer> buf = p != nullptr ? p->Find(d.key) : std::nullopt;
  if (buf && !buf->message_id && meta != nullptr) {
    // An offer's first direct chunk: it becomes the buffer of the chunk's message, if
    // that message can still take it (else the chunk is checked where it lies and copied,
    // or dropped as a duplicate, and the offer waits for its withdrawal).
    Connection* conn = env_.ep->ConnectionAt(id);
    if (conn != nullptr && !p->KeyOf(d.message_id) &&
        conn->AdoptOffer(d.key & ~kOfferAdKey, d.message_id, d.message_length).ok()) {
      p->Adopt(d.key, d.message_id);  // cannot fail: an offer without a message, a free id
      buf->message_id = d.message_id;
      ++offers_adopted_;
    }
  }
  if (meta == nullptr || !buf || (buf->message_id && *buf->message_id != d.message_id) ||
      d.message_offset > buf->length || d.hole_length > buf->length - d.message_offset) {
    // Its payload went to a buffer that is no longer advertised (its message completed)
    // or never was: nothing readable holds it. Lost, as a chunk that did not arrive.
    ++direct_unplaceable_;
    return;
  }
  const endpoint::LocalId local = meta->is_server ? meta->listener : meta->locals.front();
  // The slot is the link's until this returns; the endpoint may write into its hole.
  const Connection::Placed r = env_.ep->OnPlacedDatagram(
      now, local, meta->peer,
      std::span<uint8_t>(const_cast<uint8_t*>(chunk.data()), chunk.size()), d.hole_offset,
      buf->data + d.message_offset, d.hole_length);
  switch (r) {
    case Connection::Placed::kInPlace:
      ++direct_in_place_;
      direct_bytes_in_place_ += d.hole_length;
      break;
    case Connection::Placed::kCopied:
      ++direct_copied_;
      direct_bytes_copied_ += d.hole_length;
      break;
    case Connection::Placed::kRefused:
      ++direct_refused_;
      p->Strike(d.key);
      break;
  }
}

void UcDatapath::OnConnectionClosed(endpoint::ConnectionId id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.link->placements() == nullptr) return;
  it->second.link->placements()->ForgetAll();
  (void)it->second.link->placements()->TakeRevoked();  // nothing left to deliver them to
}

void UcDatapath::OnRegionRemoved(uint64_t region) {
  for (auto& [id, e] : entries_) {
    if (e.link->placements() != nullptr) e.link->placements()->ForgetRegion(region);
  }
}

void UcDatapath::Place(endpoint::ConnectionId id, Entry& e) {
  UcPlacements* p = e.link->placements();
  Connection* conn = env_.ep->ConnectionAt(id);
  if (p == nullptr || conn == nullptr) return;
  bool changed = false;
  uint64_t done = 0;
  while (conn->TakeHeldComplete(&done)) {  // complete: take the peer's access away first
    std::optional<uint64_t> key = p->KeyOf(done);
    if (key && p->Revoke(*key)) {
      changed = true;
    } else {
      conn->ReleaseDelivery(done);
    }
  }
  for (const UcPlacements::Revoked& r : p->TakeRevoked()) {
    // Every window unbound: the message is delivered, or the offer handed back.
    if (r.message_id) {
      conn->ReleaseDelivery(*r.message_id);
    } else {
      conn->OfferRevoked(r.key & ~kOfferAdKey);
    }
    ++placements_revoked_;
    env_.ep->Touch(id);
  }
  if (env_.regions != nullptr && e.raised) {
    e.next_placement = std::max(e.next_placement, conn->next_undelivered_id());
    const uint64_t end = conn->next_posted_id();
    while (e.next_placement < end && p->active_count() < UcPlacements::kMaxActive) {
      const uint64_t m = e.next_placement;
      uint8_t* data = nullptr;
      ByteCount capacity = 0;
      if (!conn->PostedBuffer(m, &data, &capacity)) {
        ++e.next_placement;
        continue;
      }
      ++e.next_placement;
      if (capacity < kMinPlacement || capacity > UINT32_MAX) continue;
      std::optional<MemoryRegions::Span> region = env_.regions->Containing(data, capacity);
      if (!region || !conn->HoldDelivery(m).ok()) continue;
      absl::Status s = p->Advertise(m, data, static_cast<uint32_t>(capacity), region->id,
                                    region->data, region->size);
      if (!s.ok()) {
        conn->ReleaseDelivery(m);
        ++placement_errors_;
        env_.log->Warn("uc-placement", Time::FromNanoseconds(MonotonicNs()),
                       absl::StrCat("verbs: connection ", id, ": a receive buffer cannot be "
                                    "advertised (", s.message(), "); its message is copied"));
        continue;
      }
      ++placements_advertised_;
      changed = true;
    }
  }
  if (PlaceOffers(id, *conn, *p)) changed = true;
  if (p->TakeChanged()) changed = true;  // withdrawn advertisements
  if (changed) e.link->MarkChanged();
}

// Offered buffers (Connection::OfferReceive): advertised in the order offered while
// there is room, each looked at once; those the application withdraws are revoked
// first (Connection::OfferRevoked hands them back, in Place).
bool UcDatapath::PlaceOffers(endpoint::ConnectionId id, Connection& conn, UcPlacements& p) {
  bool changed = false;
  std::vector<std::pair<uint64_t, bool>> noted;  // key, advertised
  for (const ReceiveOffer& o : conn.offers()) {
    const uint64_t key = kOfferAdKey | o.key;
    if (o.withdrawing) {
      if (!p.revoking(key) && p.Revoke(key)) changed = true;
      continue;
    }
    if (o.considered || p.active_count() >= UcPlacements::kMaxActive) continue;
    bool advertised = false;
    std::optional<MemoryRegions::Span> region =
        env_.regions != nullptr && o.capacity >= kMinPlacement && o.capacity <= UINT32_MAX
            ? env_.regions->Containing(o.data, o.capacity)
            : std::nullopt;
    if (region) {
      absl::Status s = p.Advertise(key, o.data, static_cast<uint32_t>(o.capacity), region->id,
                                   region->data, region->size);
      if (s.ok()) {
        advertised = true;
        ++placements_advertised_;
        changed = true;
      } else {
        ++placement_errors_;
        env_.log->Warn("uc-placement", Time::FromNanoseconds(MonotonicNs()),
                       absl::StrCat("verbs: connection ", id, ": an offered buffer cannot be "
                                    "advertised (", s.message(), "); its message is copied"));
      }
    }
    noted.emplace_back(o.key, advertised);
  }
  for (const auto& [key, advertised] : noted) conn.NoteOfferPlacement(key, advertised);
  return changed;
}

bool UcDatapath::OnSend(const ibv_wc& wc) {
  if (wc.wr_id == kBindWr) {
    if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
      ++lane_errors_;
      env_.log->Warn("uc-bind", Time::FromNanoseconds(MonotonicNs()),
                     absl::StrCat("verbs: UC window bind failed: ", Ibverbs().wc_status_str(wc.status)));
    }
    return true;
  }
  auto b = by_id_.find(WrQp(wc.wr_id));
  if (b == by_id_.end()) return false;
  const endpoint::ConnectionId id = b->second.connection;
  Entry& e = entries_.at(id);
  const bool was_ready = e.link->ready();
  e.link->OnSendCompletion(b->second.lane, wc, env_.free_slots);
  if (was_ready && !e.link->ready()) {
    Fail(id, e, absl::InternalError(
                    absl::StrCat("write completion: ", Ibverbs().wc_status_str(wc.status))));
    return true;
  }
  Flush(id, e);
  return true;
}

void UcDatapath::Maintain(Time now) {
  for (auto& [id, e] : entries_) {
    const bool was_ready = e.link->ready();
    if (absl::Status s = e.link->Maintain(now, env_.free_slots); !s.ok()) {
      Fail(id, e, s);
      continue;
    }
    if (was_ready && !e.link->ready()) {  // its last lane stalled (7.6)
      Fail(id, e, absl::UnavailableError("the peer received nothing of its lanes' writes"));
    }
    for (const UcLink::IdChange& c : e.link->TakeIdChanges()) {  // a writer replaced
      // The lane's receiving end keeps its id (its receives and binds still carry it).
      if (c.old_id != e.link->rx_id(c.lane)) {
        by_id_.erase(c.old_id);
        std::replace(e.ids.begin(), e.ids.end(), c.old_id, c.new_id);
      } else {
        e.ids.push_back(c.new_id);
      }
      by_id_[c.new_id] = LaneRef{id, c.lane};
    }
    Place(id, e);
    if (!e.raised && e.link->ready()) {
      if (Connection* conn = env_.ep->ConnectionAt(id)) {
        Raise(id, e, *conn);
        Flush(id, e);
      }
    }
    if (e.raised && now - e.sized_at >= kResizeEvery) Resize(id, e, now);
    Publish(id, e);
  }
}

// The chunk follows the loss it meets (docs/rdma.md 7.7): a lost packet loses its whole
// chunk, so over each period with enough data packets the chunk halves while more than
// kShrinkAbove of them were lost (down to two pieces) and doubles back while fewer than
// kGrowBelow were (up to the configured chunk): the tuner's 2 % budget, kept at run time.
void UcDatapath::Resize(endpoint::ConnectionId id, Entry& e, Time now) {
  Connection* conn = env_.ep->ConnectionAt(id);
  if (conn == nullptr) return;
  const ConnectionStats& st = conn->stats();
  const uint64_t sent = st.data_packets_sent - e.sent_mark;
  const uint64_t lost = st.packets_lost - e.lost_mark;
  if (sent < kResizePackets) return;
  e.sent_mark = st.data_packets_sent;
  e.lost_mark = st.packets_lost;
  e.sized_at = now;
  const double loss = static_cast<double>(lost) / static_cast<double>(sent);
  const uint32_t piece = std::max<uint32_t>(e.link->piece(), 1);
  uint32_t next = e.limit;
  // Two pieces at least: a datagram of one goes over UD anyway (Take).
  const uint32_t floor = std::min(e.max_chunk, 2 * piece);
  if (loss > kShrinkAbove && e.limit > floor) {
    next = std::max(floor, (e.limit / 2 + piece - 1) / piece * piece);
    ++shrinks_;
  } else if (loss < kGrowBelow && e.limit < e.max_chunk) {
    next = std::min(e.max_chunk, e.limit * 2);
    ++grows_;
  }
  if (next == e.limit) return;
  VLOG(1) << "verbs: connection " << id << ": chunk " << e.limit << " -> " << next
          << " bytes (" << lost << " of " << sent << " data packets lost)";
  e.limit = next;
  conn->SetDatagramLimit(next);
  env_.ep->Touch(id);
}

Time UcDatapath::NextWake(Time now) const {
  for (const auto& [id, e] : entries_) {
    if (e.link->peer_waiting()) return now + Duration::Milliseconds(50);
  }
  return Time::Infinite();
}

bool UcDatapath::has_inflight() const {
  for (const auto& [id, e] : entries_) {
    if (e.link->has_inflight()) return true;
  }
  return false;
}

void UcDatapath::Totals::Add(const UcLink& link) {
  const UcLink::Counters& l = link.counters();
  c.chunks_sent += l.chunks_sent;
  c.chunk_bytes_sent += l.chunk_bytes_sent;
  c.chunks_received += l.chunks_received;
  c.grant_waits += l.grant_waits;
  c.replays += l.replays;
  c.lanes_failed += l.lanes_failed;
  c.lanes_replaced += l.lanes_replaced;
  c.lanes_stalled += l.lanes_stalled;
  c.direct_chunks += l.direct_chunks;
  c.direct_bytes += l.direct_bytes;
  const std::vector<uint64_t> lane = link.lane_chunks();
  for (size_t i = 0; i < lane.size() && i < lane_chunks.size(); ++i) lane_chunks[i] += lane[i];
  const UcReceiveLane::Stats ls = link.receive_stats();
  stale += ls.lane.stale_completions;
  given_up += ls.lane.given_up;
}

void UcDatapath::AddStats(EndpointStats* s) const {
  Totals t = gone_;
  for (const auto& [id, e] : entries_) t.Add(*e.link);
  s->uc_chunks_sent += t.c.chunks_sent;
  s->uc_chunk_bytes_sent += t.c.chunk_bytes_sent;
  s->uc_chunks_received += t.c.chunks_received;
  s->uc_stale_completions += t.stale;
  s->uc_chunks_given_up += t.given_up;
  s->uc_grant_waits += t.c.grant_waits;
  s->uc_replays += t.c.replays;
  s->uc_lanes_failed += t.c.lanes_failed;
  s->uc_lanes_replaced += t.c.lanes_replaced;
  s->uc_lanes_stalled += t.c.lanes_stalled;
  for (size_t i = 0; i < t.lane_chunks.size(); ++i) s->uc_lane_chunks_sent[i] += t.lane_chunks[i];
  s->uc_lane_errors += lane_errors_;
  s->uc_lanes_opened += lanes_opened_;
  s->uc_chunk_shrinks += shrinks_;
  s->uc_chunk_grows += grows_;
  s->uc_payload_bytes_referenced += payload_bytes_referenced_;
  s->uc_payload_bytes_copied += payload_bytes_copied_;
  s->uc_direct_chunks_sent += t.c.direct_chunks;
  s->uc_direct_bytes_sent += t.c.direct_bytes;
  s->uc_placements_advertised += placements_advertised_;
  s->uc_placements_revoked += placements_revoked_;
  s->uc_placement_errors += placement_errors_;
  s->uc_direct_chunks_received += direct_in_place_ + direct_copied_;
  s->uc_direct_bytes_in_place += direct_bytes_in_place_;
  s->uc_direct_bytes_copied += direct_bytes_copied_;
  s->uc_direct_chunks_refused += direct_refused_ + direct_unplaceable_;
  s->uc_placements_withdrawn += placements_withdrawn_;
  s->uc_offers_adopted += offers_adopted_;
  for (const auto& [id, e] : entries_) {
    if (e.link->placements() != nullptr) {
      s->uc_placements_withdrawn += e.link->placements()->counters().withdrawn;
    }
  }
}

}  // namespace longhaul::verbs
