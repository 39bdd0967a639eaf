// PacketPool: fixed-size datagram buffers ("slots") for the emulator, addressed by index.
//
// The emulator holds every datagram between its arrival and its modelled delivery time, so
// the pool's size bounds the emulator's memory: max_bytes / slot_bytes slots at most.
// Memory is allocated lazily in chunks as the number of datagrams in flight grows and is
// kept until the pool is destroyed; slots are recycled LIFO (the most recently freed slot
// is the warmest in cache). Acquire() returns kNoSlot when the pool is exhausted: the
// caller counts that as the emulator's own drop, never as modelled loss.
//
// Thread-safety: none; one thread owns a pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace longhaul::emu {

class PacketPool {
 public:
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  // `slot_bytes` (> 0) is the capacity of each buffer; `max_bytes` caps the memory (at
  // least one chunk's worth of slots is always allowed).
  PacketPool(size_t slot_bytes, size_t max_bytes);
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  // A free slot, or kNoSlot when max_slots() are in use.
  uint32_t Acquire();
  // Returns a slot obtained from Acquire(). Releasing a slot twice is a bug (CHECKed in
  // debug builds).
  void Release(uint32_t slot);

  uint8_t* Data(uint32_t slot) {
    return chunks_[slot / kSlotsPerChunk].get() + (slot % kSlotsPerChunk) * slot_bytes_;
  }
  const uint8_t* Data(uint32_t slot) const {
    return chunks_[slot / kSlotsPerChunk].get() + (slot % kSlotsPerChunk) * slot_bytes_;
  }

  size_t slot_bytes() const { return slot_bytes_; }
  size_t max_slots() const { return max_slots_; }
  size_t in_use() const { return in_use_; }
  size_t allocated_slots() const { return chunks_.size() * kSlotsPerChunk; }
  size_t peak_in_use() const { return peak_in_use_; }

  static constexpr size_t kSlotsPerChunk = 256;

 private:
  size_t slot_bytes_;
  size_t max_slots_;
  size_t in_use_ = 0;
  size_t peak_in_use_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> chunks_;
  std::vector<uint32_t> free_;  // LIFO
};

}  // namespace longhaul::emu
