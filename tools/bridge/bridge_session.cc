#include "tools/bridge/bridge_session.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "glog/logging.h"
#include "transport/base/parse.h"

namespace longhaul::bridge {

namespace asio = boost::asio;
using asio::ip::tcp;

// The TCP side of one stream. Kept by shared_ptr so that pending socket
// operations hold it until their handlers run; the protocol state is the
// StreamProtocol's.
struct Session::Stream {
  explicit Stream(tcp::socket s) : sock(std::move(s)), timer(sock.get_executor()) {}
  uint64_t id = 0;
  std::string forward;
  tcp::socket sock;
  asio::steady_timer timer;  // server: target connect timeout
  bool connected = false;    // the TCP side is up (client: accepted; server: target)
  bool gone = false;         // the protocol ended the stream
  bool eof_read = false;
  bool waiting_readable = false;
  bool in_ready = false;
  bool writing = false;
  bool watching_errors = false;  // after our FIN: an RST from the application
};

namespace {

ProtocolOptions ProtocolOptionsFor(const SessionOptions& o) {
  ProtocolOptions p;
  p.is_client = o.is_client;
  p.stream_window = o.stream_window;
  p.memory = o.memory;
  p.max_streams = o.max_streams;
  if (o.find_forward) {
    p.has_forward = [f = o.find_forward](const std::string& name) { return f(name) != nullptr; };
  }
  return p;
}

}  // namespace

Session::Session(asio::io_context& io, SessionOptions options, std::shared_ptr<Budget> budget,
                 Metrics* metrics)
    : io_(io),
      o_(std::move(options)),
      metrics_(metrics),
      core_(ProtocolOptionsFor(o_), std::move(budget), metrics),
      pump_timer_(io),
      core_timer_(io),
      backlog_(o_.send_backlog),
      close_timer_(io) {}

Session::~Session() = default;

EventCallback Session::EventCallbackFor(asio::io_context& io, std::weak_ptr<Session> weak) {
  return [&io, weak](Event& e) {
    auto ev = std::make_shared<Event>(std::move(e));
    asio::post(io, [weak, ev] {
      if (auto s = weak.lock()) s->OnEvent(*ev);
    });
  };
}

void Session::StartEvents(asio::io_context& io, const std::shared_ptr<Session>& s) {
  s->conn_->SetCallback(EventCallbackFor(io, s));
  // A handle detached from its engine before the callback was set keeps its queued
  // events (the kClosed among them) to itself; OnClosed runs once, whichever comes.
  if (s->conn_->closed()) {
    std::weak_ptr<Session> weak = s;
    asio::post(io, [weak] {
      if (auto p = weak.lock()) p->OnClosed(p->conn_->status());
    });
  }
}

void Session::Attach(std::shared_ptr<ConnectionHandle> conn) {
  conn_ = std::move(conn);
  ++metrics_->sessions_opened;
}

Time Session::Now() {
  return Time::FromNanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// ---- the protocol's outputs ----

void Session::Flush() {
  if (flushing_) return;  // the outer call picks up what this one would
  flushing_ = true;
  bool more = true;
  while (more) {
    more = false;
    OutFrame f;
    while (core_.PollSend(&f)) {
      more = true;
      if (closed_) continue;
      auto frame = std::make_shared<std::string>(std::move(f.bytes));
      const auto* data = reinterpret_cast<const uint8_t*>(frame->data());
      const size_t size = frame->size();
      Submit(std::move(frame), data, size, StreamProtocol::kControlTag, f.ordered);
    }
    StreamEvent ev;
    while (core_.PollEvent(&ev)) {
      more = true;
      OnStreamEvent(ev);
    }
  }
  flushing_ = false;
  ArmTimer();
}

void Session::ArmTimer() {
  const Time at = core_.NextTimeout();
  if (closed_ || at.IsInfinite() || at == core_timer_at_) return;
  core_timer_at_ = at;
  const int64_t wait_ns = std::max<int64_t>(0, (at - Now()).ns());
  core_timer_.expires_after(std::chrono::nanoseconds(wait_ns));
  core_timer_.async_wait([this, self = shared_from_this()](boost::system::error_code ec) {
    if (ec) return;
    core_timer_at_ = Time::Infinite();
    core_.OnTimeout(Now());
    Flush();
  });
}

void Session::OnStreamEvent(StreamEvent& ev) {
  switch (ev.kind) {
    case StreamEvent::Kind::kConnectTarget: {
      StreamPtr s = NewStream(ev.stream, tcp::socket(io_));
      s->forward = ev.forward;
      const Forward* fwd = o_.find_forward ? o_.find_forward(ev.forward) : nullptr;
      if (fwd == nullptr) {  // the protocol asked has_forward first
        return core_.ResetLocal(ev.stream, ResetCode::kUnknownForward, "no such forward");
      }
      return ConnectTarget(s, *fwd);
    }
    case StreamEvent::Kind::kWritable:
      if (StreamPtr s = Find(ev.stream)) StartWrite(s);
      return;
    case StreamEvent::Kind::kSendRoom:
      if (StreamPtr s = Find(ev.stream)) ArmRead(s);
      return;
    case StreamEvent::Kind::kEnded: {
      StreamPtr s = Find(ev.stream);
      if (ev.reset) {
        // The forward name and a peer's reason come from the network: printable
        // only.
        LOG(INFO) << "event=stream_reset stream=" << ev.stream
                  << " forward=" << PrintableText(ev.forward) << " by=" << ev.by
                  << " reason=" << ResetCodeName(ev.code) << " detail=\""
                  << PrintableText(ev.detail) << "\"";
      } else {
        VLOG(1) << "event=stream_done stream=" << ev.stream;
      }
      if (s) {
        CloseSocket(s, ev.reset);
        streams_.erase(ev.stream);
      }
      if (core_.draining() && core_.open_streams() == 0) {
        CloseWhenFlushed(std::chrono::seconds(10));
      }
      return;
    }
    case StreamEvent::Kind::kSessionError:
      if (closed_ || session_error_) return;
      session_error_ = true;
      LOG(ERROR) << "event=protocol_error peer=" << conn_->info().peer_address << " detail=\""
                 << PrintableText(ev.detail) << "\"";
      conn_->Abort(absl::StrCat("bridge protocol: ", ev.detail));
      return;
    case StreamEvent::Kind::kGoAway:
      LOG(INFO) << "event=goaway peer=" << conn_->info().peer_address;
      if (on_goaway) asio::post(io_, on_goaway);
      return;
  }
}

// ---- streams ----

Session::StreamPtr Session::NewStream(uint64_t id, tcp::socket socket) {
  auto s = std::make_shared<Stream>(std::move(socket));
  s->id = id;
  streams_[id] = s;
  return s;
}

Session::StreamPtr Session::Find(uint64_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

void Session::OpenStream(tcp::socket socket, const std::string& forward) {
  uint64_t id = 0;
  const char* why = closed_ ? "session_lost" : "draining";
  if (!closed_ && !core_.draining()) {
    id = core_.OpenLocal(Now(), forward);
    why = "limit";
  } else {
    ++metrics_->streams_reset[{why, "local"}];
  }
  if (id == 0) {
    LOG(WARNING) << "event=stream_refused forward=" << forward << " reason=" << why;
    boost::system::error_code ec;
    socket.set_option(asio::socket_base::linger(true, 0), ec);
    socket.close(ec);
    return;
  }
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);
  StreamPtr s = NewStream(id, std::move(socket));
  s->forward = forward;
  s->connected = true;
  VLOG(1) << "event=stream_open stream=" << s->id << " forward=" << forward;
  Flush();
  ArmRead(s);
}

void Session::CloseSocket(const StreamPtr& s, bool reset) {
  if (s->gone) return;
  s->gone = true;
  boost::system::error_code ec;
  s->timer.cancel();
  // An RST on the TCP side: the application sees the reset, not a clean end.
  if (reset) s->sock.set_option(asio::socket_base::linger(true, 0), ec);
  s->sock.close(ec);
}

void Session::ResetStream(const StreamPtr& s, ResetCode code, const std::string& reason) {
  if (s->gone) return;
  core_.ResetLocal(s->id, code, reason, /*silent=*/closed_);
  Flush();
}

void Session::CloseWhenFlushed(std::chrono::milliseconds deadline) {
  if (closed_ || close_when_flushed_) return;
  close_when_flushed_ = true;
  close_timer_.expires_after(deadline);
  close_timer_.async_wait([this, self = shared_from_this()](boost::system::error_code ec) {
    if (!ec && !closed_) conn_->Close();
  });
  MaybeCloseFlushed();
}

void Session::MaybeCloseFlushed() {
  if (close_when_flushed_ && !closed_ && send_inflight_ == 0) {
    close_timer_.cancel();
    conn_->Close();
  }
}

void Session::ConnectTarget(const StreamPtr& s, const Forward& fwd) {
  auto resolver = std::make_shared<tcp::resolver>(io_);
  const std::string target = absl::StrCat(fwd.host, ":", fwd.port);
  s->timer.expires_after(o_.connect_timeout);
  s->timer.async_wait([this, self = shared_from_this(), s, target](boost::system::error_code ec) {
    if (ec || s->gone || s->connected) return;
    ++metrics_->target_connect_failures;
    ResetStream(s, ResetCode::kTargetUnreachable,
                absl::StrCat("target ", target, " did not answer within ",
                             o_.connect_timeout.count(), " ms"));
  });
  resolver->async_resolve(
      fwd.host, std::to_string(fwd.port),
      [this, self = shared_from_this(), s, resolver, target](boost::system::error_code ec,
                                                             tcp::resolver::results_type results) {
        if (s->gone) return;
        if (ec) {
          ++metrics_->target_connect_failures;
          return ResetStream(s, ResetCode::kTargetUnreachable,
                             absl::StrCat("target ", target, ": ", ec.message()));
        }
        asio::async_connect(
            s->sock, results,
            [this, self, s, target](boost::system::error_code ec, const tcp::endpoint&) {
              if (s->gone) return;
              if (ec) {
                ++metrics_->target_connect_failures;
                const bool refused = ec == asio::error::connection_refused;
                return ResetStream(
                    s, refused ? ResetCode::kTargetRefused : ResetCode::kTargetUnreachable,
                    absl::StrCat("target ", target, ": ", ec.message()));
              }
              s->timer.cancel();
              boost::system::error_code e2;
              s->sock.set_option(tcp::no_delay(true), e2);
              s->sock.non_blocking(true, e2);
              s->connected = true;
              VLOG(1) << "event=target_connected stream=" << s->id << " target=" << target;
              core_.OnConnected(s->id);
              Flush();
              ArmRead(s);
            });
      });
}

void Session::StartWrite(const StreamPtr& s) {
  if (s->gone || s->writing || !s->connected) return;
  Chunk* c = core_.NextChunk(s->id);
  if (c == nullptr) return;
  if (c->fin) {
    boost::system::error_code ec;
    s->sock.shutdown(tcp::socket::shutdown_send, ec);
    core_.OnChunkWritten(Now(), s->id);
    return Flush();
  }
  s->writing = true;
  asio::async_write(s->sock, asio::buffer(c->data, c->size),
                    [this, self = shared_from_this(), s](boost::system::error_code ec, size_t) {
                      s->writing = false;
                      if (s->gone) return;
                      if (ec) {
                        return ResetStream(s, ResetCode::kAborted,
                                           absl::StrCat("writing to TCP: ", ec.message()));
                      }
                      OwnedBuffer b = core_.OnChunkWritten(Now(), s->id);
                      if (!closed_ && b) conn_->ReturnBuffer(std::move(b));
                      Flush();
                      StartWrite(s);
                    });
}

// ---- receiving ----

void Session::OnEvent(Event& e) {
  if (closed_) return;
  switch (e.type) {
    case Event::Type::kSendComplete:
      send_inflight_ -= std::min<uint64_t>(send_inflight_, e.size);
      core_.OnSendComplete(e.tag, e.size);
      MaybeCloseFlushed();
      Flush();
      Pump();
      break;
    case Event::Type::kReceiveComplete:
      if (!e.status.ok()) {
        if (!session_error_) {
          session_error_ = true;
          ++metrics_->protocol_errors;
          LOG(ERROR) << "event=protocol_error peer=" << conn_->info().peer_address
                     << " detail=\"a message did not arrive: " << e.status.message() << "\"";
          conn_->Abort(
              absl::StrCat("bridge protocol: a message did not arrive: ", e.status.message()));
        }
        return;
      }
      core_.OnMessage(Now(), std::move(e));
      Flush();
      break;
    case Event::Type::kOfferWithdrawn:  // never: the bridge offers no buffers
      break;
    case Event::Type::kClosed:
      OnClosed(e.status);
      break;
  }
}

void Session::OnClosed(const absl::Status& status) {
  if (closed_) return;
  closed_ = true;
  pump_timer_.cancel();
  core_timer_.cancel();
  close_timer_.cancel();  // nothing left to close; do not hold the session (and its budget)
  // Streams that finished both ways keep writing what is queued for their
  // sockets and end with the EOF; the rest are reset.
  core_.OnConnectionClosed(status);
  Flush();
  ready_.clear();
  if (on_closed) on_closed(status);
}

// ---- sending ----

void Session::Submit(std::shared_ptr<const void> owner, const uint8_t* data, size_t size,
                     uint64_t tag, bool ordered) {
  SendBuffer b{data, size, std::move(owner), /*unordered=*/!ordered};
  if (conn_->Send(std::move(b), tag).ok()) {
    send_inflight_ += size;
  } else {
    core_.OnSendComplete(tag, size);  // never sent: nothing to wait for
  }
}

void Session::ArmRead(const StreamPtr& s) {
  if (s->gone || s->waiting_readable || s->in_ready || s->eof_read || !s->connected) return;
  s->waiting_readable = true;
  s->sock.async_wait(tcp::socket::wait_read,
                     [this, self = shared_from_this(), s](boost::system::error_code ec) {
                       s->waiting_readable = false;
                       if (ec || s->gone) return;
                       MakeReady(s);
                       Pump();
                     });
}

// After its EOF the socket is no longer read, but the application may still
// reset the connection (an RST after its FIN): Linux then reports an error on
// the socket.
void Session::WatchErrors(const StreamPtr& s) {
  if (s->gone || s->watching_errors || !s->eof_read) return;
  s->watching_errors = true;
  s->sock.async_wait(tcp::socket::wait_error, [this, self = shared_from_this(),
                                               s](boost::system::error_code ec) {
    s->watching_errors = false;
    if (ec || s->gone) return;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s->sock.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
      ResetStream(s, ResetCode::kAborted,
                  absl::StrCat("TCP connection reset after its FIN: ", std::strerror(err)));
    }
  });
}

void Session::MakeReady(const StreamPtr& s) {
  if (s->in_ready || s->gone) return;
  s->in_ready = true;
  ready_.push_back(s);
}

uint64_t Session::BacklogLimit() {
  return backlog_.Limit(Now(), conn_->debug_state().pacing_rate);
}

// Reads one chunk from a readable stream and submits it. False when the stream
// should leave the ready list (nothing more to read now, no credit, ended).
bool Session::ReadOne(const StreamPtr& s) {
  const uint64_t room = core_.SendRoom(s->id);
  if (room == 0) return false;  // a WINDOW re-arms it
  const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, room));
  auto buf = std::make_shared<std::vector<uint8_t>>(kFrameHeaderSize + want);
  boost::system::error_code ec;
  const size_t got = s->sock.read_some(asio::buffer(buf->data() + kFrameHeaderSize, want), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ArmRead(s);
    return false;
  }
  if (ec == asio::error::eof) {
    s->eof_read = true;
    core_.OnLocalEof(s->id);
    Flush();
    WatchErrors(s);
    return false;
  }
  if (ec) {
    ResetStream(s, ResetCode::kAborted, absl::StrCat("reading from TCP: ", ec.message()));
    return false;
  }
  const Time now = Now();
  const bool was_interactive = backlog_.interactive(now);
  backlog_.OnRead(now, got, want);
  if (!was_interactive && backlog_.interactive(now)) {
    VLOG(1) << "event=send_backlog_short stream=" << s->id << " read=" << got;
  }
  buf->resize(kFrameHeaderSize + got);
  const SendSlot slot = core_.OnDataRead(s->id, got);
  WriteFrameHeader(FrameType::kData, s->id, slot.seq, buf->data());
  const uint8_t* data = buf->data();
  Submit(std::move(buf), data, kFrameHeaderSize + got, StreamProtocol::kDataTag, slot.ordered);
  if (got < want) {
    ArmRead(s);  // drained the socket for now
    return false;
  }
  return true;
}

void Session::Pump() {
  if (closed_ || ready_.empty()) return;
  const uint64_t limit = BacklogLimit();
  // A chunk is read only when the budget can take it (with its header and
  // overhead).
  constexpr uint64_t kChunkCost = kChunk + kFrameHeaderSize + kFrameOverhead;
  while (!ready_.empty()) {
    if (conn_->unsent_bytes() >= limit || send_inflight_ >= o_.send_memory ||
        core_.budget().memory_available() < kChunkCost) {
      // Come back when the pacer has sent some of the backlog (or ACKs freed
      // memory).
      if (!pump_timer_armed_) {
        pump_timer_armed_ = true;
        pump_timer_.expires_after(std::chrono::milliseconds(1));
        pump_timer_.async_wait([this, self = shared_from_this()](boost::system::error_code ec) {
          pump_timer_armed_ = false;
          if (!ec) Pump();
        });
      }
      return;
    }
    StreamPtr s = ready_.front();
    ready_.pop_front();
    s->in_ready = false;
    if (s->gone) continue;
    if (ReadOne(s)) MakeReady(s);  // more to read: back of the line
  }
}

// ---- shutdown ----

void Session::Drain() {
  if (closed_) return;
  core_.Drain();
  Flush();
  if (core_.open_streams() == 0) CloseWhenFlushed(std::chrono::seconds(10));
}

void Session::Abort(const std::string& reason) {
  if (closed_) return;
  core_.Drain();
  std::vector<uint64_t> ids;
  for (auto& [id, s] : streams_) ids.push_back(id);
  for (uint64_t id : ids) core_.ResetLocal(id, ResetCode::kAborted, reason);
  Flush();
  // The RESETs get a moment to be acknowledged; then the connection closes
  // regardless.
  CloseWhenFlushed(std::chrono::seconds(1));
}

}  // namespace longhaul::bridge
