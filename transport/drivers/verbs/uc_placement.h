// Receive-side placement, the receiving end (docs/rdma.md 7.15): buffers the application
// posted for given messages (Connection::PostReceive) or offered under its own keys
// (Connection::OfferReceive), in memory it registered, that the peer may write one
// message's payload into, each through one type-1 memory window per lane over exactly
// the buffer. An advertisement's key (UcPlacementAd) is the message id of a posted
// buffer, or kOfferAdKey | the offer's key; an offer is adopted by the message whose first
// direct chunk names it (Adopt), and then revoked and released like a posted buffer. A lane's windows live in that lane's own protection
// domain (as its ring's), over a registration there of the application's region with
// local write and window binding only: the region's own key grants the peer nothing.
//
// A buffer is advertised (Advertise: the windows bound, their keys go to the peer in the
// link state) and revoked before its message is handed to the application (Revoke: each
// window rebound to nothing, which advances its key; the message is released only once
// every one of those binds completed, so no write through an old key can land after the
// application has the buffer). Windows are reused; a window whose unbind did not complete
// (flushed) is deallocated instead. A late write of a revoked advertisement finds a key
// that no longer answers and is dropped by the NIC (UC reports nothing to its sender).
//
// Work requests: binds are posted on each lane's receiving queue pair with wr_id
// WrId(lane id, kPlacementWr | index), the revoking ones with kPlacementUnbind too
// (index: the advertisement's, < kMaxActive).
// Thread-compatible: the driver thread owns it.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "transport/drivers/verbs/uc_link_state.h"
#include "transport/drivers/verbs/uc_queue_pair.h"

namespace longhaul::verbs {

inline constexpr uint32_t kPlacementWr = 0x80000000u;      // in WrSlot of a placement bind
inline constexpr uint32_t kPlacementUnbind = 0x40000000u;  // and of one that revokes

class UcPlacements {
 public:
  static constexpr uint32_t kMaxActive = UcLinkState::kMaxPlacements;
  struct Lane {
    ibv_pd* pd = nullptr;      // the lane's receiving domain
    UcQueuePair* qp = nullptr;  // its receiving queue pair (binds)
    uint32_t wr_id = 0;        // its work request id space
  };
  struct Counters {
    uint64_t advertised = 0;       // buffers advertised
    uint64_t revoked = 0;          // and revoked (their messages released)
    uint64_t bind_errors = 0;      // binds that failed or were flushed
    uint64_t region_registrations = 0;  // a region registered in a lane's domain
    uint64_t withdrawn = 0;        // advertisements withdrawn (a failed bind, strikes)
  };

  explicit UcPlacements(std::vector<Lane> lanes) : lanes_(std::move(lanes)) {}
  ~UcPlacements();
  UcPlacements(const UcPlacements&) = delete;
  UcPlacements& operator=(const UcPlacements&) = delete;

  // Advertises [data, data + len) under `key` inside the application's registered region
  // `region` ([base, base + size)). ResourceExhausted when kMaxActive are active; the
  // refused call otherwise (registration, window).
  absl::Status Advertise(uint64_t key, uint8_t* data, uint32_t len, uint64_t region,
                         uint8_t* base, size_t size);
  bool active(uint64_t key) const { return by_key_.contains(key); }
  bool revoking(uint64_t key) const {
    auto it = by_key_.find(key);
    return it != by_key_.end() && ads_[it->second].revoking;
  }
  size_t active_count() const { return by_key_.size(); }
  // Where the buffer advertised under `key` is, if it is (revoked or not yet), and the
  // message it is for (a posted buffer's, an adopted offer's; none yet for an offer).
  struct Buffer {
    uint8_t* data = nullptr;
    uint32_t length = 0;
    std::optional<uint64_t> message_id;
  };
  std::optional<Buffer> Find(uint64_t key) const;
  // The offer advertised under `key` is now message `message_id`'s buffer (false: no such
  // offer, or it has a message already).
  bool Adopt(uint64_t key, uint64_t message_id);
  // The key of the advertisement whose buffer is message `message_id`'s.
  std::optional<uint64_t> KeyOf(uint64_t message_id) const;
  // Starts revoking `key`'s windows (its message completed, or the application withdrew
  // the offer); TakeRevoked lists it once every lane's unbind completed. False when it
  // was not advertised.
  bool Revoke(uint64_t key);
  // A completion of a placement bind (WrSlot(wc.wr_id) has kPlacementWr).
  void OnBindCompletion(uint32_t lane, const ibv_wc& wc);
  // Lane `lane`'s queue pair was reset: its posted binds are gone without completions.
  // Its windows are deallocated (which invalidates them at once); the advertisements
  // stay, that lane no longer taking writes for them.
  void OnLaneReset(uint32_t lane);
  // Advertisements whose buffers are no longer reachable by the peer, since the last call.
  struct Revoked {
    uint64_t key = 0;
    std::optional<uint64_t> message_id;  // the message to release (none: an offer's)
  };
  std::vector<Revoked> TakeRevoked();
  // A direct chunk for `message_id` failed its check at the receiver (stale bytes where
  // its payload should be). After kMaxStrikes the advertisement is withdrawn (no longer
  // in Ads(); its message is still held and revoked as any): whatever keeps the peer's
  // writes from landing there, the message goes on staged instead of being resent direct
  // for ever.
  static constexpr uint32_t kMaxStrikes = 4;
  void Strike(uint64_t key);
  // Ads() changed other than by Advertise or Revoke (a withdrawal) since the last call.
  bool TakeChanged() { return std::exchange(changed_, false); }
  // The advertisements not being revoked, in key order (for the link state).
  std::vector<UcPlacementAd> Ads() const;
  // The region is going: every advertisement in it is invalidated at once (its windows
  // deallocated, its message released) and its registrations in the lanes' domains go.
  void ForgetRegion(uint64_t region);
  // The connection closed: every advertisement is invalidated at once, before the
  // application gets its posted buffers back.
  void ForgetAll();
  const Counters& counters() const { return counters_; }

 private:
  struct Ad {
    bool used = false;
    bool revoking = false;
    uint64_t key = 0;
    std::optional<uint64_t> message_id;
    uint8_t* data = nullptr;
    uint32_t length = 0;
    uint64_t region = 0;
    std::vector<ibv_mw*> mws;     // per lane (null: that lane has none)
    std::vector<uint32_t> keys;   // per lane, as bound
    uint32_t pending = 0;         // unbinds not completed yet
    uint32_t strikes = 0;         // direct chunks that failed their check
    bool withdrawn = false;       // no longer advertised (a failed bind, strikes)
  };
  // Stops advertising ad `index` (its message stays held until revoked).
  void Withdraw(uint32_t index);
  ibv_mr* LaneMr(uint32_t lane, uint64_t region, uint8_t* base, size_t size);
  ibv_mw* TakeWindow(uint32_t lane);
  void Finish(uint32_t index);
  // Deallocates `mw` (invalidating it at once).
  static void Drop(ibv_mw* mw);

  std::vector<Lane> lanes_;
  std::array<Ad, kMaxActive> ads_;
  absl::flat_hash_map<uint64_t, uint32_t> by_key_;      // key -> ads_ index
  absl::flat_hash_map<uint64_t, uint32_t> by_message_;  // message id -> ads_ index
  // Per region: its registration in each lane's domain.
  absl::flat_hash_map<uint64_t, std::vector<ibv_mr*>> mrs_;
  std::vector<std::vector<ibv_mw*>> free_windows_;  // per lane, unbound
  std::vector<Revoked> revoked_;
  bool changed_ = false;
  Counters counters_;
};

}  // namespace longhaul::verbs
