// The state the two ends of a connection's UC datapath exchange (uc_link.h), and its
// encoding as the connection's driver state (at most wire::kMaxDriverState bytes: 32
// windows at most). Pure; built and tested without rdma-core.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/drivers/verbs/uc_lane.h"

namespace longhaul::verbs {

struct UcQp {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // its first send PSN
};

// One lane as its side tells the peer: its writer's generation, the QP that writes into the peer's lane i and the
// QP of this side's lane i; once that lane is connected its ring, lap-0 keys and every
// window's granted lap (UcLaneReceiver::Grants); whether this side's sender waits for a
// grant on it (the chunk number), and whether this side took it out (failed).
struct UcLaneState {
  // Increments each time this side replaces the lane's writing QP (after an error): the
  // peer then reconnects its receiving QP to the new `sender`.
  uint32_t generation = 0;
  UcQp sender;
  UcQp receiver;
  bool has_ring = false;
  uint64_t ring = 0;
  UcRingGeometry geometry;
  std::vector<uint32_t> keys;
  std::vector<uint64_t> grants;
  std::optional<uint64_t> waiting;
  bool failed = false;
  // Chunks this side's lane i was handed so far (mod 2^32): the peer's writer sees its
  // chunks arrive, and retires a lane whose count stops while it writes (a stall).
  uint32_t received = 0;
};

// Receive-side placement (docs/rdma.md 7.15): a buffer that the peer may write one
// message's payload into, through each lane's memory window over exactly [address,
// address + length). Its key names the message: a message id (a buffer posted for that
// message), or kOfferAdKey | the key the application offered the buffer under
// (Connection::OfferReceive), which the peer's message carries (SendBuffer::placement_key).
inline constexpr uint64_t kOfferAdKey = uint64_t{1} << 63;
struct UcPlacementAd {
  uint64_t key = 0;
  uint64_t address = 0;
  uint32_t length = 0;
  std::vector<uint32_t> keys;  // one per lane, in lane order
};

// What a side tells its peer (encoded as the connection's driver state).
struct UcLinkState {
  // Bounds that keep the largest state within a DRIVER_STATE frame (1 KiB).
  static constexpr uint32_t kMaxLanes = 4;
  static constexpr uint32_t kMaxWindows = 16;
  static constexpr uint32_t kMaxPlacements = 32;
  // The DRIVER_STATE frame's limit (wire::kMaxDriverState; checked where both are seen).
  static constexpr size_t kMaxBytes = 1024;
  std::array<uint8_t, 16> gid{};  // RoCE v2 GID of every QP
  uint32_t mtu = 0;  // active MTU: the piece size is the smaller of both sides'
  std::vector<UcLaneState> lanes;
  // In key order (posted buffers' by message, then offers). Encode keeps the first ones that fit the frame (at most
  // kMaxPlacements); each must have one key per lane.
  std::vector<UcPlacementAd> placements;

  std::vector<uint8_t> Encode() const;
  // How many of `placements` Encode keeps.
  size_t EncodedPlacements() const;
  // InvalidArgument naming what is malformed (a hostile or broken peer).
  static absl::StatusOr<UcLinkState> Decode(std::span<const uint8_t> bytes);
};

}  // namespace longhaul::verbs
