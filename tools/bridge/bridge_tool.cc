// The client and server loops of longhaul-bridge. Everything runs on one io_context
// thread, except the longhaul driver's own thread (which posts connection events here)
// and, on the client, one short-lived thread per connection attempt (Endpoint::Connect
// blocks for the handshake).

#include "tools/bridge/bridge_tool.h"

#include <atomic>
#include <csignal>
#include <deque>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/steady_timer.hpp"
#include "glog/logging.h"
#include "tools/bridge/metrics_server.h"
#include "tools/common/security_flags.h"
#include "transport/api/endpoint.h"
#include "transport/base/status.h"

namespace longhaul::bridge {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

void Print(const std::string& line) { std::cout << line << std::endl; }

SessionSnapshot Snapshot(const Session& s) {
  SessionSnapshot snap;
  snap.peer = s.connection()->info().peer_address;
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

  bool StartMetrics(std::function<std::vector<SessionSnapshot>()> sessions) {
    if (o_.metrics_host.empty()) return true;
    auto m = MetricsServer::Start(io_, o_.metrics_host, o_.metrics_port,
                                  [this, sessions = std::move(sessions)] {
                                    const double up =
                                        std::chrono::duration<double>(Clock::now() - start_).count();
                                    return FormatMetrics(mode_, up, metrics_, sessions());
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

class Client {
 public:
  explicit Client(const BridgeOptions& o)
      : o_(o),
        r_(o, "client"),
        // The receive memory (--memory) and what is sent but not yet acknowledged
        // (--send_memory), for every session of this client.
        budget_(std::make_shared<Budget>(o.session.memory + o.session.send_memory, ~0ull)),
        retry_timer_(r_.io_),
        wait_timer_(r_.io_) {}

  int Run() {
    ep_ = r_.StartEndpoint();
    if (ep_ == nullptr) return 1;
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
    if (!r_.StartMetrics([this] {
          std::vector<SessionSnapshot> v;
          r_.metrics_.memory_charged = budget_->memory_used();
          r_.metrics_.memory_limit = budget_->memory_limit();
          if (session_ && !session_->closed()) v.push_back(Snapshot(*session_));
          for (const auto& s : old_sessions_) {
            if (!s->closed()) v.push_back(Snapshot(*s));
          }
          return v;
        })) {
      return 1;
    }
    for (size_t i = 0; i < acceptors_.size(); ++i) Accept(i);
    r_.OnSignals([this] { Drain(); }, [this] { Abort(); });
    StartConnect();
    r_.io_.run();
    if (connector_.joinable()) connector_.join();
    ep_->Close();
    return exit_status_;
  }

 private:
  struct Waiting {
    tcp::socket socket;
    std::string forward;
    Clock::time_point deadline;
  };

  void Accept(size_t i) {
    acceptors_[i].first->async_accept([this, i](boost::system::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || draining_) return;
      if (!ec) OnTcp(std::move(s), acceptors_[i].second);
      Accept(i);
    });
  }

  void OnTcp(tcp::socket s, const std::string& forward) {
    if (session_ && !session_->closed() && !session_->draining()) {
      session_->OpenStream(std::move(s), forward);
      return;
    }
    // The peer is not reachable now: the connection waits for it, a while.
    waiting_.push_back({std::move(s), forward, Clock::now() + o_.connect_wait});
    ArmWaitTimer();
    if (!connecting_ && !retry_pending_) StartConnect();
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

  void StartConnect() {
    if (draining_ || connecting_) return;
    connecting_ = true;
    if (connector_.joinable()) connector_.join();
    ConnectOptions co;
    co.config = o_.config;
    co.app_data = kBridgeAppData;
    co.timeout = Duration::Milliseconds(o_.connect_timeout.count());
    connector_ = std::thread([this, co] {
      auto h = ep_->Connect(o_.peer_host, o_.peer_port, co);
      asio::post(r_.io_, [this, h = std::move(h)]() mutable { OnConnected(std::move(h)); });
    });
  }

  void OnConnected(absl::StatusOr<std::shared_ptr<ConnectionHandle>> h) {
    connecting_ = false;
    if (!h.ok()) {
      ++r_.metrics_.connect_failures;
      const auto delay = std::min<std::chrono::milliseconds>(
          o_.reconnect_max, std::chrono::milliseconds(200) * (1 << std::min(attempt_, 10)));
      ++attempt_;
      LOG(WARNING) << "event=connect_failed peer=" << o_.peer_host << ":" << o_.peer_port
                   << " detail=\"" << h.status().message() << "\" retry_in_ms=" << delay.count();
      if (draining_) return Finish();
      retry_pending_ = true;
      retry_timer_.expires_after(delay);
      retry_timer_.async_wait([this](boost::system::error_code ec) {
        retry_pending_ = false;
        if (!ec) StartConnect();
      });
      return;
    }
    if (draining_) {
      (*h)->Close();
      return Finish();
    }
    attempt_ = 0;
    if (r_.metrics_.sessions_opened > 0) ++r_.metrics_.reconnects;
    session_ = std::make_shared<Session>(r_.io_, o_.session, budget_, &r_.metrics_);
    session_->Attach(*h);
    std::weak_ptr<Session> weak = session_;
    session_->on_closed = [this, weak](const absl::Status& st) {
      LOG(WARNING) << "event=session_closed peer=" << o_.peer_host << ":" << o_.peer_port
                   << " detail=\"" << (st.ok() ? "closed" : st.message()) << "\"";
      asio::post(r_.io_, [this, weak] {
        std::shared_ptr<Session> s = weak.lock();
        if (s && s == session_) {
          session_.reset();
          if (!draining_) StartConnect();
        } else if (s) {
          old_sessions_.erase(s);
        }
        if (draining_ && !session_ && old_sessions_.empty()) Finish();
      });
    };
    // The server is going away: its open streams finish on this session, new ones wait
    // for the next (the restarted server, or another behind the same address).
    session_->on_goaway = [this, weak] {
      std::shared_ptr<Session> s = weak.lock();
      if (!s || s != session_) return;
      LOG(INFO) << "event=peer_draining peer=" << o_.peer_host << ":" << o_.peer_port;
      old_sessions_.insert(s);
      session_.reset();
      s->Drain();
      StartConnect();
    };
    (*h)->SetCallback(Session::EventCallbackFor(r_.io_, session_));
    const ConnectionInfo& info = (*h)->info();
    LOG(INFO) << "event=session_open peer=" << info.peer_address << " security=\"" << info.security
              << "\"";
    Print(absl::StrCat("connected to ", info.peer_address, " (",
                       ConnectionSecurityText(info, o_.keys), ")"));
    while (!waiting_.empty()) {
      session_->OpenStream(std::move(waiting_.front().socket), waiting_.front().forward);
      waiting_.pop_front();
    }
  }

  void Drain() {
    draining_ = true;
    for (auto& [a, name] : acceptors_) {
      boost::system::error_code ec;
      a->close(ec);
    }
    for (Waiting& w : waiting_) ResetSocket(w.socket);
    waiting_.clear();
    retry_timer_.cancel();
    for (const auto& s : old_sessions_) s->Drain();
    if (session_ && !session_->closed()) {
      session_->Drain();  // closes when its streams end; on_closed then finishes
    } else if (!connecting_ && old_sessions_.empty()) {
      Finish();
    }
  }

  void Abort() {
    LOG(WARNING) << "event=drain_abort";
    if (session_ && !session_->closed()) session_->Abort("client bridge shutting down");
    for (const auto& s : old_sessions_) s->Abort("client bridge shutting down");
    exit_status_ = 0;
    Finish();
  }

  void Finish() { r_.Stop(); }

  const BridgeOptions& o_;
  Runner r_;
  std::shared_ptr<Budget> budget_;
  std::unique_ptr<Endpoint> ep_;
  std::vector<std::pair<std::unique_ptr<tcp::acceptor>, std::string>> acceptors_;
  std::shared_ptr<Session> session_;              // takes new streams
  std::set<std::shared_ptr<Session>> old_sessions_;  // draining: their streams finish
  std::deque<Waiting> waiting_;
  std::thread connector_;
  asio::steady_timer retry_timer_, wait_timer_;
  bool connecting_ = false, retry_pending_ = false, wait_armed_ = false, draining_ = false;
  int attempt_ = 0;
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
    lo.on_accept = [this, so](std::shared_ptr<ConnectionHandle> h) {
      // Driver thread: hand the connection to the io thread; its events wait in the
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
    for (const Forward& f : o_.forwards) {
      Print(absl::StrCat("forward ", f.name, ": -> tcp ", f.host, ":", f.port));
    }
    Print(SecuritySettingsLine(o_.keys));
    if (!r_.StartMetrics([this] {
          std::vector<SessionSnapshot> v;
          r_.metrics_.memory_charged = budgets_.process().memory_used();
          r_.metrics_.memory_limit = budgets_.process().memory_limit();
          r_.metrics_.targets_open = budgets_.process().targets_used();
          r_.metrics_.client_keys = budgets_.keys();
          for (const auto& s : sessions_) {
            if (!s->closed()) v.push_back(Snapshot(*s));
          }
          return v;
        })) {
      return 1;
    }
    r_.OnSignals(
        [this] {
          draining_.store(true);
          if (sessions_.empty()) return r_.Stop();
          for (const auto& s : sessions_) s->Drain();
        },
        [this] {
          for (const auto& s : sessions_) s->Abort("server bridge shutting down");
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
    sessions_.insert(s);
    LOG(INFO) << "event=session_open peer=" << peer << " security=\"" << h->info().security
              << "\" client=\"" << key << "\"";
    Print(absl::StrCat("client bridge ", peer, " connected (",
                       ConnectionSecurityText(h->info(), o_.keys), ")"));
    h->SetCallback(Session::EventCallbackFor(r_.io_, s));
  }

  const BridgeOptions& o_;
  Runner r_;
  ClientBudgets budgets_;
  std::unique_ptr<Endpoint> ep_;
  std::set<std::shared_ptr<Session>> sessions_;
  std::atomic<bool> draining_{false};
};

}  // namespace

int RunClient(const BridgeOptions& o) { return Client(o).Run(); }
int RunServer(const BridgeOptions& o) { return Server(o).Run(); }

}  // namespace longhaul::bridge
