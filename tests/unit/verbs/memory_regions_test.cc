// MemoryRegions without a device (zero copy, docs/rdma.md 7.14): what is added before the
// device opens waits unregistered (it resolves to no key), bad memory and reused ids are
// refused by name, removal of an unknown region says so, and slot bookkeeping alone never
// touches the device.
#include "transport/drivers/verbs/memory_regions.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::verbs {
namespace {

TEST(MemoryRegions, RegionsAddedBeforeTheDeviceResolveToNoKey) {
  MemoryRegions r;
  std::vector<uint8_t> mem(4096);
  ASSERT_TRUE(r.Add(1, mem.data(), mem.size(), /*pd=*/nullptr).ok());
  EXPECT_FALSE(r.Lookup(1, mem.data(), 100).has_value()) << "not registered until Open";
  EXPECT_FALSE(r.Lookup(2, mem.data(), 100).has_value()) << "no such region";
  EXPECT_EQ(r.registered(), 0u);
  // Slots referencing it and a removal: nothing was registered, nothing waits.
  const uint64_t ids[] = {1};
  r.NoteSlot(3, ids);
  ASSERT_TRUE(r.Remove(1).ok());
  EXPECT_FALSE(r.collect_pending());
  const std::vector<uint32_t> free_slots = {0, 1, 2};
  r.Collect(free_slots, 8);
  EXPECT_FALSE(r.Lookup(1, mem.data(), 100).has_value());
}

TEST(MemoryRegions, BadMemoryReusedIdsAndUnknownRemovalsAreRefusedByName) {
  MemoryRegions r;
  std::vector<uint8_t> mem(64);
  absl::Status s = r.Add(1, nullptr, 10, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("null or empty"));
  EXPECT_EQ(r.Add(1, mem.data(), 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add(0, mem.data(), mem.size(), nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.Add(7, mem.data(), mem.size(), nullptr).ok());
  s = r.Add(7, mem.data(), mem.size(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("id 7 is in use"));
  s = r.Remove(8);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("memory region 8"));
  EXPECT_TRUE(r.Remove(7).ok());
  EXPECT_EQ(r.Remove(7).code(), absl::StatusCode::kNotFound) << "removed once";
}

}  // namespace
}  // namespace longhaul::verbs
