// One connection's UC datapath (docs/rdma.md section 7): Q lanes (1 to 4), each the lane
// this side receives on (UcReceiveLane: its own protection domain, ring and queue pair)
// and the UC queue pair it writes the peer's lane of the same index through, with the
// set-up and grant state both sides exchange as the connection's driver state
// (Connection::SetDriverState, carried reliably inside the protected connection; the
// newest wins).
//
// Set-up (docs/rdma.md 7.3): the client creates its link when the connection is up and
// sends its state (its GID, active MTU, every lane's two QPNs and PSNs); the server
// creates its link on that first state. On the peer's first state a side connects every
// lane (its receiving QP to the peer's writing QP, its writing QP to the peer's receiving
// QP), binds its rings' windows for lap 0 and sends its state again, now with the rings
// (address, geometry, lap-0 keys) and the grants. On a peer's ring it may write that
// lane: ready() once one lane can. About one round trip after the handshake; until then,
// and for good if the peer offers no lane (a UD-only peer), the connection stays on UD.
// Both sides use the smaller lane count of the two.
//
// Chunks are sprayed over the lanes in turn (a lane without a grant or send queue room
// is passed over); each lane's QP number gives RoCE v2 its own UDP source port (ECMP
// entropy). A chunk is written as single-packet RDMA WRITEs of the piece size (the
// smaller active MTU of the two sides), the last one WITH IMMEDIATE (the lap, the piece
// count and the slot): every packet is a whole UC message, so a lost packet can leave no
// message half done at the responder (rxe never recovers from one: 7.11), and a chunk
// with a lost or stale piece fails its AEAD tag or CRC32C and counts as lost.
//
// A lane whose writes fail (a refused post, an error completion: a UC QP errs only for
// local reasons) is taken out: its chunks in flight are losses the core repairs, the
// other lanes carry on, and with none left the connection runs over UD. A second later
// its writer is replaced (a new QP, the lane's generation advanced in the state; the
// peer resets its receiving QP and connects it to the new one; the ring, its keys and
// the chunk numbering go on), at most kMaxReplacements times per lane.
//
// Thread-compatible: the driver thread owns it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/clock.h"
#include "transport/drivers/verbs/uc_lane.h"
#include "transport/drivers/verbs/uc_lane_io.h"
#include "transport/drivers/verbs/uc_link_state.h"
#include "transport/drivers/verbs/uc_placement.h"
#include "transport/drivers/verbs/uc_queue_pair.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

class UcLink {
 public:
  struct Counters {
    uint64_t chunks_sent = 0;
    uint64_t chunk_bytes_sent = 0;
    uint64_t chunks_received = 0;
    uint64_t grant_waits = 0;       // times every lane waited for a grant or queue room
    uint64_t idle_retirements = 0;  // OnIdle calls (the peer waited through a quiet spell)
    uint64_t send_errors = 0;
    uint64_t bad_peer_states = 0;
    uint64_t replays = 0;  // test mode (VerbsOptions::uc_replay_every)
    uint64_t lanes_failed = 0;
    uint64_t lanes_replaced = 0;
    uint64_t lanes_stalled = 0;  // of lanes_failed: the peer saw none of their chunks
    uint64_t direct_chunks = 0;  // chunks whose payload went into the peer's buffer
    uint64_t direct_bytes = 0;   // their payload bytes
  };
  static constexpr uint32_t kMaxReplacements = 3;
  static constexpr Duration kReplaceAfter = Duration::Seconds(1);
  // A lane stalls (docs/rdma.md 7.6) when at least kStallChunks of its chunks went out
  // over at least kStallAfter without the peer's count of that lane moving: UC reports
  // nothing of writes the path or the receiving NIC drops. Taken out like a lane that
  // erred (and replaced: a new QP number is a new RoCE v2 source port, maybe a new path).
  // The peer publishes its counts at least every kCountEvery while they move, so paths
  // up to about kStallAfter - kCountEvery of round trip are never mistaken for a stall.
  static constexpr uint64_t kStallChunks = 32;
  static constexpr Duration kStallAfter = Duration::Seconds(1);
  static constexpr Duration kCountEvery = Duration::Milliseconds(100);

  // `ids`: one work request id space per lane (WrId(ids[i], .)); lane i's receive
  // completions carry WrId(ids[i], 0), its writes WrId(tx_id(i), slot) (ids[i] until the
  // writer is replaced: a fresh id from `next_id` then). The writing QPs live in
  // `send_pd` (the driver's, where its send arena is registered: that domain holds no
  // remotely writable memory). `dev` outlives the link.
  static absl::StatusOr<std::unique_ptr<UcLink>> Create(const VerbsDevice& dev, ibv_pd* send_pd,
                                                        ibv_cq* send_cq, ibv_cq* recv_cq,
                                                        const std::vector<uint32_t>& ids,
                                                        UcRingGeometry g, uint32_t send_depth,
                                                        std::function<uint32_t()> next_id);
  ~UcLink();
  UcLink(const UcLink&) = delete;
  UcLink& operator=(const UcLink&) = delete;

  uint32_t lane_count() const { return static_cast<uint32_t>(lanes_.size()); }
  uint32_t tx_id(uint32_t lane) const { return lanes_[lane].tx_id; }
  // Writers replaced since the last call: (lane, the old writer's id, the new one's).
  struct IdChange {
    uint32_t lane, old_id, new_id;
  };
  std::vector<IdChange> TakeIdChanges() { return std::move(id_changes_); }
  // Test modes: VerbsOptions::uc_replay_every and uc_fail_lane_after.
  void set_replay_every(uint32_t n) { replay_every_ = n; }
  void set_fail_after(uint64_t n) { fail_after_ = n; }
  // Test mode (VerbsOptions::uc_stall_lane_after): lane 0's first writer writes with a
  // wrong key after n chunks.
  void set_stall_after(uint64_t n) { stall_after_ = n; }

  // The state to send the peer (after Create, and whenever changed() says so).
  UcLinkState LocalState(const VerbsDevice& dev) const;
  bool changed() const { return changed_; }
  // Something the state carries changed outside the link (this side's placements).
  void MarkChanged() { changed_ = true; }
  void ClearChanged() { changed_ = false; }

  // The peer's latest state. Errors (a malformed or inconsistent state, a refused
  // transition) leave the link not ready; the connection goes on over UD.
  absl::Status OnPeerState(const VerbsDevice& dev, std::span<const uint8_t> bytes);

  // Some lane may be written (the peer's ring is known, the lane works).
  bool ready() const;
  uint32_t piece() const { return piece_; }
  // The smallest slot of the peer's rings this side may write (0 before any).
  uint32_t peer_slot_bytes() const;
  // Receive-side placement (docs/rdma.md 7.15), the sending end: the chunk's one DATA
  // payload, [hole_offset, hole_offset + hole_length) of the datagram, belongs to message
  // `message_id` (`message_length` bytes) at `message_offset`, whose buffer the peer
  // advertises under `key` (the message id, or kOfferAdKey | its placement key). If the
  // peer advertised such a buffer and it holds the payload, the chunk goes direct: the payload into that buffer, then, with the
  // immediate, the rest of the datagram and a UcDirectDescriptor (encoded into
  // `descriptor`, kBytes of registered memory under `descriptor_lkey` that the caller
  // does not need until the chunk's send completion: the arena slot's own hole) as one
  // tail into the ring slot.
  struct Direct {
    uint32_t hole_offset = 0;
    uint32_t hole_length = 0;
    uint64_t key = 0;
    uint64_t message_id = 0;
    uint64_t message_offset = 0;
    uint64_t message_length = 0;
    uint8_t* descriptor = nullptr;
    uint32_t descriptor_lkey = 0;
  };
  // Whether the peer advertised a buffer that holds `d`'s payload.
  bool CanPlace(const Direct& d) const;
  // Posts the `len` bytes gathered from `gather` (the driver's arena slot `slot`, and
  // with zero copy the application's registered memory; UcQueuePair::PostPieces) as the
  // next chunk of the next lane that can take it, direct when `direct` is set and the
  // peer's advertisement allows (CanPlace). false: none can now (nothing posted; the
  // caller keeps the buffer and calls again after the next grant or send completion).
  // Errors: the link cannot write any more (ready() is false).
  absl::StatusOr<bool> Post(std::span<const ibv_sge> gather, uint32_t len, uint32_t slot,
                            const Direct* direct = nullptr);
  // A send completion of lane `lane`'s writing QP: the arena slots up to the signalled
  // one are free again (appended to `freed`). An error completion takes the lane out.
  void OnSendCompletion(uint32_t lane, const ibv_wc& wc, std::vector<uint32_t>* freed);
  // Every arena slot still posted (the link is going).
  void ReleaseSlots(std::vector<uint32_t>* freed);
  bool has_inflight() const;

  // A receive completion of lane `lane`: the chunk to hand to the endpoint now, or
  // nullopt; `direct` is set for a direct chunk (its payload is in one of this side's
  // advertised buffers: placements()).
  std::optional<std::span<const uint8_t>> OnReceive(uint32_t lane, const ibv_wc& wc, Time now,
                                                    std::optional<UcDirectDescriptor>* direct);
  // This side's advertised buffers (null until the link is connected).
  UcPlacements* placements() { return placements_.get(); }
  // The work request id of lane `lane`'s receiving end (it never changes).
  uint32_t rx_id(uint32_t lane) const { return lanes_[lane].id; }
  // After a batch: receives reposted, windows rebound (changed() then says to send the
  // grants); after a quiet spell while the peer waits, the lane's oldest window retired;
  // a failed writer due for replacement replaced (the arena slots its old QP held go to
  // `freed`).
  absl::Status Maintain(Time now, std::vector<uint32_t>* freed);

  // The peer says its sender waits for one of this side's grants.
  bool peer_waiting() const;
  const Counters& counters() const { return counters_; }
  // Chunks written per lane.
  std::vector<uint64_t> lane_chunks() const;
  // The receiving lanes' counters, summed.
  UcReceiveLane::Stats receive_stats() const;

 private:
  struct Lane {
    uint32_t id = 0;     // the receiving lane's work request id
    uint32_t tx_id = 0;  // the writer's
    uint32_t generation = 0;       // of this side's writer
    uint32_t peer_generation = 0;  // of the peer's writer, as connected
    uint32_t replacements = 0;
    Time replace_at = Time::Infinite();
    UcPeer peer_receiver;  // what the writer connects to
    std::unique_ptr<UcReceiveLane> rx;
    std::unique_ptr<UcQueuePair> tx_qp;
    std::optional<UcLaneSender> tx;
    uint64_t peer_ring = 0;
    uint32_t peer_slots = 0;
    uint32_t peer_slot_bytes = 0;
    bool failed = false;  // this side's writing QP
    std::optional<uint64_t> waiting;
    bool peer_waiting = false;
    Time last_chunk = Time::Zero();
    Time last_idle = Time::Zero();
    std::deque<uint32_t> posted;     // arena slots, in order
    std::deque<uint32_t> slot_wrs;   // work requests of each posted slot
    uint32_t send_wrs = 0;           // work requests outstanding (pieces)
    uint32_t unsignalled = 0;
    uint64_t chunks = 0;
    uint32_t received = 0;       // chunks this side's lane was handed (published)
    uint32_t peer_received = 0;  // the peer's count of this lane's chunks
    uint64_t unconfirmed = 0;    // chunks written since that count last moved
    Time unconfirmed_since = Time::Infinite();
    bool writable() const { return tx.has_value() && !failed; }
  };
  UcLink() = default;
  absl::StatusOr<bool> PostOn(Lane& l, std::span<const ibv_sge> gather, uint32_t len,
                              uint32_t slot, const Direct* direct);
  // The peer's advertisement that holds `d`'s payload, or null.
  const UcPlacementAd* PeerAd(const Direct& d) const;
  // Posts the chunk direct: its payload to `payload_addr` through `payload_key`, its tail
  // (with `d`'s descriptor) to ring placement `ring_addr` / `ring_key` (or a late duplicate
  // of it, the payload through a withdrawn advertisement).
  absl::Status PostDirect(Lane& l, std::span<const ibv_sge> gather, uint32_t len,
                          const Direct& d, uint64_t payload_addr, uint32_t payload_key,
                          uint64_t ring_addr, uint32_t ring_key, uint32_t immediate,
                          uint64_t wr_id, bool signaled, uint32_t* wrs);
  void Fail(Lane& l);
  void Replace(Lane& l, std::vector<uint32_t>* freed);

  const VerbsDevice* dev_ = nullptr;
  ibv_pd* send_pd_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  std::function<uint32_t()> next_id_;
  std::vector<IdChange> id_changes_;
  std::vector<Lane> lanes_;
  uint32_t next_lane_ = 0;
  uint32_t piece_ = 0;
  uint32_t send_depth_ = 0;
  bool connected_ = false;
  bool failed_ = false;  // the set-up failed
  bool changed_ = true;
  uint64_t sent_grant_version_ = 0;
  uint32_t replay_every_ = 0;
  uint64_t fail_after_ = 0;
  uint64_t stall_after_ = 0;
  std::unique_ptr<UcPlacements> placements_;     // this side's advertised buffers
  std::vector<UcPlacementAd> peer_placements_;  // the peer's, from its latest state
  std::deque<UcPlacementAd> old_peer_placements_;  // withdrawn ones (late-duplicate test mode)
  uint64_t published_received_ = 0;  // the counts' sum when last made to publish
  Time counts_at_ = Time::Zero();
  Counters counters_;
};

}  // namespace longhaul::verbs
