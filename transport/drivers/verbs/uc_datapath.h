// The verbs driver's UC datapath (VerbsOptions::qp_type uc; docs/rdma.md section 7): a
// UcLink per connection, created when a client's connection is up or when a server's
// client first offers its lanes, and gone with the connection. The driver hands it
//   - each datagram PollTransmit wrote (Take): larger than the UD MTU and the link up ->
//     written as a chunk (or queued while the lane waits for a grant, the connection
//     blocked meanwhile); otherwise the driver sends it over UD (FillPayloads first);
//   - completions whose work request id names a link (OnRecv, OnSend);
//   - the peer's driver state (OnPeerState);
// and calls Maintain after each batch. Connections start limited to the UD MTU
// (Connection::SetDatagramLimit) and are raised to the chunk size when their link is up;
// then they also send by reference (Connection::SetPayloadByReference): a chunk's DATA
// payloads from memory the application registered (MemoryRegions) are gathered by the
// NIC from where they are, not copied (docs/rdma.md 7.14).
//
// Thread-compatible: the driver thread owns it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "transport/base/clock.h"
#include "transport/base/rate_limited_log.h"
#include "transport/core/config.h"
#include "transport/datapath/options.h"
#include "transport/drivers/verbs/memory_regions.h"
#include "transport/drivers/verbs/queue_pair.h"
#include "transport/drivers/verbs/uc_link.h"
#include "transport/drivers/verbs/uc_queue_pair.h"
#include "transport/drivers/verbs/verbs_device.h"
#include "transport/endpoint/sans_io_endpoint.h"

namespace longhaul::verbs {

class UcDatapath {
 public:
  struct Env {
    const VerbsDevice* dev = nullptr;
    ibv_cq* send_cq = nullptr;
    ibv_cq* recv_cq = nullptr;
    SendArena arena;  // the driver's (chunk-sized slots), registered in dev->pd()
    endpoint::SansIoEndpoint* ep = nullptr;
    std::function<uint32_t()> next_id;  // work request id space shared with the UD QPs
    RateLimitedLog* log = nullptr;
    std::vector<uint32_t>* free_slots = nullptr;  // the arena's free slots
    // The driver's completion queue budget (entries used of cq_capacity).
    uint32_t* recv_cq_used = nullptr;
    uint32_t* send_cq_used = nullptr;
    uint32_t cq_capacity = 0;
    MemoryRegions* regions = nullptr;  // zero copy: the application's registered memory
  };

  // The chunk size for `o` on a port of `mtu` bytes: o.uc_chunk, or 16 pieces, within the
  // core's largest datagram.
  static uint32_t ChunkBytes(const VerbsOptions& o, uint32_t mtu);

  // `o`: the lanes per connection and the test modes.
  UcDatapath(Env env, uint32_t chunk_bytes, const VerbsOptions& o);
  ~UcDatapath();

  uint32_t chunk_bytes() const { return chunk_bytes_; }
  // The ring each of a connection's lanes gets: its share of rate x initial RTT x 2 of
  // chunks (what the lanes must hold while grants cross the path), in 8 windows, 64 to
  // 2048 slots, 128 MiB at most.
  UcRingGeometry RingFor(const TransportConfig& c) const;

  void OnConnectionUp(endpoint::ConnectionId id, Time now);
  // The connection closed (before the application gets its last events, its posted
  // buffers among them): the peer's access to this side's advertised buffers ends now.
  void OnConnectionClosed(endpoint::ConnectionId id);
  // The application deregistered region `region`: advertisements in it end at once.
  void OnRegionRemoved(uint64_t region);
  // Arena slots the link still held go back to the free list.
  void OnConnectionGone(endpoint::ConnectionId id);
  void OnPeerState(endpoint::ConnectionId id);

  // The datagram PollTransmit wrote into arena slot `slot`: true when the UC path took it
  // (the slot is the link's until its send completion); false: send it over UD.
  bool Take(const endpoint::Transmit& t, uint32_t slot, uint32_t len);
  // The payloads `t` left in the application's memory (Transmit::referenced), copied
  // into the datagram at `buf` (one going over UD). Returns the bytes copied.
  static uint64_t FillPayloads(uint8_t* buf, const endpoint::Transmit& t);
  void CountCopied(uint64_t bytes) { payload_bytes_copied_ += bytes; }
  // A completion whose work request names a link (false: not one of the links').
  bool OnRecv(const ibv_wc& wc, Time now);
  bool OnSend(const ibv_wc& wc);
  void Maintain(Time now);
  // When Maintain must run again at the latest (a peer waits for a grant: the idle
  // retirement), or Infinite.
  Time NextWake(Time now) const;
  bool has_inflight() const;
  // Every link goes (the device is closing).
  void Clear();

  void AddStats(EndpointStats* s) const;

 private:
  // A chunk's bytes: its arena slot around the payloads sent from where they are.
  struct Gather {
    std::array<ibv_sge, kMaxGather> sge{};
    uint32_t count = 0;
    std::span<const ibv_sge> span() const { return std::span<const ibv_sge>(sge.data(), count); }
  };
  struct Held {
    uint32_t slot;
    uint32_t len;
    Gather gather;
    std::optional<UcLink::Direct> direct;
  };
  // The gather list of the datagram in `slot`: payloads of registered memory by
  // reference, any other payload copied into the slot (counted). `direct`: set when the
  // datagram's one payload went by reference (receive-side placement may take it).
  Gather GatherFor(const endpoint::Transmit& t, uint32_t slot, uint32_t len,
                   std::optional<UcLink::Direct>* direct);
  struct Entry {
    std::unique_ptr<UcLink> link;
    std::vector<uint32_t> ids;  // its lanes' work request ids
    uint32_t recv_entries = 0;
    uint32_t send_entries = 0;
    uint64_t ring_bytes = 0;
    bool raised = false;   // the connection's datagram limit is a chunk (`limit`)
    bool opened = false;   // counted in lanes_opened_
    uint32_t limit = 0;
    uint32_t max_chunk = 0;  // what both ends can take (OnPeerState)
    Time sized_at;
    uint64_t sent_mark = 0, lost_mark = 0;  // the connection's counters at sized_at
    bool blocked = false;  // SetConnectionBlocked
    std::deque<Held> held;  // chunks waiting for a grant or send queue room
    uint64_t next_placement = 0;  // the next message whose posted buffer to look at
  };
  // Receive-side placement (docs/rdma.md 7.15): posted buffers in registered memory
  // advertised (their messages held), completed messages revoked, revoked ones released.
  void Place(endpoint::ConnectionId id, Entry& e);
  // Place's part for offered buffers; true when the advertisements changed.
  bool PlaceOffers(endpoint::ConnectionId id, Connection& conn, UcPlacements& p);
  // A direct chunk arrived: its payload is in the buffer advertised for its message.
  void OnDirect(endpoint::ConnectionId id, Entry& e, std::span<const uint8_t> chunk,
                const UcDirectDescriptor& d, Time now);
  void Publish(endpoint::ConnectionId id, Entry& e);
  void Flush(endpoint::ConnectionId id, Entry& e);
  void Fail(endpoint::ConnectionId id, Entry& e, const absl::Status& s);
  // The connection's lanes; null (logged, counted; it stays on UD) when they cannot be
  // had: completion queue entries, the endpoint's ring budget, the device's refusal.
  Entry* CreateLink(endpoint::ConnectionId id, Connection& conn, Time now);
  void Release(Entry& e);
  // Its connection's datagram limit up to the chunk, once a lane may be written.
  void Raise(endpoint::ConnectionId id, Entry& e, Connection& conn);
  void Resize(endpoint::ConnectionId id, Entry& e, Time now);

  Env env_;
  uint32_t chunk_bytes_;
  uint32_t lanes_;
  uint32_t replay_every_;
  uint64_t fail_after_;
  uint64_t stall_after_;
  absl::flat_hash_map<endpoint::ConnectionId, Entry> entries_;
  struct LaneRef {
    endpoint::ConnectionId connection;
    uint32_t lane;
  };
  absl::flat_hash_map<uint32_t, LaneRef> by_id_;  // a lane's work request id
  // Counters summed over links (those gone, and for AddStats the live ones too).
  struct Totals {
    UcLink::Counters c;
    std::array<uint64_t, 4> lane_chunks{};
    uint64_t stale = 0, given_up = 0;
    void Add(const UcLink& link);
  };
  Totals gone_;
  uint64_t lane_errors_ = 0;
  uint64_t lanes_opened_ = 0;
  uint64_t shrinks_ = 0, grows_ = 0;
  uint64_t ring_bytes_ = 0;  // registered by every link
  uint64_t payload_bytes_referenced_ = 0;  // gathered from the application's memory
  uint64_t payload_bytes_copied_ = 0;      // by-reference payloads that had to be copied
  // Receive-side placement, this side's: buffers advertised and revoked, direct chunks
  // whose payload was checked in place / copied / refused (checksum) / unplaceable (no
  // advertisement for their message any more), and advertisements the device refused.
  uint64_t placements_advertised_ = 0, placements_revoked_ = 0, placement_errors_ = 0;
  uint64_t placements_withdrawn_ = 0;  // of links gone
  uint64_t offers_adopted_ = 0;        // offered buffers a message took (7.15)
  uint64_t direct_in_place_ = 0, direct_copied_ = 0, direct_refused_ = 0,
           direct_unplaceable_ = 0;
  uint64_t direct_bytes_in_place_ = 0, direct_bytes_copied_ = 0;
  absl::flat_hash_set<endpoint::ConnectionId> declined_;  // a server that could not offer
};

}  // namespace longhaul::verbs
