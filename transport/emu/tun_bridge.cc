#include "transport/emu/tun_bridge.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"
#include "transport/emu/tun_device.h"
#include "transport/emu/udp_relay.h"

namespace longhaul::emu {
namespace {

constexpr uint64_t kTagStop = 0;
constexpr uint64_t kTagA = 1;
constexpr uint64_t kTagB = 2;
// Packets read from one device per wake before the loop looks at its timers again.
constexpr int kReadsPerWake = 256;

}  // namespace

TunBridge::TunBridge(const TunBridgeOptions& o, StopSignal stop)
    : options_(o),
      stop_(std::move(stop)),
      pool_(std::max<size_t>(o.link.mtu, 68), o.buffer_bytes),
      forward_(DeriveDirectionSeeds(o.link, o.seed).forward_spec,
               DeriveDirectionSeeds(o.link, o.seed).forward_seed, PayloadKind::kIpPacket, &pool_),
      reverse_(DeriveDirectionSeeds(o.link, o.seed).reverse_spec,
               DeriveDirectionSeeds(o.link, o.seed).reverse_seed, PayloadKind::kIpPacket, &pool_) {}

absl::StatusOr<std::unique_ptr<TunBridge>> TunBridge::Create(const TunBridgeOptions& options) {
  LH_RETURN_IF_ERROR(ValidateNetnsName(options.netns_a));
  LH_RETURN_IF_ERROR(ValidateNetnsName(options.netns_b));
  if (options.netns_a == options.netns_b) {
    return absl::InvalidArgumentError("the two namespaces must differ");
  }
  if (options.link.rate.IsZero()) return absl::InvalidArgumentError("link rate must be > 0");
  LH_RETURN_IF_ERROR(CheckTunModePrivileges());
  LH_ASSIGN_OR_RETURN(StopSignal stop, StopSignal::Create());
  std::unique_ptr<TunBridge> b(new TunBridge(options, std::move(stop)));
  if (absl::Status s = b->Init(); !s.ok()) {
    b->Shutdown();
    return s;
  }
  return b;
}

absl::Status TunBridge::Init() {
  epoch_ns_ = MonotonicNs();
  absl::StatusOr<NetnsHandle> a = OpenOrCreateNetns(options_.netns_a);
  if (!a.ok())
    return absl::Status(a.status().code(),
                        absl::StrCat("namespace ", options_.netns_a, ": ", a.status().message()));
  a_ = *a;
  absl::StatusOr<NetnsHandle> b = OpenOrCreateNetns(options_.netns_b);
  if (!b.ok())
    return absl::Status(b.status().code(),
                        absl::StrCat("namespace ", options_.netns_b, ": ", b.status().message()));
  b_ = *b;
  TunConfig c;
  c.name = options_.tun_name;
  c.prefix_len = options_.prefix_len;
  c.mtu = static_cast<int>(options_.link.mtu);
  c.address = options_.address_a;
  absl::StatusOr<int> ta = CreateTunInNetns(a_.fd, c);
  if (!ta.ok())
    return absl::Status(ta.status().code(),
                        absl::StrCat("namespace ", a_.name, ": ", ta.status().message()));
  tun_a_ = *ta;
  c.address = options_.address_b;
  absl::StatusOr<int> tb = CreateTunInNetns(b_.fd, c);
  if (!tb.ok())
    return absl::Status(tb.status().code(),
                        absl::StrCat("namespace ", b_.name, ": ", tb.status().message()));
  tun_b_ = *tb;
  // Best effort: without /proc the counters stay 0.
  if (absl::StatusOr<int> f = OpenNetDevStatsInNetns(a_.fd); f.ok()) dev_stats_a_ = *f;
  if (absl::StatusOr<int> f = OpenNetDevStatsInNetns(b_.fd); f.ok()) dev_stats_b_ = *f;
  if (dev_stats_a_ >= 0) tx_drops_base_a_ = ReadDeviceTxDrops(dev_stats_a_, c.name).value_or(0);
  if (dev_stats_b_ >= 0) tx_drops_base_b_ = ReadDeviceTxDrops(dev_stats_b_, c.name).value_or(0);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
  for (auto [fd, tag] :
       {std::pair{tun_a_, kTagA}, std::pair{tun_b_, kTagB}, std::pair{stop_.fd(), kTagStop}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

TunBridge::~TunBridge() { Shutdown(); }

std::vector<std::string> TunBridge::Shutdown() {
  std::vector<std::string> deleted;
  if (shut_down_) return deleted;
  shut_down_ = true;
  forward_.DropPending();
  reverse_.DropPending();
  SampleDeviceDrops();
  for (int* fd : {&dev_stats_a_, &dev_stats_b_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  // Closing the last fd of a non-persistent TUN device removes the device.
  if (tun_a_ >= 0) close(tun_a_);
  if (tun_b_ >= 0) close(tun_b_);
  tun_a_ = tun_b_ = -1;
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
  for (NetnsHandle* h : {&a_, &b_}) {
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
    if (h->created) {
      if (absl::Status s = DeleteNetns(h->name); s.ok()) {
        deleted.push_back(h->name);
      } else {
        LOG(WARNING) << "could not delete namespace " << h->name << ": " << s;
      }
      h->created = false;
    }
  }
  return deleted;
}

void TunBridge::SampleDeviceDrops() {
  if (tun_a_ < 0) return;
  if (dev_stats_a_ >= 0) {
    if (auto d = ReadDeviceTxDrops(dev_stats_a_, options_.tun_name); d && *d >= tx_drops_base_a_) {
      forward_.counters().rx_overflow = *d - tx_drops_base_a_;
    }
  }
  if (dev_stats_b_ >= 0) {
    if (auto d = ReadDeviceTxDrops(dev_stats_b_, options_.tun_name); d && *d >= tx_drops_base_b_) {
      reverse_.counters().rx_overflow = *d - tx_drops_base_b_;
    }
  }
}

void TunBridge::ReadTun(int fd, EmuDirection& dir) {
  for (int i = 0; i < kReadsPerWake; ++i) {
    const uint32_t slot = pool_.Acquire();
    uint8_t scratch[65536];
    uint8_t* buf = slot == PacketPool::kNoSlot ? scratch : pool_.Data(slot);
    const size_t cap = slot == PacketPool::kNoSlot ? sizeof(scratch) : pool_.slot_bytes();
    const ssize_t n = read(fd, buf, cap);
    if (n <= 0) {
      if (slot != PacketPool::kNoSlot) pool_.Release(slot);
      return;  // EAGAIN: drained (errors: nothing more to read now)
    }
    dir.OnReceived(static_cast<uint64_t>(n));
    if (slot == PacketPool::kNoSlot) {
      ++dir.counters().buffer_full;
      continue;
    }
    dir.Ingest(Now(), slot, static_cast<uint32_t>(n));
  }
}

void TunBridge::ReleaseDue(int64_t now) {
  PendingDatagram d;
  for (auto [dir, out] : {std::pair{&forward_, tun_b_}, std::pair{&reverse_, tun_a_}}) {
    while (dir->PopDue(now, &d)) {
      const ssize_t w = write(out, pool_.Data(d.slot), d.bytes);
      if (w == static_cast<ssize_t>(d.bytes)) {
        dir->OnSent(d.bytes);
      } else {
        ++dir->counters().send_errors;
      }
      pool_.Release(d.slot);
    }
  }
}

absl::Status TunBridge::Run() {
  if (shut_down_) return absl::FailedPreconditionError("bridge already shut down");
  UsePreciseTimers();
  if (options_.realtime_priority > 0) {
    LH_RETURN_IF_ERROR(UseRealtimeScheduling(options_.realtime_priority));
  }
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  now_ns_ = Now();
  const int64_t interval = options_.stats_interval.ns();
  int64_t next_stats = interval > 0 ? now_ns_ + interval : kNever;
  LinkSchedule schedule(options_.schedule_times, options_.schedule_specs, options_.seed);
  schedule.Start(now_ns_);
  const int64_t end = options_.max_time.ns() > 0 ? now_ns_ + options_.max_time.ns() : kNever;
  epoll_event events[8];
  bool stop = false;
  while (!stop) {
    const int64_t now = Now();
    ReleaseDue(now);
    now_ns_ = now;
    if (now >= end) break;
    schedule.ApplyDue(now, &forward_, &reverse_);
    if (now >= next_stats) {
      SampleDeviceDrops();
      if (options_.on_stats) options_.on_stats(Stats());
      while (next_stats <= now) next_stats += interval;
    }
    int64_t deadline = std::min(
        {forward_.NextDeadline(), reverse_.NextDeadline(), next_stats, end, schedule.next_at()});
    deadline = WakeTarget(deadline, now);
    const int n =
        EpollWaitUntil(epoll_fd_, events, 8, deadline == kNever ? kNever : deadline + epoch_ns_);
    ++wakeups_;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("epoll_pwait2: ", strerror(errno)));
    }
    for (int i = 0; i < n; ++i) {
      switch (events[i].data.u64) {
        case kTagStop:
          stop = true;
          break;
        case kTagA:
          ReadTun(tun_a_, forward_);
          break;
        case kTagB:
          ReadTun(tun_b_, reverse_);
          break;
      }
    }
  }
  now_ns_ = Now();
  SampleDeviceDrops();
  return absl::OkStatus();
}

EmuStats TunBridge::Stats() const {
  EmuStats s;
  s.elapsed_s = static_cast<double>(now_ns_) * 1e-9;
  s.forward.model = forward_.ModelCounters(now_ns_);
  s.forward.own = forward_.counters();
  s.forward.pending = forward_.pending();
  s.reverse.model = reverse_.ModelCounters(now_ns_);
  s.reverse.own = reverse_.counters();
  s.reverse.pending = reverse_.pending();
  s.wakeups = wakeups_;
  s.pool_slot_bytes = pool_.slot_bytes();
  s.pool_max_slots = pool_.max_slots();
  s.pool_peak_slots = pool_.peak_in_use();
  return s;
}

}  // namespace longhaul::emu
