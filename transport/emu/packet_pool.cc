#include "transport/emu/packet_pool.h"

#include <algorithm>

#include "glog/logging.h"

namespace longhaul::emu {

PacketPool::PacketPool(size_t slot_bytes, size_t max_bytes)
    : slot_bytes_(std::max<size_t>(slot_bytes, 1)) {
  // Slots start on 64-byte boundaries so copies into and out of them stay aligned.
  slot_bytes_ = (slot_bytes_ + 63) / 64 * 64;
  size_t slots = max_bytes / slot_bytes_;
  slots = std::max(slots, kSlotsPerChunk);
  // Indices must stay below kNoSlot.
  slots = std::min<size_t>(slots, size_t{1} << 31);
  max_slots_ = slots;
}

uint32_t PacketPool::Acquire() {
  if (free_.empty()) {
    if (in_use_ >= max_slots_ || allocated_slots() >= max_slots_) return kNoSlot;
    // Default-initialised: the memory is not touched until a datagram lands in it.
    chunks_.emplace_back(new uint8_t[kSlotsPerChunk * slot_bytes_]);
    const uint32_t base = static_cast<uint32_t>((chunks_.size() - 1) * kSlotsPerChunk);
    const uint32_t usable = static_cast<uint32_t>(std::min(kSlotsPerChunk, max_slots_ - base));
    free_.reserve(allocated_slots());
    // Pushed in reverse so the lowest index is handed out first.
    for (uint32_t i = usable; i-- > 0;) free_.push_back(base + i);
  }
  const uint32_t slot = free_.back();
  free_.pop_back();
  ++in_use_;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return slot;
}

void PacketPool::Release(uint32_t slot) {
  DCHECK_LT(slot, allocated_slots());
  DCHECK_GT(in_use_, 0u);
  --in_use_;
  free_.push_back(slot);
}

}  // namespace longhaul::emu
