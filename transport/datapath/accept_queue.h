// AcceptQueue: accepted connections waiting for Endpoint::Accept. One per endpoint: a
// single driver owns its own; the engines of an EngineGroup (engine_group.h) share one,
// so Accept returns the next connection whichever engine accepted it, and the listen
// backlog counts them all.
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/datapath/connection_handle.h"

namespace longhaul::datapath {

class AcceptQueue {
 public:
  // True when `backlog` connections already wait (a new one is refused as busy).
  bool Full(uint32_t backlog) const;
  // False (and nothing queued) once stopped.
  bool Push(std::shared_ptr<ConnectionHandle> handle);
  // The next connection. DeadlineExceeded after `timeout`; Cancelled once stopped.
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Pop(Duration timeout);
  // Ends every Pop (Cancelled) and detaches the queued handles (kClosed, Cancelled
  // "endpoint closed"). Idempotent.
  void Stop();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<ConnectionHandle>> queue_;
  bool stopped_ = false;
};

}  // namespace longhaul::datapath
