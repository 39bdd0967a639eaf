// The driver thread's loop, in order on every turn:
//   1. run ready Asio handlers without blocking: socket reads (datagrams go straight to
//      their connection), cross-thread wake-ups, the timer;
//   2. apply operations the application queued on handles (Send, PostReceive, ...);
//   3. OnTimeout + PollTransmit for every connection whose NextTimeout() has come, into
//      one batch arena that is flushed per socket with sendmmsg (GSO groups);
//   4. hand the connections' events to their handles (callbacks run here);
//   5. sleep on the one timer (or poll when the deadline is within the spin window).
// Reads drain a socket until EAGAIN with the Asio wait re-armed *before* draining, so an
// edge that arrives while draining is never lost (Asio registers sockets edge-triggered).

#include "transport/drivers/udp/udp_driver.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "glog/logging.h"
#include "transport/base/parse.h"
#include "transport/base/rng.h"
#include "transport/core/connection.h"
#include "transport/drivers/udp/handshake.h"
#include "transport/net/udp_socket.h"
#include "transport/wire/packet.h"

namespace longhaul::udp {
namespace {

namespace asio = boost::asio;

constexpr size_t kSlotSize = 65536;
// Receive batches per socket per loop turn before the loop transmits (ACKs) again.
constexpr int kMaxReadBatchesPerTurn = 2;
constexpr Duration kStatsPublishPeriod = Duration::Milliseconds(10);
constexpr Duration kBlockedRecheck = Duration::Milliseconds(1);
constexpr Duration kRefusedGrace = Duration::Seconds(1);
constexpr Duration kStalledDeadlineWait = Duration::Microseconds(200);
constexpr int kMaxRetries = 8;

Time Now() {
  return Time::FromNanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The socket buffer to ask for when the options leave it to us: window / 4 within
// [4 MiB, 256 MiB]. It absorbs what arrives while the driver thread is not reading.
ByteCount SocketBufferFor(const EndpointOptions& o, const TransportConfig& c) {
  if (o.socket_buffer > 0) return o.socket_buffer;
  return std::clamp<ByteCount>(c.window / 4, ByteCount{4} << 20, ByteCount{256} << 20);
}

// A negotiated idle timeout below this side's keepalive would end quiet but healthy
// connections: keep at least three keepalives per idle timeout.
void KeepAliveWithinIdle(TransportConfig* c) {
  const Duration most = c->idle_timeout / 3;
  if (c->keepalive > most) c->keepalive = std::max(most, Duration::Milliseconds(1));
}

struct ConnectResult {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool abandoned = false;  // the caller stopped waiting
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> value =
      absl::UnknownError("connect did not finish");
};

// Logs a message at most once per period per key, with the number suppressed meanwhile.
class RateLimitedLog {
 public:
  void Warn(const std::string& key, Time now, const std::string& msg) {
    Entry& e = entries_[key];
    if (e.logged && now - e.last < Duration::Seconds(10)) {
      ++e.suppressed;
      return;
    }
    if (e.suppressed > 0) {
      LOG(WARNING) << msg << " (and " << e.suppressed << " more like it in the last 10s)";
    } else {
      LOG(WARNING) << msg;
    }
    e.logged = true;
    e.last = now;
    e.suppressed = 0;
  }

 private:
  struct Entry {
    bool logged = false;
    Time last;
    uint64_t suppressed = 0;
  };
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace

class UdpDriverImpl {
 public:
  explicit UdpDriverImpl(const EndpointOptions& o)
      : opt_(o), timer_(io_), minter_(CookieMinter::RandomSecret(), o.cookie_lifetime) {
    uint64_t seed = o.seed;
    if (seed == 0) {
      std::random_device rd;
      seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }
    rng_.Seed(seed);
    arena_.resize(static_cast<size_t>(std::max<uint32_t>(o.tx_batch, 1)) * kSlotSize);
    rx_ = std::make_unique<net::RxBatch>(std::max<uint32_t>(o.rx_batch, 1));
  }

  void Start(UdpDriver* owner) {
    owner_ = owner;
    thread_ = std::thread([this] { Loop(); });
    driver_thread_id_.store(thread_.get_id());
  }

  // ---- thread-safe entry points ----

  absl::StatusOr<net::SocketAddress> Listen(const net::SocketAddress& bind, ListenOptions lo) {
    if (absl::Status s = lo.config.Validate(); !s.ok()) return s;
    absl::StatusOr<net::SocketAddress> result = absl::CancelledError("endpoint is shut down");
    RunOnDriver([&] {
      net::SocketOptions so;
      so.recv_buffer = so.send_buffer = SocketBufferFor(opt_, lo.config);
      so.gso = opt_.gso;
      so.gro = opt_.gro;
      so.rx_timestamps = static_cast<bool>(lo.on_foreign_datagram);
      absl::StatusOr<uint32_t> id = OpenSocket(bind, net::SocketAddress(), so);
      if (!id.ok()) {
        result = id.status();
        return;
      }
      Socket& s = *sockets_.at(*id);
      s.listening = true;
      s.listen = std::make_unique<ListenOptions>(std::move(lo));
      result = s.udp->local_address();
    });
    return result;
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Connect(const net::SocketAddress& server,
                                                            ConnectOptions co) {
    if (std::this_thread::get_id() == driver_thread_id_.load()) {
      return absl::FailedPreconditionError("Connect cannot be called from an event callback");
    }
    if (absl::Status s = co.config.Validate(); !s.ok()) return s;
    if (co.app_data.size() > kMaxAppDataSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "connect: application data of ", co.app_data.size(), " bytes exceeds ", kMaxAppDataSize));
    }
    auto result = std::make_shared<ConnectResult>();
    const Duration timeout = co.timeout;
    bool posted = Post([this, server, co = std::move(co), result]() mutable {
      StartConnect(server, std::move(co), result);
    });
    if (!posted) return absl::CancelledError("endpoint is shut down");
    std::unique_lock<std::mutex> l(result->mu);
    // The driver enforces the timeout; the extra second only guards against a stuck thread.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::nanoseconds(timeout.ns()) + std::chrono::seconds(1);
    if (!result->cv.wait_until(l, deadline, [&] { return result->done; })) {
      result->abandoned = true;
      return absl::DeadlineExceededError(
          absl::StrCat("connect to ", server.ToString(), ": the driver did not finish in time"));
    }
    return result->value;
  }

  absl::StatusOr<std::shared_ptr<ConnectionHandle>> Accept(Duration timeout) {
    std::unique_lock<std::mutex> l(accept_mu_);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::nanoseconds(std::max<int64_t>(0, timeout.ns()));
    accept_cv_.wait_until(l, deadline, [&] { return !accept_queue_.empty() || stopped_; });
    if (!accept_queue_.empty()) {
      std::shared_ptr<ConnectionHandle> h = std::move(accept_queue_.front());
      accept_queue_.pop_front();
      return h;
    }
    if (stopped_) return absl::CancelledError("endpoint is shut down");
    return absl::DeadlineExceededError(
        absl::StrCat("no connection accepted within ", FormatDuration(timeout)));
  }

  void Shutdown() {
    if (std::this_thread::get_id() == driver_thread_id_.load()) {
      // From an event callback: the thread cannot join itself. Stop after this turn.
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
    asio::post(io_, [] {});
    thread_.join();
  }

  EndpointStats stats() {
    // Fresh counters from the driver thread (the published copy when it has stopped).
    RunOnDriver([this] { PublishDriverStats(Now()); });
    std::lock_guard<std::mutex> l(stats_mu_);
    return published_;
  }

  void Wake(ConnectionHandle* h) {
    if (std::this_thread::get_id() == driver_thread_id_.load()) {
      local_dirty_.push_back(h);
      return;
    }
    {
      std::lock_guard<std::mutex> l(dirty_mu_);
      dirty_.push_back(h);
    }
    if (!wake_posted_.exchange(true)) {
      asio::post(io_, [this] { wake_posted_.store(false); });
    }
  }

 private:
  struct Socket {
    uint32_t id = 0;
    std::unique_ptr<net::UdpSocket> udp;
    bool listening = false;
    std::unique_ptr<ListenOptions> listen;
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
    uint64_t owner_cid = 0;  // client sockets: the connection (or pending handshake) id
  };

  struct Conn {
    uint64_t local_cid = 0;
    uint64_t peer_cid = 0;
    bool is_server = false;
    std::unique_ptr<Connection> conn;
    std::shared_ptr<ConnectionHandle> handle;
    std::vector<uint32_t> sockets;          // client: one per flow; server: the listener
    std::vector<net::SocketAddress> peer_addrs;  // server: client address per flow
    net::SocketAddress peer;                     // handshake address
    Time next_timeout;
    Time last_publish;
    bool closed_seen = false;
    // server handshake state
    bool confirmed = true;
    bool queued_for_accept = false;
    Time confirm_deadline = Time::Infinite();
    Time next_accept_resend = Time::Infinite();
    Duration accept_backoff;
    std::vector<uint8_t> accept_packet;
    uint64_t client_cid = 0;
    bool has_on_accept = false;
    // client: ICMP "port unreachable" seen since the last packet from the peer
    Time refused_since = Time::Infinite();
    uint64_t last_packets_received = 0;
  };

  struct Pending {
    uint64_t cid = 0;
    net::SocketAddress server;
    std::vector<uint32_t> sockets;
    ConnectOptions opts;
    std::vector<uint8_t> cookie;
    std::vector<uint8_t> hello;
    uint32_t version = kProtocolVersion;
    Time deadline;
    Time next_resend;
    Duration backoff;
    int retries = 0;
    bool heard = false;  // the server answered (a Retry)
    std::shared_ptr<ConnectResult> result;
  };

  struct TxSlot {
    uint32_t len = 0;
    uint32_t socket = 0;
    const net::SocketAddress* dest = nullptr;
    Ecn ecn = Ecn::kNotEct;
  };

  // ---- posting work to the driver thread ----

  bool Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(post_mu_);
    if (stop_requested_ || stopped_) return false;
    asio::post(io_, std::move(fn));
    return true;
  }

  void RunOnDriver(const std::function<void()>& fn) {
    if (std::this_thread::get_id() == driver_thread_id_.load()) {
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

  // ---- the loop ----

  void Loop() {
    driver_thread_id_.store(std::this_thread::get_id());
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // timer wake-ups to the microsecond
    while (true) {
      io_.restart();
      io_.poll();
      bool stop;
      {
        std::lock_guard<std::mutex> l(post_mu_);
        stop = stop_requested_;
      }
      if (stop) {
        DoShutdown();
        return;
      }
      Service();
      WaitForWork();
    }
  }

  void Service() {
    Time now = Now();
    ApplyDirty();
    // Reading may close sockets (a failed handshake), so walk a copy of the ids.
    pending_reads_.clear();
    for (auto& [id, s] : sockets_) {
      if (s->read_pending) pending_reads_.push_back(id);
    }
    for (uint32_t id : pending_reads_) {
      if (Socket* s = FindSocket(id)) ReadSocket(*s);
    }
    now = Now();
    RunHandshakeTimers(now);
    Transmit(now);
    DeliverAll(now);
    Reap();
    if (now - last_stats_publish_ >= kStatsPublishPeriod) PublishDriverStats(now);
  }

  Time Deadline(Time now) {
    if (!local_dirty_.empty()) return now;
    Time next = Time::Infinite();
    for (auto& [id, s] : sockets_) {
      if (s->read_pending) return now;
    }
    for (auto& [cid, c] : conns_) {
      Time t = c->next_timeout;
      if (ConnBlocked(*c)) t = std::max(t, now + kBlockedRecheck);
      next = std::min(next, t);
      if (!c->confirmed) next = std::min({next, c->next_accept_resend, c->confirm_deadline});
    }
    for (auto& [cid, p] : pending_) next = std::min({next, p->next_resend, p->deadline});
    if (!conns_.empty() || !pending_.empty()) {
      next = std::min(next, last_stats_publish_ + kStatsPublishPeriod);
    }
    return next;
  }

  void WaitForWork() {
    Time now = Now();
    Time next = Deadline(now);
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

  absl::StatusOr<uint32_t> OpenSocket(const net::SocketAddress& bind,
                                      const net::SocketAddress& connect_to,
                                      const net::SocketOptions& so) {
    absl::StatusOr<std::unique_ptr<net::UdpSocket>> u =
        net::UdpSocket::Open(io_, bind, connect_to, so);
    if (!u.ok()) return u.status();
    auto s = std::make_unique<Socket>();
    s->id = next_socket_id_++;
    s->udp = *std::move(u);
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
    uint32_t id = s->id;
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
    sockets_.erase(it);
  }

  void ArmRead(Socket& s) {
    if (s.read_armed) return;
    s.read_armed = true;
    const uint32_t id = s.id;
    s.udp->asio_socket().async_wait(asio::socket_base::wait_read,
                                    [this, id](const boost::system::error_code& ec) {
                                      Socket* s = FindSocket(id);
                                      if (s == nullptr) return;
                                      s->read_armed = false;
                                      if (ec) return;
                                      ReadSocket(*s);
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
    if (s->owner_cid == 0) {
      rate_log_.Warn(
          "socket-error", Now(),
          absl::StrCat("UDP socket ", s->udp->local_address().ToString(), ": ", error.message()));
      return;
    }
    const uint64_t cid = s->owner_cid;
    if (auto it = pending_.find(cid); it != pending_.end()) {
      FailPending(cid, error);
      return;
    }
    if (auto it = conns_.find(cid); it != conns_.end() && absl::IsUnavailable(error)) {
      Conn& c = *it->second;
      const Time now = Now();
      if (c.refused_since.IsInfinite()) {
        c.refused_since = now;
      } else if (now - c.refused_since >= kRefusedGrace && !c.conn->closed()) {
        c.conn->Close(CloseCode::kApplication, absl::StrCat("peer unreachable: ", error.message()));
        c.next_timeout = Time::Zero();
      }
    }
  }

  // ---- receive path ----

  void OnDatagram(uint32_t socket_id, const net::RxDatagram& d, const net::SocketAddress& src,
                  Time now) {
    ++counters_.datagrams_received;
    counters_.bytes_received += d.data.size();
    if (!d.data.empty() && d.data[0] != wire::kVersion && OnForeignDatagram(socket_id, d, src)) {
      return;
    }
    absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(d.data);
    if (!h.ok()) {
      ++counters_.undecodable;
      if (d.data.size() >= 1 && d.data[0] != wire::kVersion) ++counters_.version_mismatches;
      rate_log_.Warn("undecodable", now,
                     absl::StrCat("dropped a datagram from ", src.ToString(), " (", d.data.size(),
                                  " bytes): ", h.status().message()));
      return;
    }
    if (h->type == wire::PacketType::kOneRtt) {
      auto it = conns_.find(h->connection_id);
      if (it == conns_.end()) {
        ++counters_.unknown_connection;
        return;
      }
      Conn& c = *it->second;
      c.conn->OnDatagram(now, d.data, d.ecn);
      const uint64_t received = c.conn->stats().packets_received;
      if (received != c.last_packets_received) {
        // A valid packet (checksum and connection id): learn the flow's address, confirm.
        c.last_packets_received = received;
        c.refused_since = Time::Infinite();
        if (c.is_server) {
          if (h->flow < c.peer_addrs.size()) c.peer_addrs[h->flow] = src;
          if (!c.confirmed) ConfirmServerConn(c);
        }
      }
      c.next_timeout = c.conn->NextTimeout();
      return;
    }
    OnHandshakePacket(socket_id, d.data, src, now);
  }

  // A datagram of another protocol on a listening socket with a handler: the handler's
  // replies go back to the source. False when there is no handler (dropped as undecodable).
  bool OnForeignDatagram(uint32_t socket_id, const net::RxDatagram& d,
                         const net::SocketAddress& src) {
    Socket* s = FindSocket(socket_id);
    if (s == nullptr || !s->listening || !s->listen->on_foreign_datagram) return false;
    ++counters_.foreign_datagrams;
    ForeignDatagram f;
    f.data = d.data;
    f.from = src.ToString();
    f.kernel_time_ns = d.kernel_time_ns;
    f.now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    foreign_replies_.clear();
    s->listen->on_foreign_datagram(f, &foreign_replies_);
    for (const std::vector<uint8_t>& r : foreign_replies_) {
      if (r.empty() || r.size() > 65507) continue;
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
    return true;
  }

  void OnHandshakePacket(uint32_t socket_id, std::span<const uint8_t> d,
                         const net::SocketAddress& src, Time now) {
    absl::StatusOr<HandshakeMessage> m = ParseHandshakePacket(d);
    if (!m.ok()) {
      ++counters_.handshake_errors;
      rate_log_.Warn("handshake-malformed", now,
                     absl::StrCat("dropped a handshake packet from ", src.ToString(), ": ",
                                  m.status().message()));
      return;
    }
    Socket* s = FindSocket(socket_id);
    if (s == nullptr) return;
    switch (m->kind) {
      case HandshakeKind::kHello:
        if (s->listening) ServerOnHello(*s, d.size(), src, *m, now);
        return;
      case HandshakeKind::kConfirm: {
        auto it = conns_.find(m->server_cid);
        if (it != conns_.end() && it->second->is_server &&
            it->second->client_cid == m->client_cid) {
          ConfirmServerConn(*it->second);
        }
        return;
      }
      case HandshakeKind::kRetry:
      case HandshakeKind::kAccept:
      case HandshakeKind::kReject:
        ClientOnServerMessage(*s, *m, now);
        return;
    }
  }

  // ---- server side of the handshake ----

  void SendHandshake(Socket& s, const net::SocketAddress& to, const std::vector<uint8_t>& bytes,
                     size_t received_bytes, bool validated) {
    if (!validated && bytes.size() > kAmplificationFactor * received_bytes) {
      ++counters_.amplification_limited;
      return;
    }
    net::TxDatagram d;
    d.data = bytes.data();
    d.len = static_cast<uint32_t>(bytes.size());
    d.dest = s.udp->connected() ? nullptr : &to;
    net::SendResult r = s.udp->Send(std::span<const net::TxDatagram>(&d, 1));
    counters_.datagrams_sent += r.sent;
    counters_.bytes_sent += r.sent ? bytes.size() : 0;
    if (!r.error.ok()) OnSocketError(s.id, r.error);
  }

  void SendReject(Socket& s, const net::SocketAddress& to, const HandshakeMessage& hello,
                  std::string reason, size_t received, bool validated) {
    HandshakeMessage rej;
    rej.kind = HandshakeKind::kReject;
    rej.version = kProtocolVersion;
    rej.client_cid = hello.client_cid;
    rej.reason = reason.substr(0, kMaxReasonSize);
    absl::StatusOr<std::vector<uint8_t>> p = BuildHandshakePacket(rej);
    if (!p.ok()) return;
    ++counters_.rejects_sent;
    SendHandshake(s, to, *p, received, validated);
  }

  void ServerOnHello(Socket& s, size_t received, const net::SocketAddress& src,
                     const HandshakeMessage& m, Time now) {
    ++counters_.hellos_received;
    if (received < kMinInitialSize) {
      ++counters_.short_initials;
      rate_log_.Warn(
          "short-initial", now,
          absl::StrCat("dropped a Hello of ", received, " bytes from ", src.ToString(),
                       " (Initial datagrams must be at least ", kMinInitialSize, " bytes)"));
      return;
    }
    if (m.version != kProtocolVersion) {
      ++counters_.version_mismatches;
      std::string reason = absl::StrCat(
          "version mismatch: the server speaks longhaul protocol "
          "version ",
          kProtocolVersion, ", the client asked for ", m.version);
      rate_log_.Warn("version", now, absl::StrCat("client ", src.ToString(), ": ", reason));
      SendReject(s, src, m, reason, received, /*validated=*/false);
      return;
    }
    if (m.cookie.empty()) {
      SendRetry(s, src, m, received, now);
      return;
    }
    switch (minter_.Check(now, m.cookie, src, m.client_cid, m.version)) {
      case CookieVerdict::kInvalid:
        ++counters_.cookies_invalid;
        rate_log_.Warn("cookie", now,
                       absl::StrCat("dropped a Hello from ", src.ToString(),
                                    " with an invalid (forged or corrupted) cookie"));
        return;
      case CookieVerdict::kExpired:
        ++counters_.cookies_expired;
        SendRetry(s, src, m, received, now);
        return;
      case CookieVerdict::kValid:
        break;
    }
    // The client's address is validated from here on.
    const HelloKey key{m.client_cid, src};
    if (auto it = hello_index_.find(key); it != hello_index_.end()) {
      auto c = conns_.find(it->second);
      if (c != conns_.end()) SendHandshake(s, src, c->second->accept_packet, received, true);
      return;
    }
    size_t server_conns = 0;
    for (auto& [cid, c] : conns_) server_conns += c->is_server ? 1 : 0;
    const ListenOptions& lo = *s.listen;
    if (server_conns >= opt_.max_connections) {
      SendReject(s, src, m,
                 absl::StrCat("server busy: it already serves ", server_conns, " connections"),
                 received, true);
      return;
    }
    if (!lo.on_accept) {
      std::lock_guard<std::mutex> l(accept_mu_);
      if (accept_queue_.size() >= lo.backlog) {
        SendReject(s, src, m, "server busy: too many connections waiting to be accepted", received,
                   true);
        return;
      }
    }
    if (m.params.flows == 0 || m.params.max_inflight_messages == 0 || m.params.segment == 0) {
      SendReject(s, src, m, "bad parameters: flows, segment and max_inflight_messages must be > 0",
                 received, true);
      return;
    }
    TransportConfig config = lo.config;
    if (lo.policy) {
      HelloInfo info;
      info.peer_address = src.ToString();
      info.segment = m.params.segment;
      info.recv_window = m.params.recv_window;
      info.max_inflight_messages = m.params.max_inflight_messages;
      info.flows = m.params.flows;
      info.idle_timeout = Duration::Milliseconds(m.params.idle_timeout_ms);
      info.app_data = m.app_data;
      absl::StatusOr<TransportConfig> pc = lo.policy(info);
      if (!pc.ok()) {
        SendReject(s, src, m, std::string(pc.status().message()), received, true);
        return;
      }
      config = *pc;
    }
    // Negotiation: message limit and idle timeout are the smaller of the two sides', the
    // flows the client asked for up to our limit.
    config.max_inflight_messages =
        std::min(config.max_inflight_messages, m.params.max_inflight_messages);
    if (m.params.idle_timeout_ms > 0) {
      config.idle_timeout =
          std::min(config.idle_timeout, Duration::Milliseconds(m.params.idle_timeout_ms));
    }
    config.flows = std::min<uint32_t>(m.params.flows, std::max<uint32_t>(1, opt_.max_flows));
    KeepAliveWithinIdle(&config);
    if (absl::Status v = config.Validate(); !v.ok()) {
      SendReject(s, src, m, absl::StrCat("unsupported parameters: ", v.message()), received, true);
      return;
    }
    auto c = std::make_unique<Conn>();
    c->is_server = true;
    c->local_cid = NewCid();
    c->peer_cid = m.client_cid;
    c->client_cid = m.client_cid;
    c->peer = src;
    c->sockets = {s.id};
    c->peer_addrs.assign(config.flows, src);
    ConnectionIds ids;
    ids.local = c->local_cid;
    ids.peer = c->peer_cid;
    ids.peer_recv_window = m.params.recv_window;
    c->conn = std::make_unique<Connection>(config, ids, rng_.Next(), now);
    ConnectionInfo info;
    info.config = config;
    info.local_id = ids.local;
    info.peer_id = ids.peer;
    info.local_address = s.udp->local_address().ToString();
    info.peer_address = src.ToString();
    info.peer_app_data = m.app_data;
    info.is_server = true;
    c->handle = std::make_shared<ConnectionHandle>(owner_, std::move(info));
    HandshakeMessage acc;
    acc.kind = HandshakeKind::kAccept;
    acc.client_cid = m.client_cid;
    acc.server_cid = c->local_cid;
    acc.params.segment = static_cast<uint32_t>(config.segment);
    acc.params.max_datagram = static_cast<uint32_t>(config.MaxDatagramSize());
    acc.params.recv_window = config.recv_window;
    acc.params.max_inflight_messages = config.max_inflight_messages;
    acc.params.flows = static_cast<uint16_t>(config.flows);
    acc.params.idle_timeout_ms = static_cast<uint32_t>(config.idle_timeout.ns() / 1000000);
    absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(acc);
    if (!pkt.ok()) return;
    c->accept_packet = *std::move(pkt);
    c->confirmed = false;
    c->confirm_deadline = now + opt_.cookie_lifetime;
    c->accept_backoff = Duration::Milliseconds(200);
    c->next_accept_resend = now + c->accept_backoff;
    c->has_on_accept = static_cast<bool>(lo.on_accept);
    c->next_timeout = c->conn->NextTimeout();
    Conn& ref = *c;
    handle_index_[ref.handle.get()] = ref.local_cid;
    hello_index_[key] = ref.local_cid;
    conns_[ref.local_cid] = std::move(c);
    ++counters_.connections_accepted;
    SendHandshake(s, src, ref.accept_packet, received, true);
    if (lo.on_accept) {
      lo.on_accept(ref.handle);
      ApplyOps(ref);  // what the callback queued applies before any data arrives
    }
  }

  void SendRetry(Socket& s, const net::SocketAddress& src, const HandshakeMessage& m,
                 size_t received, Time now) {
    HandshakeMessage r;
    r.kind = HandshakeKind::kRetry;
    r.client_cid = m.client_cid;
    r.cookie = minter_.Mint(now, src, m.client_cid, m.version);
    absl::StatusOr<std::vector<uint8_t>> p = BuildHandshakePacket(r);
    if (!p.ok()) return;
    ++counters_.retries_sent;
    SendHandshake(s, src, *p, received, /*validated=*/false);
  }

  void ConfirmServerConn(Conn& c) {
    if (c.confirmed) return;
    c.confirmed = true;
    c.next_accept_resend = Time::Infinite();
    c.confirm_deadline = Time::Infinite();
    if (!c.has_on_accept && !c.queued_for_accept) {
      c.queued_for_accept = true;
      std::lock_guard<std::mutex> l(accept_mu_);
      accept_queue_.push_back(c.handle);
      accept_cv_.notify_all();
    }
  }

  // ---- client side of the handshake ----

  void StartConnect(const net::SocketAddress& server, ConnectOptions co,
                    std::shared_ptr<ConnectResult> result) {
    const Time now = Now();
    auto p = std::make_unique<Pending>();
    p->cid = NewCid();
    p->server = server;
    p->result = result;
    p->version = co.protocol_version != 0 ? co.protocol_version : kProtocolVersion;
    p->deadline = now + co.timeout;
    p->backoff = std::max(co.config.initial_rtt * 2, Duration::Milliseconds(100));
    p->next_resend = now + p->backoff;
    const uint32_t flows = std::max<uint32_t>(1, co.config.flows);
    net::SocketOptions so;
    so.recv_buffer = so.send_buffer = SocketBufferFor(opt_, co.config);
    so.gso = opt_.gso;
    so.gro = opt_.gro;
    absl::StatusOr<net::SocketAddress> any =
        net::SocketAddress::FromNumeric(server.family() == AF_INET6 ? "::" : "0.0.0.0", 0);
    for (uint32_t f = 0; f < flows; ++f) {
      absl::StatusOr<uint32_t> id = OpenSocket(*any, server, so);
      if (!id.ok()) {
        for (uint32_t sid : p->sockets) CloseSocket(sid);
        Complete(result, id.status());
        return;
      }
      sockets_[*id]->owner_cid = p->cid;
      p->sockets.push_back(*id);
    }
    p->opts = std::move(co);
    Pending& ref = *p;
    pending_[p->cid] = std::move(p);
    SendHello(ref);
  }

  void SendHello(Pending& p) {
    HandshakeMessage h;
    h.kind = HandshakeKind::kHello;
    h.version = p.version;
    h.client_cid = p.cid;
    const TransportConfig& c = p.opts.config;
    h.params.segment = static_cast<uint32_t>(c.segment);
    h.params.max_datagram = static_cast<uint32_t>(c.MaxDatagramSize());
    h.params.recv_window = c.recv_window;
    h.params.max_inflight_messages = c.max_inflight_messages;
    h.params.flows = static_cast<uint16_t>(std::min<uint32_t>(c.flows, 65535));
    h.params.idle_timeout_ms = static_cast<uint32_t>(c.idle_timeout.ns() / 1000000);
    h.cookie = p.cookie;
    h.app_data = p.opts.app_data;
    absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(h);
    if (!pkt.ok()) {
      FailPending(p.cid, pkt.status());
      return;
    }
    p.hello = *std::move(pkt);
    Socket* s = FindSocket(p.sockets[0]);
    if (s != nullptr) SendHandshake(*s, p.server, p.hello, 0, /*validated=*/true);
  }

  void Complete(const std::shared_ptr<ConnectResult>& r,
                absl::StatusOr<std::shared_ptr<ConnectionHandle>> v) {
    std::lock_guard<std::mutex> l(r->mu);
    r->value = std::move(v);
    r->done = true;
    r->cv.notify_all();
  }

  void FailPending(uint64_t cid, absl::Status error) {
    auto it = pending_.find(cid);
    if (it == pending_.end()) return;
    std::unique_ptr<Pending> p = std::move(it->second);
    pending_.erase(it);
    for (uint32_t sid : p->sockets) CloseSocket(sid);
    Complete(p->result, std::move(error));
  }

  void ClientOnServerMessage(Socket& s, const HandshakeMessage& m, Time now) {
    auto it = pending_.find(m.client_cid);
    if (it == pending_.end()) {
      // A repeated Accept for an established connection: our Confirm was lost.
      auto c = conns_.find(m.client_cid);
      if (m.kind == HandshakeKind::kAccept && c != conns_.end() && !c->second->is_server &&
          c->second->peer_cid == m.server_cid) {
        SendConfirm(*c->second);
      }
      return;
    }
    Pending& p = *it->second;
    if (s.owner_cid != p.cid) return;
    const std::string server = p.server.ToString();
    if (m.version != p.version) {
      FailPending(p.cid, absl::FailedPreconditionError(
                             absl::StrCat("version mismatch: server ", server,
                                          " speaks longhaul protocol "
                                          "version ",
                                          m.version, ", this client speaks ", p.version)));
      return;
    }
    switch (m.kind) {
      case HandshakeKind::kRetry:
        p.heard = true;
        if (++p.retries > kMaxRetries) {
          FailPending(p.cid, absl::UnavailableError(
                                 absl::StrCat("server ", server, " kept answering with Retry (",
                                              kMaxRetries, " times); giving up")));
          return;
        }
        p.cookie = m.cookie;
        p.next_resend = now + p.backoff;
        SendHello(p);
        return;
      case HandshakeKind::kReject:
        FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                               "server ", server, " rejected the connection: ", m.reason)));
        return;
      case HandshakeKind::kAccept:
        ClientEstablish(p, m, now);
        return;
      default:
        return;
    }
  }

  void ClientEstablish(Pending& p, const HandshakeMessage& m, Time now) {
    TransportConfig config = p.opts.config;
    config.max_inflight_messages = m.params.max_inflight_messages;
    if (m.params.idle_timeout_ms > 0) {
      config.idle_timeout = Duration::Milliseconds(m.params.idle_timeout_ms);
    }
    config.flows = std::max<uint32_t>(1, std::min<uint32_t>(config.flows, m.params.flows));
    KeepAliveWithinIdle(&config);
    if (absl::Status v = config.Validate(); !v.ok()) {
      FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                             "server ", p.server.ToString(),
                             " negotiated parameters this client cannot use: ", v.message())));
      return;
    }
    std::unique_ptr<Pending> owned = std::move(pending_[p.cid]);
    pending_.erase(p.cid);
    auto c = std::make_unique<Conn>();
    c->is_server = false;
    c->local_cid = owned->cid;
    c->peer_cid = m.server_cid;
    c->peer = owned->server;
    // Sockets beyond the negotiated flow count are not needed.
    while (owned->sockets.size() > config.flows) {
      CloseSocket(owned->sockets.back());
      owned->sockets.pop_back();
    }
    c->sockets = owned->sockets;
    for (uint32_t sid : c->sockets) sockets_[sid]->owner_cid = c->local_cid;
    ConnectionIds ids;
    ids.local = c->local_cid;
    ids.peer = c->peer_cid;
    ids.peer_recv_window = m.params.recv_window;
    c->conn = std::make_unique<Connection>(config, ids, rng_.Next(), now);
    ConnectionInfo info;
    info.config = config;
    info.local_id = ids.local;
    info.peer_id = ids.peer;
    info.local_address = sockets_[c->sockets[0]]->udp->local_address().ToString();
    info.peer_address = owned->server.ToString();
    info.peer_app_data = m.app_data;
    info.is_server = false;
    c->handle = std::make_shared<ConnectionHandle>(owner_, std::move(info));
    if (owned->opts.callback) c->handle->SetCallback(owned->opts.callback);
    c->next_timeout = c->conn->NextTimeout();
    Conn& ref = *c;
    handle_index_[ref.handle.get()] = ref.local_cid;
    conns_[ref.local_cid] = std::move(c);
    SendConfirm(ref);
    bool abandoned;
    {
      std::lock_guard<std::mutex> l(owned->result->mu);
      abandoned = owned->result->abandoned;
    }
    if (abandoned) {
      ref.conn->Close(CloseCode::kApplication, "client gave up waiting for the handshake");
      ref.next_timeout = Time::Zero();
    }
    Complete(owned->result, ref.handle);
  }

  void SendConfirm(Conn& c) {
    HandshakeMessage m;
    m.kind = HandshakeKind::kConfirm;
    m.client_cid = c.local_cid;
    m.server_cid = c.peer_cid;
    absl::StatusOr<std::vector<uint8_t>> p = BuildHandshakePacket(m);
    if (!p.ok()) return;
    Socket* s = FindSocket(c.sockets[0]);
    if (s != nullptr) SendHandshake(*s, c.peer, *p, 0, true);
  }

  void RunHandshakeTimers(Time now) {
    std::vector<uint64_t> expired;
    for (auto& [cid, p] : pending_) {
      if (now >= p->deadline) {
        expired.push_back(cid);
      } else if (now >= p->next_resend) {
        p->backoff = std::min(p->backoff * 2, Duration::Seconds(1));
        p->next_resend = now + p->backoff;
        Socket* s = FindSocket(p->sockets[0]);
        if (s != nullptr) SendHandshake(*s, p->server, p->hello, 0, true);
      }
    }
    for (uint64_t cid : expired) {
      Pending& p = *pending_[cid];
      const std::string what =
          p.heard ? absl::StrCat("server ", p.server.ToString(),
                                 " answered but did not accept the connection within ",
                                 FormatDuration(p.opts.timeout))
                  : absl::StrCat("no answer from ", p.server.ToString(), " within ",
                                 FormatDuration(p.opts.timeout),
                                 " (is a longhaul server listening there?)");
      FailPending(cid, absl::DeadlineExceededError(what));
    }
    for (auto& [cid, c] : conns_) {
      if (c->confirmed) continue;
      if (now >= c->confirm_deadline) {
        c->confirmed = true;  // stop resending
        c->conn->Close(CloseCode::kProtocolViolation,
                       "handshake not confirmed by the client in time");
        c->next_timeout = Time::Zero();
      } else if (now >= c->next_accept_resend) {
        c->accept_backoff = std::min(c->accept_backoff * 2, Duration::Seconds(1));
        c->next_accept_resend = now + c->accept_backoff;
        Socket* s = FindSocket(c->sockets[0]);
        if (s != nullptr) SendHandshake(*s, c->peer, c->accept_packet, 0, true);
      }
    }
  }

  uint64_t NewCid() {
    while (true) {
      uint64_t cid = rng_.Next();
      if (cid != 0 && !conns_.contains(cid) && !pending_.contains(cid)) return cid;
    }
  }

  // ---- application operations ----

  void ApplyDirty() {
    std::vector<ConnectionHandle*> list;
    {
      std::lock_guard<std::mutex> l(dirty_mu_);
      list.swap(dirty_);
    }
    list.insert(list.end(), local_dirty_.begin(), local_dirty_.end());
    local_dirty_.clear();
    for (ConnectionHandle* h : list) {
      auto it = handle_index_.find(h);
      if (it == handle_index_.end()) continue;
      auto c = conns_.find(it->second);
      if (c == conns_.end()) continue;
      ApplyOps(*c->second);
    }
  }

  void ApplyOps(Conn& c) {
    ops_.clear();
    c.handle->TakeOps(&ops_);
    std::vector<Event> failed;
    for (ConnectionHandle::Op& op : ops_) {
      switch (op.kind) {
        case ConnectionHandle::Op::Kind::kSend: {
          const uint64_t size = op.send.size;
          absl::StatusOr<uint64_t> id = c.conn->Send(std::move(op.send), op.tag);
          if (!id.ok()) {
            Event e;
            e.type = Event::Type::kSendComplete;
            e.message_id = op.expected_id;
            e.tag = op.tag;
            e.size = size;
            e.status = absl::CancelledError(id.status().message());
            failed.push_back(std::move(e));
          } else {
            DCHECK_EQ(*id, op.expected_id);
          }
          break;
        }
        case ConnectionHandle::Op::Kind::kPost:
          c.conn->PostReceive(op.data, op.capacity, op.tag).IgnoreError();
          break;
        case ConnectionHandle::Op::Kind::kReturn:
          c.conn->ReturnBuffer(std::move(op.owned));
          break;
        case ConnectionHandle::Op::Kind::kClose:
          c.conn->Close(op.code, std::move(op.reason));
          break;
      }
    }
    ops_.clear();
    if (!failed.empty()) c.handle->Deliver(&failed);
    c.handle->FlushToCallback();
    c.next_timeout = c.conn->NextTimeout();
  }

  // ---- transmit path ----

  bool ConnBlocked(const Conn& c) {
    for (uint32_t sid : c.sockets) {
      auto it = sockets_.find(sid);
      if (it != sockets_.end() && it->second->blocked) return true;
    }
    return false;
  }

  void Transmit(Time now) {
    due_.clear();
    for (auto& [cid, c] : conns_) {
      if (c->next_timeout <= now && !ConnBlocked(*c)) due_.push_back(c.get());
    }
    if (due_.empty()) return;
    for (Conn* c : due_) {
      c->conn->OnTimeout(now);
    }
    const size_t slots = arena_.size() / kSlotSize;
    std::vector<Conn*> active = due_;
    while (!active.empty()) {
      const size_t quota = std::max<size_t>(4, slots / active.size());
      std::vector<Conn*> more;
      for (Conn* c : active) {
        if (ConnBlocked(*c)) continue;
        size_t k = 0;
        while (k < quota && tx_count_ < slots) {
          uint8_t* slot = &arena_[tx_count_ * kSlotSize];
          TransmitInfo info;
          size_t n = c->conn->PollTransmit(now, slot, kSlotSize, &info);
          if (n == 0) break;
          TxSlot& t = tx_[tx_count_];
          t.len = static_cast<uint32_t>(n);
          const uint32_t flow = info.flow < c->sockets.size() ? info.flow : 0;
          if (c->is_server) {
            t.socket = c->sockets[0];
            t.dest = &c->peer_addrs[info.flow < c->peer_addrs.size() ? info.flow : 0];
          } else {
            t.socket = c->sockets[flow];
            t.dest = nullptr;
          }
          t.ecn = info.ecn;
          ++tx_count_;
          ++k;
        }
        if (k == quota || (tx_count_ >= slots && k > 0)) more.push_back(c);
        if (tx_count_ >= slots) {
          FlushArena();
        }
      }
      FlushArena();
      active.swap(more);
    }
    for (Conn* c : due_) {
      c->next_timeout = c->conn->NextTimeout();
      if (c->next_timeout <= now && !ConnBlocked(*c) && !c->conn->closed()) {
        // Nothing more could be sent at `now` although the deadline has passed: wait a
        // little (new input re-evaluates it at once) rather than spin on it.
        ++counters_.stalled_deadlines;
        c->next_timeout = now + kStalledDeadlineWait;
      }
    }
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
        d.dest = tx_[i].dest;
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
      s.blocked = true;
      Hold(s, batch.subspan(taken));
      ArmWrite(s);
    }
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
    s.blocked = false;
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
        s.blocked = true;
        ArmWrite(s);
        return;
      }
    }
  }

  void OnSendError(Socket& s, const absl::Status& error) {
    if (absl::IsUnavailable(error) && s.owner_cid != 0) {
      OnSocketError(s.id, error);
      return;
    }
    rate_log_.Warn(
        absl::StrCat("send-", error.code()), Now(),
        absl::StrCat("UDP socket ", s.udp->local_address().ToString(), ": ", error.message()));
  }

  // ---- events and teardown ----

  void DeliverAll(Time now) {
    for (auto& [cid, c] : conns_) {
      events_.clear();
      Event e;
      while (c->conn->PollEvent(&e)) events_.push_back(std::move(e));
      const bool closed = c->conn->closed();
      if (closed || now - c->last_publish >= kStatsPublishPeriod) {
        c->handle->PublishStats(c->conn->stats(), c->conn->debug_state());
        c->last_publish = now;
      }
      if (!events_.empty()) c->handle->Deliver(&events_);
      if (closed) c->closed_seen = true;
    }
  }

  void Reap() {
    std::vector<uint64_t> dead;
    for (auto& [cid, c] : conns_) {
      if (c->closed_seen) dead.push_back(cid);
    }
    for (uint64_t cid : dead) {
      std::unique_ptr<Conn> c = std::move(conns_[cid]);
      conns_.erase(cid);
      handle_index_.erase(c->handle.get());
      if (c->is_server) hello_index_.erase(HelloKey{c->client_cid, c->peer});
      c->handle->Detach(c->handle->status());
      if (!c->is_server) {
        for (uint32_t sid : c->sockets) CloseSocket(sid);
      }
    }
  }

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
    s.connections_active = conns_.size();
    s.recv_buffer = last_socket_info_.recv_buffer;
    s.send_buffer = last_socket_info_.send_buffer;
    s.gso = last_socket_info_.gso;
    s.gro = last_socket_info_.gro;
    std::lock_guard<std::mutex> l(stats_mu_);
    published_ = s;
  }

  void DoShutdown() {
    const Time now = Now();
    std::vector<uint64_t> pend;
    for (auto& [cid, p] : pending_) pend.push_back(cid);
    for (uint64_t cid : pend) FailPending(cid, absl::CancelledError("endpoint is shut down"));
    ApplyDirty();
    for (auto& [cid, c] : conns_) {
      if (!c->conn->closed()) c->conn->Close(CloseCode::kApplication, "endpoint closed");
      c->next_timeout = Time::Zero();
    }
    Transmit(now);  // the CLOSE packets
    DeliverAll(now);
    for (auto& [cid, c] : conns_) {
      c->handle->Detach(absl::CancelledError("endpoint closed"));
    }
    PublishDriverStats(now);
    conns_.clear();
    handle_index_.clear();
    {
      std::lock_guard<std::mutex> l(accept_mu_);
      for (auto& h : accept_queue_) h->Detach(absl::CancelledError("endpoint closed"));
      accept_queue_.clear();
    }
    {
      std::lock_guard<std::mutex> l(post_mu_);
      stopped_ = true;
    }
    {
      std::lock_guard<std::mutex> l(accept_mu_);
      accept_cv_.notify_all();
    }
    sockets_.clear();
    boost::system::error_code ec;
    timer_.cancel(ec);
  }

  struct HelloKey {
    uint64_t cid;
    net::SocketAddress addr;
    bool operator==(const HelloKey& o) const { return cid == o.cid && addr == o.addr; }
    template <typename H>
    friend H AbslHashValue(H h, const HelloKey& k) {
      return H::combine(std::move(h), k.cid, k.addr);
    }
  };

  const EndpointOptions opt_;
  UdpDriver* owner_ = nullptr;
  asio::io_context io_;
  asio::steady_timer timer_;
  bool timer_armed_ = false;
  Time timer_at_ = Time::Infinite();
  uint64_t timer_gen_ = 0;
  std::thread thread_;
  std::atomic<std::thread::id> driver_thread_id_{};
  CookieMinter minter_;
  Rng rng_;
  RateLimitedLog rate_log_;

  std::unordered_map<uint32_t, std::unique_ptr<Socket>> sockets_;
  uint32_t next_socket_id_ = 1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Conn>> conns_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Pending>> pending_;
  absl::flat_hash_map<ConnectionHandle*, uint64_t> handle_index_;
  absl::flat_hash_map<HelloKey, uint64_t> hello_index_;

  std::unique_ptr<net::RxBatch> rx_;
  std::vector<uint8_t> arena_;
  TxSlot tx_[1024];
  size_t tx_count_ = 0;
  std::vector<uint32_t> sock_order_;
  std::vector<uint32_t> pending_reads_;
  std::vector<net::TxDatagram> batch_;
  std::vector<Conn*> due_;
  std::vector<ConnectionHandle::Op> ops_;
  std::vector<Event> events_;

  // Cross-thread wake-ups.
  std::mutex dirty_mu_;
  std::vector<ConnectionHandle*> dirty_;
  std::atomic<bool> wake_posted_{false};
  std::vector<ConnectionHandle*> local_dirty_;  // driver thread only

  std::mutex post_mu_;
  bool stop_requested_ = false;
  bool stopped_ = false;

  std::mutex accept_mu_;
  std::condition_variable accept_cv_;
  std::deque<std::shared_ptr<ConnectionHandle>> accept_queue_;

  EndpointStats counters_;
  std::vector<std::vector<uint8_t>> foreign_replies_;  // OnForeignDatagram's scratch
  net::SocketInfo last_socket_info_;
  uint64_t closed_send_syscalls_ = 0;
  uint64_t closed_recv_syscalls_ = 0;
  uint64_t closed_gso_ = 0;
  uint64_t closed_gro_ = 0;
  Time last_stats_publish_;
  mutable std::mutex stats_mu_;
  EndpointStats published_;
  bool warned_rmem_ = false;
  bool warned_wmem_ = false;
};

// ---- UdpDriver ----

absl::StatusOr<std::unique_ptr<UdpDriver>> UdpDriver::Create(const EndpointOptions& options) {
  if (options.tx_batch == 0 || options.tx_batch > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("tx_batch=", options.tx_batch, " is outside [1, 1024]"));
  }
  if (options.rx_batch == 0 || options.rx_batch > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("rx_batch=", options.rx_batch, " is outside [1, 1024]"));
  }
  if (options.spin < Duration::Zero() || options.spin > Duration::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spin=", FormatDuration(options.spin), " is outside [0, 10ms]"));
  }
  if (options.cookie_lifetime < Duration::Seconds(1)) {
    return absl::InvalidArgumentError("cookie_lifetime must be at least 1s");
  }
  std::unique_ptr<UdpDriver> d(new UdpDriver(std::make_unique<UdpDriverImpl>(options)));
  d->impl_->Start(d.get());
  return d;
}

UdpDriver::UdpDriver(std::unique_ptr<UdpDriverImpl> impl) : impl_(std::move(impl)) {}

UdpDriver::~UdpDriver() { Shutdown(); }

absl::StatusOr<net::SocketAddress> UdpDriver::Listen(const net::SocketAddress& bind,
                                                     ListenOptions options) {
  return impl_->Listen(bind, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> UdpDriver::Connect(
    const net::SocketAddress& server, ConnectOptions options) {
  return impl_->Connect(server, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> UdpDriver::Accept(Duration timeout) {
  return impl_->Accept(timeout);
}

void UdpDriver::Shutdown() { impl_->Shutdown(); }

EndpointStats UdpDriver::stats() const { return impl_->stats(); }

void UdpDriver::Wake(ConnectionHandle* handle) { impl_->Wake(handle); }

}  // namespace longhaul::udp
