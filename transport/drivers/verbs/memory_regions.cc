#include "transport/drivers/verbs/memory_regions.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "transport/drivers/verbs/ibverbs.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

MemoryRegions::~MemoryRegions() { Close(); }

absl::Status MemoryRegions::Register(Region& r, ibv_pd* pd) {
  // Read by the NIC as a send's source only: no access flags (local read is implied).
  r.mr = Ibverbs().reg_mr(pd, const_cast<uint8_t*>(r.data), r.size, 0);
  if (r.mr == nullptr) {
    return VerbsError(errno, absl::StrCat("ibv_reg_mr of memory region ", r.id, " (", r.size,
                                          " bytes the application sends from)"));
  }
  ++registered_;
  registered_bytes_ += r.size;
  return absl::OkStatus();
}

absl::Status MemoryRegions::Add(uint64_t id, const void* data, size_t size, ibv_pd* pd) {
  if (data == nullptr || size == 0) {
    return absl::InvalidArgumentError("RegisterMemory: null or empty memory");
  }
  if (id == 0 || regions_.contains(id)) {
    return absl::InvalidArgumentError(absl::StrCat("memory region id ", id, " is in use"));
  }
  Region r{id, static_cast<const uint8_t*>(data), size, nullptr};
  if (pd != nullptr) {
    if (absl::Status s = Register(r, pd); !s.ok()) return s;
  }
  regions_[id] = r;
  return absl::OkStatus();
}

absl::Status MemoryRegions::Open(ibv_pd* pd) {
  absl::Status first;
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second.mr == nullptr) {
      if (absl::Status s = Register(it->second, pd); !s.ok()) {
        if (first.ok()) first = s;
        regions_.erase(it++);
        continue;
      }
    }
    ++it;
  }
  return first;
}

std::optional<MemoryRegions::Span> MemoryRegions::Containing(const uint8_t* p,
                                                            size_t len) const {
  for (const auto& [id, r] : regions_) {
    if (r.mr != nullptr && p >= r.data && len <= r.size &&
        static_cast<size_t>(p - r.data) <= r.size - len) {
      return Span{id, const_cast<uint8_t*>(r.data), r.size};
    }
  }
  return std::nullopt;
}

absl::Status MemoryRegions::Remove(uint64_t id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return absl::NotFoundError(absl::StrCat("memory region ", id, " is not registered"));
  }
  if (it->second.mr != nullptr) removed_.push_back(it->second);
  regions_.erase(it);
  return absl::OkStatus();
}

std::optional<uint32_t> MemoryRegions::Lookup(uint64_t id, const uint8_t* p, size_t len) const {
  auto it = regions_.find(id);
  if (it == regions_.end() || it->second.mr == nullptr) return std::nullopt;
  const Region& r = it->second;
  if (p < r.data || len > r.size || static_cast<size_t>(p - r.data) > r.size - len) {
    return std::nullopt;
  }
  return r.mr->lkey;
}

void MemoryRegions::NoteSlot(uint32_t slot, std::span<const uint64_t> ids) {
  if (slot >= slots_.size()) {
    if (ids.empty()) return;
    slots_.resize(slot + 1);
  }
  std::array<uint64_t, kMaxPerSlot>& s = slots_[slot];
  s.fill(0);
  for (size_t i = 0; i < ids.size() && i < kMaxPerSlot; ++i) s[i] = ids[i];
}

void MemoryRegions::Collect(std::span<const uint32_t> free_slots, uint32_t slot_count) {
  if (removed_.empty()) return;
  std::vector<bool> free(std::max<size_t>(slot_count, slots_.size()), false);
  for (uint32_t s : free_slots) {
    if (s < free.size()) free[s] = true;
  }
  for (size_t i = 0; i < removed_.size();) {
    const uint64_t id = removed_[i].id;
    bool posted = false;
    for (size_t s = 0; s < slots_.size() && !posted; ++s) {
      if (free[s]) continue;
      posted = std::find(slots_[s].begin(), slots_[s].end(), id) != slots_[s].end();
    }
    if (posted) {
      ++i;
      continue;
    }
    Ibverbs().dereg_mr(removed_[i].mr);
    removed_[i] = removed_.back();
    removed_.pop_back();
  }
}

void MemoryRegions::Close() {
  for (auto& [id, r] : regions_) {
    if (r.mr != nullptr) Ibverbs().dereg_mr(r.mr);
    r.mr = nullptr;
  }
  for (Region& r : removed_) Ibverbs().dereg_mr(r.mr);
  removed_.clear();
  slots_.clear();
}

}  // namespace longhaul::verbs
