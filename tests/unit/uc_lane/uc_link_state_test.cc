// The UC datapath's set-up state (uc_link_state.h): what one side encodes the other
// decodes, and a malformed state from a broken or hostile peer is refused by name.
#include "transport/drivers/verbs/uc_link_state.h"

#include <string>

#include "gtest/gtest.h"

namespace longhaul::verbs {
namespace {

UcLinkState Full() {
  UcLinkState s;
  for (size_t i = 0; i < s.gid.size(); ++i) s.gid[i] = static_cast<uint8_t>(i * 7);
  s.mtu = 4096;
  s.sender = {0x123, 0xabcdef};
  s.receiver = {0x456, 0x10203};
  s.has_ring = true;
  s.ring = 0x7f00deadbeef000;
  s.geometry = UcRingGeometry{.slots = 64, .windows = 8, .slot_bytes = 65536};
  for (uint32_t w = 0; w < 8; ++w) {
    s.keys.push_back(0x1000 * w + w);
    s.grants.push_back(uint64_t{w} << 33);
  }
  s.waiting = 977;
  return s;
}

TEST(UcLinkState, WhatIsEncodedDecodes) {
  for (bool ring : {false, true}) {
    for (bool waiting : {false, true}) {
      UcLinkState s = Full();
      if (!ring) {
        s.has_ring = false;
        s.keys.clear();
        s.grants.clear();
      }
      if (!waiting) s.waiting.reset();
      const std::vector<uint8_t> b = s.Encode();
      absl::StatusOr<UcLinkState> d = UcLinkState::Decode(b);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->gid, s.gid);
      EXPECT_EQ(d->mtu, 4096u);
      EXPECT_EQ(d->sender.qpn, 0x123u);
      EXPECT_EQ(d->sender.psn, 0xabcdefu);
      EXPECT_EQ(d->receiver.qpn, 0x456u);
      EXPECT_EQ(d->receiver.psn, 0x10203u);
      EXPECT_EQ(d->has_ring, ring);
      if (ring) {
        EXPECT_EQ(d->ring, s.ring);
        EXPECT_EQ(d->geometry.slots, 64u);
        EXPECT_EQ(d->geometry.windows, 8u);
        EXPECT_EQ(d->geometry.slot_bytes, 65536u);
        EXPECT_EQ(d->keys, s.keys);
        EXPECT_EQ(d->grants, s.grants);
      }
      EXPECT_EQ(d->waiting, s.waiting);
    }
  }
}

TEST(UcLinkState, TheLargestStateFitsADriverStateFrame) {
  UcLinkState s = Full();
  s.geometry = UcRingGeometry{.slots = 1u << 20, .windows = UcLinkState::kMaxWindows,
                              .slot_bytes = 65536};
  s.keys.assign(UcLinkState::kMaxWindows, 0xffffffffu);
  s.grants.assign(UcLinkState::kMaxWindows, ~uint64_t{0});
  EXPECT_LE(s.Encode().size(), 1024u);  // wire::kMaxDriverState
  EXPECT_TRUE(UcLinkState::Decode(s.Encode()).ok());
}

TEST(UcLinkState, EveryTruncationAndTrailingByteIsRefused) {
  const std::vector<uint8_t> b = Full().Encode();
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
  UcLinkState s = Full();
  s.mtu = 100;
  EXPECT_NE(message(s).find("MTU"), std::string::npos);
  s = Full();
  s.geometry.windows = 7;  // does not divide 64
  EXPECT_NE(message(s).find("geometry"), std::string::npos);
  s = Full();
  s.geometry = UcRingGeometry{.slots = 128, .windows = 64, .slot_bytes = 4096};
  s.keys.assign(64, 1);
  s.grants.assign(64, 0);
  EXPECT_NE(message(s).find("geometry"), std::string::npos);  // more windows than 32
  std::vector<uint8_t> b = Full().Encode();
  b[0] = 9;
  EXPECT_NE(UcLinkState::Decode(b).status().message().find("version"), std::string::npos);
}

}  // namespace
}  // namespace longhaul::verbs
