#include "transport/datapath/driver_thread.h"

#include <sys/prctl.h>

#include <utility>

#include "glog/logging.h"

namespace longhaul::datapath {

DriverThread::DriverThread(std::function<void()> wake) : wake_(std::move(wake)) {}

DriverThread::~DriverThread() { Shutdown(); }

void DriverThread::Start(const EngineSlot& slot, std::function<void()> loop) {
  CHECK(!thread_.joinable()) << "DriverThread::Start called twice";
  thread_ = std::thread([this, slot, loop = std::move(loop)] {
    id_.store(std::this_thread::get_id());
    SetUpEngineThread(slot);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // timer wake-ups to the microsecond
    loop();
    id_.store(std::thread::id());  // a later thread may be given the same id
  });
}

bool DriverThread::Post(std::function<void()> fn) {
  std::lock_guard<std::mutex> l(post_mu_);
  if (stop_requested_ || stopped_) return false;
  posted_.push_back(std::move(fn));
  wake_();
  return true;
}

void DriverThread::RunOnThread(const std::function<void()>& fn) {
  RunOnDriverThread(
      OnThread(), [this](std::function<void()> f) { return Post(std::move(f)); }, fn);
}

void DriverThread::Shutdown() {
  if (OnThread()) {
    // From an event callback: the thread cannot join itself. Stop after this turn.
    LOG(DFATAL) << "Endpoint::Close called from an event callback";
    std::lock_guard<std::mutex> l(post_mu_);
    stop_requested_ = true;
    return;
  }
  std::lock_guard<std::mutex> join(join_mu_);
  {
    std::lock_guard<std::mutex> l(post_mu_);
    stop_requested_ = true;
    if (!thread_.joinable()) return;
  }
  wake_();
  thread_.join();
}

void DriverThread::RunPosted() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> l(post_mu_);
    work.swap(posted_);
  }
  for (auto& fn : work) fn();
}

bool DriverThread::stop_requested() const {
  std::lock_guard<std::mutex> l(post_mu_);
  return stop_requested_;
}

void DriverThread::StopPosting() {
  {
    std::lock_guard<std::mutex> l(post_mu_);
    stopped_ = true;
  }
  RunPosted();
}

void DriverThread::Publish(EndpointStats stats) {
  stats.cpu_s = ThisThreadCpuSeconds();
  std::lock_guard<std::mutex> l(stats_mu_);
  published_ = stats;
}

EndpointStats DriverThread::Published() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return published_;
}

EndpointStats DriverThread::FreshStats(const std::function<void()>& publish) {
  RunOnThread(publish);
  return Published();
}

}  // namespace longhaul::datapath
