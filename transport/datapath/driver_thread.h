// DriverThread: the thread a driver (transport/drivers) runs on, and what every driver
// does around it: starting the thread, the queue of work posted from other threads,
// running a function on the thread and waiting for it, the stop and join protocol, and
// the stats the thread publishes for other threads to read. The driver keeps its I/O and
// its loop; the loop calls RunPosted and stop_requested on every turn and, once a stop is
// requested, runs its own shutdown (udp_driver.cc is the model):
//
//   thread_.RunPosted();
//   if (thread_.stop_requested()) {
//     runtime_.BeginShutdown(now); Transmit(now); runtime_.FinishShutdown(now);
//     PublishDriverStats(now);  // calls thread_.Publish
//     thread_.StopPosting();
//     ... close the driver's I/O ...
//     return;
//   }
//
// The one thing a driver supplies is `wake`: it makes the loop leave its wait and turn
// (the UDP driver posts an empty handler to its io_context, the verbs driver writes to
// its eventfd).
//
// Thread-safety: every method may be called from any thread except those marked "driver
// thread".
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/datapath/driver_runtime.h"
#include "transport/datapath/options.h"

namespace longhaul::datapath {

class DriverThread {
 public:
  // `wake` may be called with DriverThread's lock held: it must not call back into it.
  explicit DriverThread(std::function<void()> wake);
  // Shutdown(): the owner shuts down first, while what `loop` uses still exists.
  ~DriverThread();

  DriverThread(const DriverThread&) = delete;
  DriverThread& operator=(const DriverThread&) = delete;

  // Starts the thread: it names and pins itself as SetUpEngineThread(slot) does
  // ("lh-engine-<index>"), asks for timer wake-ups to the microsecond (PR_SET_TIMERSLACK),
  // then runs `loop`, which returns once it has shut down. Once only.
  void Start(const EngineSlot& slot, std::function<void()> loop);

  // True on the driver thread.
  bool OnThread() const { return std::this_thread::get_id() == id_.load(); }

  // Queues `fn` for the driver thread and wakes it. False, and `fn` is dropped without
  // running, once a stop was requested.
  bool Post(std::function<void()> fn);

  // Runs `fn` on the driver thread and waits for it: at once from the driver thread
  // itself, else through Post (after a stop `fn` does not run; RunOnDriverThread).
  void RunOnThread(const std::function<void()>& fn);

  // Asks the loop to stop, wakes it and joins the thread. Idempotent. From the driver
  // thread (an event callback) it cannot join: it logs DFATAL "Endpoint::Close called
  // from an event callback" and the loop stops after this turn.
  void Shutdown();

  // ---- driver thread ----

  // Runs the work posted so far, in order.
  void RunPosted();
  // True once Shutdown was called: the loop runs its shutdown, then returns.
  bool stop_requested() const;
  // At the end of the loop's shutdown: Post fails from now on, and the work posted before
  // runs now (callers waiting in RunOnThread return).
  void StopPosting();

  // ---- stats ----

  // Driver thread: makes `stats` the published copy, with cpu_s set to the thread's CPU
  // time (ThisThreadCpuSeconds).
  void Publish(EndpointStats stats);
  // The last published copy.
  EndpointStats Published() const;
  // Fresh stats: runs `publish` (which calls Publish) on the driver thread, then returns
  // the published copy (the last one once the thread has stopped).
  EndpointStats FreshStats(const std::function<void()>& publish);

 private:
  const std::function<void()> wake_;
  std::atomic<std::thread::id> id_{};
  std::thread thread_;
  std::mutex join_mu_;  // one Shutdown joins at a time

  mutable std::mutex post_mu_;
  std::vector<std::function<void()>> posted_;
  bool stop_requested_ = false;
  bool stopped_ = false;

  mutable std::mutex stats_mu_;
  EndpointStats published_;
};

}  // namespace longhaul::datapath
