#include "tools/bridge/bridge_session.h"

#include <algorithm>
#include <cstring>
#include <sys/socket.h>
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

// One TCP connection carried as a stream. Kept by shared_ptr so that pending socket
// operations hold it (and the buffers they use) until their handlers run.
struct Session::Stream {
  explicit Stream(tcp::socket s) : sock(std::move(s)), timer(sock.get_executor()) {}
  uint64_t id = 0;
  std::string forward;
  tcp::socket sock;
  asio::steady_timer timer;  // server: target connect timeout
  bool connected = false;    // the TCP side is up (client: accepted; server: target)
  bool gone = false;         // removed from the session
  // TCP -> longhaul
  uint64_t send_seq = 1;     // next sequence number for DATA / FIN
  uint64_t sent = 0;         // DATA payload bytes submitted
  uint64_t peer_limit = 0;   // the peer's grant (WINDOW)
  bool fin_sent = false;
  bool waiting_readable = false;
  bool in_ready = false;
  // longhaul -> TCP
  uint64_t next_seq = 0;                 // next sequence number to deliver
  std::map<uint64_t, Event> reorder;     // frames that arrived early, by sequence number
  uint64_t reorder_bytes = 0;
  uint64_t received = 0;                 // payload bytes delivered in order
  struct Chunk {
    Event event;  // owns the bytes
    const uint8_t* data = nullptr;
    size_t size = 0;
    bool fin = false;
  };
  std::deque<Chunk> writeq;
  bool writing = false;
  uint64_t written = 0;  // bytes written to the TCP socket
  uint64_t granted = 0;  // the grant we gave the peer
  bool fin_written = false;
  bool fin_received = false;  // a FIN arrived (maybe still out of order)
  bool opened = false;  // server: OPEN processed
  bool watching_errors = false;  // after our FIN: an RST from the application
};

Session::Session(asio::io_context& io, SessionOptions options, Metrics* metrics)
    : io_(io), o_(std::move(options)), metrics_(metrics), pump_timer_(io), close_timer_(io) {}

Session::~Session() = default;

EventCallback Session::EventCallbackFor(asio::io_context& io, std::weak_ptr<Session> weak) {
  return [&io, weak](Event& e) {
    auto ev = std::make_shared<Event>(std::move(e));
    asio::post(io, [weak, ev] {
      if (auto s = weak.lock()) s->OnEvent(*ev);
    });
  };
}

void Session::Attach(std::shared_ptr<ConnectionHandle> conn) {
  conn_ = std::move(conn);
  ++metrics_->sessions_opened;
}

// ---- streams ----

Session::StreamPtr Session::NewStream(uint64_t id, tcp::socket socket) {
  auto s = std::make_shared<Stream>(std::move(socket));
  s->id = id;
  streams_[id] = s;
  ++metrics_->streams_opened;
  return s;
}

uint64_t Session::WindowFor() const {
  const uint64_t n = std::max<uint64_t>(1, streams_.size());
  return std::clamp<uint64_t>(o_.memory / n, std::min<uint64_t>(kInitialWindow, o_.stream_window),
                              o_.stream_window);
}

size_t Session::StreamLimit() const {
  // Every stream may be sent kInitialWindow before its receiver says otherwise: the
  // receive memory bounds the number of streams too.
  return std::min<size_t>(o_.max_streams, std::max<uint64_t>(1, o_.memory / kInitialWindow));
}

void Session::OpenStream(tcp::socket socket, const std::string& forward) {
  if (closed_ || draining_ || goaway_received_ || streams_.size() >= StreamLimit()) {
    const char* why = closed_ ? "session_lost" : streams_.size() >= StreamLimit() ? "limit"
                                                                                  : "draining";
    ++metrics_->streams_reset[{why, "local"}];
    LOG(WARNING) << "event=stream_refused forward=" << forward << " reason=" << why;
    boost::system::error_code ec;
    socket.set_option(asio::socket_base::linger(true, 0), ec);
    socket.close(ec);
    return;
  }
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);
  StreamPtr s = NewStream(next_stream_id_++, std::move(socket));
  s->forward = forward;
  s->connected = true;
  s->opened = true;
  s->next_seq = 1;  // the server's first frame is DATA 1
  s->peer_limit = kInitialWindow;
  s->granted = WindowFor();
  SendControl(FrameType::kOpen, s->id, s->granted, forward);
  VLOG(1) << "event=stream_open stream=" << s->id << " forward=" << forward;
  ArmRead(s);
}

bool Session::IsNewPeerStream(uint64_t id) const {
  return id > seen_floor_ && seen_above_.count(id) == 0;
}

void Session::MarkPeerStreamSeen(uint64_t id) {
  seen_above_.insert(id);
  while (!seen_above_.empty() && *seen_above_.begin() == seen_floor_ + 1) {
    ++seen_floor_;
    seen_above_.erase(seen_above_.begin());
  }
}

void Session::RemoveStream(const StreamPtr& s) {
  if (s->gone) return;
  s->gone = true;
  boost::system::error_code ec;
  s->timer.cancel();
  s->sock.close(ec);
  for (auto& [seq, e] : s->reorder) conn_->ReturnBuffer(std::move(e.owned));
  buffered_ -= s->reorder_bytes;
  for (auto& c : s->writeq) {
    buffered_ -= c.size;
    conn_->ReturnBuffer(std::move(c.event.owned));
  }
  s->reorder.clear();
  s->writeq.clear();
  streams_.erase(s->id);
  if (draining_ && streams_.empty()) CloseWhenFlushed(std::chrono::seconds(10));
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

void Session::ResetStream(const StreamPtr& s, ResetCode code, const std::string& reason,
                          ResetBy by) {
  if (s->gone) return;
  if (by == ResetBy::kLocal && !closed_) {
    SendControl(FrameType::kReset, s->id, static_cast<uint64_t>(code), reason);
  }
  const char* who = by == ResetBy::kPeer ? "peer" : "local";
  ++metrics_->streams_reset[{ResetCodeName(code), who}];
  // The forward name and a peer's reason come from the network: printable only.
  LOG(INFO) << "event=stream_reset stream=" << s->id << " forward=" << PrintableText(s->forward)
            << " by=" << who << " reason=" << ResetCodeName(code) << " detail=\""
            << PrintableText(reason) << "\"";
  // An RST on the TCP side: the application sees the reset, not a clean end.
  boost::system::error_code ec;
  s->sock.set_option(asio::socket_base::linger(true, 0), ec);
  RemoveStream(s);
}

void Session::MaybeFinish(const StreamPtr& s) {
  if (s->gone || !s->fin_sent || !s->fin_written) return;
  ++metrics_->streams_completed;
  VLOG(1) << "event=stream_done stream=" << s->id << " sent=" << s->sent
          << " received=" << s->written;
  RemoveStream(s);
}

// ---- receiving ----

void Session::OnEvent(Event& e) {
  if (closed_) return;
  switch (e.type) {
    case Event::Type::kSendComplete:
      send_inflight_ -= std::min<uint64_t>(send_inflight_, e.size);
      MaybeCloseFlushed();
      Pump();
      break;
    case Event::Type::kReceiveComplete:
      if (!e.status.ok()) {
        ProtocolError(absl::StrCat("a message did not arrive: ", e.status.message()));
        return;
      }
      OnFrame(e);
      break;
    case Event::Type::kClosed:
      OnClosed(e.status);
      break;
  }
}

void Session::ProtocolError(const std::string& what) {
  if (closed_) return;
  ++metrics_->protocol_errors;
  LOG(ERROR) << "event=protocol_error peer=" << conn_->info().peer_address << " detail=\"" << what
             << "\"";
  conn_->Abort(absl::StrCat("bridge protocol: ", what));
}

void Session::OnFrame(Event& e) {
  absl::StatusOr<Frame> f = DecodeFrame({e.data, static_cast<size_t>(e.size)});
  if (!f.ok()) return ProtocolError(std::string(f.status().message()));
  auto it = streams_.find(f->stream);
  StreamPtr s = it == streams_.end() ? nullptr : it->second;
  switch (f->type) {
    case FrameType::kGoAway:
      if (!o_.is_client) return ProtocolError("GOAWAY from a client bridge");
      if (!goaway_received_ && on_goaway) asio::post(io_, on_goaway);
      goaway_received_ = true;
      LOG(INFO) << "event=goaway peer=" << conn_->info().peer_address << " detail=\"" << f->text()
                << "\"";
      break;
    case FrameType::kWindow:
      if (!s) return;  // the stream ended meanwhile
      if (f->value > s->peer_limit) {
        s->peer_limit = f->value;
        if (!s->fin_sent && !s->waiting_readable && !s->in_ready && s->connected) ArmRead(s);
      }
      break;
    case FrameType::kReset:
      if (!s) {
        // A reset that overtook its stream's OPEN: remember the id, so the OPEN that
        // follows is ignored instead of connecting to the target for nobody.
        if (!o_.is_client && IsNewPeerStream(f->stream)) MarkPeerStreamSeen(f->stream);
        return;
      }
      ResetStream(s, static_cast<ResetCode>(f->value), std::string(f->text()), ResetBy::kPeer);
      break;
    case FrameType::kOpen:
    case FrameType::kData:
    case FrameType::kFin: {
      const uint64_t seq = f->type == FrameType::kOpen ? 0 : f->value;
      if (!s) {
        // Only the client opens streams: a frame for an unknown stream is for one that
        // ended (late, ignored), or, on the server, the first frame of a new one.
        if (o_.is_client || !IsNewPeerStream(f->stream)) return;
        if (streams_.size() >= StreamLimit()) {
          MarkPeerStreamSeen(f->stream);
          ++metrics_->streams_reset[{"limit", "local"}];
          SendControl(FrameType::kReset, f->stream, static_cast<uint64_t>(ResetCode::kLimit),
                      absl::StrCat("server bridge has ", streams_.size(), " streams open"));
          return;
        }
        MarkPeerStreamSeen(f->stream);
        s = NewStream(f->stream, tcp::socket(io_));
        s->peer_limit = 0;  // until OPEN gives the client's grant
        s->granted = kInitialWindow;
        if (f->type != FrameType::kOpen) {
          // Its OPEN is still on the way; a stream whose OPEN never comes is dropped.
          s->timer.expires_after(kOpenTimeout);
          s->timer.async_wait([this, self = shared_from_this(), s](boost::system::error_code ec) {
            if (ec || s->gone || s->opened) return;
            LOG(WARNING) << "event=stream_dropped stream=" << s->id
                         << " detail=\"no OPEN within " << kOpenTimeout.count() << " s\"";
            RemoveStream(s);
          });
        }
      }
      if (f->type == FrameType::kOpen && o_.is_client) {
        return ProtocolError("OPEN from a server bridge");
      }
      Sequenced(s, seq, e, *f);
      break;
    }
  }
}

void Session::Sequenced(const StreamPtr& s, uint64_t seq, Event& e, const Frame& f) {
  if (seq < s->next_seq || s->reorder.count(seq)) {
    return ProtocolError(absl::StrCat("stream ", s->id, ": sequence number ", seq, " repeated"));
  }
  if (f.type == FrameType::kData && f.body.empty()) {
    return ProtocolError(absl::StrCat("stream ", s->id, ": empty DATA frame"));
  }
  if (f.type == FrameType::kFin) {
    if (s->fin_received) return ProtocolError(absl::StrCat("stream ", s->id, ": second FIN"));
    s->fin_received = true;
  }
  if (s->reorder.size() >= kMaxReorderFrames) {
    return ProtocolError(absl::StrCat("stream ", s->id, ": more than ", kMaxReorderFrames,
                                      " frames out of order"));
  }
  // What the peer may have in flight on this stream: its grant.
  const uint64_t payload = f.type == FrameType::kData ? f.body.size() : 0;
  if (s->received + s->reorder_bytes + payload > std::max(s->granted, kInitialWindow)) {
    return ProtocolError(absl::StrCat("stream ", s->id, ": peer sent beyond its window of ",
                                      s->granted, " bytes"));
  }
  if (seq != s->next_seq) {
    s->reorder_bytes += payload;
    buffered_ += payload;
    s->reorder.emplace(seq, std::move(e));
    return;
  }
  Deliver(s, e, f);
  while (!s->gone && !s->reorder.empty() && s->reorder.begin()->first == s->next_seq) {
    Event next = std::move(s->reorder.begin()->second);
    s->reorder.erase(s->reorder.begin());
    absl::StatusOr<Frame> nf = DecodeFrame({next.data, static_cast<size_t>(next.size)});
    const uint64_t bytes = nf->type == FrameType::kData ? nf->body.size() : 0;
    s->reorder_bytes -= bytes;
    buffered_ -= bytes;
    Deliver(s, next, *nf);
  }
}

void Session::Deliver(const StreamPtr& s, Event& e, const Frame& f) {
  ++s->next_seq;
  switch (f.type) {
    case FrameType::kOpen:
      return OnOpen(s, f);
    case FrameType::kData: {
      if (f.body.empty()) return;
      Stream::Chunk c;
      c.data = f.body.data();
      c.size = f.body.size();
      c.event = std::move(e);
      s->received += c.size;
      buffered_ += c.size;
      s->writeq.push_back(std::move(c));
      return StartWrite(s);
    }
    case FrameType::kFin: {
      Stream::Chunk c;
      c.fin = true;
      s->writeq.push_back(std::move(c));
      return StartWrite(s);
    }
    default:
      return;
  }
}

void Session::OnOpen(const StreamPtr& s, const Frame& f) {
  s->forward = std::string(f.text());
  s->peer_limit = f.value;
  s->opened = true;
  if (draining_) {
    return ResetStream(s, ResetCode::kDraining, "server bridge is draining", ResetBy::kLocal);
  }
  const Forward* fwd = o_.find_forward ? o_.find_forward(s->forward) : nullptr;
  if (fwd == nullptr) {
    return ResetStream(s, ResetCode::kUnknownForward,
                       absl::StrCat("no forward '", s->forward, "' on the server bridge"), ResetBy::kLocal);
  }
  // The full window now: the data that arrives while the target connects is buffered.
  s->granted = WindowFor();
  SendControl(FrameType::kWindow, s->id, s->granted);
  ConnectTarget(s, *fwd);
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
                             o_.connect_timeout.count(), " ms"),
                ResetBy::kLocal);
  });
  resolver->async_resolve(
      fwd.host, std::to_string(fwd.port),
      [this, self = shared_from_this(), s, resolver, target](
          boost::system::error_code ec, tcp::resolver::results_type results) {
        if (s->gone) return;
        if (ec) {
          ++metrics_->target_connect_failures;
          return ResetStream(s, ResetCode::kTargetUnreachable,
                             absl::StrCat("target ", target, ": ", ec.message()), ResetBy::kLocal);
        }
        asio::async_connect(
            s->sock, results,
            [this, self, s, target](boost::system::error_code ec, const tcp::endpoint&) {
              if (s->gone) return;
              if (ec) {
                ++metrics_->target_connect_failures;
                const bool refused = ec == asio::error::connection_refused;
                return ResetStream(s, refused ? ResetCode::kTargetRefused
                                              : ResetCode::kTargetUnreachable,
                                   absl::StrCat("target ", target, ": ", ec.message()), ResetBy::kLocal);
              }
              s->timer.cancel();
              boost::system::error_code e2;
              s->sock.set_option(tcp::no_delay(true), e2);
              s->sock.non_blocking(true, e2);
              s->connected = true;
              VLOG(1) << "event=target_connected stream=" << s->id << " target=" << target;
              StartWrite(s);
              ArmRead(s);
            });
      });
}

void Session::StartWrite(const StreamPtr& s) {
  if (s->gone || s->writing || !s->connected || s->writeq.empty()) return;
  Stream::Chunk& c = s->writeq.front();
  if (c.fin) {
    s->writeq.pop_front();
    boost::system::error_code ec;
    s->sock.shutdown(tcp::socket::shutdown_send, ec);
    s->fin_written = true;
    return MaybeFinish(s);
  }
  s->writing = true;
  asio::async_write(s->sock, asio::buffer(c.data, c.size),
                    [this, self = shared_from_this(), s](boost::system::error_code ec, size_t n) {
                      s->writing = false;
                      if (s->gone) return;
                      if (ec) {
                        return ResetStream(s, ResetCode::kAborted,
                                           absl::StrCat("writing to TCP: ", ec.message()), ResetBy::kLocal);
                      }
                      Stream::Chunk done = std::move(s->writeq.front());
                      s->writeq.pop_front();
                      s->written += n;
                      buffered_ -= done.size;
                      metrics_->bytes_to_tcp += n;
                      if (!closed_) conn_->ReturnBuffer(std::move(done.event.owned));
                      MaybeGrant(s);
                      StartWrite(s);
                    });
}

void Session::MaybeGrant(const StreamPtr& s) {
  const uint64_t w = WindowFor();
  const uint64_t limit = s->written + w;
  // Grant in steps of a quarter window: few WINDOW frames, never a stalled sender.
  if (limit > s->granted && limit - s->granted >= w / 4 && !closed_) {
    s->granted = limit;
    SendControl(FrameType::kWindow, s->id, limit);
  }
}

void Session::OnClosed(const absl::Status& status) {
  if (closed_) return;
  closed_ = true;
  pump_timer_.cancel();
  std::vector<StreamPtr> all;
  for (auto& [id, s] : streams_) all.push_back(s);
  for (const StreamPtr& s : all) {
    // A clean close after both sides finished the stream (our FIN went out, the peer's
    // arrived in order): only bytes still queued for the application's socket remain, and
    // they are written and end with the EOF as if the connection were still there (a
    // draining server closes as soon as its last stream is done on its side).
    if (status.ok() && s->fin_sent && s->fin_received && s->reorder.empty()) {
      StartWrite(s);
      continue;
    }
    ResetStream(s, ResetCode::kSessionLost,
                absl::StrCat("longhaul connection ended: ", status.ok() ? "closed" : status.message()),
                ResetBy::kLocalSilent);
  }
  ready_.clear();
  if (on_closed) on_closed(status);
}

// ---- sending ----

void Session::Submit(std::shared_ptr<const void> owner, const uint8_t* data, size_t size) {
  SendBuffer b{data, size, std::move(owner), /*unordered=*/true};
  if (conn_->Send(std::move(b), size).ok()) send_inflight_ += size;
}

void Session::SendControl(FrameType type, uint64_t stream, uint64_t value, const std::string& body) {
  auto frame = std::make_shared<std::string>(EncodeFrame(type, stream, value, body));
  const auto* data = reinterpret_cast<const uint8_t*>(frame->data());
  const size_t size = frame->size();
  Submit(std::move(frame), data, size);
}

void Session::ArmRead(const StreamPtr& s) {
  if (s->gone || s->waiting_readable || s->in_ready || s->fin_sent || !s->connected) return;
  s->waiting_readable = true;
  s->sock.async_wait(tcp::socket::wait_read,
                     [this, self = shared_from_this(), s](boost::system::error_code ec) {
                       s->waiting_readable = false;
                       if (ec || s->gone) return;
                       MakeReady(s);
                       Pump();
                     });
}

// After its EOF the socket is no longer read, but the application may still reset the
// connection (an RST after its FIN): Linux then reports an error on the socket.
void Session::WatchErrors(const StreamPtr& s) {
  if (s->gone || s->watching_errors) return;
  s->watching_errors = true;
  s->sock.async_wait(tcp::socket::wait_error,
                     [this, self = shared_from_this(), s](boost::system::error_code ec) {
                       s->watching_errors = false;
                       if (ec || s->gone) return;
                       int err = 0;
                       socklen_t len = sizeof(err);
                       if (getsockopt(s->sock.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
                           err != 0) {
                         ResetStream(s, ResetCode::kAborted,
                                     absl::StrCat("TCP connection reset after its FIN: ",
                                                  std::strerror(err)),
                                     ResetBy::kLocal);
                       }
                     });
}

void Session::MakeReady(const StreamPtr& s) {
  if (s->in_ready || s->gone) return;
  s->in_ready = true;
  ready_.push_back(s);
}

uint64_t Session::BacklogLimit() {
  // A few milliseconds of the connection's pacing rate: enough to keep the pacer busy
  // between two pumps, little enough that a new small frame waits behind at most that.
  const double rate_Bps = conn_->debug_state().pacing_rate.BytesPerSecond();
  return std::max<uint64_t>(o_.min_backlog,
                            static_cast<uint64_t>(rate_Bps * o_.send_backlog.count() * 1e-6));
}

// Reads one chunk from a readable stream and submits it. False when the stream should
// leave the ready list (nothing more to read now, no credit, ended).
bool Session::ReadOne(const StreamPtr& s) {
  const uint64_t room = s->peer_limit > s->sent ? s->peer_limit - s->sent : 0;
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
    s->fin_sent = true;
    SendControl(FrameType::kFin, s->id, s->send_seq++);
    MaybeFinish(s);
    WatchErrors(s);
    return false;
  }
  if (ec) {
    ResetStream(s, ResetCode::kAborted, absl::StrCat("reading from TCP: ", ec.message()), ResetBy::kLocal);
    return false;
  }
  buf->resize(kFrameHeaderSize + got);
  WriteFrameHeader(FrameType::kData, s->id, s->send_seq++, buf->data());
  s->sent += got;
  metrics_->bytes_from_tcp += got;
  const uint8_t* data = buf->data();
  Submit(std::move(buf), data, kFrameHeaderSize + got);
  if (got < want) {
    ArmRead(s);  // drained the socket for now
    return false;
  }
  return true;
}

void Session::Pump() {
  if (closed_ || ready_.empty()) return;
  const uint64_t limit = BacklogLimit();
  while (!ready_.empty()) {
    if (conn_->unsent_bytes() >= limit || send_inflight_ >= o_.send_memory) {
      // Come back when the pacer has sent some of the backlog (or ACKs freed memory).
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
  if (draining_ || closed_) return;
  draining_ = true;
  if (!o_.is_client) SendControl(FrameType::kGoAway, 0, 0, "server bridge is shutting down");
  if (streams_.empty()) CloseWhenFlushed(std::chrono::seconds(10));
}

void Session::Abort(const std::string& reason) {
  if (closed_) return;
  draining_ = true;
  std::vector<StreamPtr> all;
  for (auto& [id, s] : streams_) all.push_back(s);
  for (const StreamPtr& s : all) ResetStream(s, ResetCode::kAborted, reason, ResetBy::kLocal);
  // The RESETs get a moment to be acknowledged; then the connection closes regardless.
  CloseWhenFlushed(std::chrono::seconds(1));
}

}  // namespace longhaul::bridge
