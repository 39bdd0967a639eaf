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
// each queue pair (queue_pair.h) keeps its posted slots and its own receive ring.
// Listeners' UDP sockets are locator.h's.

#include "transport/drivers/verbs/verbs_driver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
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
#include "transport/base/status.h"
#include "transport/datapath/driver_runtime.h"
#include "transport/datapath/driver_thread.h"
#include "transport/drivers/verbs/ibverbs.h"
#include "transport/drivers/verbs/locator.h"
#include "transport/drivers/verbs/peer_address.h"
#include "transport/drivers/verbs/queue_pair.h"
#include "transport/drivers/verbs/uc_datapath.h"
#include "transport/drivers/verbs/verbs_device.h"
#include "transport/endpoint/handshake.h"
#include "transport/net/errno_status.h"
#include "transport/net/resolver.h"

namespace longhaul::verbs {
namespace {

constexpr int kCqBatch = 32;
constexpr int kMaxCqBatchesPerTurn = 8;  // then transmit (ACKs) before reading more
constexpr uint32_t kRefillBatch = 32;
constexpr uint32_t kMinRecvDepth = 256;
constexpr uint32_t kMaxRecvDepth = 16384;
constexpr uint32_t kSendSlots = 4096;  // the shared send arena
constexpr size_t kUcArenaBytes = size_t{64} << 20;  // with UC lanes: chunk-sized slots
constexpr size_t kMaxForeignReply = 65507;

Time Now() { return Time::FromNanoseconds(MonotonicNs()); }

}  // namespace

class VerbsDriverImpl {
 public:
  explicit VerbsDriverImpl(const EndpointOptions& o)
      : opt_(o),
        thread_([this] { Kick(); }),
        runtime_(datapath::EndpointConfigFor(o, FormatPeerAddress),
                 datapath::DriverRuntime::Hooks{
                     .wake = [this] { Kick(); },
                     .close_local = [this](endpoint::LocalId id) { DestroyQp(id); },
                     .local_address =
                         [this](endpoint::LocalId id) {
                           UdQueuePair* q = FindQp(id);
                           if (q == nullptr || dev_ == nullptr) return std::string();
                           return absl::StrCat(FormatGid(dev_->gid()), " qp ", q->qpn());
                         },
                     .connection_up =
                         [this](endpoint::ConnectionId id) {
                           if (uc_) uc_->OnConnectionUp(id, Now());
                         },
                     .connection_gone =
                         [this](endpoint::ConnectionId id) {
                           if (uc_) uc_->OnConnectionGone(id);
                         },
                     .connection_closed =
                         [this](endpoint::ConnectionId id) {
                           if (uc_) uc_->OnConnectionClosed(id);
                         },
                     .driver_state =
                         [this](endpoint::ConnectionId id) {
                           if (uc_) uc_->OnPeerState(id);
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
    thread_.Start(datapath::EngineSlot{}, [this] { Loop(); });
  }

  // ---- thread-safe entry points ----

  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port, ListenOptions lo) {
    LH_ASSIGN_OR_RETURN(net::SocketAddress bind, net::SocketAddress::FromNumeric(address, port));
    if (bind.family() != AF_INET) {
      return absl::InvalidArgumentError(
          absl::StrCat("verbs: listen address ", address, " is not IPv4 (RoCE v2 over IPv4)"));
    }
    LH_RETURN_IF_ERROR(lo.config.Validate());
    const uint32_t ipv4 =
        reinterpret_cast<const sockaddr_in*>(bind.sockaddr_ptr())->sin_addr.s_addr;
    absl::StatusOr<uint16_t> result = absl::CancelledError("endpoint is shut down");
    thread_.RunOnThread([&] { result = ListenOnDriver(bind, ipv4, std::move(lo)); });
    return result;
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host, uint16_t port,
                                                            ConnectOptions co) {
    if (thread_.OnThread()) {
      return absl::FailedPreconditionError("Connect cannot be called from an event callback");
    }
    LH_ASSIGN_OR_RETURN(net::SocketAddress server, net::Resolve(host, port));
    if (server.family() != AF_INET) {
      return absl::InvalidArgumentError(
          absl::StrCat("verbs: ", host, " has no IPv4 address (RoCE v2 over IPv4)"));
    }
    LH_RETURN_IF_ERROR(datapath::ValidateConnectOptions(co));
    const int64_t start = MonotonicNs();
    LH_ASSIGN_OR_RETURN(LocateAnswer located, Locate(server, co.timeout));
    const Duration left = co.timeout - Duration::Nanoseconds(MonotonicNs() - start);
    co.timeout = std::max(left, Duration::Milliseconds(100));
    const uint32_t ipv4 = SourceAddressTowards(server);
    absl::Status opened = absl::CancelledError("endpoint is shut down");
    thread_.RunOnThread([&] { opened = OpenDevice(ipv4); });
    if (!opened.ok()) return opened;
    auto wait = std::make_shared<datapath::ConnectWait>();
    const Duration timeout = co.timeout;
    const bool posted = thread_.Post([this, a = located, co = std::move(co), wait]() mutable {
      StartConnect(a, std::move(co), std::move(wait));
    });
    if (!posted) return absl::CancelledError("endpoint is shut down");
    return datapath::DriverRuntime::WaitConnect(*wait, timeout, server.ToString());
  }

  // Zero copy (docs/rdma.md 7.14): the registry lives on the driver thread.
  absl::Status RegisterMemory(uint64_t id, const void* data, size_t size) {
    absl::Status s = absl::CancelledError("endpoint is shut down");
    thread_.RunOnThread(
        [&] { s = regions_.Add(id, data, size, dev_ != nullptr ? dev_->pd() : nullptr); });
    return s;
  }
  absl::Status DeregisterMemory(uint64_t id) {
    absl::Status s = absl::CancelledError("endpoint is shut down");
    thread_.RunOnThread([&] {
      s = regions_.Remove(id);
      if (s.ok() && uc_) uc_->OnRegionRemoved(id);  // advertised receive buffers in it end
    });
    return s;
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) {
    return runtime_.Accept(timeout);
  }

  void Shutdown() { thread_.Shutdown(); }

  EndpointStats stats() {
    return thread_.FreshStats([this] { PublishDriverStats(Now()); });
  }

 private:
  // Wakes the driver thread (its eventfd).
  void Kick() {
    const uint64_t one = 1;
    ssize_t r = write(event_fd_, &one, sizeof(one));
    (void)r;
  }

  // ---- the device ----

  absl::Status OpenDevice(uint32_t ipv4) {
    if (dev_ != nullptr) return absl::OkStatus();
    LH_ASSIGN_OR_RETURN(std::unique_ptr<VerbsDevice> dev, VerbsDevice::Open(opt_.verbs, ipv4));
    if (dev->active_mtu() < endpoint::kMinInitialSize) {
      return absl::FailedPreconditionError(absl::StrCat(
          dev->Describe(), ": the handshake's Initial datagrams are ", endpoint::kMinInitialSize,
          " bytes, more than the active MTU; raise the netdev's MTU "
          "(9000 gives an active MTU of 4096)"));
    }
    channel_ = Ibverbs().create_comp_channel(dev->context());
    if (channel_ == nullptr) return VerbsError(errno, "ibv_create_comp_channel");
    const int flags = fcntl(channel_->fd, F_GETFL);
    fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK);
    cq_capacity_ = std::min<uint32_t>(dev->max_cqe(), 65536);
    send_cq_ = Ibverbs().create_cq(dev->context(), static_cast<int>(cq_capacity_), nullptr, channel_, 0);
    recv_cq_ = Ibverbs().create_cq(dev->context(), static_cast<int>(cq_capacity_), nullptr, channel_, 0);
    if (send_cq_ == nullptr || recv_cq_ == nullptr) {
      const int e = errno;
      DestroyDeviceObjects();
      return VerbsError(e, absl::StrCat("ibv_create_cq(", cq_capacity_, " entries)"));
    }
    slot_size_ = dev->active_mtu();
    // With UC lanes every slot can hold a chunk (PollTransmit's connection is known only
    // once it has written); what goes over UD uses the front of its slot.
    const bool uc = opt_.verbs.qp_type == QpType::kUc;
    send_slot_size_ = uc ? UcDatapath::ChunkBytes(opt_.verbs, slot_size_) : slot_size_;
    send_slots_ = uc ? static_cast<uint32_t>(std::clamp<size_t>(kUcArenaBytes / send_slot_size_,
                                                                 256, kSendSlots))
                     : kSendSlots;
    send_mem_.assign(static_cast<size_t>(send_slots_) * send_slot_size_, 0);
    send_mr_ = Ibverbs().reg_mr(dev->pd(), send_mem_.data(), send_mem_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (send_mr_ == nullptr) {
      const int e = errno;
      DestroyDeviceObjects();
      return VerbsError(e, absl::StrCat("ibv_reg_mr of the ", send_mem_.size(), "-byte send ring"));
    }
    free_slots_.clear();
    for (uint32_t i = send_slots_; i > 0; --i) free_slots_.push_back(i - 1);
    arena_ = SendArena{send_mem_.data(), send_mr_->lkey, send_slot_size_};
    dev_ = std::move(dev);
    if (uc) {
      uc_ = std::make_unique<UcDatapath>(
          UcDatapath::Env{.dev = dev_.get(),
                          .send_cq = send_cq_,
                          .recv_cq = recv_cq_,
                          .arena = arena_,
                          .ep = &ep_,
                          .next_id = [this] { return next_qp_id_++; },
                          .log = &rate_log_,
                          .free_slots = &free_slots_,
                          .recv_cq_used = &recv_cq_used_,
                          .send_cq_used = &send_cq_used_,
                          .cq_capacity = cq_capacity_,
                          .regions = &regions_},
          send_slot_size_, opt_.verbs);
    }
    if (absl::Status s = regions_.Open(dev_->pd()); !s.ok()) {
      LOG(WARNING) << "verbs: " << s.message() << "; sends from it are copied";
    }
    LOG(INFO) << "verbs: " << dev_->Describe();
    return absl::OkStatus();
  }

  void DestroyDeviceObjects() {
    uc_.reset();  // its queue pairs use the CQs
    regions_.Close();  // nothing is posted any more
    while (!qps_.empty()) DestroyQp(qps_.begin()->first);
    for (auto& [gid, ah] : ahs_) Ibverbs().destroy_ah(ah);
    ahs_.clear();
    if (send_mr_ != nullptr) Ibverbs().dereg_mr(send_mr_);
    send_mr_ = nullptr;
    if (send_cq_ != nullptr) {
      Ibverbs().ack_cq_events(send_cq_, unacked_send_events_);
      Ibverbs().destroy_cq(send_cq_);
    }
    if (recv_cq_ != nullptr) {
      Ibverbs().ack_cq_events(recv_cq_, unacked_events_);
      Ibverbs().destroy_cq(recv_cq_);
    }
    unacked_events_ = unacked_send_events_ = 0;
    send_cq_ = recv_cq_ = nullptr;
    if (channel_ != nullptr) Ibverbs().destroy_comp_channel(channel_);
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

  // A connection's configuration fitted to the port: the segment to the active MTU (or
  // the error when it may not be changed).
  absl::Status FitToPort(TransportConfig* c) const {
    if (uc_ != nullptr) return FitToChunk(c);
    if (c->MaxDatagramSize() > slot_size_) {
      const ByteCount fitted = slot_size_ - (c->MaxDatagramSize() - c->segment);
      if (!opt_.verbs.fit_segment) {
        return absl::FailedPreconditionError(
            absl::StrCat("segment of ", c->segment, " bytes makes datagrams of ",
                         c->MaxDatagramSize(), " bytes, more than ", dev_->name(),
                         "'s active MTU of ", slot_size_, "; use --segment=", fitted, " or less"));
      }
      c->segment = fitted;
      if (c->window < 2 * c->segment) c->window = 2 * c->segment;
    }
    return c->Validate();
  }

  // With UC lanes: datagrams up to a chunk (until a connection's lane is up it is held to
  // the UD MTU: UcDatapath). fit_segment grows the segment to fill a chunk.
  absl::Status FitToChunk(TransportConfig* c) const {
    const ByteCount overhead = c->MaxDatagramSize() - c->segment;
    const ByteCount fitted =
        std::min<ByteCount>(send_slot_size_ - overhead, TransportConfig::kMaxSegment);
    if (c->MaxDatagramSize() > send_slot_size_ && !opt_.verbs.fit_segment) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment of ", c->segment, " bytes makes datagrams of ",
                       c->MaxDatagramSize(), " bytes, more than a UC chunk of ",
                       send_slot_size_, "; use --segment=", fitted, " or less"));
    }
    if (opt_.verbs.fit_segment) c->segment = fitted;
    c->window = std::max(c->window, 2 * c->segment);
    c->recv_window = std::max(c->recv_window, 2 * c->segment);
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
    const uint32_t id = next_qp_id_++;
    LH_ASSIGN_OR_RETURN(std::unique_ptr<UdQueuePair> q,
                        UdQueuePair::Create(*dev_, send_cq_, recv_cq_, id, recv_depth, send_depth,
                                            slot_size_, &counters_));
    recv_cq_used_ += recv_depth;
    send_cq_used_ += send_depth;
    qps_[id] = std::move(q);
    return id;
  }

  UdQueuePair* FindQp(uint32_t id) {
    auto it = qps_.find(id);
    return it == qps_.end() ? nullptr : it->second.get();
  }

  void DestroyQp(uint32_t id) {
    auto it = qps_.find(id);
    if (it == qps_.end()) return;
    UdQueuePair& q = *it->second;
    ep_.SetBlocked(id, false);
    q.ReleaseSlots(&free_slots_);
    recv_cq_used_ -= q.recv_depth();
    send_cq_used_ -= q.send_depth();
    qps_.erase(it);
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
    ibv_ah* ah = Ibverbs().create_ah(dev_->pd(), &a);
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
    LH_RETURN_IF_ERROR(OpenDevice(ipv4));
    LH_RETURN_IF_ERROR(FitToPort(&lo.config));
    // The accepted connections' configuration (the policy's, from the client's settings)
    // must fit the MTU as well.
    if (lo.policy) {
      lo.policy = [this, inner = std::move(lo.policy)](
                      const HelloInfo& h) -> absl::StatusOr<TransportConfig> {
        LH_ASSIGN_OR_RETURN(TransportConfig c, inner(h));
        LH_RETURN_IF_ERROR(FitToPort(&c));
        return c;
      };
    }
    LH_ASSIGN_OR_RETURN(std::unique_ptr<LocatorSocket> sock,
                        LocatorSocket::Open(bind, static_cast<bool>(lo.on_foreign_datagram)));
    LH_ASSIGN_OR_RETURN(uint32_t id, CreateQp(lo.config));
    UdQueuePair& q = *qps_.at(id);
    q.locator = std::move(sock);
    q.on_foreign = lo.on_foreign_datagram;
    const net::SocketAddress local = q.locator->local();
    const uint32_t qpn = q.qpn();
    if (absl::Status st = runtime_.Listen(id, std::move(lo)); !st.ok()) {
      DestroyQp(id);
      return st;
    }
    LOG(INFO) << "verbs: listening on " << local.ToString() << " as " << dev_->Describe() << " qp "
              << qpn;
    return local.port();
  }

  void StartConnect(const LocateAnswer& server, ConnectOptions co,
                    std::shared_ptr<datapath::ConnectWait> wait) {
    auto fail = [&](absl::Status s) {
      std::lock_guard<std::mutex> l(wait->mu);
      wait->value = std::move(s);
      wait->done = true;
      wait->cv.notify_all();
    };
    if (absl::Status s = FitToPort(&co.config); !s.ok()) return fail(s);
    if (uc_ != nullptr && server.mtu < slot_size_) {
      return fail(absl::FailedPreconditionError(
          absl::StrCat("the server's active MTU (", server.mtu, ") is smaller than this side's (",
                       slot_size_, "); UC lanes need the same MTU at both ends")));
    }
    if (uc_ == nullptr && co.config.MaxDatagramSize() > server.mtu) {
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
    while (true) {
      thread_.RunPosted();
      if (thread_.stop_requested()) {
        DoShutdown();
        return;
      }
      const bool busy = Service();
      if (!busy) WaitForWork();
    }
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
    if (uc_) uc_->Maintain(now);
    if (regions_.collect_pending()) regions_.Collect(free_slots_, send_slots_);
    Transmit(now);
    runtime_.ProcessEndpointEvents();
    runtime_.DeliverAll(now);
    if (now - last_stats_publish_ >= datapath::DriverRuntime::kStatsPublishPeriod) {
      PublishDriverStats(now);
    }
    return more;
  }

  Time Deadline(Time now) {
    if (runtime_.HasLocalWakes()) return now;
    Time next = ep_.NextWake(now);
    if (uc_) next = std::min(next, uc_->NextWake(now));
    if (ep_.connection_count() > 0 || ep_.pending_count() > 0) {
      next = std::min(next, last_stats_publish_ + datapath::DriverRuntime::kStatsPublishPeriod);
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
      if (q->locator) pfds_.push_back({q->locator->fd(), POLLIN, 0});
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
    while (Ibverbs().get_cq_event(channel_, &cq, &ctx) == 0) {
      if (cq == recv_cq_) {
        ++unacked_events_;
      } else {
        ++unacked_send_events_;
      }
    }
    if (unacked_events_ >= 64) {
      Ibverbs().ack_cq_events(recv_cq_, unacked_events_);
      unacked_events_ = 0;
    }
    if (unacked_send_events_ >= 64) {
      Ibverbs().ack_cq_events(send_cq_, unacked_send_events_);
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
      if (uc_) uc_->Maintain(now);
      runtime_.ProcessEndpointEvents();
      for (auto& [id, q] : qps_) {
        if (q->returned() >= kRefillBatch) ReportRefill(*q);
      }
      if (n < kCqBatch) break;
      if (b + 1 == kMaxCqBatchesPerTurn) return true;
    }
    for (auto& [id, q] : qps_) ReportRefill(*q);
    return false;
  }

  void ReportRefill(UdQueuePair& q) {
    if (absl::Status s = q.Refill(&counters_); !s.ok()) {
      rate_log_.Warn("refill", Now(), absl::StrCat("verbs: ", s.message()));
    }
  }

  void OnRecv(const ibv_wc& wc, Time now) {
    UdQueuePair* q = FindQp(WrQp(wc.wr_id));
    if (q == nullptr) {  // a UC lane's, or destroyed meanwhile
      if (uc_) uc_->OnRecv(wc, now);
      return;
    }
    const uint32_t slot = WrSlot(wc.wr_id);
    if (wc.status != IBV_WC_SUCCESS) {
      if (wc.status != IBV_WC_WR_FLUSH_ERR) {
        ++counters_.receive_truncated;
        rate_log_.Warn("recv-error", now,
                       absl::StrCat("verbs: receive completion: ", Ibverbs().wc_status_str(wc.status)));
        q->ReturnRecv(slot);
      }
      return;
    }
    const uint8_t* buf = q->RecvBuffer(slot);
    const uint32_t len = wc.byte_len >= kGrhBytes ? wc.byte_len - kGrhBytes : 0;
    UdAddress from;
    from.qpn = wc.src_qp;
    if (!(wc.wc_flags & IBV_WC_GRH) || !SourceGid(buf, &from.gid)) {
      ++counters_.undecodable;
      q->ReturnRecv(slot);
      return;
    }
    ++counters_.datagrams_received;
    counters_.bytes_received += len;
    const uint32_t id = q->id();
    ep_.OnDatagram(now, id, ToPeerAddress(from), std::span<const uint8_t>(buf + kGrhBytes, len));
    // The endpoint copied what it keeps; the buffer goes back (if the QP still exists).
    if (UdQueuePair* again = FindQp(id)) again->ReturnRecv(slot);
  }

  // ---- locators (UDP) ----

  void ReadLocators() {
    ids_.clear();
    for (auto& [id, q] : qps_) {
      if (q->locator) ids_.push_back(id);
    }
    LocatorDatagram d;
    for (uint32_t id : ids_) {
      for (int i = 0; i < 64; ++i) {
        UdQueuePair* q = FindQp(id);
        if (q == nullptr) break;
        const uint64_t truncated = q->locator->truncated();
        const bool got = q->locator->Read(&d);
        counters_.receive_truncated += q->locator->truncated() - truncated;
        if (!got) break;
        OnLocatorDatagram(*q, d);
      }
    }
  }

  void SendUdp(UdQueuePair& q, std::span<const uint8_t> d, const net::SocketAddress& to) {
    if (absl::Status s = q.locator->Send(d, to); !s.ok()) {
      rate_log_.Warn("locator-send", Now(), absl::StrCat("verbs: ", s.message()));
    }
  }

  void OnLocatorDatagram(UdQueuePair& q, const LocatorDatagram& d) {
    if (std::optional<uint64_t> nonce = DecodeLocateRequest(d.data)) {
      LocateAnswer a;
      a.address.gid = dev_->gid();
      a.address.qpn = q.qpn();
      a.qkey = kQkey;
      a.mtu = slot_size_;
      SendUdp(q, EncodeLocateAnswer(*nonce, a), d.from);
      return;
    }
    if (IsLocateMessage(d.data) || !q.on_foreign) {
      ++counters_.undecodable;
      return;
    }
    ForeignDatagram f;
    f.data = d.data;
    f.from = d.from.ToString();
    f.kernel_time_ns = d.kernel_time_ns;
    f.now_ns = RealtimeNs();
    ++counters_.foreign_datagrams;
    foreign_replies_.clear();
    q.on_foreign(f, &foreign_replies_);
    for (const std::vector<uint8_t>& r : foreign_replies_) {
      if (r.empty() || r.size() > kMaxForeignReply) continue;
      SendUdp(q, r, d.from);
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
        UdQueuePair* q = FindQp(WrQp(wcs[i].wr_id));
        if (q == nullptr) {  // a UC lane's, or destroyed meanwhile
          if (uc_) uc_->OnSend(wcs[i]);
          continue;
        }
        if (wcs[i].status != IBV_WC_SUCCESS && wcs[i].status != IBV_WC_WR_FLUSH_ERR) {
          ++counters_.send_errors;
          rate_log_.Warn(
              "send-error", Now(),
              absl::StrCat("verbs: send completion: ", Ibverbs().wc_status_str(wcs[i].status)));
        }
        q->Completed(WrSlot(wcs[i].wr_id), &free_slots_);
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

  void FlushBacklog(UdQueuePair& q) {
    while (!q.backlog.empty() && q.send_room() > 0) {
      q.chain.push_back(q.backlog.front());
      q.backlog.pop_front();
    }
    PostChain(q);
    if (q.backlog.empty() && q.blocked) {
      q.blocked = false;
      ep_.SetBlocked(q.id(), false);
    }
  }

  void Transmit(Time now) {
    if (dev_ == nullptr) return;
    endpoint::Transmit t;
    const size_t turn = std::max<uint32_t>(opt_.tx_batch, 1);
    while (!free_slots_.empty()) {
      const uint32_t slot = free_slots_.back();
      uint8_t* buf = arena_.Slot(slot);
      const size_t n = ep_.PollTransmit(now, buf, send_slot_size_, &t, turn);
      if (n == 0) break;
      if (uc_) {
        free_slots_.pop_back();
        if (uc_->Take(t, slot, static_cast<uint32_t>(n))) continue;
        free_slots_.push_back(slot);
        uc_->CountCopied(UcDatapath::FillPayloads(buf, t));  // over UD
      }
      UdQueuePair* q = FindQp(t.local);
      if (q == nullptr) continue;  // destroyed meanwhile: lost like on a wire
      std::optional<UdAddress> to = FromPeerAddress(t.to);
      ibv_ah* ah = to ? AhFor(to->gid) : nullptr;
      if (ah == nullptr) {
        ++counters_.send_errors;
        continue;
      }
      free_slots_.pop_back();
      SendWr w{slot, static_cast<uint32_t>(n), ah, to->qpn};
      if (!q->backlog.empty() || q->send_room() == 0) {
        q->backlog.push_back(w);
        if (!q->blocked) {
          q->blocked = true;
          ++counters_.send_blocked;
          ep_.SetBlocked(q->id(), true);
        }
        continue;
      }
      q->chain.push_back(w);
      if (q->chain.size() >= turn) PostChain(*q);
    }
    for (auto& [id, q] : qps_) PostChain(*q);
  }

  void PostChain(UdQueuePair& q) {
    if (const int err = q.PostChain(arena_, &free_slots_, &counters_); err != 0) {
      rate_log_.Warn("post-send", Now(),
                     absl::StrCat("verbs: ibv_post_send: ", std::strerror(err)));
    }
  }

  // ---- stats and teardown ----

  void PublishDriverStats(Time now) {
    last_stats_publish_ = now;
    EndpointStats s = counters_;
    runtime_.AddStats(&s);
    if (uc_) uc_->AddStats(&s);
    s.memory_regions = regions_.registered();
    s.memory_region_bytes = regions_.registered_bytes();
    thread_.Publish(s);
  }

  void DoShutdown() {
    const Time now = Now();
    runtime_.BeginShutdown(now);
    Transmit(now);  // the CLOSE packets
    runtime_.FinishShutdown(now);
    PublishDriverStats(now);
    thread_.StopPosting();  // callers waiting in RunOnThread
    if (dev_ != nullptr) {
      // Let the CLOSE packets leave before the queue pairs go (bounded).
      const int64_t until = MonotonicNs() + 50'000'000;
      while (MonotonicNs() < until) {
        bool pending = false;
        for (auto& [id, q] : qps_) pending |= q->has_inflight();
        if (uc_) pending |= uc_->has_inflight();
        if (!pending) break;
        PollSend();
      }
    }
    DestroyDeviceObjects();
  }

  const EndpointOptions opt_;
  datapath::DriverThread thread_;
  datapath::DriverRuntime runtime_;
  endpoint::SansIoEndpoint& ep_;
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
  uint32_t slot_size_ = 0;       // the active MTU: UD messages and receive buffers
  uint32_t send_slot_size_ = 0;  // the send arena's slots (a chunk with UC lanes)
  uint32_t send_slots_ = 0;
  std::unique_ptr<UcDatapath> uc_;  // qp_type uc
  MemoryRegions regions_;           // the application's, for zero-copy sends
  std::vector<uint8_t> send_mem_;
  ibv_mr* send_mr_ = nullptr;
  SendArena arena_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<Gid, ibv_ah*> ahs_;
  std::unordered_map<uint32_t, std::unique_ptr<UdQueuePair>> qps_;
  uint32_t next_qp_id_ = 1;
  bool recv_seen_this_turn_ = false;

  // Scratch (driver thread).
  std::vector<pollfd> pfds_;
  std::vector<uint32_t> ids_;
  std::vector<std::vector<uint8_t>> foreign_replies_;

  EndpointStats counters_;
  Time last_stats_publish_;
};

// ---- VerbsDriver ----

absl::StatusOr<std::unique_ptr<VerbsDriver>> VerbsDriver::Create(const EndpointOptions& options) {
  LH_RETURN_IF_ERROR(datapath::ValidateEndpointOptions(options));
  if (options.verbs.gid_index < -1 || options.verbs.gid_index > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("gid_index=", options.verbs.gid_index, " is outside [-1, 255]"));
  }
  auto impl = std::make_unique<VerbsDriverImpl>(options);
  LH_RETURN_IF_ERROR(impl->Init());
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

absl::Status VerbsDriver::RegisterMemory(uint64_t region, const void* data, size_t size) {
  return impl_->RegisterMemory(region, data, size);
}

absl::Status VerbsDriver::DeregisterMemory(uint64_t region) {
  return impl_->DeregisterMemory(region);
}

EndpointStats VerbsDriver::stats() const { return impl_->stats(); }

}  // namespace longhaul::verbs
