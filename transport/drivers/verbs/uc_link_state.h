// The state the two ends of a connection's UC datapath exchange (uc_link.h), and its
// encoding as the connection's driver state (at most wire::kMaxDriverState bytes: 32
// windows at most). Pure; built and tested without rdma-core.
#pragma once

#include <array>
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

// What a side tells its peer (encoded as the connection's driver state).
struct UcLinkState {
  static constexpr uint32_t kMaxWindows = 32;
  std::array<uint8_t, 16> gid{};  // RoCE v2 GID of both QPs
  uint32_t mtu = 0;  // active MTU: the piece size is the smaller of both sides'
  UcQp sender;       // the QP that writes into the peer's lane
  UcQp receiver;     // the QP of this side's lane
  // Once the lane is connected: the ring and its lap-0 keys, and every window's granted
  // lap (UcLaneReceiver::Grants).
  bool has_ring = false;
  uint64_t ring = 0;
  UcRingGeometry geometry;
  std::vector<uint32_t> keys;
  std::vector<uint64_t> grants;
  // The sender has a chunk waiting for a grant (its number): the receiver retires its
  // oldest window after a quiet spell (UcLaneReceiver::OnIdle).
  std::optional<uint64_t> waiting;

  std::vector<uint8_t> Encode() const;
  // InvalidArgument naming what is malformed (a hostile or broken peer).
  static absl::StatusOr<UcLinkState> Decode(std::span<const uint8_t> bytes);
};

}  // namespace longhaul::verbs
