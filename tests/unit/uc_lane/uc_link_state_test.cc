// The UC datapath's set-up state (uc_link_state.h): what one side encodes the other
// decodes, the largest state fits a DRIVER_STATE frame, and a malformed state from a
// broken or hostile peer is refused by name.
#include "transport/drivers/verbs/uc_link_state.h"

#include <string>

#include "gtest/gtest.h"

namespace longhaul::verbs {
namespace {

UcLaneState FullLane(uint32_t i) {
  UcLaneState l;
  l.generation = 7 * i;
  l.sender = {0x123 + i, 0xabcdef};
  l.receiver = {0x456 + i, 0x10203};
  l.has_ring = true;
  l.ring = 0x7f00deadbeef000 + i;
  l.geometry = UcRingGeometry{.slots = 64, .windows = 8, .slot_bytes = 65536};
  for (uint32_t w = 0; w < 8; ++w) {
    l.keys.push_back(0x1000 * w + w + i);
    l.grants.push_back((uint64_t{w} << 33) + i);
  }
  l.waiting = 977 + i;
  l.failed = i == 2;
  l.received = 0xfffffff0u + i;  // near the wrap: mod 2^32
  return l;
}

UcLinkState Full(uint32_t lanes) {
  UcLinkState s;
  for (size_t i = 0; i < s.gid.size(); ++i) s.gid[i] = static_cast<uint8_t>(i * 7);
  s.mtu = 4096;
  for (uint32_t i = 0; i < lanes; ++i) s.lanes.push_back(FullLane(i));
  return s;
}

TEST(UcLinkState, WhatIsEncodedDecodes) {
  for (uint32_t lanes : {1u, 3u}) {
    for (bool ring : {false, true}) {
      for (bool waiting : {false, true}) {
        UcLinkState s = Full(lanes);
        for (UcLaneState& l : s.lanes) {
          if (!ring) {
            l.has_ring = false;
            l.keys.clear();
            l.grants.clear();
          }
          if (!waiting) l.waiting.reset();
        }
        absl::StatusOr<UcLinkState> d = UcLinkState::Decode(s.Encode());
        ASSERT_TRUE(d.ok()) << d.status();
        EXPECT_EQ(d->gid, s.gid);
        EXPECT_EQ(d->mtu, 4096u);
        ASSERT_EQ(d->lanes.size(), lanes);
        for (uint32_t i = 0; i < lanes; ++i) {
          const UcLaneState& a = d->lanes[i];
          const UcLaneState& b = s.lanes[i];
          EXPECT_EQ(a.generation, b.generation);
          EXPECT_EQ(a.sender.qpn, b.sender.qpn);
          EXPECT_EQ(a.sender.psn, b.sender.psn);
          EXPECT_EQ(a.receiver.qpn, b.receiver.qpn);
          EXPECT_EQ(a.receiver.psn, b.receiver.psn);
          EXPECT_EQ(a.has_ring, ring);
          EXPECT_EQ(a.failed, i == 2);
          if (ring) {
            EXPECT_EQ(a.ring, b.ring);
            EXPECT_EQ(a.geometry.slots, 64u);
            EXPECT_EQ(a.geometry.windows, 8u);
            EXPECT_EQ(a.geometry.slot_bytes, 65536u);
            EXPECT_EQ(a.keys, b.keys);
            EXPECT_EQ(a.grants, b.grants);
          }
          EXPECT_EQ(a.waiting, b.waiting);
          EXPECT_EQ(a.received, b.received);
        }
      }
    }
  }
}

TEST(UcLinkState, TheLargestStateFitsADriverStateFrame) {
  UcLinkState s = Full(UcLinkState::kMaxLanes);
  for (UcLaneState& l : s.lanes) {
    l.geometry = UcRingGeometry{.slots = 1u << 19, .windows = UcLinkState::kMaxWindows,
                                .slot_bytes = 65536};
    l.keys.assign(UcLinkState::kMaxWindows, 0xffffffffu);
    l.grants.assign(UcLinkState::kMaxWindows, ~uint64_t{0});
  }
  EXPECT_LE(s.Encode().size(), 1024u);  // wire::kMaxDriverState
  EXPECT_TRUE(UcLinkState::Decode(s.Encode()).ok());
}

TEST(UcLinkState, EveryTruncationAndTrailingByteIsRefused) {
  const std::vector<uint8_t> b = Full(2).Encode();
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(UcLinkState::Decode(std::span<const uint8_t>(b.data(), n)).ok()) << n;
  }
  std::vector<uint8_t> longer = b;
  longer.push_back(0);
  EXPECT_NE(UcLinkState::Decode(longer).status().message().find("trailing"), std::string::npos);
}

TEST(UcLinkState, OutOfBoundsFieldsAreRefusedByName) {
  auto message = [](const UcLinkState& s) {
    return std::string(UcLinkState::Decode(s.Encode()).status().message());
  };
  UcLinkState s = Full(1);
  s.mtu = 100;
  EXPECT_NE(message(s).find("MTU"), std::string::npos);
  s = Full(1);
  s.lanes[0].geometry.windows = 7;  // does not divide 64
  EXPECT_NE(message(s).find("geometry"), std::string::npos);
  s = Full(1);
  s.lanes[0].geometry = UcRingGeometry{.slots = 128, .windows = 32, .slot_bytes = 4096};
  s.lanes[0].keys.assign(32, 1);
  s.lanes[0].grants.assign(32, 0);
  EXPECT_NE(message(s).find("geometry"), std::string::npos);  // more windows than 16
  s = Full(UcLinkState::kMaxLanes + 1);
  EXPECT_NE(message(s).find("lane count"), std::string::npos);
  s = Full(1);
  s.lanes.clear();
  EXPECT_NE(message(s).find("lane count"), std::string::npos);
  std::vector<uint8_t> b = Full(1).Encode();
  b[0] = 9;
  EXPECT_NE(UcLinkState::Decode(b).status().message().find("version"), std::string::npos);
}

UcPlacementAd Ad(uint64_t id, uint32_t lanes) {
  UcPlacementAd a;
  a.key = id;
  a.address = 0x7f0000000000 + id * 0x10000;
  a.length = 65536 + static_cast<uint32_t>(id);
  for (uint32_t l = 0; l < lanes; ++l) a.keys.push_back(0x5000 + 0x100 * l + static_cast<uint32_t>(id));
  return a;
}

// Receive-side placement: the advertised buffers travel with the rest, as many as the
// frame holds (the earliest messages first), and a placement out of bounds is refused.
TEST(UcLinkState, PlacementsRoundTripAsManyAsFit) {
  UcLinkState s = Full(3);
  for (uint64_t id = 100; id < 103; ++id) s.placements.push_back(Ad(id, 3));
  EXPECT_EQ(s.EncodedPlacements(), 3u);
  absl::StatusOr<UcLinkState> d = UcLinkState::Decode(s.Encode());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->placements.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d->placements[i].key, s.placements[i].key);
    EXPECT_EQ(d->placements[i].address, s.placements[i].address);
    EXPECT_EQ(d->placements[i].length, s.placements[i].length);
    EXPECT_EQ(d->placements[i].keys, s.placements[i].keys);
  }
  for (uint32_t lanes : {1u, 4u}) {
    UcLinkState big = Full(lanes);
    for (UcLaneState& l : big.lanes) {
      l.geometry.windows = UcLinkState::kMaxWindows;
      l.keys.assign(UcLinkState::kMaxWindows, 1);
      l.grants.assign(UcLinkState::kMaxWindows, 2);
    }
    for (uint64_t id = 0; id < 40; ++id) big.placements.push_back(Ad(id, lanes));
    const size_t n = big.EncodedPlacements();
    EXPECT_LE(n, UcLinkState::kMaxPlacements);
    const std::vector<uint8_t> b = big.Encode();
    EXPECT_LE(b.size(), 1024u) << lanes;
    // One more placement would not have fit.
    if (n < UcLinkState::kMaxPlacements) EXPECT_GT(b.size() + 20 + 4 * lanes, 1024u) << lanes;
    absl::StatusOr<UcLinkState> e = UcLinkState::Decode(b);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->placements.size(), n);
    if (n > 0) EXPECT_EQ(e->placements[n - 1].key, n - 1) << "the earliest first";
  }
  UcLinkState bad = Full(1);
  bad.placements.push_back(Ad(5, 1));
  bad.placements[0].length = 0;
  EXPECT_NE(std::string(UcLinkState::Decode(bad.Encode()).status().message()).find("placement"),
            std::string::npos);
  bad.placements[0].length = 16;
  bad.placements[0].address = ~uint64_t{0} - 3;
  EXPECT_FALSE(UcLinkState::Decode(bad.Encode()).ok()) << "wraps the address space";
}

}  // namespace
}  // namespace longhaul::verbs
