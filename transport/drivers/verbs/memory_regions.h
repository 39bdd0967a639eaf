// The application's memory registered for zero-copy sends (Driver::RegisterMemory;
// docs/rdma.md 7.14): a region id -> the device's memory region, registered in the
// driver's protection domain (where its writing UC queue pairs live), so that a chunk's
// work requests can gather DATA payloads straight from where the application keeps them.
//
// A region added before the device is open is registered when it opens (Open). One that
// is removed stops resolving at once (later sends copy), but its ibv_mr stays until no
// arena slot whose chunk referenced it is still posted (Collect): the NIC may read it
// until that chunk's send completion.
//
// Thread-compatible: the driver thread owns it.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace longhaul::verbs {

class MemoryRegions {
 public:
  static constexpr size_t kMaxPerSlot = 4;  // wire::kMaxDeferredPayloads

  MemoryRegions() = default;
  ~MemoryRegions();  // Close()
  MemoryRegions(const MemoryRegions&) = delete;
  MemoryRegions& operator=(const MemoryRegions&) = delete;

  // Registers [data, data + size) as region `id` in `pd` now, or when Open gives a
  // domain (pd null). Errors: InvalidArgument (null or empty memory, an id in use),
  // ResourceExhausted naming memlock when the device refuses for want of locked memory,
  // or the refused call.
  absl::Status Add(uint64_t id, const void* data, size_t size, ibv_pd* pd);
  // Registers the regions added before the device opened; a refusal drops that region
  // (its sends copy) and is returned, the others go on.
  absl::Status Open(ibv_pd* pd);
  // The region stops resolving; its registration goes once Collect finds no posted slot
  // referencing it. NotFound for an unknown id.
  absl::Status Remove(uint64_t id);

  // The local key under which [p, p + len) of region `id` can be read, or nullopt (no
  // such region, removed, not registered yet, or out of its bounds).
  std::optional<uint32_t> Lookup(uint64_t id, const uint8_t* p, size_t len) const;

  // The registered region that holds all of [p, p + len) (receive-side placement: a
  // posted buffer in registered memory), or nullopt.
  struct Span {
    uint64_t id = 0;
    uint8_t* data = nullptr;
    size_t size = 0;
  };
  std::optional<Span> Containing(const uint8_t* p, size_t len) const;

  // The chunk in arena slot `slot` references these regions (empty: none) until the slot
  // is free again.
  void NoteSlot(uint32_t slot, std::span<const uint64_t> ids);
  // Deregisters removed regions no slot outside `free_slots` references.
  void Collect(std::span<const uint32_t> free_slots, uint32_t slot_count);
  bool collect_pending() const { return !removed_.empty(); }
  // Every registration goes (the device is closing: nothing is posted any more).
  void Close();

  uint64_t registered() const { return registered_; }
  uint64_t registered_bytes() const { return registered_bytes_; }

 private:
  struct Region {
    uint64_t id = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
    ibv_mr* mr = nullptr;
  };
  absl::Status Register(Region& r, ibv_pd* pd);
  absl::flat_hash_map<uint64_t, Region> regions_;
  std::vector<Region> removed_;  // registered, waiting for their slots
  // Per arena slot: the regions its chunk references (0: none).
  std::vector<std::array<uint64_t, kMaxPerSlot>> slots_;
  uint64_t registered_ = 0;
  uint64_t registered_bytes_ = 0;
};

}  // namespace longhaul::verbs
