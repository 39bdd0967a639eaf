#include "tools/bridge/bridge_budget.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace longhaul::bridge {

Budget::Budget(uint64_t memory_limit, uint64_t target_limit, std::shared_ptr<Budget> parent)
    : memory_limit_(memory_limit), target_limit_(target_limit), parent_(std::move(parent)) {}

Budget::~Budget() {
  // What a key still holds when its last session ends goes back to the process.
  if (parent_ != nullptr) {
    parent_->Release(memory_used_);
    for (uint64_t i = 0; i < targets_used_; ++i) parent_->ReleaseTarget();
  }
}

uint64_t Budget::memory_available() const {
  const uint64_t here = memory_limit_ > memory_used_ ? memory_limit_ - memory_used_ : 0;
  return parent_ == nullptr ? here : std::min(here, parent_->memory_available());
}

bool Budget::TryCharge(uint64_t bytes) {
  if (bytes > memory_available()) return false;
  ForceCharge(bytes);
  return true;
}

void Budget::ForceCharge(uint64_t bytes) {
  memory_used_ += bytes;
  if (parent_ != nullptr) parent_->ForceCharge(bytes);
}

void Budget::Release(uint64_t bytes) {
  // Releasing more than was charged is a bookkeeping bug; never wrap around.
  const uint64_t n = std::min(bytes, memory_used_);
  memory_used_ -= n;
  if (parent_ != nullptr) parent_->Release(n);
}

bool Budget::TryAddTarget() {
  if (targets_used_ >= target_limit_) return false;
  if (parent_ != nullptr && !parent_->TryAddTarget()) return false;
  ++targets_used_;
  return true;
}

void Budget::ReleaseTarget() {
  if (targets_used_ == 0) return;
  --targets_used_;
  if (parent_ != nullptr) parent_->ReleaseTarget();
}

ClientBudgets::ClientBudgets(const ClientLimits& limits)
    : limits_(limits),
      process_(std::make_shared<Budget>(limits.memory_total, limits.targets_total)) {}

absl::StatusOr<std::shared_ptr<Budget>> ClientBudgets::BeginSession(const std::string& key) {
  Sweep();
  Key& k = keys_[key];
  if (k.sessions >= limits_.sessions_per_key) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this client key has ", k.sessions,
                     " sessions open (--sessions_per_key=", limits_.sessions_per_key, ")"));
  }
  std::shared_ptr<Budget> b = k.budget.lock();
  if (!b) {
    b = std::make_shared<Budget>(limits_.memory_per_key, limits_.targets_per_key, process_);
    k.budget = b;
  }
  ++k.sessions;
  return b;
}

void ClientBudgets::EndSession(const std::string& key) {
  auto it = keys_.find(key);
  if (it != keys_.end() && it->second.sessions > 0) --it->second.sessions;
  Sweep();
}

void ClientBudgets::Sweep() {
  for (auto it = keys_.begin(); it != keys_.end();) {
    it = it->second.sessions == 0 && it->second.budget.expired() ? keys_.erase(it) : std::next(it);
  }
}

size_t ClientBudgets::sessions(const std::string& key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.sessions;
}

}  // namespace longhaul::bridge
