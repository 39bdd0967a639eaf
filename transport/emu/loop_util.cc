#include "transport/emu/loop_util.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace longhaul::emu {

int64_t WakeTarget(int64_t deadline_ns, int64_t now_ns) {
  if (deadline_ns == std::numeric_limits<int64_t>::max()) return deadline_ns;
  const int64_t left = deadline_ns - now_ns;
  if (left > 1'200'000) return deadline_ns - 1'000'000;
  if (left > 150'000) return deadline_ns - 100'000;
  return deadline_ns;
}

absl::Status UseRealtimeScheduling(int priority) {
  sched_param p{};
  p.sched_priority = priority;
  const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
  if (rc != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("SCHED_FIFO priority ", priority, ": ", strerror(rc), " (needs root)"));
  }
  return absl::OkStatus();
}

void UsePreciseTimers() { prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); }

absl::StatusOr<StopSignal> StopSignal::Create() {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  return StopSignal(fd);
}

StopSignal::~StopSignal() {
  if (fd_ >= 0) close(fd_);
}

void StopSignal::Raise() const {
  const uint64_t one = 1;
  // write() is async-signal-safe; an eventfd counter cannot meaningfully overflow here.
  [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
}

bool StopSignal::Raised() const {
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int EpollWaitUntil(int epoll_fd, epoll_event* events, int max_events, int64_t deadline_ns) {
  if (deadline_ns == std::numeric_limits<int64_t>::max()) {
    return epoll_pwait2(epoll_fd, events, max_events, nullptr, nullptr);
  }
  int64_t wait = deadline_ns - MonotonicNs();
  if (wait < 0) wait = 0;
  timespec ts{static_cast<time_t>(wait / 1000000000), static_cast<long>(wait % 1000000000)};
  return epoll_pwait2(epoll_fd, events, max_events, &ts, nullptr);
}

}  // namespace longhaul::emu
