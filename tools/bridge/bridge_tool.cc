// The client and server loops of longhaul-bridge. Everything runs on one io_context
// thread, except the longhaul engines' threads (EndpointOptions::engines of them, which
// post connection events and accepted connections here) and, on the client, one
// short-lived thread per connection attempt (Endpoint::Connect blocks for the handshake).
//
// Threading, and why there are no locks: with several engines, accept callbacks, the
// server's Hello policy and connection events run on several engine threads at once.
// None of them touches the bridge's state: the policy reads only the options (const)
// and `draining_` (atomic); on_accept, the event callbacks (Session::EventCallbackFor)
// and the connect threads only asio::post to the io thread, which alone owns the
// sessions, streams, budgets and metrics. The endpoint's own methods (Connect,
// engine_stats) are thread-safe.

#include "tools/bridge/bridge_tool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/steady_timer.hpp"
#include "glog/logging.h"
#include "tools/bridge/metrics_server.h"
#include "tools/common/path_memory.h"
#include "tools/common/security_flags.h"
#include "transport/api/endpoint.h"
#include "transport/base/clock.h"
#include "transport/base/status.h"

namespace longhaul::bridge {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

void Print(const std::string& line) { std::cout << line << std::endl; }

SessionSnapshot Snapshot(const Session& s, const std::string& connection) {
  SessionSnapshot snap;
  snap.peer = s.connection()->info().peer_address;
  snap.connection = connection;
  snap.engine = s.connection()->info().engine;
  snap.streams_open = s.open_streams();
  snap.stats = s.connection()->stats();
  snap.debug = s.connection()->debug_state();
  return snap;
}

// Closes a TCP connection with an RST: the application sees a reset, not a clean end.
void ResetSocket(tcp::socket& s) {
  boost::system::error_code ec;
  s.set_option(asio::socket_base::linger(true, 0), ec);
  s.close(ec);
}

absl::StatusOr<std::unique_ptr<tcp::acceptor>> ListenTcp(asio::io_context& io, const Forward& f) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(f.host, std::to_string(f.port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return absl::NotFoundError(absl::StrCat(f.origin, ": cannot resolve '", f.host, "': ",
                                            ec ? ec.message() : "no address"));
  }
  const tcp::endpoint ep = *results.begin();
  auto a = std::make_unique<tcp::acceptor>(io);
  a->open(ep.protocol(), ec);
  if (!ec) a->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a->bind(ep, ec);
  if (!ec) a->listen(1024, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", f.host, ":", f.port,
                                               " (forward '", f.name, "', ", f.origin,
                                               "): ", ec.message()));
  }
  return a;
}

// Metrics endpoint, signals and the drain deadline: what both modes share.
class Runner {
 public:
  Runner(const BridgeOptions& o, const char* mode) : o_(o), mode_(mode), signals_(io_, SIGINT, SIGTERM),
                                                      drain_timer_(io_) {}

  // Ignores SIGPIPE (a TCP peer may close while a write is under way) and creates the
  // longhaul endpoint; on failure prints the error and returns null.
  std::unique_ptr<Endpoint> StartEndpoint() {
    std::signal(SIGPIPE, SIG_IGN);
    absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(o_.endpoint);
    if (!ep.ok()) {
      std::cerr << "longhaul-bridge: error - " << ep.status().message() << std::endl;
      return nullptr;
    }
    return *std::move(ep);
  }

  // `ep` gives the per-engine series (Endpoint::engine_stats, safe from this thread).
  bool StartMetrics(const Endpoint* ep, std::function<std::vector<SessionSnapshot>()> sessions) {
    if (o_.metrics_host.empty()) return true;
    auto m = MetricsServer::Start(
        io_, o_.metrics_host, o_.metrics_port, [this, ep, sessions = std::move(sessions)] {
          const double up = std::chrono::duration<double>(Clock::now() - start_).count();
          std::vector<EngineSnapshot> engines;
          for (const EndpointStats& e : ep->engine_stats()) {
            engines.push_back({.connections = e.connections_active,
                               .bytes_sent = e.bytes_sent,
                               .bytes_received = e.bytes_received,
                               .cpu_s = e.cpu_s});
          }
          return FormatMetrics(mode_, up, metrics_, sessions(), engines);
        });
    if (!m.ok()) {
      std::cerr << "longhaul-bridge: error - " << m.status().message() << std::endl;
      return false;
    }
    metrics_server_ = *std::move(m);
    Print(absl::StrCat("metrics: http://", o_.metrics_host, ":", metrics_server_->port(), "/metrics"));
    return true;
  }

  // on_drain runs at the first signal; a second signal or the drain timeout runs
  // on_abort.
  void OnSignals(std::function<void()> on_drain, std::function<void()> on_abort) {
    signals_.async_wait([this, on_drain, on_abort](boost::system::error_code ec, int sig) {
      if (ec) return;
      LOG(INFO) << "event=drain signal=" << sig;
      if (metrics_server_) metrics_server_->Stop();
      on_drain();  // first: the listeners close before anyone reads the line below
      Print(absl::StrCat("draining (signal ", sig, "): no new connections; exiting when the open ",
                         "ones end, at most ", o_.drain_timeout.count(), " ms"));
      drain_timer_.expires_after(o_.drain_timeout);
      drain_timer_.async_wait([on_abort](boost::system::error_code ec) {
        if (!ec) on_abort();
      });
      signals_.async_wait([on_abort](boost::system::error_code ec, int) {
        if (!ec) on_abort();
      });
    });
  }

  void Stop() {
    signals_.cancel();
    drain_timer_.cancel();
    if (metrics_server_) metrics_server_->Stop();
    io_.stop();
  }

  asio::io_context io_;
  Metrics metrics_;

 private:
  const BridgeOptions& o_;
  std::string mode_;
  asio::signal_set signals_;
  asio::steady_timer drain_timer_;
  std::unique_ptr<MetricsServer> metrics_server_;
  Clock::time_point start_ = Clock::now();
};

// ---- client ----

// The client keeps --connections longhaul connections ("links") to the server bridge;
// Endpoint::Connect places them on its engines in turn. Each TCP connection is carried
// as a stream on exactly one link: the one with the fewest open streams now, ties taken
// in turn, so long streams spread evenly and short ones one after another still use
// every link. A link reconnects on its own with backoff, as the single connection did:
// when it is lost its streams are reset (session_lost) while new TCP connections go to
// the links that are up, and wait (--connect_wait) only while none is. A drain drains
// every link; the client exits when all have closed. All links share one budget.
class Client {
 public:
  explicit Client(const BridgeOptions& o)
      : o_(o),
        r_(o, "client"),
        // The receive memory (--memory) and what is sent but not yet acknowledged
        // (--send_memory), for every session of this client.
        budget_(std::make_shared<Budget>(o.session.memory + o.session.send_memory, ~0ull)),
        wait_timer_(r_.io_) {
    for (size_t i = 0; i < std::max<size_t>(1, o.connections); ++i) {
      links_.push_back(std::make_unique<Link>(i, r_.io_));
    }
  }

  int Run() {
    ep_ = r_.StartEndpoint();
    if (ep_ == nullptr) return 1;
    if (!o_.path_memory.empty() && o_.config.cc == CongestionControl::kBbr) {
      paths_ = PathMemory::LoadOrWarn(o_.path_memory);
    }
    for (const Forward& f : o_.forwards) {
      absl::StatusOr<std::unique_ptr<tcp::acceptor>> a = ListenTcp(r_.io_, f);
      if (!a.ok()) {
        std::cerr << "longhaul-bridge: error - " << a.status().message() << std::endl;
        return 1;
      }
      Print(absl::StrCat("forward ", f.name, ": tcp ", f.host, ":", (*a)->local_endpoint().port(),
                         " -> longhaul ", o_.peer_host, ":", o_.peer_port));
      acceptors_.push_back({std::move(*a), f.name});
    }
    Print(SecuritySettingsLine(o_.keys));
    Print(absl::StrCat("connections: ", links_.size(), " over ", ep_->stats().engines,
                       " engine(s)"));
    r_.metrics_.connections_configured = links_.size();
    if (!r_.StartMetrics(ep_.get(), [this] {
          std::vector<SessionSnapshot> v;
          r_.metrics_.memory_charged = budget_->memory_used();
          r_.metrics_.memory_limit = budget_->memory_limit();
          for (const auto& l : links_) {
            if (l->session && !l->session->closed()) {
              v.push_back(Snapshot(*l->session, std::to_string(l->index)));
            }
          }
          for (const auto& [s, label] : old_sessions_) {
            if (!s->closed()) v.push_back(Snapshot(*s, label));
          }
          return v;
        })) {
      return 1;
    }
    for (size_t i = 0; i < acceptors_.size(); ++i) Accept(i);
    r_.OnSignals([this] { Drain(); }, [this] { Abort(); });
    for (const auto& l : links_) StartConnect(*l);
    r_.io_.run();
    for (const auto& l : links_) {
      if (l->connector.joinable()) l->connector.join();
    }
    ep_->Close();
    return exit_status_;
  }

 private:
  struct Waiting {
    tcp::socket socket;
    std::string forward;
    Clock::time_point deadline;
  };

  // One of the longhaul connections to the server and its reconnection state.
  struct Link {
    Link(size_t i, asio::io_context& io) : index(i), retry_timer(io) {}
    const size_t index;
    std::shared_ptr<Session> session;  // takes new streams; null while down
    std::thread connector;             // the attempt under way (Connect blocks)
    asio::steady_timer retry_timer;
    bool connecting = false, retry_pending = false, ever_connected = false;
    int attempt = 0;  // failed attempts (or short sessions) in a row: the backoff
    Clock::time_point connected_at;
  };

  void Accept(size_t i) {
    acceptors_[i].first->async_accept([this, i](boost::system::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || draining_) return;
      if (!ec) OnTcp(std::move(s), acceptors_[i].second);
      Accept(i);
    });
  }

  // A session that lasted this long ends the backoff: the next reconnects at once.
  static constexpr std::chrono::seconds kStableSession{1};

  static bool Up(const Link& l) {
    return l.session && !l.session->closed() && !l.session->draining() &&
           !l.session->connection()->closed();  // ended, its event not yet here
  }

  // A link whose last attempts failed or whose last session ended at once (a server
  // whose --sessions_per_key refused it) gets new streams only when no other link is up,
  // until its session has lasted kStableSession: a stream is not lost to a refusal.
  static bool OnProbation(const Link& l) {
    return l.attempt > 0 && Clock::now() - l.connected_at < kStableSession;
  }

  // The link to carry a new stream: the fewest open streams, ties in turn from the link
  // after the last one chosen (links on probation only when no other is up); null when
  // no link is up.
  Session* PickSession() {
    for (const bool probation : {false, true}) {
      Session* best = nullptr;
      size_t best_index = 0;
      for (size_t j = 0; j < links_.size(); ++j) {
        const size_t i = (next_link_ + j) % links_.size();
        if (!Up(*links_[i]) || (!probation && OnProbation(*links_[i]))) continue;
        Session* s = links_[i]->session.get();
        if (best == nullptr || s->open_streams() < best->open_streams()) {
          best = s;
          best_index = i;
        }
      }
      if (best != nullptr) {
        next_link_ = best_index + 1;
        return best;
      }
    }
    return nullptr;
  }

  void OnTcp(tcp::socket s, const std::string& forward) {
    if (Session* session = PickSession()) {
      session->OpenStream(std::move(s), forward);
      return;
    }
    // No link is up now: the connection waits for one, a while.
    waiting_.push_back({std::move(s), forward, Clock::now() + o_.connect_wait});
    ArmWaitTimer();
    for (const auto& l : links_) {
      if (!l->connecting && !l->retry_pending) StartConnect(*l);
    }
  }

  void ArmWaitTimer() {
    if (wait_armed_ || waiting_.empty()) return;
    wait_armed_ = true;
    wait_timer_.expires_after(std::chrono::milliseconds(100));
    wait_timer_.async_wait([this](boost::system::error_code ec) {
      wait_armed_ = false;
      if (ec) return;
      const auto now = Clock::now();
      while (!waiting_.empty() && waiting_.front().deadline <= now) {
        ++r_.metrics_.streams_reset[{"peer_unreachable", "local"}];
        LOG(WARNING) << "event=stream_refused forward=" << waiting_.front().forward
                     << " reason=peer_unreachable detail=\"no connection to " << o_.peer_host
                     << ":" << o_.peer_port << " within " << o_.connect_wait.count() << " ms\"";
        ResetSocket(waiting_.front().socket);
        waiting_.pop_front();
      }
      ArmWaitTimer();
    });
  }

  void StartConnect(Link& l) {
    if (draining_ || l.connecting || Up(l)) return;
    l.connecting = true;
    if (l.connector.joinable()) l.connector.join();
    ConnectOptions co;
    co.config = o_.config;
    if (paths_ && o_.path_memory_applies) {
      const int64_t now_s = RealtimeNs() / 1000000000;
      if (std::optional<PathRecord> r = paths_->Find(PathPeer(), now_s)) {
        if (std::optional<Bandwidth> start = ApplyPathRecord(*r, links_.size(), &co.config)) {
          LOG(INFO) << "event=path_memory peer=" << PathPeer() << " connection=" << l.index
                    << " initial_rate_bps=" << static_cast<int64_t>(start->bps())
                    << " remembered_bps=" << static_cast<int64_t>(r->rate.bps())
                    << " age_s=" << now_s - r->saved_unix_s;
        }
      }
    }
    co.app_data = kBridgeAppData;
    co.timeout = Duration::Milliseconds(o_.connect_timeout.count());
    co.engine = static_cast<int>(l.index % 256);  // connection i on engine i, reconnects too
    Link* lp = &l;  // links_ outlives the io loop and the joined thread
    l.connector = std::thread([this, lp, co] {
      auto h = ep_->Connect(o_.peer_host, o_.peer_port, co);
      asio::post(r_.io_,
                 [this, lp, h = std::move(h)]() mutable { OnConnected(*lp, std::move(h)); });
    });
  }

  std::string PathPeer() const { return absl::StrCat(o_.peer_host, ":", o_.peer_port); }

  // Remembers what the links measured (their bandwidth estimates summed, their smallest
  // min RTT): when one closes and when the bridge drains.
  void RememberPath() {
    if (!paths_) return;
    std::vector<ConnectionDebugState> states;
    for (const auto& l : links_) {
      if (l->session && l->session->connection()) {
        states.push_back(l->session->connection()->debug_state());
      }
    }
    if (states.empty()) return;
    const int64_t now_s = RealtimeNs() / 1000000000;
    paths_->Remember(PathPeer(), PathRecordOf(states, now_s));
    if (absl::Status st = paths_->Save(); !st.ok()) LOG(WARNING) << st.message();
  }

  // The next attempt after the backoff: 200 ms doubling to --reconnect_max.
  std::chrono::milliseconds NextDelay(Link& l) {
    const auto delay = std::min<std::chrono::milliseconds>(
        o_.reconnect_max, std::chrono::milliseconds(200) * (1 << std::min(l.attempt, 10)));
    ++l.attempt;
    return delay;
  }

  void OnConnectFailed(Link& l, const absl::Status& status) {
    ++r_.metrics_.connect_failures;
    const auto delay = NextDelay(l);
    LOG(WARNING) << "event=connect_failed peer=" << o_.peer_host << ":" << o_.peer_port
                 << " connection=" << l.index << " detail=\"" << status.message()
                 << "\" retry_in_ms=" << delay.count();
    if (draining_) return MaybeFinish();
    RetryAfter(l, delay);
  }

  void RetryAfter(Link& l, std::chrono::milliseconds delay) {
    if (draining_ || l.retry_pending) return;
    l.retry_pending = true;
    l.retry_timer.expires_after(delay);
    l.retry_timer.async_wait([this, lp = &l](boost::system::error_code ec) {
      lp->retry_pending = false;
      if (!ec) StartConnect(*lp);
    });
  }

  void OnConnected(Link& l, absl::StatusOr<std::shared_ptr<ConnectionHandle>> h) {
    l.connecting = false;
    if (!h.ok()) return OnConnectFailed(l, h.status());
    if (draining_) {
      (*h)->Close();
      return MaybeFinish();
    }
    l.connected_at = Clock::now();
    if (l.ever_connected) ++r_.metrics_.reconnects;
    l.ever_connected = true;
    l.session = std::make_shared<Session>(r_.io_, o_.session, budget_, &r_.metrics_);
    l.session->Attach(*h);
    std::weak_ptr<Session> weak = l.session;
    Link* lp = &l;
    l.session->on_closed = [this, lp, weak](const absl::Status& st) {
      LOG(WARNING) << "event=session_closed peer=" << o_.peer_host << ":" << o_.peer_port
                   << " connection=" << lp->index << " detail=\""
                   << (st.ok() ? "closed" : st.message()) << "\"";
      asio::post(r_.io_, [this, lp, weak] {
        std::shared_ptr<Session> s = weak.lock();
        if (s && s == lp->session) {
          RememberPath();
          lp->session.reset();
          // At once after a session that lasted; with the backoff after one the server
          // ended straight away (e.g. its --sessions_per_key refused this connection),
          // so that a refusal does not become a busy loop of handshakes.
          if (Clock::now() - lp->connected_at >= kStableSession) {
            lp->attempt = 0;
            StartConnect(*lp);  // not while draining
          } else {
            RetryAfter(*lp, NextDelay(*lp));
          }
        } else if (s) {
          old_sessions_.erase(s);
        }
        MaybeFinish();
      });
    };
    // The server is going away: this link's open streams finish on this session, new
    // ones go to the other links or wait for this one's next session (the restarted
    // server, or another behind the same address).
    l.session->on_goaway = [this, lp, weak] {
      std::shared_ptr<Session> s = weak.lock();
      if (!s || s != lp->session) return;
      LOG(INFO) << "event=peer_draining peer=" << o_.peer_host << ":" << o_.peer_port
                << " connection=" << lp->index;
      old_sessions_[s] = absl::StrCat(lp->index, "-draining-", ++old_serial_);
      lp->session.reset();
      s->Drain();
      StartConnect(*lp);
    };
    Session::StartEvents(r_.io_, l.session);
    const ConnectionInfo& info = (*h)->info();
    LOG(INFO) << "event=session_open peer=" << info.peer_address << " connection=" << l.index
              << " engine=" << info.engine << " security=\"" << info.security << "\"";
    Print(absl::StrCat("connected to ", info.peer_address, " (",
                       ConnectionSecurityText(info, o_.keys), "), connection ", l.index + 1,
                       " of ", links_.size(), " on engine ", info.engine));
    while (!waiting_.empty()) {
      Session* s = PickSession();  // this link is up: never null
      if (s == nullptr) break;
      s->OpenStream(std::move(waiting_.front().socket), waiting_.front().forward);
      waiting_.pop_front();
    }
  }

  void Drain() {
    RememberPath();
    draining_ = true;
    for (auto& [a, name] : acceptors_) {
      boost::system::error_code ec;
      a->close(ec);
    }
    for (Waiting& w : waiting_) ResetSocket(w.socket);
    waiting_.clear();
    for (const auto& [s, label] : old_sessions_) s->Drain();
    for (const auto& l : links_) {
      l->retry_timer.cancel();
      // Closes when its streams end; on_closed then finishes.
      if (l->session && !l->session->closed()) l->session->Drain();
    }
    MaybeFinish();
  }

  // While draining: exits once no link has a session open or an attempt under way.
  void MaybeFinish() {
    if (!draining_ || !old_sessions_.empty()) return;
    for (const auto& l : links_) {
      if (l->connecting || (l->session && !l->session->closed())) return;
    }
    Finish();
  }

  void Abort() {
    LOG(WARNING) << "event=drain_abort";
    for (const auto& l : links_) {
      if (l->session && !l->session->closed()) l->session->Abort("client bridge shutting down");
    }
    for (const auto& [s, label] : old_sessions_) s->Abort("client bridge shutting down");
    exit_status_ = 0;
    Finish();
  }

  void Finish() { r_.Stop(); }

  const BridgeOptions& o_;
  Runner r_;
  std::shared_ptr<Budget> budget_;
  std::unique_ptr<Endpoint> ep_;
  std::optional<PathMemory> paths_;  // --path_memory, for cc=bbr
  std::vector<std::pair<std::unique_ptr<tcp::acceptor>, std::string>> acceptors_;
  std::vector<std::unique_ptr<Link>> links_;  // --connections of them
  size_t next_link_ = 0;                      // where PickSession's turn starts
  // Sessions the server is draining (GOAWAY): their streams finish; by metrics label.
  std::map<std::shared_ptr<Session>, std::string> old_sessions_;
  uint64_t old_serial_ = 0;
  std::deque<Waiting> waiting_;
  asio::steady_timer wait_timer_;
  bool wait_armed_ = false, draining_ = false;
  int exit_status_ = 0;
};

// ---- server ----

class Server {
 public:
  explicit Server(const BridgeOptions& o) : o_(o), r_(o, "server"), budgets_(o.limits) {}

  int Run() {
    ep_ = r_.StartEndpoint();
    if (ep_ == nullptr) return 1;
    SessionOptions so = o_.session;
    so.is_client = false;
    so.find_forward = [this](const std::string& name) -> const Forward* {
      for (const Forward& f : o_.forwards) {
        if (f.name == name) return &f;
      }
      return nullptr;
    };
    ListenOptions lo;
    lo.config = o_.config;
    lo.policy = [this](const HelloInfo& h) -> absl::StatusOr<TransportConfig> {
      if (h.app_data != kBridgeAppData) {
        return absl::FailedPreconditionError(absl::StrCat(
            "this is a longhaul-bridge server; the client is not a longhaul-bridge client "
            "(application data '", h.app_data.substr(0, 40), "')"));
      }
      if (draining_.load()) return absl::UnavailableError("server bridge is draining");
      TransportConfig c = o_.config;
      c.recv_window = std::min(c.recv_window, std::max<ByteCount>(h.recv_window, 1));
      // What the transport may hold of a session's messages before the bridge sees them
      // (partly received ones): all sessions of one key together, at most its budget.
      const uint64_t per_session =
          o_.limits.memory_per_key / std::max<uint64_t>(1, o_.limits.sessions_per_key);
      c.recv_window = std::min<ByteCount>(c.recv_window, per_session);
      LH_RETURN_IF_ERROR(c.Validate());
      return c;
    };
    // Both run on the engines' threads, several at once (see the top of this file): the
    // policy reads only const options and the atomic draining_; on_accept only posts.
    lo.on_accept = [this, so](std::shared_ptr<ConnectionHandle> h) {
      // Engine thread: hand the connection to the io thread; its events wait in the
      // handle until the session sets the callback.
      asio::post(r_.io_, [this, so, h] { Adopt(so, h); });
    };
    absl::StatusOr<uint16_t> port = ep_->Listen(o_.listen_host, o_.listen_port, lo);
    if (!port.ok()) {
      std::cerr << "longhaul-bridge: error - cannot listen on " << o_.listen_host << ":"
                << o_.listen_port << ": " << port.status().message() << std::endl;
      return 1;
    }
    Print(absl::StrCat("listening on longhaul ", o_.listen_host, ":", *port));
    Print(absl::StrCat("engines: ", ep_->stats().engines));
    for (const Forward& f : o_.forwards) {
      Print(absl::StrCat("forward ", f.name, ": -> tcp ", f.host, ":", f.port));
    }
    Print(SecuritySettingsLine(o_.keys));
    if (!r_.StartMetrics(ep_.get(), [this] {
          std::vector<SessionSnapshot> v;
          r_.metrics_.memory_charged = budgets_.process().memory_used();
          r_.metrics_.memory_limit = budgets_.process().memory_limit();
          r_.metrics_.targets_open = budgets_.process().targets_used();
          r_.metrics_.client_keys = budgets_.keys();
          for (const auto& [s, serial] : sessions_) {
            if (!s->closed()) v.push_back(Snapshot(*s, std::to_string(serial)));
          }
          return v;
        })) {
      return 1;
    }
    r_.OnSignals(
        [this] {
          draining_.store(true);
          if (sessions_.empty()) return r_.Stop();
          for (const auto& [s, serial] : sessions_) s->Drain();
        },
        [this] {
          for (const auto& [s, serial] : sessions_) s->Abort("server bridge shutting down");
          r_.Stop();
        });
    r_.io_.run();
    ep_->Close();
    return 0;
  }

 private:
  // Whose budget a session is charged to: the client's static key, or without one (a
  // pre-shared key, --insecure) the client's address.
  static std::string ClientKeyOf(const ConnectionInfo& info) {
    if (!info.peer_key.empty()) return absl::StrCat("key ", info.peer_key);
    const std::string& a = info.peer_address;
    const size_t colon = a.rfind(':');
    return absl::StrCat("address ", colon == std::string::npos ? a : a.substr(0, colon));
  }

  void Adopt(const SessionOptions& so, std::shared_ptr<ConnectionHandle> h) {
    if (draining_.load()) {
      h->Abort("server bridge is draining");
      return;
    }
    const std::string peer = h->info().peer_address;
    const std::string key = ClientKeyOf(h->info());
    absl::StatusOr<std::shared_ptr<Budget>> budget = budgets_.BeginSession(key);
    if (!budget.ok()) {
      ++r_.metrics_.refused["sessions"];
      LOG(WARNING) << "event=session_refused peer=" << peer << " client=\"" << key
                   << "\" detail=\"" << budget.status().message() << "\"";
      h->Abort(std::string(budget.status().message()));
      return;
    }
    auto s = std::make_shared<Session>(r_.io_, so, *std::move(budget), &r_.metrics_);
    s->Attach(h);
    std::weak_ptr<Session> weak = s;
    s->on_closed = [this, weak, peer, key](const absl::Status& st) {
      LOG(INFO) << "event=session_closed peer=" << peer << " detail=\""
                << (st.ok() ? "closed" : st.message()) << "\"";
      asio::post(r_.io_, [this, weak, key] {
        if (auto s = weak.lock()) sessions_.erase(s);
        budgets_.EndSession(key);
        if (draining_.load() && sessions_.empty()) r_.Stop();
      });
    };
    const uint64_t serial = ++accepted_;
    sessions_[s] = serial;
    LOG(INFO) << "event=session_open peer=" << peer << " connection=" << serial
              << " engine=" << h->info().engine << " security=\"" << h->info().security
              << "\" client=\"" << key << "\"";
    Print(absl::StrCat("client bridge ", peer, " connected (",
                       ConnectionSecurityText(h->info(), o_.keys), "), connection ", serial,
                       " on engine ", h->info().engine));
    Session::StartEvents(r_.io_, s);
  }

  const BridgeOptions& o_;
  Runner r_;
  ClientBudgets budgets_;
  std::unique_ptr<Endpoint> ep_;
  // A client bridge may keep several connections (--connections); each is a session
  // here, told apart by the accept counter (the metrics' connection label).
  std::map<std::shared_ptr<Session>, uint64_t> sessions_;
  uint64_t accepted_ = 0;
  std::atomic<bool> draining_{false};
};

}  // namespace

int RunClient(const BridgeOptions& o) { return Client(o).Run(); }
int RunServer(const BridgeOptions& o) { return Server(o).Run(); }

}  // namespace longhaul::bridge
