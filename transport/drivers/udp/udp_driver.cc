// The driver thread's loop, in order on every turn:
//   1. run ready Asio handlers without blocking: sockets turning readable (only marked),
//      cross-thread wake-ups, the timer; then the work other threads posted (Listen,
//      Connect: datapath::DriverThread);
//   2. apply operations the application queued on handles (Send, PostReceive, ...), then
//      read the marked sockets, at most two recvmmsg batches each (every datagram goes
//      to the endpoint at once; a socket with more stays marked for the next turn);
//   3. drain the endpoint's PollTransmit into one batch arena that is flushed per socket
//      with sendmmsg (GSO groups);
//   4. hand the connections' events to their handles (callbacks run here);
//   5. sleep on the one timer (or poll when the deadline is within the spin window).
// Reads drain a socket until EAGAIN with the Asio wait re-armed *before* draining, so an
// edge that arrives while draining is never lost (Asio registers sockets edge-triggered).
// The wait's handler only marks the socket readable; step 1 never reads, so a flood of
// arrivals cannot keep the loop from transmitting.

#include "transport/drivers/udp/udp_driver.h"

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "glog/logging.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/base/rate_limited_log.h"
#include "transport/base/status.h"
#include "transport/datapath/driver_runtime.h"
#include "transport/datapath/driver_thread.h"
#include "transport/drivers/udp/engine_steering.h"
#include "transport/drivers/udp/peer_address.h"
#include "transport/endpoint/handshake.h"
#include "transport/net/resolver.h"
#include "transport/net/udp_socket.h"

namespace longhaul::udp {
namespace {

namespace asio = boost::asio;

constexpr size_t kSlotSize = 65536;
// Receive batches per socket per loop turn before the loop transmits (ACKs) again.
constexpr int kMaxReadBatchesPerTurn = 2;
constexpr size_t kMaxForeignReply = 65507;

// steady_clock (CLOCK_MONOTONIC), the clock of the Asio timer.
Time Now() { return Time::FromNanoseconds(MonotonicNs()); }

// The socket buffer to ask for when the options leave it to us: window / 4 within
// [4 MiB, 256 MiB]. It absorbs what arrives while the driver thread is not reading.
ByteCount SocketBufferFor(const EndpointOptions& o, const TransportConfig& c) {
  if (o.socket_buffer > 0) return o.socket_buffer;
  return std::clamp<ByteCount>(c.window / 4, ByteCount{4} << 20, ByteCount{256} << 20);
}

}  // namespace

class UdpDriverImpl {
 public:
  UdpDriverImpl(const EndpointOptions& o, datapath::EngineSlot slot)
      : opt_(o),
        slot_(slot),
        timer_(io_),
        thread_([this] { asio::post(io_, [] {}); }),
        runtime_(datapath::EngineConfigFor(o, FormatPeerAddress, slot),
                 datapath::DriverRuntime::Hooks{
                     .wake = [this] { asio::post(io_, [] {}); },
                     .close_local = [this](endpoint::LocalId id) { CloseSocket(id); },
                     .local_address =
                         [this](endpoint::LocalId id) {
                           Socket* s = FindSocket(id);
                           return s != nullptr ? s->udp->local_address().ToString()
                                               : std::string();
                         }},
                 slot.accept_queue),
        ep_(runtime_.endpoint()) {
    arena_.resize(static_cast<size_t>(std::max<uint32_t>(o.tx_batch, 1)) * kSlotSize);
    rx_ = std::make_unique<net::RxBatch>(std::max<uint32_t>(o.rx_batch, 1));
  }

  void Start() {
    thread_.Start(slot_, [this] { Loop(); });
  }

  // ---- thread-safe entry points ----

  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port, ListenOptions lo) {
    LH_ASSIGN_OR_RETURN(net::SocketAddress bind, net::SocketAddress::FromNumeric(address, port));
    LH_RETURN_IF_ERROR(lo.config.Validate());
    absl::StatusOr<uint16_t> result = absl::CancelledError("endpoint is shut down");
    thread_.RunOnThread([&] {
      net::SocketOptions so;
      so.recv_buffer = so.send_buffer = SocketBufferFor(opt_, lo.config);
      so.gso = opt_.gso;
      so.gro = opt_.gro;
      so.rx_timestamps = static_cast<bool>(lo.on_foreign_datagram);
      so.reuse_port = slot_.count > 1;  // the engines share the port
      absl::StatusOr<uint32_t> id = OpenSocket(bind, net::SocketAddress(), so);
      if (!id.ok()) {
        result = id.status();
        return;
      }
      Socket& s = *sockets_.at(*id);
      if (slot_.count > 1 && slot_.index + 1 == slot_.count) {
        // The last engine to join the port: steer the group by connection id.
        if (absl::Status st = AttachEngineSteering(s.udp->fd(), slot_.count); !st.ok()) {
          CloseSocket(*id);
          result = st;
          return;
        }
      }
      s.on_foreign = lo.on_foreign_datagram;
      if (absl::Status st = runtime_.Listen(*id, std::move(lo)); !st.ok()) {
        CloseSocket(*id);
        result = st;
        return;
      }
      result = s.udp->local_address().port();
    });
    return result;
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const std::string& host,
                                                            uint16_t port, ConnectOptions co) {
    if (thread_.OnThread()) {
      return absl::FailedPreconditionError("Connect cannot be called from an event callback");
    }
    LH_ASSIGN_OR_RETURN(net::SocketAddress server, net::Resolve(host, port));
    LH_RETURN_IF_ERROR(datapath::ValidateConnectOptions(co));
    auto wait = std::make_shared<datapath::ConnectWait>();
    const Duration timeout = co.timeout;
    const bool posted = thread_.Post([this, server, co = std::move(co), wait]() mutable {
      StartConnect(server, std::move(co), std::move(wait));
    });
    if (!posted) return absl::CancelledError("endpoint is shut down");
    return datapath::DriverRuntime::WaitConnect(*wait, timeout, server.ToString());
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) {
    return runtime_.Accept(timeout);
  }

  void Shutdown() { thread_.Shutdown(); }

  EndpointStats stats() {
    return thread_.FreshStats([this] { PublishDriverStats(Now()); });
  }

 private:
  struct Socket {
    uint32_t id = 0;  // also its endpoint::LocalId
    std::unique_ptr<net::UdpSocket> udp;
    ForeignDatagramHandler on_foreign;  // listening sockets only
    bool read_armed = false;
    bool read_pending = false;
    bool blocked = false;
    bool write_armed = false;
    // Datagrams built but not taken by the kernel (socket buffer full).
    struct Held {
      std::vector<uint8_t> bytes;
      net::SocketAddress dest;
      Ecn ecn;
    };
    std::deque<Held> backlog;
  };

  struct TxSlot {
    uint32_t len = 0;
    uint32_t socket = 0;
    net::SocketAddress dest;  // unset for a connected socket
    Ecn ecn = Ecn::kNotEct;
  };

  // ---- the loop ----

  void Loop() {
    runtime_.SetDriverThread(std::this_thread::get_id());
    while (true) {
      io_.restart();
      io_.poll();
      thread_.RunPosted();
      if (thread_.stop_requested()) {
        DoShutdown();
        return;
      }
      Service();
      WaitForWork();
    }
  }

  void Service() {
    runtime_.ApplyWakes();
    // Reading may close sockets (a failed handshake), so walk a copy of the ids.
    pending_reads_.clear();
    for (auto& [id, s] : sockets_) {
      if (s->read_pending) pending_reads_.push_back(id);
    }
    for (uint32_t id : pending_reads_) {
      if (Socket* s = FindSocket(id)) ReadSocket(*s);
    }
    const Time now = Now();
    Transmit(now);
    runtime_.ProcessEndpointEvents();
    runtime_.DeliverAll(now);
    if (now - last_stats_publish_ >= datapath::DriverRuntime::kStatsPublishPeriod) {
      PublishDriverStats(now);
    }
  }

  Time Deadline(Time now) {
    if (runtime_.HasLocalWakes()) return now;
    for (auto& [id, s] : sockets_) {
      if (s->read_pending) return now;
    }
    Time next = ep_.NextWake(now);
    if (ep_.connection_count() > 0 || ep_.pending_count() > 0) {
      next = std::min(next, last_stats_publish_ + datapath::DriverRuntime::kStatsPublishPeriod);
    }
    return next;
  }

  void WaitForWork() {
    const Time now = Now();
    const Time next = Deadline(now);
    if (next <= now) return;
    if (next - now <= opt_.spin) return;  // poll again instead of sleeping
    if (!next.IsInfinite() && (!timer_armed_ || timer_at_ > next)) {
      timer_.expires_at(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next.ns())));
      const uint64_t gen = ++timer_gen_;
      timer_.async_wait([this, gen](const boost::system::error_code&) {
        if (gen == timer_gen_) timer_armed_ = false;
      });
      timer_armed_ = true;
      timer_at_ = next;
    }
    io_.restart();
    io_.run_one();
  }

  // ---- sockets ----

  absl::StatusOr<uint32_t> OpenSocket(const net::SocketAddress& bind, const net::SocketAddress& connect_to,
                                      const net::SocketOptions& so) {
    LH_ASSIGN_OR_RETURN(std::unique_ptr<net::UdpSocket> u,
                        net::UdpSocket::Open(io_, bind, connect_to, so));
    auto s = std::make_unique<Socket>();
    s->id = next_socket_id_++;
    s->udp = std::move(u);
    const net::SocketInfo& info = s->udp->info();
    last_socket_info_ = info;
    if (info.recv_buffer_capped && !warned_rmem_) {
      warned_rmem_ = true;
      LOG(WARNING) << "net.core.rmem_max caps the UDP receive buffer at "
                   << FormatByteCount(info.recv_buffer / 2) << " (asked for "
                   << FormatByteCount(so.recv_buffer) << "); raise it with: sysctl -w "
                   << "net.core.rmem_max=" << so.recv_buffer;
    }
    if (info.send_buffer_capped && !warned_wmem_) {
      warned_wmem_ = true;
      LOG(WARNING) << "net.core.wmem_max caps the UDP send buffer at "
                   << FormatByteCount(info.send_buffer / 2) << " (asked for "
                   << FormatByteCount(so.send_buffer) << "); raise it with: sysctl -w "
                   << "net.core.wmem_max=" << so.send_buffer;
    }
    const uint32_t id = s->id;
    sockets_[id] = std::move(s);
    ArmRead(*sockets_[id]);
    return id;
  }

  Socket* FindSocket(uint32_t id) {
    auto it = sockets_.find(id);
    return it == sockets_.end() ? nullptr : it->second.get();
  }

  void CloseSocket(uint32_t id) {
    auto it = sockets_.find(id);
    if (it == sockets_.end()) return;
    closed_send_syscalls_ += it->second->udp->send_syscalls();
    closed_recv_syscalls_ += it->second->udp->recv_syscalls();
    closed_gso_ += it->second->udp->gso_messages();
    closed_gro_ += it->second->udp->gro_messages();
    ep_.SetBlocked(id, false);
    sockets_.erase(it);
  }

  void ArmRead(Socket& s) {
    if (s.read_armed) return;
    s.read_armed = true;
    const uint32_t id = s.id;
    // The handler only marks the socket: Service reads it, a bounded number of batches
    // per turn. Reading here would let io_.poll() run reads back to back for as long as
    // datagrams keep arriving (each read re-arms the wait, and a new arrival makes it
    // ready again), and the loop would never transmit an ACK.
    s.udp->asio_socket().async_wait(asio::socket_base::wait_read,
                                    [this, id](const boost::system::error_code& ec) {
                                      Socket* s = FindSocket(id);
                                      if (s == nullptr) return;
                                      s->read_armed = false;
                                      if (ec) return;
                                      s->read_pending = true;
                                    });
  }

  void ArmWrite(Socket& s) {
    if (s.write_armed) return;
    s.write_armed = true;
    const uint32_t id = s.id;
    s.udp->asio_socket().async_wait(asio::socket_base::wait_write,
                                    [this, id](const boost::system::error_code& ec) {
                                      Socket* s = FindSocket(id);
                                      if (s == nullptr) return;
                                      s->write_armed = false;
                                      if (ec) return;
                                      FlushBacklog(*s);
                                    });
  }

  void ReadSocket(Socket& s) {
    ArmRead(s);  // before draining: an arrival after the last EAGAIN fires the wait
    s.read_pending = false;
    const uint32_t id = s.id;
    for (int i = 0; i < kMaxReadBatchesPerTurn; ++i) {
      net::RecvResult r = s.udp->Receive(rx_.get());
      counters_.receive_truncated += r.truncated;
      if (!r.error.ok()) {
        OnSocketError(id, r.error);
        return;
      }
      if (r.messages == 0) return;
      const Time now = Now();
      for (const net::RxDatagram& d : rx_->datagrams()) {
        OnDatagram(id, d, rx_->source(d.source), now);
      }
      if (FindSocket(id) == nullptr) return;     // closed while handling (failed handshake)
      if (r.messages < rx_->capacity()) return;  // drained
    }
    s.read_pending = true;  // more queued: continue next turn, after transmitting
  }

  void OnSocketError(uint32_t socket_id, const absl::Status& error) {
    Socket* s = FindSocket(socket_id);
    if (s == nullptr) return;
    if (!s->udp->connected()) {
      // A listening socket: the error names no connection of ours.
      rate_log_.Warn("socket-error", Now(),
                     absl::StrCat("UDP socket ", s->udp->local_address().ToString(), ": ",
                                  error.message()));
      return;
    }
    ep_.OnLocalError(Now(), socket_id, error);
    runtime_.ProcessEndpointEvents();
  }

  void OnDatagram(uint32_t socket_id, const net::RxDatagram& d, const net::SocketAddress& src, Time now) {
    ++counters_.datagrams_received;
    counters_.bytes_received += d.data.size();
    const endpoint::SansIoEndpoint::Verdict v =
        ep_.OnDatagram(now, socket_id, ToPeerAddress(src), d.data, d.ecn);
    if (v == endpoint::SansIoEndpoint::Verdict::kForeign) {
      OnForeignDatagram(socket_id, d, src);
      return;
    }
    runtime_.ProcessEndpointEvents();
  }

  // A datagram of another protocol on a listening socket with a handler: the handler's
  // replies go back to the source at once.
  void OnForeignDatagram(uint32_t socket_id, const net::RxDatagram& d, const net::SocketAddress& src) {
    Socket* s = FindSocket(socket_id);
    if (s == nullptr || !s->on_foreign) return;
    ForeignDatagram f;
    f.data = d.data;
    f.from = src.ToString();
    f.kernel_time_ns = d.kernel_time_ns;
    f.now_ns = RealtimeNs();
    foreign_replies_.clear();
    s->on_foreign(f, &foreign_replies_);
    for (const std::vector<uint8_t>& r : foreign_replies_) {
      if (r.empty() || r.size() > kMaxForeignReply) continue;
      net::TxDatagram t;
      t.data = r.data();
      t.len = static_cast<uint32_t>(r.size());
      t.dest = &src;
      net::SendResult sr = s->udp->Send(std::span<const net::TxDatagram>(&t, 1));
      counters_.datagrams_sent += sr.sent;
      counters_.bytes_sent += sr.sent ? r.size() : 0;
      counters_.foreign_replies += sr.sent;
      if (!sr.error.ok()) {
        rate_log_.Warn("foreign-reply", Now(),
                       absl::StrCat("reply to ", f.from, " not sent: ", sr.error.message()));
      }
    }
  }

  void StartConnect(const net::SocketAddress& server, ConnectOptions co,
                    std::shared_ptr<datapath::ConnectWait> wait) {
    const uint32_t flows = std::max<uint32_t>(1, co.config.flows);
    net::SocketOptions so;
    so.recv_buffer = so.send_buffer = SocketBufferFor(opt_, co.config);
    so.gso = opt_.gso;
    so.gro = opt_.gro;
    absl::StatusOr<net::SocketAddress> any =
        net::SocketAddress::FromNumeric(server.family() == AF_INET6 ? "::" : "0.0.0.0", 0);
    std::vector<endpoint::LocalId> locals;
    for (uint32_t f = 0; f < flows; ++f) {
      absl::StatusOr<uint32_t> id = OpenSocket(*any, server, so);
      if (!id.ok()) {
        for (endpoint::LocalId l : locals) CloseSocket(l);
        std::lock_guard<std::mutex> l(wait->mu);
        wait->value = id.status();
        wait->done = true;
        wait->cv.notify_all();
        return;
      }
      locals.push_back(*id);
    }
    runtime_.StartConnect(Now(), ToPeerAddress(server), std::move(locals), std::move(co),
                          std::move(wait));
  }

  // ---- transmit path ----

  void Transmit(Time now) {
    const size_t slots = arena_.size() / kSlotSize;
    endpoint::Transmit t;
    while (true) {
      uint8_t* slot = &arena_[tx_count_ * kSlotSize];
      const size_t n = ep_.PollTransmit(now, slot, kSlotSize, &t, slots);
      if (n == 0) break;
      Socket* s = FindSocket(t.local);
      if (s == nullptr) continue;  // closed meanwhile: the datagram is lost like on a wire
      TxSlot& x = tx_[tx_count_];
      x.len = static_cast<uint32_t>(n);
      x.socket = t.local;
      x.ecn = t.ecn;
      x.dest = s->udp->connected() ? net::SocketAddress() : FromPeerAddress(t.to);
      if (++tx_count_ >= slots) FlushArena();
    }
    FlushArena();
  }

  void FlushArena() {
    if (tx_count_ == 0) return;
    // Per socket, in order of first appearance.
    sock_order_.clear();
    for (size_t i = 0; i < tx_count_; ++i) {
      if (std::find(sock_order_.begin(), sock_order_.end(), tx_[i].socket) == sock_order_.end()) {
        sock_order_.push_back(tx_[i].socket);
      }
    }
    for (uint32_t sid : sock_order_) {
      batch_.clear();
      for (size_t i = 0; i < tx_count_; ++i) {
        if (tx_[i].socket != sid) continue;
        net::TxDatagram d;
        d.data = &arena_[i * kSlotSize];
        d.len = tx_[i].len;
        d.ecn = tx_[i].ecn;
        d.dest = tx_[i].dest.valid() ? &tx_[i].dest : nullptr;
        batch_.push_back(d);
      }
      Socket* s = FindSocket(sid);
      if (s == nullptr) continue;
      SendBatch(*s, batch_);
    }
    tx_count_ = 0;
  }

  // Sends `batch` on `s`, keeping what the kernel did not take in the socket's backlog.
  void SendBatch(Socket& s, std::span<const net::TxDatagram> batch) {
    if (s.blocked) {
      Hold(s, batch);
      return;
    }
    net::SendResult r = s.udp->Send(batch);
    counters_.datagrams_sent += r.sent;
    for (size_t i = 0; i < r.sent; ++i) counters_.bytes_sent += batch[i].len;
    counters_.send_errors += r.dropped;
    if (!r.error.ok()) OnSendError(s, r.error);
    const size_t taken = r.sent + r.dropped;
    if (r.would_block && taken < batch.size()) {
      ++counters_.send_blocked;
      SetBlocked(s, true);
      Hold(s, batch.subspan(taken));
      ArmWrite(s);
    }
  }

  void SetBlocked(Socket& s, bool blocked) {
    s.blocked = blocked;
    ep_.SetBlocked(s.id, blocked);
  }

  void Hold(Socket& s, std::span<const net::TxDatagram> rest) {
    for (const net::TxDatagram& d : rest) {
      Socket::Held h;
      h.bytes.assign(d.data, d.data + d.len);
      if (d.dest != nullptr) h.dest = *d.dest;
      h.ecn = d.ecn;
      s.backlog.push_back(std::move(h));
    }
  }

  void FlushBacklog(Socket& s) {
    SetBlocked(s, false);
    while (!s.backlog.empty()) {
      std::vector<net::TxDatagram> batch;
      const size_t n = std::min<size_t>(s.backlog.size(), 64);
      for (size_t i = 0; i < n; ++i) {
        const Socket::Held& h = s.backlog[i];
        net::TxDatagram d;
        d.data = h.bytes.data();
        d.len = static_cast<uint32_t>(h.bytes.size());
        d.ecn = h.ecn;
        d.dest = h.dest.valid() ? &h.dest : nullptr;
        batch.push_back(d);
      }
      net::SendResult r = s.udp->Send(batch);
      counters_.datagrams_sent += r.sent;
      counters_.send_errors += r.dropped;
      if (!r.error.ok()) OnSendError(s, r.error);
      const size_t taken = r.sent + r.dropped;
      for (size_t i = 0; i < taken; ++i) {
        counters_.bytes_sent += i < r.sent ? s.backlog.front().bytes.size() : 0;
        s.backlog.pop_front();
      }
      if (r.would_block) {
        SetBlocked(s, true);
        ArmWrite(s);
        return;
      }
    }
  }

  void OnSendError(Socket& s, const absl::Status& error) {
    if (absl::IsUnavailable(error) && s.udp->connected()) {
      OnSocketError(s.id, error);
      return;
    }
    rate_log_.Warn(
        absl::StrCat("send-", error.code()), Now(),
        absl::StrCat("UDP socket ", s.udp->local_address().ToString(), ": ", error.message()));
  }

  // ---- stats and teardown ----

  void PublishDriverStats(Time now) {
    last_stats_publish_ = now;
    EndpointStats s = counters_;
    s.send_syscalls = closed_send_syscalls_;
    s.recv_syscalls = closed_recv_syscalls_;
    s.gso_sends = closed_gso_;
    s.gro_receives = closed_gro_;
    for (auto& [id, sock] : sockets_) {
      s.send_syscalls += sock->udp->send_syscalls();
      s.recv_syscalls += sock->udp->recv_syscalls();
      s.gso_sends += sock->udp->gso_messages();
      s.gro_receives += sock->udp->gro_messages();
    }
    runtime_.AddStats(&s);
    s.recv_buffer = last_socket_info_.recv_buffer;
    s.send_buffer = last_socket_info_.send_buffer;
    s.gso = last_socket_info_.gso;
    s.gro = last_socket_info_.gro;
    thread_.Publish(s);
  }

  void DoShutdown() {
    const Time now = Now();
    runtime_.BeginShutdown(now);
    Transmit(now);  // the CLOSE packets
    runtime_.FinishShutdown(now);
    PublishDriverStats(now);
    thread_.StopPosting();  // callers waiting in RunOnThread
    sockets_.clear();
    boost::system::error_code ec;
    timer_.cancel(ec);
  }

  const EndpointOptions opt_;
  const datapath::EngineSlot slot_;
  asio::io_context io_;
  asio::steady_timer timer_;
  bool timer_armed_ = false;
  Time timer_at_ = Time::Infinite();
  uint64_t timer_gen_ = 0;
  datapath::DriverThread thread_;
  datapath::DriverRuntime runtime_;
  endpoint::SansIoEndpoint& ep_;
  RateLimitedLog rate_log_;

  std::unordered_map<uint32_t, std::unique_ptr<Socket>> sockets_;
  uint32_t next_socket_id_ = 1;

  std::unique_ptr<net::RxBatch> rx_;
  std::vector<uint8_t> arena_;
  TxSlot tx_[1024];
  size_t tx_count_ = 0;
  std::vector<uint32_t> sock_order_;
  std::vector<uint32_t> pending_reads_;
  std::vector<net::TxDatagram> batch_;

  EndpointStats counters_;
  std::vector<std::vector<uint8_t>> foreign_replies_;  // OnForeignDatagram's scratch
  net::SocketInfo last_socket_info_;
  uint64_t closed_send_syscalls_ = 0;
  uint64_t closed_recv_syscalls_ = 0;
  uint64_t closed_gso_ = 0;
  uint64_t closed_gro_ = 0;
  Time last_stats_publish_;
  bool warned_rmem_ = false;
  bool warned_wmem_ = false;
};

// ---- UdpDriver ----

absl::StatusOr<std::unique_ptr<UdpDriver>> UdpDriver::Create(const EndpointOptions& options,
                                                             const datapath::EngineSlot& slot) {
  LH_RETURN_IF_ERROR(datapath::ValidateEndpointOptions(options));
  if (options.rx_batch == 0 || options.rx_batch > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("rx_batch=", options.rx_batch, " is outside [1, 1024]"));
  }
  std::unique_ptr<UdpDriver> d(new UdpDriver(std::make_unique<UdpDriverImpl>(options, slot)));
  d->impl_->Start();
  return d;
}

UdpDriver::UdpDriver(std::unique_ptr<UdpDriverImpl> impl) : impl_(std::move(impl)) {}

UdpDriver::~UdpDriver() { Shutdown(); }

absl::StatusOr<uint16_t> UdpDriver::Listen(const std::string& address, uint16_t port,
                                           ListenOptions options) {
  return impl_->Listen(address, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> UdpDriver::Connect(const std::string& host,
                                                                     uint16_t port,
                                                                     ConnectOptions options) {
  return impl_->Connect(host, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> UdpDriver::Accept(Duration timeout) {
  return impl_->Accept(timeout);
}

void UdpDriver::Shutdown() { impl_->Shutdown(); }

EndpointStats UdpDriver::stats() const { return impl_->stats(); }

}  // namespace longhaul::udp
