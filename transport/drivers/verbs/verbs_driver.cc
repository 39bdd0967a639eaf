// The driver thread's loop, in order on every turn:
//   1. run work posted from other threads (Listen, Connect) and the handles' wake-ups;
//   2. answer the locator sockets (LOCATE requests, the tuner's probes);
//   3. poll the receive and send completion queues in batches: every received message
//      goes to the endpoint at once, its buffer is queued for the next refill batch;
//      send completions return registered send buffers;
//   4. drain the endpoint's PollTransmit into registered send buffers, one post list per
//      queue pair;
//   5. hand the connections' events to their handles;
//   6. sleep: arm both CQs, poll them once more (a completion between the last poll and
//      the arming would otherwise be missed), then ppoll the completion channel, the
//      eventfd and the locator sockets until the endpoint's next deadline.
//
// Buffers: one registered send arena of fixed slots (the port's MTU each) shared by every
// queue pair, so PollTransmit writes into the slot it will be posted from (no copy);
// each queue pair keeps its posted slots in order, and a signalled completion returns
// every slot up to it (a UD send queue completes in order). Every 16th work request and
// the last of each post list is signalled. Each queue pair has its own receive ring
// (MTU + the 40-byte GRH per slot).

#include "transport/drivers/verbs/verbs_driver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/base/rate_limited_log.h"
#include "transport/datapath/endpoint_runtime.h"
#include "transport/drivers/verbs/locator.h"
#include "transport/drivers/verbs/peer_address.h"
#include "transport/drivers/verbs/verbs_device.h"
#include "transport/endpoint/handshake.h"
#include "transport/net/control_messages.h"
#include "transport/net/errno_status.h"
#include "transport/net/resolver.h"
#include "transport/net/socket_setup.h"

namespace longhaul::verbs {
namespace {

constexpr uint32_t kGrhBytes = 40;
constexpr uint32_t kSignalEvery = 16;
constexpr int kCqBatch = 32;
constexpr int kMaxCqBatchesPerTurn = 8;  // then transmit (ACKs) before reading more
constexpr uint32_t kRefillBatch = 32;
constexpr uint32_t kMinRecvDepth = 256;
constexpr uint32_t kMaxRecvDepth = 16384;
constexpr uint32_t kSendSlots = 4096;  // the shared send arena
constexpr size_t kMaxForeignReply = 65507;

Time Now() { return Time::FromNanoseconds(MonotonicNs()); }

uint64_t RandomWord() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

endpoint::EndpointConfig EndpointConfigFor(const EndpointOptions& o) {
  endpoint::EndpointConfig c;
  c.cookie_lifetime = o.cookie_lifetime;
  c.max_connections = o.max_connections;
  c.max_flows = std::clamp<uint32_t>(o.max_flows, 1, 65535);
  c.seed = o.seed != 0 ? o.seed : RandomWord();
  c.cookie_secret = endpoint::SipKey{RandomWord(), RandomWord()};
  c.format_address = FormatPeerAddress;
  return c;
}

uint64_t WrId(uint32_t qp, uint32_t slot) { return (static_cast<uint64_t>(qp) << 32) | slot; }
uint32_t WrQp(uint64_t id) { return static_cast<uint32_t>(id >> 32); }
uint32_t WrSlot(uint64_t id) { return static_cast<uint32_t>(id); }

// The sender's GID from the 40 bytes in front of a UD message: a GRH (IPv6, RoCE v2 over
// IPv6 or RoCE v1), or for RoCE v2 over IPv4 20 unused bytes and the IPv4 header.
bool SourceGid(const uint8_t* grh, Gid* gid) {
  if ((grh[0] >> 4) == 6) {
    std::memcpy(gid->data(), grh + 8, 16);
    return true;
  }
  if ((grh[20] >> 4) == 4) {
    uint32_t v4;
    std::memcpy(&v4, grh + 20 + 12, 4);
    *gid = Ipv4MappedGid(v4);
    return true;
  }
  return false;
}

// The local IPv4 address the kernel would send from towards `to` (network order).
uint32_t SourceAddressTowards(const net::SocketAddress& to) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  uint32_t out = 0;
  if (connect(fd, to.sockaddr_ptr(), to.sockaddr_len()) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      out = local.sin_addr.s_addr;
    }
  }
  close(fd);
  return out;
}

}  // namespace

class VerbsDriverImpl {
 public:
  explicit VerbsDriverImpl(const EndpointOptions& o)
      : opt_(o),
        runtime_(EndpointConfigFor(o),
                 datapath::EndpointRuntime::Hooks{
                     .wake = [this] { Kick(); },
                     .close_local = [this](endpoint::LocalId id) { DestroyQp(id); },
                     .local_address =
                         [this](endpoint::LocalId id) {
                           Qp* q = FindQp(id);
                           if (q == nullptr || dev_ == nullptr) return std::string();
                           return absl::StrCat(FormatGid(dev_->gid()), " qp ", q->qpn);
                         }}),
        ep_(runtime_.endpoint()) {}

  ~VerbsDriverImpl() {
    if (event_fd_ >= 0) close(event_fd_);
  }

  absl::Status Init() {
    event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (event_fd_ < 0) return net::ErrnoStatus(errno, "eventfd");
    if (!opt_.verbs.device.empty()) return OpenDevice(0);
    return absl::OkStatus();
  }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
    runtime_.SetDriverThread(thread_.get_id());
  }

  // ---- thread-safe entry points ----

  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port, ListenOptions lo) {
    absl::StatusOr<net::SocketAddress> bind = net::SocketAddress::FromNumeric(address, port);
    if (!bind.ok()) return bind.status();
    if (bind->family() != AF_INET) {
      return absl::InvalidArgumentError(
          absl::StrCat("verbs: listen address ", address, " is not IPv4 (RoCE v2 over IPv4)"));
    }
    if (absl::Status s = lo.config.Validate(); !s.ok()) return s;
    const uint32_t ipv4 =
        reinterpret_cast<const sockaddr_in*>(bind->sockaddr_ptr())->sin_addr.s_addr;
    absl::StatusOr<uint16_t> result = absl::CancelledError("endpoint is shut down");
    RunOnDriver([&] { result = ListenOnDriver(*bind, ipv4, std::move(lo)); });
    return result;
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host, uint16_t port,
                                                            ConnectOptions co) {
    if (runtime_.OnDriverThread()) {
      return absl::FailedPreconditionError("Connect cannot be called from an event callback");
    }
    absl::StatusOr<net::SocketAddress> server = net::Resolve(host, port);
    if (!server.ok()) return server.status();
    if (server->family() != AF_INET) {
      return absl::InvalidArgumentError(
          absl::StrCat("verbs: ", host, " has no IPv4 address (RoCE v2 over IPv4)"));
    }
    if (absl::Status s = co.config.Validate(); !s.ok()) return s;
    if (co.app_data.size() > endpoint::kMaxAppDataSize) {
      return absl::InvalidArgumentError(absl::StrCat("connect: application data of ",
                                                     co.app_data.size(), " bytes exceeds ",
                                                     endpoint::kMaxAppDataSize));
    }
    const int64_t start = MonotonicNs();
    absl::StatusOr<LocateAnswer> located = Locate(*server, co.timeout);
    if (!located.ok()) return located.status();
    const Duration left = co.timeout - Duration::Nanoseconds(MonotonicNs() - start);
    co.timeout = std::max(left, Duration::Milliseconds(100));
    const uint32_t ipv4 = SourceAddressTowards(*server);
    absl::Status opened = absl::CancelledError("endpoint is shut down");
    RunOnDriver([&] { opened = OpenDevice(ipv4); });
    if (!opened.ok()) return opened;
    auto wait = std::make_shared<datapath::ConnectWait>();
    const Duration timeout = co.timeout;
    const bool posted = Post([this, a = *located, co = std::move(co), wait]() mutable {
      StartConnect(a, std::move(co), std::move(wait));
    });
    if (!posted) return absl::CancelledError("endpoint is shut down");
    return datapath::EndpointRuntime::WaitConnect(*wait, timeout, server->ToString());
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) {
    return runtime_.Accept(timeout);
  }

  void Shutdown() {
    if (runtime_.OnDriverThread()) {
      LOG(DFATAL) << "Endpoint::Close called from an event callback";
      std::lock_guard<std::mutex> l(post_mu_);
      stop_requested_ = true;
      return;
    }
    {
      std::lock_guard<std::mutex> l(post_mu_);
      if (!thread_.joinable()) return;
      stop_requested_ = true;
    }
    Kick();
    thread_.join();
  }

  EndpointStats stats() {
    RunOnDriver([this] { PublishDriverStats(Now()); });
    std::lock_guard<std::mutex> l(stats_mu_);
    return published_;
  }

 private:
  struct SendWr {
    uint32_t slot;
    uint32_t len;
    ibv_ah* ah;
    uint32_t remote_qpn;
  };
  struct Qp {
    uint32_t id = 0;  // its endpoint::LocalId
    ibv_qp* qp = nullptr;
    uint32_t qpn = 0;
    uint32_t max_inline = 0;
    // receive ring
    std::vector<uint8_t> recv_mem;
    ibv_mr* recv_mr = nullptr;
    uint32_t recv_depth = 0;
    std::vector<uint32_t> refill;  // slots to post again
    // send side
    uint32_t send_depth = 0;
    std::deque<std::pair<uint32_t, bool>> inflight;  // posted slots, signalled?
    uint32_t unsignaled_run = 0;
    std::vector<SendWr> chain;   // built this turn
    std::deque<SendWr> backlog;  // PollTransmit's output while the send queue was full
    bool blocked = false;
    // listener
    int udp_fd = -1;
    ForeignDatagramHandler on_foreign;
  };

  // ---- posting work to the driver thread ----

  void Kick() {
    const uint64_t one = 1;
    ssize_t r = write(event_fd_, &one, sizeof(one));
    (void)r;
  }

  bool Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> l(post_mu_);
      if (stop_requested_ || stopped_) return false;
      posted_.push_back(std::move(fn));
    }
    Kick();
    return true;
  }

  void RunOnDriver(const std::function<void()>& fn) {
    if (runtime_.OnDriverThread()) {
      fn();
      return;
    }
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool posted = Post([&] {
      fn();
      std::lock_guard<std::mutex> l(mu);
      done = true;
      cv.notify_all();
    });
    if (!posted) return;
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done; });
  }

  // ---- the device ----

  absl::Status OpenDevice(uint32_t ipv4) {
    if (dev_ != nullptr) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<VerbsDevice>> d = VerbsDevice::Open(opt_.verbs, ipv4);
    if (!d.ok()) return d.status();
    std::unique_ptr<VerbsDevice> dev = *std::move(d);
    if (dev->active_mtu() < endpoint::kMinInitialSize) {
      return absl::FailedPreconditionError(absl::StrCat(
          dev->Describe(), ": the handshake's Initial datagrams are ", endpoint::kMinInitialSize,
          " bytes, more than the active MTU; raise the netdev's MTU "
          "(9000 gives an active MTU of 4096)"));
    }
    channel_ = ibv_create_comp_channel(dev->context());
    if (channel_ == nullptr) return VerbsError(errno, "ibv_create_comp_channel");
    const int flags = fcntl(channel_->fd, F_GETFL);
    fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK);
    cq_capacity_ = std::min<uint32_t>(dev->max_cqe(), 65536);
    send_cq_ = ibv_create_cq(dev->context(), static_cast<int>(cq_capacity_), nullptr, channel_, 0);
    recv_cq_ = ibv_create_cq(dev->context(), static_cast<int>(cq_capacity_), nullptr, channel_, 0);
    if (send_cq_ == nullptr || recv_cq_ == nullptr) {
      const int e = errno;
      DestroyDeviceObjects();
      return VerbsError(e, absl::StrCat("ibv_create_cq(", cq_capacity_, " entries)"));
    }
    slot_size_ = dev->active_mtu();
    send_mem_.assign(static_cast<size_t>(kSendSlots) * slot_size_, 0);
    send_mr_ = ibv_reg_mr(dev->pd(), send_mem_.data(), send_mem_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (send_mr_ == nullptr) {
      const int e = errno;
      DestroyDeviceObjects();
      return VerbsError(e, absl::StrCat("ibv_reg_mr of the ", send_mem_.size(), "-byte send ring"));
    }
    free_slots_.clear();
    for (uint32_t i = kSendSlots; i > 0; --i) free_slots_.push_back(i - 1);
    dev_ = std::move(dev);
    LOG(INFO) << "verbs: " << dev_->Describe();
    return absl::OkStatus();
  }

  void DestroyDeviceObjects() {
    while (!qps_.empty()) DestroyQp(qps_.begin()->first);
    for (auto& [gid, ah] : ahs_) ibv_destroy_ah(ah);
    ahs_.clear();
    if (send_mr_ != nullptr) ibv_dereg_mr(send_mr_);
    send_mr_ = nullptr;
    if (send_cq_ != nullptr) {
      ibv_ack_cq_events(send_cq_, unacked_send_events_);
      ibv_destroy_cq(send_cq_);
    }
    if (recv_cq_ != nullptr) {
      ibv_ack_cq_events(recv_cq_, unacked_events_);
      ibv_destroy_cq(recv_cq_);
    }
    unacked_events_ = unacked_send_events_ = 0;
    send_cq_ = recv_cq_ = nullptr;
    if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
    channel_ = nullptr;
    dev_.reset();
  }

  // The receive depth for a queue pair carrying `c`: rate x initial RTT / 4 of MTU
  // buffers (what the UDP driver's socket buffer holds, window / 4), within the device's
  // limits and what the completion queue has left.
  uint32_t RecvDepthFor(const TransportConfig& c) const {
    uint64_t depth = opt_.verbs.recv_depth;
    if (depth == 0) {
      const double bytes = c.rate.BytesPerSecond() * c.initial_rtt.seconds() / 4.0;
      depth = static_cast<uint64_t>(bytes / slot_size_);
      depth = std::clamp<uint64_t>(depth, kMinRecvDepth, kMaxRecvDepth);
    }
    depth = std::min<uint64_t>(depth, dev_->max_qp_wr());
    return static_cast<uint32_t>(depth);
  }

  // The segment fitted to the port's MTU (or the error when it may not be changed).
  absl::Status FitSegment(TransportConfig* c) const {
    if (c->MaxDatagramSize() <= slot_size_) return absl::OkStatus();
    const ByteCount fitted = slot_size_ - (c->MaxDatagramSize() - c->segment);
    if (!opt_.verbs.fit_segment) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment of ", c->segment, " bytes makes datagrams of ",
                       c->MaxDatagramSize(), " bytes, more than ", dev_->name(),
                       "'s active MTU of ", slot_size_, "; use --segment=", fitted, " or less"));
    }
    c->segment = fitted;
    if (c->window < 2 * c->segment) c->window = 2 * c->segment;
    return c->Validate();
  }

  absl::StatusOr<uint32_t> CreateQp(const TransportConfig& c) {
    const uint32_t recv_depth = RecvDepthFor(c);
    const uint32_t send_depth = std::clamp<uint32_t>(opt_.verbs.send_depth, 16,
                                                     std::min<uint32_t>(dev_->max_qp_wr(), 8192));
    if (recv_cq_used_ + recv_depth > cq_capacity_ || send_cq_used_ + send_depth > cq_capacity_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("verbs: completion queues full (", cq_capacity_, " entries; ", qps_.size(),
                       " queue pairs): fewer flows or connections, or a smaller recv_depth"));
    }
    auto q = std::make_unique<Qp>();
    q->id = next_qp_id_++;
    q->recv_depth = recv_depth;
    q->send_depth = send_depth;
    ibv_qp_init_attr ia{};
    ia.send_cq = send_cq_;
    ia.recv_cq = recv_cq_;
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = send_depth;
    ia.cap.max_recv_wr = recv_depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = dev_->max_inline();
    q->qp = ibv_create_qp(dev_->pd(), &ia);
    if (q->qp == nullptr) {
      // Some devices refuse inline data: retry without.
      ia.cap.max_inline_data = 0;
      q->qp = ibv_create_qp(dev_->pd(), &ia);
    }
    if (q->qp == nullptr) {
      return VerbsError(errno, absl::StrCat("ibv_create_qp (UD, ", send_depth, " send and ",
                                            recv_depth, " receive work requests)"));
    }
    q->qpn = q->qp->qp_num;
    q->max_inline = ia.cap.max_inline_data;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev_->port();
    a.qkey = kQkey;
    int err =
        ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (err == 0) {
      a = {};
      a.qp_state = IBV_QPS_RTR;
      err = ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
    }
    if (err == 0) {
      a = {};
      a.qp_state = IBV_QPS_RTS;
      a.sq_psn = static_cast<uint32_t>(RandomWord() & 0xffffff);
      err = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (err != 0) {
      ibv_destroy_qp(q->qp);
      return VerbsError(err, "ibv_modify_qp (UD to RTS)");
    }
    const size_t recv_slot = slot_size_ + kGrhBytes;
    q->recv_mem.assign(recv_slot * recv_depth, 0);
    q->recv_mr =
        ibv_reg_mr(dev_->pd(), q->recv_mem.data(), q->recv_mem.size(), IBV_ACCESS_LOCAL_WRITE);
    if (q->recv_mr == nullptr) {
      const int e = errno;
      ibv_destroy_qp(q->qp);
      return VerbsError(e,
                        absl::StrCat("ibv_reg_mr of a ", q->recv_mem.size(), "-byte receive ring"));
    }
    const uint32_t id = q->id;
    recv_cq_used_ += recv_depth;
    send_cq_used_ += send_depth;
    Qp& ref = *q;
    qps_[id] = std::move(q);
    for (uint32_t s = 0; s < recv_depth; ++s) ref.refill.push_back(s);
    if (absl::Status st = Refill(ref); !st.ok()) {
      DestroyQp(id);
      return st;
    }
    return id;
  }

  Qp* FindQp(uint32_t id) {
    auto it = qps_.find(id);
    return it == qps_.end() ? nullptr : it->second.get();
  }

  void DestroyQp(uint32_t id) {
    auto it = qps_.find(id);
    if (it == qps_.end()) return;
    Qp& q = *it->second;
    ep_.SetBlocked(id, false);
    if (q.qp != nullptr) ibv_destroy_qp(q.qp);
    if (q.recv_mr != nullptr) ibv_dereg_mr(q.recv_mr);
    for (auto& [slot, sig] : q.inflight) free_slots_.push_back(slot);
    for (const SendWr& w : q.chain) free_slots_.push_back(w.slot);
    for (const SendWr& w : q.backlog) free_slots_.push_back(w.slot);
    if (q.udp_fd >= 0) close(q.udp_fd);
    recv_cq_used_ -= q.recv_depth;
    send_cq_used_ -= q.send_depth;
    qps_.erase(it);
  }

  absl::Status Refill(Qp& q) {
    if (q.refill.empty()) return absl::OkStatus();
    const size_t n = q.refill.size();
    recv_wrs_.resize(n);
    recv_sges_.resize(n);
    const size_t recv_slot = slot_size_ + kGrhBytes;
    for (size_t i = 0; i < n; ++i) {
      recv_sges_[i].addr = reinterpret_cast<uintptr_t>(q.recv_mem.data() + q.refill[i] * recv_slot);
      recv_sges_[i].length = static_cast<uint32_t>(recv_slot);
      recv_sges_[i].lkey = q.recv_mr->lkey;
      recv_wrs_[i] = {};
      recv_wrs_[i].wr_id = WrId(q.id, q.refill[i]);
      recv_wrs_[i].sg_list = &recv_sges_[i];
      recv_wrs_[i].num_sge = 1;
      recv_wrs_[i].next = i + 1 < n ? &recv_wrs_[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    ++counters_.recv_syscalls;
    const int err = ibv_post_recv(q.qp, recv_wrs_.data(), &bad);
    q.refill.clear();
    if (err != 0) return VerbsError(err, "ibv_post_recv");
    return absl::OkStatus();
  }

  ibv_ah* AhFor(const Gid& gid) {
    auto it = ahs_.find(gid);
    if (it != ahs_.end()) return it->second;
    ibv_ah_attr a{};
    a.is_global = 1;
    std::memcpy(a.grh.dgid.raw, gid.data(), 16);
    a.grh.sgid_index = static_cast<uint8_t>(dev_->gid_index());
    a.grh.hop_limit = 64;
    a.grh.traffic_class = opt_.verbs.traffic_class;
    a.port_num = dev_->port();
    ibv_ah* ah = ibv_create_ah(dev_->pd(), &a);
    if (ah == nullptr) {
      rate_log_.Warn(
          "create-ah", Now(),
          absl::StrCat("verbs: ibv_create_ah for ", FormatGid(gid), ": ", std::strerror(errno)));
      return nullptr;
    }
    ahs_[gid] = ah;
    return ah;
  }

  // ---- listen and connect (driver thread) ----

  absl::StatusOr<uint16_t> ListenOnDriver(const net::SocketAddress& bind, uint32_t ipv4,
                                          ListenOptions lo) {
    if (absl::Status s = OpenDevice(ipv4); !s.ok()) return s;
    if (absl::Status s = FitSegment(&lo.config); !s.ok()) return s;
    // The accepted connections' configuration (the policy's, from the client's settings)
    // must fit the MTU as well.
    if (lo.policy) {
      lo.policy = [this, inner = std::move(lo.policy)](
                      const HelloInfo& h) -> absl::StatusOr<TransportConfig> {
        absl::StatusOr<TransportConfig> c = inner(h);
        if (!c.ok()) return c;
        if (absl::Status s = FitSegment(&*c); !s.ok()) return s;
        return c;
      };
    }
    net::UdpSocketFlags flags;
    flags.recv_ecn = false;
    flags.rx_timestamps = static_cast<bool>(lo.on_foreign_datagram);
    absl::StatusOr<int> fd = net::OpenUdpSocket(AF_INET, flags);
    if (!fd.ok()) return fd.status();
    if (absl::Status s = net::BindSocket(*fd, bind); !s.ok()) {
      close(*fd);
      return s;
    }
    absl::StatusOr<net::SocketAddress> local = net::LocalAddress(*fd);
    absl::StatusOr<uint32_t> id = CreateQp(lo.config);
    if (!id.ok() || !local.ok()) {
      close(*fd);
      return id.ok() ? local.status() : id.status();
    }
    Qp& q = *qps_.at(*id);
    q.udp_fd = *fd;
    q.on_foreign = lo.on_foreign_datagram;
    if (absl::Status st = runtime_.Listen(*id, std::move(lo)); !st.ok()) {
      DestroyQp(*id);
      return st;
    }
    LOG(INFO) << "verbs: listening on " << local->ToString() << " as " << dev_->Describe() << " qp "
              << q.qpn;
    return local->port();
  }

  void StartConnect(const LocateAnswer& server, ConnectOptions co,
                    std::shared_ptr<datapath::ConnectWait> wait) {
    auto fail = [&](absl::Status s) {
      std::lock_guard<std::mutex> l(wait->mu);
      wait->value = std::move(s);
      wait->done = true;
      wait->cv.notify_all();
    };
    if (absl::Status s = FitSegment(&co.config); !s.ok()) return fail(s);
    if (co.config.MaxDatagramSize() > server.mtu) {
      return fail(absl::FailedPreconditionError(
          absl::StrCat("the server's active MTU (", server.mtu, ") is smaller than this side's ",
                       "datagrams (", co.config.MaxDatagramSize(), " bytes)")));
    }
    const uint32_t flows = std::max<uint32_t>(1, co.config.flows);
    std::vector<endpoint::LocalId> locals;
    for (uint32_t f = 0; f < flows; ++f) {
      absl::StatusOr<uint32_t> id = CreateQp(co.config);
      if (!id.ok()) {
        for (endpoint::LocalId l : locals) DestroyQp(l);
        return fail(id.status());
      }
      locals.push_back(*id);
    }
    runtime_.StartConnect(Now(), ToPeerAddress(server.address), std::move(locals), std::move(co),
                          std::move(wait));
  }

  // ---- the loop ----

  void Loop() {
    runtime_.SetDriverThread(std::this_thread::get_id());
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    while (true) {
      RunPosted();
      bool stop;
      {
        std::lock_guard<std::mutex> l(post_mu_);
        stop = stop_requested_;
      }
      if (stop) {
        DoShutdown();
        return;
      }
      const bool busy = Service();
      if (!busy) WaitForWork();
    }
  }

  void RunPosted() {
    std::vector<std::function<void()>> work;
    {
      std::lock_guard<std::mutex> l(post_mu_);
      work.swap(posted_);
    }
    for (auto& fn : work) fn();
  }

  // Returns true when there may be more to do at once (completions left in a queue).
  bool Service() {
    runtime_.ApplyWakes();
    ReadLocators();
    bool more = false;
    if (dev_ != nullptr) {
      more = PollRecv();
      PollSend();
    }
    const Time now = Now();
    Transmit(now);
    runtime_.ProcessEndpointEvents();
    runtime_.DeliverAll(now);
    if (now - last_stats_publish_ >= datapath::EndpointRuntime::kStatsPublishPeriod) {
      PublishDriverStats(now);
    }
    return more;
  }

  Time Deadline(Time now) {
    if (runtime_.HasLocalWakes()) return now;
    Time next = ep_.NextTimeout(now);
    if (ep_.connection_count() > 0 || ep_.pending_count() > 0) {
      next = std::min(next, last_stats_publish_ + datapath::EndpointRuntime::kStatsPublishPeriod);
    }
    return next;
  }

  void WaitForWork() {
    Time now = Now();
    Time next = Deadline(now);
    if (next <= now || next - now <= opt_.spin) return;
    if (dev_ != nullptr) {
      // Arm, then look once more: a completion that came after the last poll raises no
      // event once the CQ is armed.
      ibv_req_notify_cq(recv_cq_, 0);
      ibv_req_notify_cq(send_cq_, 0);
      if (PollRecv() || recv_seen_this_turn_ || PollSend() > 0) return;
    }
    pfds_.clear();
    pfds_.push_back({event_fd_, POLLIN, 0});
    if (channel_ != nullptr) pfds_.push_back({channel_->fd, POLLIN, 0});
    for (auto& [id, q] : qps_) {
      if (q->udp_fd >= 0) pfds_.push_back({q->udp_fd, POLLIN, 0});
    }
    now = Now();
    next = Deadline(now);
    if (next <= now) return;
    timespec ts{};
    timespec* tsp = nullptr;
    if (!next.IsInfinite()) {
      const int64_t ns = (next - now).ns();
      ts.tv_sec = ns / 1'000'000'000;
      ts.tv_nsec = ns % 1'000'000'000;
      tsp = &ts;
    }
    ppoll(pfds_.data(), pfds_.size(), tsp, nullptr);
    if (pfds_[0].revents & POLLIN) {
      uint64_t v;
      ssize_t r = read(event_fd_, &v, sizeof(v));
      (void)r;
    }
    if (channel_ != nullptr && (pfds_[1].revents & POLLIN)) DrainChannel();
  }

  void DrainChannel() {
    ibv_cq* cq;
    void* ctx;
    while (ibv_get_cq_event(channel_, &cq, &ctx) == 0) {
      if (cq == recv_cq_) {
        ++unacked_events_;
      } else {
        ++unacked_send_events_;
      }
    }
    if (unacked_events_ >= 64) {
      ibv_ack_cq_events(recv_cq_, unacked_events_);
      unacked_events_ = 0;
    }
    if (unacked_send_events_ >= 64) {
      ibv_ack_cq_events(send_cq_, unacked_send_events_);
      unacked_send_events_ = 0;
    }
  }

  // ---- receive path ----

  // Returns true when the CQ may hold more (a full batch was the last).
  bool PollRecv() {
    recv_seen_this_turn_ = false;
    ibv_wc wcs[kCqBatch];
    for (int b = 0; b < kMaxCqBatchesPerTurn; ++b) {
      const int n = ibv_poll_cq(recv_cq_, kCqBatch, wcs);
      if (n <= 0) return false;
      recv_seen_this_turn_ = true;
      const Time now = Now();
      for (int i = 0; i < n; ++i) OnRecv(wcs[i], now);
      runtime_.ProcessEndpointEvents();
      for (auto& [id, q] : qps_) {
        if (q->refill.size() >= kRefillBatch) ReportRefill(*q);
      }
      if (n < kCqBatch) break;
      if (b + 1 == kMaxCqBatchesPerTurn) return true;
    }
    for (auto& [id, q] : qps_) ReportRefill(*q);
    return false;
  }

  void ReportRefill(Qp& q) {
    if (absl::Status s = Refill(q); !s.ok()) {
      rate_log_.Warn("refill", Now(), absl::StrCat("verbs: ", s.message()));
    }
  }

  void OnRecv(const ibv_wc& wc, Time now) {
    Qp* q = FindQp(WrQp(wc.wr_id));
    if (q == nullptr) return;  // destroyed meanwhile
    const uint32_t slot = WrSlot(wc.wr_id);
    if (wc.status != IBV_WC_SUCCESS) {
      if (wc.status != IBV_WC_WR_FLUSH_ERR) {
        ++counters_.receive_truncated;
        rate_log_.Warn("recv-error", now,
                       absl::StrCat("verbs: receive completion: ", ibv_wc_status_str(wc.status)));
        q->refill.push_back(slot);
      }
      return;
    }
    const uint8_t* buf = q->recv_mem.data() + static_cast<size_t>(slot) * (slot_size_ + kGrhBytes);
    const uint32_t len = wc.byte_len >= kGrhBytes ? wc.byte_len - kGrhBytes : 0;
    UdAddress from;
    from.qpn = wc.src_qp;
    if (!(wc.wc_flags & IBV_WC_GRH) || !SourceGid(buf, &from.gid)) {
      ++counters_.undecodable;
      q->refill.push_back(slot);
      return;
    }
    ++counters_.datagrams_received;
    counters_.bytes_received += len;
    const uint32_t id = q->id;
    ep_.OnDatagram(now, id, ToPeerAddress(from), std::span<const uint8_t>(buf + kGrhBytes, len));
    // The endpoint copied what it keeps; the buffer goes back (if the QP still exists).
    if (Qp* again = FindQp(id)) again->refill.push_back(slot);
  }

  // ---- locators (UDP) ----

  void ReadLocators() {
    ids_.clear();
    for (auto& [id, q] : qps_) {
      if (q->udp_fd >= 0) ids_.push_back(id);
    }
    for (uint32_t id : ids_) {
      for (int i = 0; i < 64; ++i) {
        Qp* q = FindQp(id);
        if (q == nullptr) break;
        uint8_t buf[2048];
        alignas(cmsghdr) uint8_t control[256];
        sockaddr_storage from{};
        iovec iov{buf, sizeof(buf)};
        msghdr m{};
        m.msg_name = &from;
        m.msg_namelen = sizeof(from);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control;
        m.msg_controllen = sizeof(control);
        const ssize_t n = recvmsg(q->udp_fd, &m, 0);
        if (n < 0) break;
        const net::SocketAddress src =
            net::SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&from), m.msg_namelen);
        OnLocatorDatagram(*q, std::span<const uint8_t>(buf, static_cast<size_t>(n)), src,
                          net::ReceivedRealtimeNs(m));
      }
    }
  }

  void SendUdp(Qp& q, std::span<const uint8_t> d, const net::SocketAddress& to) {
    if (sendto(q.udp_fd, d.data(), d.size(), 0, to.sockaddr_ptr(), to.sockaddr_len()) < 0) {
      rate_log_.Warn("locator-send", Now(),
                     absl::StrCat("verbs: reply to ", to.ToString(), ": ", std::strerror(errno)));
    }
  }

  void OnLocatorDatagram(Qp& q, std::span<const uint8_t> d, const net::SocketAddress& src,
                         int64_t kernel_ns) {
    if (std::optional<uint64_t> nonce = DecodeLocateRequest(d)) {
      LocateAnswer a;
      a.address.gid = dev_->gid();
      a.address.qpn = q.qpn;
      a.qkey = kQkey;
      a.mtu = slot_size_;
      SendUdp(q, EncodeLocateAnswer(*nonce, a), src);
      return;
    }
    if (IsLocateMessage(d) || !q.on_foreign) {
      ++counters_.undecodable;
      return;
    }
    ForeignDatagram f;
    f.data = d;
    f.from = src.ToString();
    f.kernel_time_ns = kernel_ns > 0 ? kernel_ns : 0;
    f.now_ns = RealtimeNs();
    ++counters_.foreign_datagrams;
    foreign_replies_.clear();
    q.on_foreign(f, &foreign_replies_);
    for (const std::vector<uint8_t>& r : foreign_replies_) {
      if (r.empty() || r.size() > kMaxForeignReply) continue;
      SendUdp(q, r, src);
      ++counters_.foreign_replies;
    }
  }

  // ---- transmit path ----

  // Returns the send completions seen.
  int PollSend() {
    ibv_wc wcs[kCqBatch];
    int total = 0;
    while (true) {
      const int n = ibv_poll_cq(send_cq_, kCqBatch, wcs);
      if (n <= 0) break;
      total += n;
      for (int i = 0; i < n; ++i) {
        Qp* q = FindQp(WrQp(wcs[i].wr_id));
        if (q == nullptr) continue;
        if (wcs[i].status != IBV_WC_SUCCESS && wcs[i].status != IBV_WC_WR_FLUSH_ERR) {
          ++counters_.send_errors;
          rate_log_.Warn(
              "send-error", Now(),
              absl::StrCat("verbs: send completion: ", ibv_wc_status_str(wcs[i].status)));
        }
        const uint32_t slot = WrSlot(wcs[i].wr_id);
        while (!q->inflight.empty()) {
          const uint32_t s = q->inflight.front().first;
          q->inflight.pop_front();
          free_slots_.push_back(s);
          if (s == slot) break;
        }
      }
      if (n < kCqBatch) break;
    }
    if (total > 0) {
      for (auto& [id, q] : qps_) {
        if (!q->backlog.empty() || q->blocked) FlushBacklog(*q);
      }
    }
    return total;
  }

  void FlushBacklog(Qp& q) {
    while (!q.backlog.empty() && q.inflight.size() + q.chain.size() < q.send_depth) {
      q.chain.push_back(q.backlog.front());
      q.backlog.pop_front();
    }
    PostChain(q);
    if (q.backlog.empty() && q.blocked) {
      q.blocked = false;
      ep_.SetBlocked(q.id, false);
    }
  }

  void Transmit(Time now) {
    if (dev_ == nullptr) return;
    endpoint::Transmit t;
    const size_t turn = std::max<uint32_t>(opt_.tx_batch, 1);
    while (!free_slots_.empty()) {
      const uint32_t slot = free_slots_.back();
      uint8_t* buf = send_mem_.data() + static_cast<size_t>(slot) * slot_size_;
      const size_t n = ep_.PollTransmit(now, buf, slot_size_, &t, turn);
      if (n == 0) break;
      Qp* q = FindQp(t.local);
      if (q == nullptr) continue;  // destroyed meanwhile: lost like on a wire
      std::optional<UdAddress> to = FromPeerAddress(t.to);
      ibv_ah* ah = to ? AhFor(to->gid) : nullptr;
      if (ah == nullptr) {
        ++counters_.send_errors;
        continue;
      }
      free_slots_.pop_back();
      SendWr w{slot, static_cast<uint32_t>(n), ah, to->qpn};
      if (!q->backlog.empty() || q->inflight.size() + q->chain.size() >= q->send_depth) {
        q->backlog.push_back(w);
        if (!q->blocked) {
          q->blocked = true;
          ++counters_.send_blocked;
          ep_.SetBlocked(q->id, true);
        }
        continue;
      }
      q->chain.push_back(w);
      if (q->chain.size() >= turn) PostChain(*q);
    }
    for (auto& [id, q] : qps_) PostChain(*q);
  }

  void PostChain(Qp& q) {
    const size_t n = q.chain.size();
    if (n == 0) return;
    send_wrs_.resize(n);
    send_sges_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const SendWr& w = q.chain[i];
      send_sges_[i].addr =
          reinterpret_cast<uintptr_t>(send_mem_.data() + static_cast<size_t>(w.slot) * slot_size_);
      send_sges_[i].length = w.len;
      send_sges_[i].lkey = send_mr_->lkey;
      ibv_send_wr& wr = send_wrs_[i];
      wr = {};
      wr.wr_id = WrId(q.id, w.slot);
      wr.sg_list = &send_sges_[i];
      wr.num_sge = 1;
      wr.opcode = IBV_WR_SEND;
      wr.wr.ud.ah = w.ah;
      wr.wr.ud.remote_qpn = w.remote_qpn;
      wr.wr.ud.remote_qkey = kQkey;
      const bool signal = ++q.unsignaled_run >= kSignalEvery || i + 1 == n;
      if (signal) {
        wr.send_flags |= IBV_SEND_SIGNALED;
        q.unsignaled_run = 0;
      }
      if (w.len <= q.max_inline) wr.send_flags |= IBV_SEND_INLINE;
      wr.next = i + 1 < n ? &send_wrs_[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    ++counters_.send_syscalls;
    if (n > 1) ++counters_.gso_sends;
    const int err = ibv_post_send(q.qp, send_wrs_.data(), &bad);
    size_t posted = n;
    if (err != 0) {
      posted = bad != nullptr ? static_cast<size_t>(bad - send_wrs_.data()) : 0;
      counters_.send_errors += n - posted;
      rate_log_.Warn("post-send", Now(),
                     absl::StrCat("verbs: ibv_post_send: ", std::strerror(err)));
    }
    for (size_t i = 0; i < n; ++i) {
      if (i < posted) {
        q.inflight.emplace_back(q.chain[i].slot,
                                (send_wrs_[i].send_flags & IBV_SEND_SIGNALED) != 0);
        ++counters_.datagrams_sent;
        counters_.bytes_sent += q.chain[i].len;
      } else {
        free_slots_.push_back(q.chain[i].slot);
      }
    }
    // A refused post list may have left the last posted WR unsignalled: its slots return
    // with the next signalled one.
    q.chain.clear();
  }

  // ---- stats and teardown ----

  void PublishDriverStats(Time now) {
    last_stats_publish_ = now;
    EndpointStats s = counters_;
    runtime_.AddStats(&s);
    std::lock_guard<std::mutex> l(stats_mu_);
    published_ = s;
  }

  void DoShutdown() {
    const Time now = Now();
    runtime_.BeginShutdown(now);
    Transmit(now);  // the CLOSE packets
    runtime_.FinishShutdown(now);
    PublishDriverStats(now);
    {
      std::lock_guard<std::mutex> l(post_mu_);
      stopped_ = true;
    }
    RunPosted();  // callers waiting in RunOnDriver
    if (dev_ != nullptr) {
      // Let the CLOSE packets leave before the queue pairs go (bounded).
      const int64_t until = MonotonicNs() + 50'000'000;
      while (MonotonicNs() < until) {
        bool pending = false;
        for (auto& [id, q] : qps_) pending |= !q->inflight.empty();
        if (!pending) break;
        PollSend();
      }
    }
    DestroyDeviceObjects();
  }

  const EndpointOptions opt_;
  std::thread thread_;
  datapath::EndpointRuntime runtime_;
  endpoint::Endpoint& ep_;
  RateLimitedLog rate_log_;
  int event_fd_ = -1;

  std::unique_ptr<VerbsDevice> dev_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  uint32_t cq_capacity_ = 0;
  uint32_t recv_cq_used_ = 0;
  uint32_t send_cq_used_ = 0;
  uint32_t unacked_events_ = 0;
  uint32_t unacked_send_events_ = 0;
  uint32_t slot_size_ = 0;
  std::vector<uint8_t> send_mem_;
  ibv_mr* send_mr_ = nullptr;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<Gid, ibv_ah*> ahs_;
  std::unordered_map<uint32_t, std::unique_ptr<Qp>> qps_;
  uint32_t next_qp_id_ = 1;
  bool recv_seen_this_turn_ = false;

  // Scratch (driver thread).
  std::vector<ibv_recv_wr> recv_wrs_;
  std::vector<ibv_sge> recv_sges_;
  std::vector<ibv_send_wr> send_wrs_;
  std::vector<ibv_sge> send_sges_;
  std::vector<pollfd> pfds_;
  std::vector<uint32_t> ids_;
  std::vector<std::vector<uint8_t>> foreign_replies_;

  std::mutex post_mu_;
  std::vector<std::function<void()>> posted_;
  bool stop_requested_ = false;
  bool stopped_ = false;

  EndpointStats counters_;
  Time last_stats_publish_;
  mutable std::mutex stats_mu_;
  EndpointStats published_;
};

// ---- VerbsDriver ----

absl::StatusOr<std::unique_ptr<VerbsDriver>> VerbsDriver::Create(const EndpointOptions& options) {
  if (options.tx_batch == 0 || options.tx_batch > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("tx_batch=", options.tx_batch, " is outside [1, 1024]"));
  }
  if (options.spin < Duration::Zero() || options.spin > Duration::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spin=", FormatDuration(options.spin), " is outside [0, 10ms]"));
  }
  if (options.cookie_lifetime < Duration::Seconds(1)) {
    return absl::InvalidArgumentError("cookie_lifetime must be at least 1s");
  }
  if (options.verbs.gid_index < -1 || options.verbs.gid_index > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("gid_index=", options.verbs.gid_index, " is outside [-1, 255]"));
  }
  auto impl = std::make_unique<VerbsDriverImpl>(options);
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  std::unique_ptr<VerbsDriver> d(new VerbsDriver(std::move(impl)));
  d->impl_->Start();
  return d;
}

VerbsDriver::VerbsDriver(std::unique_ptr<VerbsDriverImpl> impl) : impl_(std::move(impl)) {}

VerbsDriver::~VerbsDriver() { Shutdown(); }

absl::StatusOr<uint16_t> VerbsDriver::Listen(const std::string& address, uint16_t port,
                                             ListenOptions options) {
  return impl_->Listen(address, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> VerbsDriver::Connect(const std::string& host,
                                                                       uint16_t port,
                                                                       ConnectOptions options) {
  return impl_->Connect(host, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> VerbsDriver::Accept(Duration timeout) {
  return impl_->Accept(timeout);
}

void VerbsDriver::Shutdown() { impl_->Shutdown(); }

EndpointStats VerbsDriver::stats() const { return impl_->stats(); }

}  // namespace longhaul::verbs
