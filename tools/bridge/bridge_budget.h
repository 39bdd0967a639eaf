// What a longhaul-bridge may spend on its peers (docs/bridge.md section 4):
// memory and target TCP connections, counted per client key and for the whole
// process.
//
// A Budget is a pair of limits (bytes, target connections) with what is charged
// against them now; a key's budget has the process budget as its parent, and a
// charge succeeds only when it fits both. Every byte a server bridge holds for
// a client is charged (tools/bridge/stream_protocol.h says what and when):
// payload promised by a window, a fixed overhead for every buffered frame and
// every stream, frames sent and not yet acknowledged. ClientBudgets hands out
// one Budget per client key to the sessions of that key and caps their number.
//
// Pure bookkeeping, no I/O. Thread-safety: none; the bridge uses it from its io
// thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace longhaul::bridge {

class Budget {
 public:
  Budget(uint64_t memory_limit, uint64_t target_limit, std::shared_ptr<Budget> parent = nullptr);
  ~Budget();
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Charges `bytes` here and in the parent when both have room; false (nothing
  // charged) otherwise.
  [[nodiscard]] bool TryCharge(uint64_t bytes);
  // Charges `bytes` even beyond the limit (small control frames that must go
  // out; the caller bounds how much it forces).
  void ForceCharge(uint64_t bytes);
  void Release(uint64_t bytes);
  // One target TCP connection more, when both this and the parent allow it.
  [[nodiscard]] bool TryAddTarget();
  void ReleaseTarget();

  uint64_t memory_limit() const { return memory_limit_; }
  uint64_t memory_used() const { return memory_used_; }
  // Room for a charge now (the smaller of this and the parent's).
  uint64_t memory_available() const;
  uint64_t target_limit() const { return target_limit_; }
  uint64_t targets_used() const { return targets_used_; }
  // Streams open under this budget (all sessions): windows are sized from it.
  uint64_t streams = 0;

 private:
  const uint64_t memory_limit_;
  const uint64_t target_limit_;
  const std::shared_ptr<Budget> parent_;  // kept alive by its children
  uint64_t memory_used_ = 0;
  uint64_t targets_used_ = 0;
};

struct ClientLimits {
  uint64_t memory_per_key = 1ull << 30;
  uint64_t memory_total = 4ull << 30;
  uint64_t targets_per_key = 4096;
  uint64_t targets_total = 16384;
  uint64_t sessions_per_key = 4;
};

// The budgets of a server bridge's clients: one per client key, all under the
// process's.
class ClientBudgets {
 public:
  explicit ClientBudgets(const ClientLimits& limits);

  // A session of `key` begins: its key's budget (shared with the key's other
  // sessions), or ResourceExhausted naming the limit when the key has
  // sessions_per_key sessions. The budget lives while a session holds it;
  // release it with EndSession.
  absl::StatusOr<std::shared_ptr<Budget>> BeginSession(const std::string& key);
  void EndSession(const std::string& key);

  const Budget& process() const { return *process_; }
  // Client keys with a session, or a budget still held.
  size_t keys() const { return keys_.size(); }
  size_t sessions(const std::string& key) const;
  const ClientLimits& limits() const { return limits_; }

 private:
  struct Key {
    // Weak: the sessions own the budget, and a session that ended may still hold it (its
    // last streams finishing) when the key's next session begins; both then share it.
    std::weak_ptr<Budget> budget;
    uint64_t sessions = 0;
  };
  // Forgets keys with no session and no budget left.
  void Sweep();

  const ClientLimits limits_;
  std::shared_ptr<Budget> process_;
  std::map<std::string, Key> keys_;
};

}  // namespace longhaul::bridge
