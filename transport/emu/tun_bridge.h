// TunBridge: the emulator's TUN mode (root). Two network namespaces A and B (created if
// missing) each get a TUN device; A's has 198.18.0.1/30, B's 198.18.0.2/30, MTU from the
// spec. Every IP packet A sends towards B is read from A's device, crosses the link's
// forward direction and is written to B's device, and back through the reverse
// direction, so any IP traffic (TCP, UDP, ICMP) between `ip netns exec A ...` and
// `ip netns exec B ...` crosses the same emulated link.
//
// The model sees whole IP packets (EmuDirection PayloadKind::kIpPacket): the MTU applies
// to the IP packet and only overhead beyond IP + UDP (e.g. Ethernet framing) is added on
// the wire. A CE mark is written into the IP header (IPv4 checksum fixed).
//
// One thread runs the loop (epoll with a nanosecond timeout to the earliest delivery,
// every due packet written at each wake). Shutdown(), also run by the destructor, closes
// the TUN fds (the devices vanish with them) and deletes the namespaces this bridge
// created; namespaces that existed before are kept.
//
// Thread-safety: Run() on one thread; Stop() from any thread or a signal handler.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/emu/emu_direction.h"
#include "transport/emu/emu_stats.h"
#include "transport/emu/loop_util.h"
#include "transport/emu/netns.h"
#include "transport/emu/packet_pool.h"
#include "transport/sim/link_spec.h"

namespace longhaul::emu {

struct TunBridgeOptions {
  sim::LinkSpec link;
  uint64_t seed = 1;
  std::string netns_a;  // namespace names
  std::string netns_b;
  std::string tun_name = "lhemu0";  // device name in both namespaces
  std::string address_a = "198.18.0.1";
  std::string address_b = "198.18.0.2";
  int prefix_len = 30;
  size_t buffer_bytes = size_t{1} << 30;
  Duration stats_interval = Duration::Zero();
  Duration max_time = Duration::Zero();
  int realtime_priority = 0;  // > 0: run the loop under SCHED_FIFO at this priority (root)
  // Link changes over time (--link_schedule): step i's spec (ResolveLinkSchedule) takes
  // effect at schedule_times[i] after Run() starts.
  std::vector<Duration> schedule_times;
  std::vector<sim::LinkSpec> schedule_specs;
  std::function<void(const EmuStats&)> on_stats;
};

class TunBridge {
 public:
  // Checks privileges, creates or opens the namespaces and creates the devices. On error
  // everything made so far is removed again.
  static absl::StatusOr<std::unique_ptr<TunBridge>> Create(const TunBridgeOptions& options);
  ~TunBridge();

  // Bridges until Stop() or max_time.
  absl::Status Run();
  void Stop() const { stop_.Raise(); }
  int stop_fd() const { return stop_.fd(); }

  // Closes the devices and deletes the namespaces this bridge created. Idempotent.
  // Returns the names deleted.
  std::vector<std::string> Shutdown();

  EmuStats Stats() const;
  bool created_a() const { return a_.created; }
  bool created_b() const { return b_.created; }
  int netns_a_fd() const { return a_.fd; }
  int netns_b_fd() const { return b_.fd; }

 private:
  TunBridge(const TunBridgeOptions& options, StopSignal stop);
  absl::Status Init();
  int64_t Now() const { return MonotonicNs() - epoch_ns_; }
  void ReadTun(int fd, EmuDirection& dir);
  void ReleaseDue(int64_t now);
  void SampleDeviceDrops();

  TunBridgeOptions options_;
  StopSignal stop_;
  NetnsHandle a_, b_;
  int tun_a_ = -1, tun_b_ = -1;
  // /proc/net/dev of each namespace: the TUN devices' transmit drops are packets the
  // kernel dropped because this bridge did not read them in time (its own drops).
  int dev_stats_a_ = -1, dev_stats_b_ = -1;
  uint64_t tx_drops_base_a_ = 0, tx_drops_base_b_ = 0;
  int epoll_fd_ = -1;
  PacketPool pool_;
  EmuDirection forward_;  // A -> B
  EmuDirection reverse_;  // B -> A
  int64_t epoch_ns_ = 0;
  int64_t now_ns_ = 0;
  uint64_t wakeups_ = 0;
  bool shut_down_ = false;
};

}  // namespace longhaul::emu
