#include "transport/emu/udp_relay.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/rng.h"
#include "transport/base/status.h"
#include "transport/net/control_messages.h"

namespace longhaul::emu {
namespace {

// epoll data: the high byte says what the fd is, the rest is an index.
constexpr uint64_t kTagStop = 1ull << 56;
constexpr uint64_t kTagListen = 2ull << 56;
constexpr uint64_t kTagFlow = 3ull << 56;
constexpr uint64_t kTagTcp = 4ull << 56;
constexpr uint64_t kTagMask = 0xffull << 56;

// Batches read per socket per wake before the loop looks at its timers again.
constexpr int kReadBatchesPerWake = 4;
constexpr size_t kControlBytes = 96;  // IP_TOS + SCM_TIMESTAMPNS, IP_TOS + UDP_SEGMENT
static_assert(net::kTosControlBytes + net::kSegmentControlBytes <= kControlBytes);

// Every relay socket reports each datagram's TOS byte and kernel arrival time.
net::UdpSocketFlags SocketFlags() {
  net::UdpSocketFlags f;
  f.recv_ecn = true;
  f.rx_timestamps = true;
  return f;
}

}  // namespace

size_t UdpSlotBytes(const sim::LinkSpec& spec) {
  const int64_t payload = static_cast<int64_t>(spec.mtu) - static_cast<int64_t>(spec.overhead);
  return static_cast<size_t>(std::clamp<int64_t>(payload, 64, 65535));
}

struct UdpRelay::RxBatch {
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_storage names[kBatch];
  alignas(cmsghdr) uint8_t control[kBatch][kControlBytes];
  uint32_t slots[kBatch];
};

// Datagrams to send in one sendmmsg call. Consecutive datagrams of one flow with the
// same size and TOS become one message with UDP_SEGMENT (GSO): the kernel passes them
// down the stack as one buffer and splits it at the end (or hands it whole to a
// receiver using UDP_GRO), which costs far less per datagram than one message each.
struct UdpRelay::TxBatch {
  static constexpr int kMaxIov = 1024;
  static constexpr int kMaxSegments = net::kMaxGsoSegments;
  static constexpr uint32_t kMaxGsoBytes = net::kMaxGsoBytes - 8;  // stays below the IP limit
  mmsghdr msgs[kBatch];
  alignas(cmsghdr) uint8_t control[kBatch][kControlBytes];
  int first_iov[kBatch];
  int iovs[kBatch];
  uint32_t gso_size[kBatch];
  uint32_t total[kBatch];
  uint8_t tos[kBatch];
  uint32_t flow[kBatch];
  bool closed[kBatch];  // ended by a shorter datagram: no more segments fit
  iovec iov[kMaxIov];
  uint32_t slots[kMaxIov];
  int n = 0;     // messages
  int niov = 0;  // iovecs (= datagrams)
};

UdpRelay::UdpRelay(const UdpRelayOptions& o, StopSignal stop)
    : options_(o),
      stop_(std::move(stop)),
      pool_(UdpSlotBytes(o.link), o.buffer_bytes),
      forward_(DeriveDirectionSeeds(o.link, o.seed).forward_spec,
               DeriveDirectionSeeds(o.link, o.seed).forward_seed, PayloadKind::kUdpPayload, &pool_),
      reverse_(DeriveDirectionSeeds(o.link, o.seed).reverse_spec,
               DeriveDirectionSeeds(o.link, o.seed).reverse_seed, PayloadKind::kUdpPayload, &pool_),
      clients_(o.max_clients),
      rx_(std::make_unique<RxBatch>()),
      tx_(std::make_unique<TxBatch>()),
      scratch_(65536),
      gso_(o.gso) {}

absl::StatusOr<std::unique_ptr<UdpRelay>> UdpRelay::Create(const UdpRelayOptions& options) {
  if (!options.listen.valid()) return absl::InvalidArgumentError("listen address missing");
  if (!options.forward.valid()) return absl::InvalidArgumentError("forward address missing");
  if (options.forward.port() == 0) {
    return absl::InvalidArgumentError("forward address needs a port other than 0");
  }
  if (options.link.rate.IsZero()) return absl::InvalidArgumentError("link rate must be > 0");
  if (options.max_clients == 0) return absl::InvalidArgumentError("max_clients must be >= 1");
  LH_ASSIGN_OR_RETURN(StopSignal stop, StopSignal::Create());
  std::unique_ptr<UdpRelay> r(new UdpRelay(options, std::move(stop)));
  LH_RETURN_IF_ERROR(r->Init());
  return r;
}

absl::Status UdpRelay::Init() {
  // The loop's clock starts before the socket exists, so every arrival time is >= 0.
  epoch_ns_ = MonotonicNs();
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
  LH_ASSIGN_OR_RETURN(listen_fd_, net::OpenUdpSocket(options_.listen.family(), SocketFlags()));
  buffers_ = net::SetSocketBuffers(listen_fd_, options_.socket_buffer_bytes);
  if (absl::Status s = net::BindSocket(listen_fd_, options_.listen); !s.ok()) {
    return absl::UnavailableError(std::string(s.message()));
  }
  LH_ASSIGN_OR_RETURN(listen_addr_, net::LocalAddress(listen_fd_));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagListen;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
  }
  ev.data.u64 = kTagStop;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_.fd(), &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
  }
  if (options_.tcp_relay) {
    absl::StatusOr<std::unique_ptr<TcpSplice>> t =
        TcpSplice::Create(listen_addr_, options_.forward, epoll_fd_, kTagTcp);
    if (!t.ok()) return absl::UnavailableError(std::string(t.status().message()));
    tcp_ = *std::move(t);
  }
  return absl::OkStatus();
}

UdpRelay::~UdpRelay() {
  tcp_.reset();
  for (Flow& f : flows_) {
    if (f.fd >= 0) close(f.fd);
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

int UdpRelay::OpenUpstream(uint32_t index, const net::SocketAddress& client) {
  absl::StatusOr<int> fd = net::OpenUdpSocket(options_.forward.family(), SocketFlags());
  if (!fd.ok()) {
    LOG_EVERY_N(WARNING, 1000) << "client " << client.ToString() << ": " << fd.status();
    return -1;
  }
  net::SetSocketBuffers(*fd, options_.socket_buffer_bytes);
  if (absl::Status s = net::ConnectSocket(*fd, options_.forward); !s.ok()) {
    LOG_EVERY_N(WARNING, 1000) << "client " << client.ToString() << ": " << s;
    close(*fd);
    return -1;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagFlow | index;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, *fd, &ev) != 0) {
    LOG(WARNING) << "epoll_ctl: " << strerror(errno);
    close(*fd);
    return -1;
  }
  return *fd;
}

int64_t UdpRelay::FlowFor(const net::SocketAddress& addr, int64_t now) {
  if (last_flow_ < flows_.size() && clients_.entry(last_flow_).in_use &&
      clients_.entry(last_flow_).addr == addr) {
    return last_flow_;
  }
  if (std::optional<uint32_t> f = clients_.Find(addr)) {
    last_flow_ = *f;
    return *f;
  }
  ClientMap::InsertResult ins = clients_.Insert(addr, now);
  if (ins.index >= flows_.size()) flows_.resize(ins.index + 1);
  if (ins.evicted) {
    VLOG(1) << "client map full: evicted " << ins.evicted_addr.ToString();
    CloseFlow(ins.index);
  }
  const int fd = OpenUpstream(ins.index, addr);
  if (fd < 0) {
    clients_.Remove(ins.index);
    return -1;
  }
  flows_[ins.index].fd = fd;
  flows_[ins.index].drops_seen = 0;
  last_flow_ = ins.index;
  return ins.index;
}

void UdpRelay::ApplyRebind() {
  rebind_pending_.store(false, std::memory_order_relaxed);
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    if (flows_[i].fd < 0 || !clients_.entry(i).in_use) continue;
    // The new socket is opened before the old one is closed, so the kernel cannot hand
    // the same port back: the target really sees a new source port.
    const int fd = OpenUpstream(i, clients_.entry(i).addr);
    if (fd < 0) continue;  // keeps its old socket
    CloseFlow(i);
    flows_[i].fd = fd;
    flows_[i].drops_seen = 0;
    ++rebinds_;
  }
}

void UdpRelay::CloseFlow(uint32_t index) {
  Flow& f = flows_[index];
  if (f.fd < 0) return;
  const uint64_t drops = net::SocketDrops(f.fd);
  if (drops > f.drops_seen) reverse_.counters().rx_overflow += drops - f.drops_seen;
  close(f.fd);
  f.fd = -1;
  f.drops_seen = 0;
}

void UdpRelay::ReadSocket(int fd, bool from_client, uint32_t flow) {
  RxBatch& b = *rx_;
  EmuDirection& dir = from_client ? forward_ : reverse_;
  for (int round = 0; round < kReadBatchesPerWake; ++round) {
    int k = 0;
    for (; k < kBatch; ++k) {
      const uint32_t slot = pool_.Acquire();
      if (slot == PacketPool::kNoSlot) break;
      b.slots[k] = slot;
      b.iov[k] = {pool_.Data(slot), pool_.slot_bytes()};
    }
    // Pool exhausted: still drain the socket (into scratch) so the datagrams are counted
    // as the emulator's own drops here, not lost silently in the kernel.
    const bool scratch = k == 0;
    if (scratch) {
      k = kBatch;
      for (int i = 0; i < k; ++i) b.iov[i] = {scratch_.data(), scratch_.size()};
    }
    for (int i = 0; i < k; ++i) {
      msghdr& h = b.msgs[i].msg_hdr;
      h.msg_name = from_client ? &b.names[i] : nullptr;
      h.msg_namelen = from_client ? sizeof(sockaddr_storage) : 0;
      h.msg_iov = &b.iov[i];
      h.msg_iovlen = 1;
      h.msg_control = b.control[i];
      h.msg_controllen = kControlBytes;
      h.msg_flags = 0;
      b.msgs[i].msg_len = 0;
    }
    // MSG_TRUNC: msg_len is the datagram's real length, so an oversized datagram is
    // offered with its true size (and dropped by the model as too big).
    const int n = recvmmsg(fd, b.msgs, static_cast<unsigned>(k), MSG_TRUNC, nullptr);
    const int64_t now = Now();
    // Kernel arrival times are on CLOCK_REALTIME; map them onto the loop's clock with
    // the offset between the clocks now. The model then sees when each datagram really
    // arrived, so the emulator's own reading delay neither bunches datagrams into false
    // bursts nor adds to the modelled delay.
    const int64_t realtime_to_loop = RealtimeNs() - now;
    if (n <= 0) {
      if (!scratch) {
        for (int i = 0; i < k; ++i) pool_.Release(b.slots[i]);
      }
      if (n < 0 && errno == ECONNREFUSED) {
        // ICMP port unreachable from the forward target, reported on the connected
        // upstream socket; nothing was received.
        ++port_unreachable_;
        continue;
      }
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint32_t len = b.msgs[i].msg_len;
      dir.OnReceived(len);
      if (scratch) {
        ++dir.counters().buffer_full;
        continue;
      }
      const net::ReceivedControl ctl = net::ParseReceivedControl(b.msgs[i].msg_hdr);
      uint32_t f = flow;
      if (from_client) {
        const net::SocketAddress addr = net::SocketAddress::FromSockaddr(
            reinterpret_cast<const sockaddr*>(&b.names[i]), b.msgs[i].msg_hdr.msg_namelen);
        const int64_t idx = !addr.valid() ? -1 : FlowFor(addr, now);
        if (idx < 0) {
          ++dir.counters().no_flow;
          pool_.Release(b.slots[i]);
          continue;
        }
        f = static_cast<uint32_t>(idx);
      }
      clients_.Touch(f, now);
      int64_t at = now;
      if (ctl.realtime_ns > 0) at = std::min(now, ctl.realtime_ns - realtime_to_loop);
      dir.Ingest(at, b.slots[i], len, f, clients_.entry(f).generation, ctl.tos);
    }
    if (!scratch) {
      for (int i = n; i < k; ++i) pool_.Release(b.slots[i]);
    }
    if (n < k) return;  // drained
  }
}

bool UdpRelay::Append(TxBatch& b, const PendingDatagram& d, const net::SocketAddress* to) {
  if (b.n > 0) {
    const int m = b.n - 1;
    if (gso_ && !b.closed[m] && d.bytes > 0 && d.bytes <= b.gso_size[m] && d.tos == b.tos[m] &&
        d.flow == b.flow[m] && b.iovs[m] < TxBatch::kMaxSegments &&
        b.total[m] + d.bytes <= TxBatch::kMaxGsoBytes && b.niov < TxBatch::kMaxIov) {
      b.iov[b.niov] = {pool_.Data(d.slot), d.bytes};
      b.slots[b.niov++] = d.slot;
      ++b.iovs[m];
      b.total[m] += d.bytes;
      b.closed[m] = d.bytes < b.gso_size[m];
      return true;
    }
  }
  if (b.n == kBatch || b.niov == TxBatch::kMaxIov) return false;
  const int m = b.n++;
  msghdr& h = b.msgs[m].msg_hdr;
  h = msghdr{};
  if (to != nullptr) {
    h.msg_name = const_cast<sockaddr*>(to->sockaddr_ptr());
    h.msg_namelen = to->sockaddr_len();
  }
  b.first_iov[m] = b.niov;
  b.iovs[m] = 1;
  b.gso_size[m] = d.bytes;
  b.total[m] = d.bytes;
  b.tos[m] = d.tos;
  b.flow[m] = d.flow;
  b.closed[m] = d.bytes == 0;
  b.iov[b.niov] = {pool_.Data(d.slot), d.bytes};
  b.slots[b.niov++] = d.slot;
  return true;
}

void UdpRelay::Flush(TxBatch& b, int fd, int family, EmuDirection& dir) {
  for (int m = 0; m < b.n; ++m) {
    msghdr& h = b.msgs[m].msg_hdr;
    h.msg_iov = &b.iov[b.first_iov[m]];
    h.msg_iovlen = static_cast<size_t>(b.iovs[m]);
    size_t len = 0;
    if (b.tos[m] != 0) len += net::WriteTosControl(family, b.tos[m], b.control[m]);
    if (b.iovs[m] > 1) {
      len += net::WriteSegmentControl(static_cast<uint16_t>(b.gso_size[m]), b.control[m] + len);
    }
    h.msg_control = len > 0 ? b.control[m] : nullptr;
    h.msg_controllen = len;
  }
  int m = 0;
  while (m < b.n) {
    const int r = sendmmsg(fd, b.msgs + m, static_cast<unsigned>(b.n - m), 0);
    if (r > 0) {
      for (int j = m; j < m + r; ++j) {
        for (int k = 0; k < b.iovs[j]; ++k) dir.OnSent(b.iov[b.first_iov[j] + k].iov_len);
      }
      m += r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    const int err = errno;
    if (b.iovs[m] > 1 && (err == EIO || err == EINVAL || err == EOPNOTSUPP || err == ENOPROTOOPT)) {
      // The path cannot segment (no UDP GSO): stop using it and send these one by one.
      LOG(WARNING) << "UDP GSO refused (" << strerror(err) << "); sending datagrams one by one";
      gso_ = false;
      msghdr one = b.msgs[m].msg_hdr;
      for (int k = 0; k < b.iovs[m]; ++k) {
        one.msg_iov = &b.iov[b.first_iov[m] + k];
        one.msg_iovlen = 1;
        size_t len = b.tos[m] != 0 ? net::WriteTosControl(family, b.tos[m], b.control[m]) : 0;
        one.msg_control = len > 0 ? b.control[m] : nullptr;
        one.msg_controllen = len;
        if (sendmsg(fd, &one, 0) >= 0) {
          dir.OnSent(one.msg_iov->iov_len);
        } else {
          ++dir.counters().send_errors;
        }
      }
      ++m;
      continue;
    }
    // Message m was refused (EAGAIN: socket buffer full; ECONNREFUSED: the target's
    // port is closed; ...): the emulator's own drop. Skip it and go on.
    if (r < 0 && err == ECONNREFUSED) ++port_unreachable_;
    dir.counters().send_errors += static_cast<uint64_t>(b.iovs[m]);
    ++m;
  }
  for (int j = 0; j < b.niov; ++j) pool_.Release(b.slots[j]);
  b.n = 0;
  b.niov = 0;
}

void UdpRelay::ReleaseDue(int64_t now) {
  TxBatch& b = *tx_;
  PendingDatagram d;
  // Forward: each datagram leaves through its client's upstream socket; consecutive
  // datagrams of the same client share a sendmmsg call (and GSO messages).
  int batch_fd = -1;
  const int fwd_family = options_.forward.family();
  while (forward_.PopDue(now, &d)) {
    if (!clients_.Valid(d.flow, d.flow_gen) || flows_[d.flow].fd < 0) {
      ++forward_.counters().evicted;
      pool_.Release(d.slot);
      continue;
    }
    const int fd = flows_[d.flow].fd;
    if (b.n > 0 && fd != batch_fd) Flush(b, batch_fd, fwd_family, forward_);
    batch_fd = fd;
    if (!Append(b, d, nullptr)) {
      Flush(b, batch_fd, fwd_family, forward_);
      Append(b, d, nullptr);
    }
  }
  if (b.n > 0) Flush(b, batch_fd, fwd_family, forward_);
  // Reverse: everything leaves through the listen socket, addressed to its client.
  const int rev_family = listen_addr_.family();
  while (reverse_.PopDue(now, &d)) {
    if (!clients_.Valid(d.flow, d.flow_gen)) {
      ++reverse_.counters().evicted;
      pool_.Release(d.slot);
      continue;
    }
    const net::SocketAddress* to = &clients_.entry(d.flow).addr;
    if (!Append(b, d, to)) {
      Flush(b, listen_fd_, rev_family, reverse_);
      Append(b, d, to);
    }
  }
  if (b.n > 0) Flush(b, listen_fd_, rev_family, reverse_);
}

void UdpRelay::SampleSocketDrops() {
  const uint64_t l = net::SocketDrops(listen_fd_);
  if (l > listen_drops_seen_) {
    forward_.counters().rx_overflow += l - listen_drops_seen_;
    listen_drops_seen_ = l;
  }
  for (Flow& f : flows_) {
    if (f.fd < 0) continue;
    const uint64_t d = net::SocketDrops(f.fd);
    if (d > f.drops_seen) {
      reverse_.counters().rx_overflow += d - f.drops_seen;
      f.drops_seen = d;
    }
  }
}

absl::Status UdpRelay::ChangeLink(const sim::LinkSpec& spec) {
  if (spec.rate.IsZero()) return absl::InvalidArgumentError("link rate must be > 0");
  std::lock_guard<std::mutex> lock(link_mu_);
  link_change_ = spec;
  link_change_pending_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void UdpRelay::ApplyLinkChange(int64_t now) {
  std::optional<sim::LinkSpec> spec;
  {
    std::lock_guard<std::mutex> lock(link_mu_);
    spec.swap(link_change_);
    link_change_pending_.store(false, std::memory_order_relaxed);
  }
  if (!spec) return;
  const DirectionSeeds seeds = DeriveDirectionSeeds(*spec, options_.seed);
  forward_.Reconfigure(seeds.forward_spec, now);
  reverse_.Reconfigure(seeds.reverse_spec, now);
}

absl::Status UdpRelay::Run() {
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
  std::vector<int64_t> rebinds;
  for (Duration d : options_.rebind_times) rebinds.push_back(now_ns_ + d.ns());
  std::sort(rebinds.begin(), rebinds.end(), std::greater<int64_t>());  // next at the back
  epoll_event events[64];
  bool stop = false;
  while (!stop) {
    int64_t now = Now();
    ReleaseDue(now);
    now_ns_ = now;
    if (now >= end) break;
    schedule.ApplyDue(now, &forward_, &reverse_);
    while (!rebinds.empty() && rebinds.back() <= now) {
      rebinds.pop_back();
      RebindClients();
    }
    if (rebind_pending_.load(std::memory_order_acquire)) ApplyRebind();
    if (now >= next_stats) {
      SampleSocketDrops();
      if (options_.on_stats) options_.on_stats(Stats());
      while (next_stats <= now) next_stats += interval;
    }
    int64_t deadline = std::min(
        {forward_.NextDeadline(), reverse_.NextDeadline(), next_stats, end, schedule.next_at(),
         rebinds.empty() ? kNever : rebinds.back()});
    deadline = WakeTarget(deadline, now);
    const int n =
        EpollWaitUntil(epoll_fd_, events, 64, deadline == kNever ? kNever : deadline + epoch_ns_);
    ++wakeups_;
    if (link_change_pending_.load(std::memory_order_acquire)) ApplyLinkChange(Now());
    if (rebind_pending_.load(std::memory_order_acquire)) ApplyRebind();
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("epoll_pwait2: ", strerror(errno)));
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64 & kTagMask;
      const uint64_t index = events[i].data.u64 & ~kTagMask;
      if (tag == kTagStop) {
        stop = true;
      } else if (tag == kTagListen) {
        ReadSocket(listen_fd_, /*from_client=*/true, 0);
      } else if (tag == kTagFlow) {
        if (index < flows_.size() && flows_[index].fd >= 0) {
          ReadSocket(flows_[index].fd, /*from_client=*/false, static_cast<uint32_t>(index));
        }
      } else if (tag == kTagTcp && tcp_ != nullptr) {
        tcp_->OnEvent(static_cast<uint32_t>(index & 0xffffff), events[i].events);
      }
    }
  }
  now_ns_ = Now();
  SampleSocketDrops();
  return absl::OkStatus();
}

EmuStats UdpRelay::Stats() const {
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
  s.clients_active = clients_.size();
  s.clients_created = clients_.inserted();
  s.clients_evicted = clients_.evictions();
  s.clients_rebound = rebinds_;
  s.port_unreachable = port_unreachable_;
  s.tcp_connections = tcp_ != nullptr ? tcp_->accepted() : 0;
  s.socket_buffers = buffers_;
  return s;
}

}  // namespace longhaul::emu
