// Pieces shared by the emulator's event loops (UDP relay, TUN bridge): a monotonic clock
// in nanoseconds, a stop signal that is safe to raise from a signal handler or another
// thread, and an epoll wait with a nanosecond deadline.
#pragma once

#include <sys/epoll.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "transport/base/clock.h"  // MonotonicNs(), RealtimeNs()

namespace longhaul::emu {

// Where a loop should wake for `deadline_ns` when it is `now_ns`: a long sleep on this
// kind of machine (a VM leaving an idle state) wakes 100-200 us late, a 1 ms one 30-60 us,
// a 100 us one about 15 us, so long waits are cut into stages: wake 1 ms early, then
// 100 us early, then at the deadline.
int64_t WakeTarget(int64_t deadline_ns, int64_t now_ns);

// Makes the calling thread's timer slack 1 ns, so nanosecond timeouts wake on time
// instead of up to the default 50 us late.
void UsePreciseTimers();

// Runs the calling thread under SCHED_FIFO at `priority` (1..99), so CPU-bound processes
// on a shared machine cannot delay its wake-ups by whole scheduler slices. Needs root
// (CAP_SYS_NICE). The kernel's RT throttling still leaves others 5 % of each second.
absl::Status UseRealtimeScheduling(int priority);

// An eventfd that a loop watches: Raise() is async-signal-safe and thread-safe.
class StopSignal {
 public:
  static absl::StatusOr<StopSignal> Create();
  StopSignal(StopSignal&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StopSignal& operator=(StopSignal&&) = delete;
  ~StopSignal();
  void Raise() const;
  bool Raised() const;  // non-consuming check
  int fd() const { return fd_; }

 private:
  explicit StopSignal(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// epoll_pwait2 until `deadline_ns` (MonotonicNs() clock; INT64_MAX = no deadline).
// Returns the number of events, 0 on timeout, or -1 with errno (EINTR included).
int EpollWaitUntil(int epoll_fd, epoll_event* events, int max_events, int64_t deadline_ns);

}  // namespace longhaul::emu
