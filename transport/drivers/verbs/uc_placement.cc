#include "transport/drivers/verbs/uc_placement.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "transport/drivers/verbs/ibverbs.h"
#include "transport/drivers/verbs/queue_pair.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

UcPlacements::~UcPlacements() {
  for (Ad& a : ads_) {
    for (ibv_mw* mw : a.mws) Drop(mw);
    a.mws.clear();
  }
  for (std::vector<ibv_mw*>& f : free_windows_) {
    for (ibv_mw* mw : f) Drop(mw);
  }
  for (auto& [region, mrs] : mrs_) {
    for (ibv_mr* mr : mrs) {
      if (mr != nullptr) Ibverbs().dereg_mr(mr);
    }
  }
}

void UcPlacements::Drop(ibv_mw* mw) {
  if (mw != nullptr) ibv_dealloc_mw(mw);
}

ibv_mr* UcPlacements::LaneMr(uint32_t lane, uint64_t region, uint8_t* base, size_t size) {
  std::vector<ibv_mr*>& mrs = mrs_[region];
  mrs.resize(lanes_.size(), nullptr);
  if (mrs[lane] == nullptr) {
    // Local write and window binding only: the peer reaches the memory through the
    // windows alone, never through the registration's own key.
    mrs[lane] = Ibverbs().reg_mr(lanes_[lane].pd, base, size,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    if (mrs[lane] != nullptr) ++counters_.region_registrations;
  }
  return mrs[lane];
}

ibv_mw* UcPlacements::TakeWindow(uint32_t lane) {
  free_windows_.resize(lanes_.size());
  if (!free_windows_[lane].empty()) {
    ibv_mw* mw = free_windows_[lane].back();
    free_windows_[lane].pop_back();
    return mw;
  }
  return ibv_alloc_mw(lanes_[lane].pd, IBV_MW_TYPE_1);
}

absl::Status UcPlacements::Advertise(uint64_t key, uint8_t* data, uint32_t len,
                                     uint64_t region, uint8_t* base, size_t size) {
  if (by_key_.contains(key)) return absl::OkStatus();
  uint32_t index = kMaxActive;
  for (uint32_t i = 0; i < kMaxActive; ++i) {
    if (!ads_[i].used) {
      index = i;
      break;
    }
  }
  if (index == kMaxActive) {
    return absl::ResourceExhaustedError(
        absl::StrCat(kMaxActive, " placement buffers are advertised already"));
  }
  Ad a;
  a.key = key;
  if ((key & kOfferAdKey) == 0) a.message_id = key;
  a.data = data;
  a.length = len;
  a.region = region;
  a.mws.assign(lanes_.size(), nullptr);
  a.keys.assign(lanes_.size(), 0);
  absl::Status status;
  for (uint32_t l = 0; l < lanes_.size(); ++l) {
    ibv_mr* mr = LaneMr(l, region, base, size);
    if (mr == nullptr) {
      status = VerbsError(errno, absl::StrCat("ibv_reg_mr of a receive region (", size,
                                              " bytes) in a UC lane's domain"));
      break;
    }
    ibv_mw* mw = TakeWindow(l);
    if (mw == nullptr) {
      status = VerbsError(errno, "ibv_alloc_mw (a placement window)");
      break;
    }
    absl::StatusOr<uint32_t> key =
        lanes_[l].qp->BindWindow(mw, mr, reinterpret_cast<uintptr_t>(data), len,
                                 WrId(lanes_[l].wr_id, kPlacementWr | index));
    if (!key.ok()) {
      Drop(mw);
      status = key.status();
      break;
    }
    a.mws[l] = mw;
    a.keys[l] = *key;
  }
  if (!status.ok()) {
    for (ibv_mw* mw : a.mws) Drop(mw);  // a posted bind of it may still run: no reuse
    return status;
  }
  a.used = true;
  ads_[index] = std::move(a);
  by_key_[key] = index;
  if (ads_[index].message_id) by_message_[*ads_[index].message_id] = index;
  ++counters_.advertised;
  return absl::OkStatus();
}

std::optional<UcPlacements::Buffer> UcPlacements::Find(uint64_t key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  const Ad& a = ads_[it->second];
  return Buffer{a.data, a.length, a.message_id};
}

bool UcPlacements::Adopt(uint64_t key, uint64_t message_id) {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || ads_[it->second].message_id || by_message_.contains(message_id)) {
    return false;
  }
  ads_[it->second].message_id = message_id;
  by_message_[message_id] = it->second;
  return true;
}

std::optional<uint64_t> UcPlacements::KeyOf(uint64_t message_id) const {
  auto it = by_message_.find(message_id);
  if (it == by_message_.end()) return std::nullopt;
  return ads_[it->second].key;
}

bool UcPlacements::Revoke(uint64_t key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  const uint32_t index = it->second;
  Ad& a = ads_[index];
  if (a.revoking) return true;
  a.revoking = true;
  auto mrs = mrs_.find(a.region);
  for (uint32_t l = 0; l < lanes_.size(); ++l) {
    if (a.mws[l] == nullptr) continue;
    // A bind of no length: the window covers nothing under a new key (providers take no
    // null registration here).
    ibv_mr* mr = mrs != mrs_.end() && l < mrs->second.size() ? mrs->second[l] : nullptr;
    absl::StatusOr<uint32_t> key =
        mr == nullptr
            ? absl::StatusOr<uint32_t>(absl::InternalError("no registration to unbind from"))
            : lanes_[l].qp->BindWindow(a.mws[l], mr, reinterpret_cast<uintptr_t>(a.data), 0,
                                       WrId(lanes_[l].wr_id, kPlacementWr | kPlacementUnbind | index));
    if (key.ok()) {
      ++a.pending;
    } else {
      // Not posted: deallocating invalidates it at once.
      ++counters_.bind_errors;
      Drop(a.mws[l]);
      a.mws[l] = nullptr;
    }
  }
  if (a.pending == 0) Finish(index);
  return true;
}

void UcPlacements::OnBindCompletion(uint32_t lane, const ibv_wc& wc) {
  const uint32_t index = WrSlot(wc.wr_id) & ~(kPlacementWr | kPlacementUnbind);
  if (index >= kMaxActive || lane >= lanes_.size()) return;
  Ad& a = ads_[index];
  if (wc.status != IBV_WC_SUCCESS) ++counters_.bind_errors;
  const bool unbind = (WrSlot(wc.wr_id) & kPlacementUnbind) != 0;
  if (!unbind || !a.used || !a.revoking || a.mws[lane] == nullptr) {
    // An advertising bind's completion; one that failed leaves its key dead (the peer's
    // writes through it would be dropped for ever): the advertisement is withdrawn, and
    // the window is not reused.
    if (!unbind && wc.status != IBV_WC_SUCCESS && a.used && !a.revoking &&
        a.mws[lane] != nullptr) {
      Drop(a.mws[lane]);
      a.mws[lane] = nullptr;
      Withdraw(index);
    }
    return;
  }
  if (wc.status == IBV_WC_SUCCESS) {
    free_windows_.resize(lanes_.size());
    free_windows_[lane].push_back(a.mws[lane]);
  } else {
    Drop(a.mws[lane]);
  }
  a.mws[lane] = nullptr;
  if (a.pending > 0 && --a.pending == 0) Finish(index);
}

void UcPlacements::OnLaneReset(uint32_t lane) {
  if (lane >= lanes_.size()) return;
  for (uint32_t i = 0; i < kMaxActive; ++i) {
    Ad& a = ads_[i];
    if (!a.used || a.mws[lane] == nullptr) continue;
    Drop(a.mws[lane]);
    a.mws[lane] = nullptr;
    if (a.revoking && a.pending > 0 && --a.pending == 0) Finish(i);
  }
}

void UcPlacements::Finish(uint32_t index) {
  Ad& a = ads_[index];
  // Windows still held (a lane without an unbind, or invalidated at once) are
  // deallocated, which stops them at once.
  for (ibv_mw* mw : a.mws) Drop(mw);
  by_key_.erase(a.key);
  if (a.message_id) by_message_.erase(*a.message_id);
  revoked_.push_back(Revoked{a.key, a.message_id});
  ++counters_.revoked;
  a = Ad{};
}

std::vector<UcPlacements::Revoked> UcPlacements::TakeRevoked() { return std::move(revoked_); }

void UcPlacements::Withdraw(uint32_t index) {
  Ad& a = ads_[index];
  if (!a.used || a.withdrawn || a.revoking) return;
  a.withdrawn = true;
  ++counters_.withdrawn;
  changed_ = true;
}

void UcPlacements::Strike(uint64_t key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  if (++ads_[it->second].strikes >= kMaxStrikes) Withdraw(it->second);
}

std::vector<UcPlacementAd> UcPlacements::Ads() const {
  std::vector<UcPlacementAd> out;
  for (const Ad& a : ads_) {
    if (!a.used || a.revoking || a.withdrawn) continue;
    out.push_back(UcPlacementAd{a.key, reinterpret_cast<uintptr_t>(a.data), a.length, a.keys});
  }
  std::sort(out.begin(), out.end(), [](const UcPlacementAd& x, const UcPlacementAd& y) {
    return x.key < y.key;
  });
  return out;
}

void UcPlacements::ForgetAll() {
  for (uint32_t i = 0; i < kMaxActive; ++i) {
    if (ads_[i].used) Finish(i);  // deallocates its windows
  }
}

void UcPlacements::ForgetRegion(uint64_t region) {
  for (uint32_t i = 0; i < kMaxActive; ++i) {
    if (ads_[i].used && ads_[i].region == region) Finish(i);
  }
  auto it = mrs_.find(region);
  if (it == mrs_.end()) return;
  for (ibv_mr* mr : it->second) {
    if (mr != nullptr) Ibverbs().dereg_mr(mr);
  }
  mrs_.erase(it);
}

}  // namespace longhaul::verbs
