#include "transport/datapath/accept_queue.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/parse.h"

namespace longhaul::datapath {

bool AcceptQueue::Full(uint32_t backlog) const {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.size() >= backlog;
}

bool AcceptQueue::Push(std::shared_ptr<ConnectionHandle> handle) {
  std::lock_guard<std::mutex> l(mu_);
  if (stopped_) return false;
  queue_.push_back(std::move(handle));
  cv_.notify_one();
  return true;
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> AcceptQueue::Pop(Duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(std::max<int64_t>(0, timeout.ns()));
  cv_.wait_until(l, deadline, [&] { return !queue_.empty() || stopped_; });
  if (!queue_.empty()) {
    std::shared_ptr<ConnectionHandle> h = std::move(queue_.front());
    queue_.pop_front();
    return h;
  }
  if (stopped_) return absl::CancelledError("endpoint is shut down");
  return absl::DeadlineExceededError(
      absl::StrCat("no connection accepted within ", FormatDuration(timeout)));
}

void AcceptQueue::Stop() {
  std::deque<std::shared_ptr<ConnectionHandle>> queued;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
    queued.swap(queue_);
    cv_.notify_all();
  }
  for (auto& h : queued) h->Detach(absl::CancelledError("endpoint closed"));
}

}  // namespace longhaul::datapath
