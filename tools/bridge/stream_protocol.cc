#include "tools/bridge/stream_protocol.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace longhaul::bridge {

namespace {

std::span<const uint8_t> Bytes(const Event& e) { return {e.data, static_cast<size_t>(e.size)}; }

}  // namespace

StreamProtocol::StreamProtocol(ProtocolOptions options, std::shared_ptr<Budget> budget,
                               Metrics* metrics)
    : o_(std::move(options)), budget_(std::move(budget)), metrics_(metrics) {}

StreamProtocol::~StreamProtocol() {
  for (auto& [id, s] : streams_) {
    if (s.admitted) budget_->ReleaseTarget();
    if (budget_->streams > 0) --budget_->streams;
  }
  budget_->Release(charged_);
}

// ---- charges ----

bool StreamProtocol::Charge(Stream* s, uint64_t bytes) {
  if (!budget_->TryCharge(bytes)) return false;
  charged_ += bytes;
  if (s != nullptr) s->charged += bytes;
  return true;
}

void StreamProtocol::ForceChargeUnattributed(uint64_t bytes) {
  budget_->ForceCharge(bytes);
  charged_ += bytes;
}

void StreamProtocol::Release(Stream* s, uint64_t bytes) {
  bytes = std::min(bytes, charged_);
  if (s != nullptr) s->charged -= std::min(bytes, s->charged);
  charged_ -= bytes;
  budget_->Release(bytes);
}

uint64_t StreamProtocol::WindowFor() const {
  // Windows shrink as streams open: the session's memory over its streams, and
  // half the budget over the streams of every session sharing it (the other
  // half is slack for grants made when fewer streams were open, frame overheads
  // and the send side).
  const uint64_t n = std::max<uint64_t>(1, streams_.size());
  const uint64_t key_n = std::max<uint64_t>(1, budget_->streams);
  const uint64_t w = std::min(o_.memory / n, budget_->memory_limit() / (2 * key_n));
  return std::clamp<uint64_t>(w, std::min<uint64_t>(kInitialWindow, o_.stream_window),
                              o_.stream_window);
}

size_t StreamProtocol::StreamLimit() const {
  // Every stream may be sent kInitialWindow before its receiver says otherwise:
  // the receive memory bounds the number of streams too.
  return std::min<size_t>(o_.max_streams, std::max<uint64_t>(1, o_.memory / kInitialWindow));
}

// ---- ids ----

bool StreamProtocol::Remembered(uint64_t id) const {
  return id <= seen_floor_ || seen_above_.count(id) != 0;
}

void StreamProtocol::Remember(uint64_t id) {
  if (Remembered(id)) return;
  seen_above_.insert(id);
  while (!seen_above_.empty() && *seen_above_.begin() == seen_floor_ + 1) {
    ++seen_floor_;
    seen_above_.erase(seen_above_.begin());
  }
  // Sparse ids: forget the lowest ones (every id below it now counts as seen).
  // Open streams are found by the stream table first, so only ids never opened
  // are lost.
  while (seen_above_.size() > kMaxRememberedIds) {
    seen_floor_ = *seen_above_.begin();
    seen_above_.erase(seen_above_.begin());
    Refuse("ids_forgotten");
  }
}

// ---- outputs ----

bool StreamProtocol::PollSend(OutFrame* frame) {
  if (out_.empty()) return false;
  *frame = std::move(out_.front());
  out_.pop_front();
  return true;
}

bool StreamProtocol::PollEvent(StreamEvent* event) {
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void StreamProtocol::Emit(StreamEvent::Kind kind, uint64_t stream) {
  StreamEvent e;
  e.kind = kind;
  e.stream = stream;
  events_.push_back(std::move(e));
}

void StreamProtocol::SendControl(FrameType type, uint64_t stream, uint64_t value,
                                 const std::string& body, bool ordered) {
  if (closed_ || failed_) return;
  OutFrame f;
  f.bytes = EncodeFrame(type, stream, value, body);
  f.ordered = ordered;
  // Control frames go out even when the budget is spent (a RESET must be able
  // to free memory), but only so many may wait for the peer to acknowledge
  // them.
  const uint64_t cost = f.bytes.size() + kFrameOverhead;
  ForceChargeUnattributed(cost);
  control_inflight_ += cost;
  out_.push_back(std::move(f));
  if (control_inflight_ > kMaxControlInflight) {
    SessionError("peer_not_reading",
                 absl::StrCat("the peer has not acknowledged ", control_inflight_,
                              " bytes of control frames: it is not reading"),
                 /*protocol=*/false);
  }
}

void StreamProtocol::OnSendComplete(uint64_t tag, uint64_t size) {
  const uint64_t cost = size + kFrameOverhead;
  uint64_t& inflight = tag == kControlTag ? control_inflight_ : data_inflight_;
  const uint64_t n = std::min(cost, inflight);
  inflight -= n;
  Release(nullptr, n);
}

void StreamProtocol::SessionError(const std::string& refusal, const std::string& detail,
                                  bool protocol) {
  if (failed_) return;
  failed_ = true;
  if (!refusal.empty()) Refuse(refusal);
  if (protocol) ++metrics_->protocol_errors;
  StreamEvent e;
  e.kind = StreamEvent::Kind::kSessionError;
  e.detail = detail;
  events_.push_back(std::move(e));
}

// ---- stream ends ----

void StreamProtocol::EndStream(Stream& s, bool reset, ResetCode code, const std::string& by,
                               const std::string& detail) {
  const uint64_t id = s.id;
  if (reset) ++metrics_->streams_reset[{ResetCodeName(code), by}];
  Release(&s, s.charged);
  if (s.admitted) budget_->ReleaseTarget();
  if (budget_->streams > 0) --budget_->streams;
  StreamEvent e;
  e.kind = StreamEvent::Kind::kEnded;
  e.stream = id;
  e.forward = s.forward;
  e.reset = reset;
  e.code = code;
  e.by = by;
  e.detail = detail;
  events_.push_back(std::move(e));
  streams_.erase(id);
}

void StreamProtocol::ResetLocal(uint64_t stream, ResetCode code, const std::string& reason,
                                bool silent) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  if (!silent) SendControl(FrameType::kReset, stream, static_cast<uint64_t>(code), reason);
  EndStream(it->second, /*reset=*/true, code, "local", reason);
}

void StreamProtocol::MaybeFinish(Stream& s) {
  if (!s.fin_sent || !s.fin_written) return;
  ++metrics_->streams_completed;
  EndStream(s, /*reset=*/false, ResetCode::kAborted, "", "");
}

void StreamProtocol::RefuseOpen(uint64_t id, ResetCode code, const std::string& reason,
                                const std::string& refusal) {
  if (!refusal.empty()) Refuse(refusal);
  ++metrics_->streams_reset[{ResetCodeName(code), "local"}];
  SendControl(FrameType::kReset, id, static_cast<uint64_t>(code), reason);
  StreamEvent e;
  e.kind = StreamEvent::Kind::kEnded;
  e.stream = id;
  e.reset = true;
  e.code = code;
  e.by = "local";
  e.detail = reason;
  events_.push_back(std::move(e));
}

// ---- the local side ----

uint64_t StreamProtocol::OpenLocal(Time now, const std::string& forward) {
  now_ = std::max(now_, now);
  if (streams_.size() >= StreamLimit()) {
    Refuse("streams");
    ++metrics_->streams_reset[{"limit", "local"}];
    return 0;
  }
  // The return path's window: at most kOpenWindow until data flows, and no more than
  // the peer may send before any WINDOW when the budget is short.
  uint64_t w = std::min(WindowFor(), kOpenWindow);
  if (!Charge(nullptr, kStreamCharge + w)) {
    w = std::min(w, kInitialWindow);
    if (!Charge(nullptr, kStreamCharge + w)) {
      Refuse("memory");
      ++metrics_->streams_reset[{"limit", "local"}];
      return 0;
    }
  }
  const uint64_t id = next_stream_id_++;
  Stream& s = streams_[id];
  s.charged = kStreamCharge + w;
  s.id = id;
  s.forward = forward;
  s.opened = s.connected = true;
  s.next_seq = 1;  // the server's first frame is DATA 1
  s.peer_limit = kInitialWindow;
  s.granted = w;
  ++budget_->streams;
  ++metrics_->streams_opened;
  SendControl(FrameType::kOpen, id, w, forward);
  return id;
}

uint64_t StreamProtocol::SendRoom(uint64_t stream) const {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.fin_sent || closed_ || failed_) return 0;
  const Stream& s = it->second;
  return s.peer_limit > s.sent ? s.peer_limit - s.sent : 0;
}

SendSlot StreamProtocol::OnDataRead(uint64_t stream, uint64_t payload) {
  SendSlot slot;
  const uint64_t cost = kFrameHeaderSize + payload + kFrameOverhead;
  ForceChargeUnattributed(cost);
  data_inflight_ += cost;
  metrics_->bytes_from_tcp += payload;
  auto it = streams_.find(stream);
  if (it == streams_.end()) return slot;
  Stream& s = it->second;
  s.sent += payload;
  slot.seq = s.send_seq++;
  // Until the server's first WINDOW the OPEN may still be on its way: ordered
  // frames cannot overtake it.
  slot.ordered = o_.is_client && !s.peer_window_seen;
  return slot;
}

void StreamProtocol::OnLocalEof(uint64_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.fin_sent) return;
  Stream& s = it->second;
  s.fin_sent = true;
  SendControl(FrameType::kFin, s.id, s.send_seq++, "", o_.is_client && !s.peer_window_seen);
  MaybeFinish(s);
}

void StreamProtocol::OnConnected(uint64_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  it->second.connected = true;
  if (!it->second.writeq.empty()) Emit(StreamEvent::Kind::kWritable, stream);
}

Chunk* StreamProtocol::NextChunk(uint64_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || !it->second.connected || it->second.writeq.empty()) return nullptr;
  return &it->second.writeq.front();
}

OwnedBuffer StreamProtocol::OnChunkWritten(Time now, uint64_t stream) {
  now_ = std::max(now_, now);
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.writeq.empty()) return {};
  Stream& s = it->second;
  Chunk c = std::move(s.writeq.front());
  s.writeq.pop_front();
  if (c.fin) {
    s.fin_written = true;
    Release(&s, kFrameOverhead);
    MaybeFinish(s);
    return {};
  }
  // The payload leaves the promise (granted - written) and the frame its
  // overhead.
  s.written += c.size;
  s.flowing = true;
  metrics_->bytes_to_tcp += c.size;
  Release(&s, c.size + kFrameOverhead);
  MaybeGrant(s, /*always=*/false);
  return std::move(c.event.owned);
}

void StreamProtocol::MaybeGrant(Stream& s, bool always) {
  if (closed_ || failed_) return;
  const uint64_t w = s.flowing ? WindowFor() : std::min(WindowFor(), kOpenWindow);
  const uint64_t limit = s.written + w;
  uint64_t delta = limit > s.granted ? limit - s.granted : 0;
  // Grant in steps of a quarter window: few WINDOW frames, never a stalled
  // sender.
  if (!always && delta < w / 4) return;
  // Windows may not take the last quarter of the budget: it stays for the streams
  // that open meanwhile (their charge and initial window) and for frames held.
  const uint64_t reserve = budget_->memory_limit() / 4;
  const uint64_t room =
      budget_->memory_available() > reserve ? budget_->memory_available() - reserve : 0;
  if (delta > 0 && (delta > room || !Charge(&s, delta))) {
    // What the budget can back now, if it is worth a frame; the rest later.
    const uint64_t avail = room;
    delta = avail >= std::min<uint64_t>(kChunk, w / 4) ? std::min(avail, delta) : 0;
    if (delta > 0 && !Charge(&s, delta)) delta = 0;
    if (!s.starved) ++metrics_->refused["window_deferred"];
    s.starved = true;
    next_retry_ = std::min(next_retry_, now_ + kGrantRetry);
  } else {
    s.starved = false;
  }
  s.granted += delta;
  // The first WINDOW also tells the client its OPEN arrived (from then on it
  // sends unordered), so it goes out even when it grants nothing new.
  if (delta > 0 || always) SendControl(FrameType::kWindow, s.id, s.granted);
}

void StreamProtocol::Drain() {
  if (draining_) return;
  draining_ = true;
  if (!o_.is_client) SendControl(FrameType::kGoAway, 0, 0, "server bridge is shutting down");
}

void StreamProtocol::OnConnectionClosed(const absl::Status& status) {
  if (closed_) return;
  closed_ = true;
  std::vector<uint64_t> ids;
  for (auto& [id, s] : streams_) ids.push_back(id);
  for (uint64_t id : ids) {
    Stream& s = streams_.at(id);
    // Both sides finished the stream (our FIN went out, the peer's arrived in
    // order): only bytes queued for the socket remain; they are written and end
    // with the EOF.
    if (status.ok() && s.fin_sent && s.fin_received && s.reorder.empty()) {
      if (!s.writeq.empty()) Emit(StreamEvent::Kind::kWritable, id);
      continue;
    }
    EndStream(s, /*reset=*/true, ResetCode::kSessionLost, "local",
              absl::StrCat("longhaul connection ended: ",
                           status.ok() ? "closed" : std::string(status.message())));
  }
}

// ---- time ----

void StreamProtocol::OnTimeout(Time now) {
  now_ = std::max(now_, now);
  if (now < next_retry_) return;
  next_retry_ = Time::Infinite();
  std::vector<uint64_t> starved;
  for (auto& [id, s] : streams_) {
    if (s.starved) starved.push_back(id);
  }
  for (uint64_t id : starved) {
    auto it = streams_.find(id);
    if (it != streams_.end()) MaybeGrant(it->second, /*always=*/false);
  }
}

Time StreamProtocol::NextTimeout() const { return next_retry_; }

StreamProtocol::StreamDebug StreamProtocol::debug(uint64_t stream) const {
  StreamDebug d;
  auto it = streams_.find(stream);
  if (it == streams_.end()) return d;
  const Stream& s = it->second;
  d.granted = s.granted;
  d.written = s.written;
  d.received = s.received;
  d.held_frames = s.held();
  d.peer_limit = s.peer_limit;
  d.sent = s.sent;
  d.charged = s.charged;
  d.opened = s.opened;
  d.fin_received = s.fin_received;
  d.fin_sent = s.fin_sent;
  return d;
}

// ---- the peer ----

void StreamProtocol::OnMessage(Time now, Event event) {
  now_ = std::max(now_, now);
  if (failed_ || closed_) return;
  absl::StatusOr<Frame> f = DecodeFrame(Bytes(event));
  if (!f.ok())
    return SessionError("", std::string(f.status().message()),
                        /*protocol=*/true);
  OnFrame(now, event, *f);
}

void StreamProtocol::OnFrame(Time now, Event& e, const Frame& f) {
  auto it = streams_.find(f.stream);
  Stream* s = it == streams_.end() ? nullptr : &it->second;
  switch (f.type) {
    case FrameType::kGoAway:
      if (!o_.is_client) {
        return SessionError("", "GOAWAY from a client bridge", /*protocol=*/true);
      }
      if (!draining_) {
        draining_ = true;
        Emit(StreamEvent::Kind::kGoAway, 0);
      }
      return;
    case FrameType::kWindow:
      if (s == nullptr) return;  // the stream ended meanwhile
      s->peer_window_seen = true;
      if (f.value > s->peer_limit) {
        s->peer_limit = f.value;
        Emit(StreamEvent::Kind::kSendRoom, s->id);
      }
      return;
    case FrameType::kReset:
      if (s == nullptr) {
        // A reset that overtook its stream's OPEN: remember the id, so the OPEN
        // that follows is ignored instead of connecting to the target for nobody.
        if (!o_.is_client) Remember(f.stream);
        return;
      }
      return EndStream(*s, /*reset=*/true, static_cast<ResetCode>(f.value), "peer",
                       std::string(f.text()));
    case FrameType::kOpen:
      if (o_.is_client) return SessionError("", "OPEN from a server bridge", /*protocol=*/true);
      if (s != nullptr) {
        return SessionError("", absl::StrCat("stream ", f.stream, ": sequence number 0 repeated"),
                            /*protocol=*/true);
      }
      return OnPeerOpen(now, e, f);
    case FrameType::kData:
    case FrameType::kFin:
      if (s == nullptr) {
        // Ended (late, ignored) or never opened: nothing is kept for a stream
        // that was never opened (a client bridge's frames cannot overtake their
        // OPEN).
        const bool ended = o_.is_client ? f.stream < next_stream_id_ : Remembered(f.stream);
        if (ended) return;
        return SessionError("not_opened",
                            absl::StrCat("stream ", f.stream, ": ", FrameTypeName(f.type),
                                         " for a stream that was never opened"),
                            /*protocol=*/true);
      }
      return Sequenced(*s, f.value, e, f);
  }
}

void StreamProtocol::OnPeerOpen(Time now, Event& e, const Frame& f) {
  const uint64_t id = f.stream;
  if (Remembered(id)) {
    // Ended, reset before its OPEN came, or forgotten (sparse ids): nothing to
    // open.
    Refuse("stale_id");
    return;
  }
  Remember(id);
  if (draining_) {
    return RefuseOpen(id, ResetCode::kDraining, "server bridge is draining", "");
  }
  const std::string forward(f.text());
  if (streams_.size() >= StreamLimit()) {
    return RefuseOpen(id, ResetCode::kLimit,
                      absl::StrCat("server bridge has ", streams_.size(), " streams open"),
                      "streams");
  }
  if (!o_.has_forward || !o_.has_forward(forward)) {
    return RefuseOpen(id, ResetCode::kUnknownForward,
                      absl::StrCat("no forward '", forward, "' on the server bridge"), "");
  }
  if (!budget_->TryAddTarget()) {
    return RefuseOpen(id, ResetCode::kLimit,
                      absl::StrCat("this client key has ", budget_->targets_used(),
                                   " target connections (limit ", budget_->target_limit(), ")"),
                      "targets");
  }
  // The client may send kInitialWindow before our first WINDOW: that promise is
  // charged with the stream.
  if (!Charge(nullptr, kStreamCharge + kInitialWindow)) {
    budget_->ReleaseTarget();
    return RefuseOpen(
        id, ResetCode::kLimit,
        absl::StrCat("memory budget of this client key spent (", budget_->memory_used(), " of ",
                     budget_->memory_limit(), " bytes)"),
        "memory");
  }
  Stream& s = streams_[id];
  s.charged = kStreamCharge + kInitialWindow;
  s.id = id;
  s.forward = forward;
  s.opened = true;
  s.admitted = true;
  s.next_seq = 1;
  s.granted = kInitialWindow;
  s.peer_limit = f.value;
  ++budget_->streams;
  ++metrics_->streams_opened;
  StreamEvent c;
  c.kind = StreamEvent::Kind::kConnectTarget;
  c.stream = id;
  c.forward = forward;
  events_.push_back(std::move(c));
  // The opening window now (kOpenWindow at most; the full one once data flows): the
  // data that arrives while the target connects is buffered.
  MaybeGrant(s, /*always=*/true);
}

void StreamProtocol::Sequenced(Stream& s, uint64_t seq, Event& e, const Frame& f) {
  if (seq < s.next_seq || s.reorder.count(seq)) {
    return SessionError("", absl::StrCat("stream ", s.id, ": sequence number ", seq, " repeated"),
                        /*protocol=*/true);
  }
  if (f.type == FrameType::kData && f.body.empty()) {
    return SessionError("", absl::StrCat("stream ", s.id, ": empty DATA frame"), true);
  }
  if (f.type == FrameType::kFin) {
    if (s.fin_received)
      return SessionError("", absl::StrCat("stream ", s.id, ": second FIN"), true);
    s.fin_received = true;
  }
  // What the peer may have in flight on this stream: its grant.
  const uint64_t payload = f.type == FrameType::kData ? f.body.size() : 0;
  if (s.received + s.reorder_bytes + payload > s.granted) {
    return SessionError(
        "", absl::StrCat("stream ", s.id, ": peer sent beyond its window of ", s.granted, " bytes"),
        true);
  }
  if (s.held() >= kMaxHeldFrames) {
    Refuse("frames");
    return ResetLocal(s.id, ResetCode::kLimit,
                      absl::StrCat("stream holds ", kMaxHeldFrames, " frames"));
  }
  // The payload is inside the promised window (charged); the frame's overhead
  // is not.
  if (!Charge(&s, kFrameOverhead)) {
    Refuse("memory");
    return ResetLocal(s.id, ResetCode::kLimit,
                      absl::StrCat("memory budget spent (", budget_->memory_used(), " of ",
                                   budget_->memory_limit(), " bytes)"));
  }
  if (seq != s.next_seq) {
    s.reorder_bytes += payload;
    Held h;
    h.type = f.type;
    h.payload = payload;
    h.event = std::move(e);
    s.reorder.emplace(seq, std::move(h));
    return;
  }
  const uint64_t id = s.id;
  Deliver(s, e, f);
  // Deliver never removes the stream; the frames that now follow in order go
  // too.
  while (!s.reorder.empty() && s.reorder.begin()->first == s.next_seq) {
    Held h = std::move(s.reorder.begin()->second);
    s.reorder.erase(s.reorder.begin());
    s.reorder_bytes -= h.payload;
    Frame nf;
    nf.type = h.type;
    nf.stream = id;
    nf.value = s.next_seq;
    nf.body = Bytes(h.event).subspan(kFrameHeaderSize);
    Deliver(s, h.event, nf);
  }
}

void StreamProtocol::Deliver(Stream& s, Event& e, const Frame& f) {
  ++s.next_seq;
  Chunk c;
  if (f.type == FrameType::kFin) {
    c.fin = true;
  } else {
    c.data = f.body.data();
    c.size = f.body.size();
    c.event = std::move(e);
    s.received += c.size;
  }
  const bool was_empty = s.writeq.empty();
  s.writeq.push_back(std::move(c));
  if (was_empty && s.connected) Emit(StreamEvent::Kind::kWritable, s.id);
}

}  // namespace longhaul::bridge
