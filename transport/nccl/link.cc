#include "transport/nccl/link.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/nccl/comms.h"
#include "transport/nccl/plugin_log.h"
#include "transport/nccl/runtime.h"

namespace longhaul::nccl {

void Link::SetReady(std::shared_ptr<ConnectionHandle> conn) {
  std::lock_guard<std::mutex> l(mu_);
  conn_ = std::move(conn);
  if (state_ == State::kConnecting) state_ = State::kReady;
}

void Link::SetFailed(absl::Status s) {
  std::lock_guard<std::mutex> l(mu_);
  state_ = State::kFailed;
  status_ = std::move(s);
}

uint32_t Link::AddSender(std::shared_ptr<SendState> s) {
  std::lock_guard<std::mutex> l(mu_);
  uint32_t id = next_comm_id_++;
  s->id = id;
  senders_[id] = s;
  ++users_;
  return id;
}

void Link::RemoveSender(uint32_t id) {
  std::shared_ptr<ConnectionHandle> to_close;
  {
    std::lock_guard<std::mutex> l(mu_);
    senders_.erase(id);
    if (--users_ == 0) {
      close_when_idle_ = true;
      if (pending_sends_ == 0 && conn_ != nullptr) to_close = conn_;
    }
  }
  if (to_close) to_close->Close();
}

void Link::AddReceiver(const std::shared_ptr<RecvState>& s) {
  std::lock_guard<std::mutex> l(mu_);
  receivers_[s->id] = s;
}

void Link::RemoveReceiver(uint32_t id) {
  std::lock_guard<std::mutex> l(mu_);
  if (receivers_.erase(id) > 0 && users_ > 0) --users_;
}

absl::Status Link::StatusLocked() const {
  switch (state_) {
    case State::kReady:
      return absl::OkStatus();
    case State::kConnecting:
      return absl::UnavailableError("connection in progress");
    case State::kFailed:
      return status_;
    case State::kClosed:
      return absl::AbortedError(absl::StrCat("longhaul connection ", key_, " closed: ",
                                             status_.ok() ? "by the peer" : status_.ToString()));
  }
  return absl::InternalError("bad link state");
}

absl::Status Link::SendControl(FrameKind kind, uint32_t comm, uint64_t value, uint64_t instance,
                               int32_t tag) {
  std::shared_ptr<ConnectionHandle> c;
  {
    std::lock_guard<std::mutex> l(mu_);
    LH_RETURN_IF_ERROR(StatusLocked());
    c = conn_;
    ++pending_sends_;
  }
  auto buf =
      std::shared_ptr<uint8_t>(new uint8_t[kFrameHeaderBytes], std::default_delete<uint8_t[]>());
  EncodeFrameHeader(MakeFrameHeader(kind, comm, tag, value, instance), buf.get());
  absl::StatusOr<uint64_t> id = c->Send(SendBuffer{buf.get(), kFrameHeaderBytes, buf}, 0);
  if (!id.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    --pending_sends_;
    return absl::AbortedError(
        absl::StrCat("longhaul connection ", key_, ": ", id.status().message()));
  }
  return absl::OkStatus();
}

absl::Status Link::SendOpen(uint32_t comm, uint64_t listen_id, uint64_t instance,
                            const OpenBody& body) {
  auto buf =
      std::shared_ptr<uint8_t>(new uint8_t[kOpenFrameBytes], std::default_delete<uint8_t[]>());
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kOpen, comm, 0, listen_id, instance), buf.get());
  EncodeOpenBody(body, buf.get() + kFrameHeaderBytes);
  return SendData(std::move(buf), kOpenFrameBytes);
}

void Link::SendReject(uint32_t comm, uint64_t listen_id, RejectReason reason) {
  SendControl(FrameKind::kReject, comm, listen_id, 0, static_cast<int32_t>(reason)).IgnoreError();
}

std::string Link::PeerIdentity() {
  static std::atomic<uint64_t> next_serial{1};
  std::lock_guard<std::mutex> l(mu_);
  if (conn_ != nullptr && !conn_->info().peer_key.empty()) {
    return absl::StrCat("key ", conn_->info().peer_key);
  }
  if (serial_ == 0) serial_ = next_serial.fetch_add(1);
  return absl::StrCat("connection ", key_, " #", serial_);
}

absl::Status Link::SendData(std::shared_ptr<uint8_t> buf, size_t bytes) {
  std::shared_ptr<ConnectionHandle> c;
  {
    std::lock_guard<std::mutex> l(mu_);
    LH_RETURN_IF_ERROR(StatusLocked());
    c = conn_;
    ++pending_sends_;
  }
  const uint8_t* data = buf.get();
  absl::StatusOr<uint64_t> id = c->Send(SendBuffer{data, bytes, std::move(buf)}, 0);
  if (!id.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    --pending_sends_;
    return absl::AbortedError(
        absl::StrCat("longhaul connection ", key_, ": ", id.status().message()));
  }
  return absl::OkStatus();
}

absl::Status Link::SendInPlace(uint32_t comm, int tag, const void* data, size_t size,
                               std::shared_ptr<ZeroCopyWait> wait, uint64_t region,
                               uint64_t placement_key) {
  auto head =
      std::shared_ptr<uint8_t>(new uint8_t[kFrameHeaderBytes], std::default_delete<uint8_t[]>());
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kDataHead, comm, tag, size, 0), head.get());
  // Both messages under the lock: no other comm's message may come between them, and the
  // payload's id is registered before its completion can be delivered.
  std::lock_guard<std::mutex> l(mu_);
  LH_RETURN_IF_ERROR(StatusLocked());
  absl::StatusOr<uint64_t> id = conn_->Send(SendBuffer{head.get(), kFrameHeaderBytes, head}, 0);
  if (!id.ok()) {
    return absl::AbortedError(
        absl::StrCat("longhaul connection ", key_, ": ", id.status().message()));
  }
  ++pending_sends_;
  SendBuffer payload{static_cast<const uint8_t*>(data), size, nullptr};
  payload.region = region;
  payload.placement_key = placement_key;
  absl::StatusOr<uint64_t> pid = conn_->Send(std::move(payload), 0);
  if (!pid.ok()) {
    return absl::AbortedError(
        absl::StrCat("longhaul connection ", key_, ": ", pid.status().message()));
  }
  ++pending_sends_;
  in_place_[*pid] = std::move(wait);
  return absl::OkStatus();
}

void Link::AbortAndWait(const std::string& reason, Duration timeout) {
  std::shared_ptr<ConnectionHandle> c = conn();
  if (!c) return;
  c->Abort(reason);
  c->WaitClosed(timeout);
}

void Link::OnEvent(Event& e) {
  switch (e.type) {
    case Event::Type::kSendComplete: {
      std::shared_ptr<ConnectionHandle> to_close;
      bool drained = false;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!in_place_.empty()) {
          auto it = in_place_.find(e.message_id);
          if (it != in_place_.end()) {
            it->second->state.store(e.status.ok() ? 1 : 2);
            in_place_.erase(it);
            drained = true;  // someone may wait for this one (CloseSend)
          }
        }
        if (pending_sends_ > 0) --pending_sends_;
        drained |= pending_sends_ == 0;
        if (drained && close_when_idle_ && users_ == 0 && state_ == State::kReady) {
          to_close = conn_;
        }
      }
      if (to_close) to_close->Close();
      if (drained) {
        if (std::shared_ptr<Runtime> rt = rt_.lock()) rt->NotifyProgress();
      }
      return;
    }
    case Event::Type::kReceiveComplete: {
      if (expect_payload_) {  // the driver thread alone touches expect_payload_
        expect_payload_ = false;
        HandlePayload(expected_, e, e.data, e.size);
        return;
      }
      if (!e.status.ok() || e.data == nullptr || e.size < kFrameHeaderBytes) {
        LogWarn("connection %s: dropped a malformed message of %llu bytes (%s)", key_.c_str(),
                static_cast<unsigned long long>(e.size), e.status.ToString().c_str());
        return;
      }
      absl::StatusOr<FrameHeader> h = DecodeFrameHeader(e.data, e.size);
      if (!h.ok()) {
        LogWarn("connection %s: dropped a message that is not a plugin frame (%s)", key_.c_str(),
                std::string(h.status().message()).c_str());
        return;
      }
      HandleFrame(*h, e);
      return;
    }
    case Event::Type::kOfferWithdrawn: {  // an irecv buffer is NCCL's again
      std::shared_ptr<RecvState> r;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = receivers_.find(OfferComm(e.tag));
        if (it != receivers_.end()) r = it->second;
      }
      if (r) {
        std::lock_guard<std::mutex> l(r->mu);
        r->offers.erase(e.tag);
        r->offers_cv.notify_all();
      }
      if (std::shared_ptr<Runtime> rt = rt_.lock()) rt->NotifyProgress();
      return;
    }
    case Event::Type::kClosed: {
      bool in_use;
      {
        std::lock_guard<std::mutex> l(mu_);
        state_ = State::kClosed;
        status_ = e.status;
        pending_sends_ = 0;
        for (auto& [id, w] : in_place_) w->state.store(2);
        in_place_.clear();
        in_use = users_ > 0;
        // The connection's placement windows went with it: every offer is NCCL's again.
        for (auto& [id, r] : receivers_) {
          std::lock_guard<std::mutex> rl(r->mu);
          r->offers.clear();
          r->offers_cv.notify_all();
        }
      }
      if (!e.status.ok() && in_use) {
        LogWarn("connection %s closed: %s", key_.c_str(), e.status.ToString().c_str());
      }
      if (std::shared_ptr<Runtime> rt = rt_.lock()) rt->NotifyProgress();
      return;
    }
  }
}

void Link::HandlePayload(const FrameHeader& h, Event& e, const uint8_t* payload, size_t size) {
  std::shared_ptr<RecvState> r;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = receivers_.find(h.comm);
    if (it != receivers_.end()) r = it->second;
  }
  if (!r || !e.status.ok() || h.value != size || (size > 0 && payload == nullptr)) {
    if (!reported_unknown_) {
      reported_unknown_ = true;
      LogWarn("connection %s: a message for comm %u was dropped (%s)", key_.c_str(), h.comm,
              !r ? "unknown or closed comm" : "size does not match its header");
    }
    return;
  }
  {
    std::lock_guard<std::mutex> l(r->mu);
    if (!r->ended.ok()) return;  // the comm was ended: what its sender still sends is dropped
  }
  // The receiver's side of the credit (docs/nccl.md, section 3): the sender may send while
  // nothing it sent waits here, or while what waits plus this message stays within the
  // credit. `consumed` only grows, and a sender acts on consumption reports that were
  // written after it grew, so this never ends a comm whose sender kept the rule.
  const uint64_t charge = size + kMessageOverhead;
  const uint64_t consumed = r->consumed.load();
  const uint64_t queued = r->received > consumed ? r->received - consumed : 0;
  if (queued > 0 && queued + charge > r->credit) {
    EndReceiver(r,
                absl::AbortedError(absl::StrCat("comm ", h.comm, " on connection ", key_,
                                                " ended: the sender exceeded its receive credit (",
                                                queued, " bytes waiting for irecv + a message of ",
                                                size, " bytes + ", kMessageOverhead, " > the ",
                                                r->credit, " bytes granted)")),
                RejectReason::kCreditExceeded);
    return;
  }
  r->received += charge;
  Incoming in;
  in.payload = payload;
  in.size = size;
  in.tag = h.tag;
  in.owned = std::move(e.owned);
  std::lock_guard<std::mutex> l(r->mu);
  r->queue.push_back(std::move(in));
}

void Link::EndReceiver(const std::shared_ptr<RecvState>& r, absl::Status why, RejectReason reason) {
  std::deque<Incoming> dropped;
  {
    std::lock_guard<std::mutex> l(r->mu);
    if (!r->ended.ok()) return;
    r->ended = why;
    dropped.swap(r->queue);
  }
  dropped.clear();  // the transport's receive buffers are freed
  SendReject(r->id, r->listen, reason);
  std::shared_ptr<Runtime> rt = rt_.lock();
  LogWarn("%s; %s", std::string(why.message()).c_str(), rt ? rt->CountCreditEnded().c_str() : "");
  if (rt) rt->NotifyProgress();
}

void Link::HandleOpen(const FrameHeader& h, const Event& e) {
  std::shared_ptr<Runtime> rt = rt_.lock();
  if (!rt) return;
  auto refuse = [&](RejectReason reason, const std::string& detail) {
    uint64_t total = 0;
    const std::string counts = rt->CountRefusedOpen(reason, &total);
    // Every refusal while there are few, then at powers of two: a peer cannot fill the log.
    if (total <= 16 || (total & (total - 1)) == 0) {
      LogWarn("connection %s: refused the OPEN of comm %u: %s%s; %s", key_.c_str(), h.comm,
              RejectReasonText(static_cast<int32_t>(reason)), detail.c_str(), counts.c_str());
    }
    SendReject(h.comm, h.value, reason);
  };
  absl::StatusOr<OpenBody> body = DecodeOpenBody(e.data, e.size);
  if (!body.ok()) {
    refuse(RejectReason::kMalformed, absl::StrCat(" (", body.status().message(), ")"));
    return;
  }
  std::shared_ptr<ListenState> ls = rt->FindListen(h.value);
  if (!ls) {
    refuse(RejectReason::kNoListen, "");
    return;
  }
  if (ls->has_comm_id != body->has_comm_id || ls->comm_id != body->comm_id) {
    refuse(RejectReason::kOtherCommunicator,
           body->has_comm_id == ls->has_comm_id
               ? ""
               : (ls->has_comm_id ? " (the OPEN carries no comm id)"
                                  : " (the listen comm has no comm id)"));
    return;
  }
  const std::string peer = PeerIdentity();
  auto r = std::make_shared<RecvState>();
  r->id = h.comm;
  r->listen = ls->id;
  r->credit = rt->settings.credit;
  RejectReason reason = RejectReason::kNoListen;
  bool taken = false;
  {
    std::lock_guard<std::mutex> l(ls->mu);
    if (ls->closed) {
      reason = RejectReason::kNoListen;
    } else if (!ls->bound_peer.empty() && ls->bound_peer != peer) {
      reason = RejectReason::kBoundToOtherPeer;
    } else if (ls->pending.size() >= kMaxPendingOpens) {
      reason = RejectReason::kTooManyPending;
    } else {
      std::lock_guard<std::mutex> lk(mu_);
      if (receivers_.count(h.comm) > 0) {  // a peer plugin never reuses a comm id
        reason = RejectReason::kMalformed;
      } else {
        receivers_[h.comm] = r;
        ++users_;
        ls->bound_peer = peer;
        ls->pending.push_back({shared_from_this(), r});
        taken = true;
      }
    }
  }
  if (!taken) {
    refuse(reason, reason == RejectReason::kMalformed
                       ? " (its comm id is already in use on this connection)"
                   : reason == RejectReason::kTooManyPending
                       ? absl::StrCat(" (", kMaxPendingOpens, " wait for accept)")
                       : "");
  }
}

void Link::HandleFrame(const FrameHeader& h, Event& e) {
  switch (static_cast<FrameKind>(h.kind)) {
    case FrameKind::kData:
      HandlePayload(h, e, e.data + kFrameHeaderBytes, e.size - kFrameHeaderBytes);
      return;
    case FrameKind::kDataHead:
      expect_payload_ = true;
      expected_ = h;
      return;
    case FrameKind::kCredit:
    case FrameKind::kReject: {
      std::shared_ptr<SendState> s;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = senders_.find(h.comm);
        if (it != senders_.end()) s = it->second.lock();
      }
      if (!s) return;
      if (static_cast<FrameKind>(h.kind) == FrameKind::kReject) {
        s->reject_reason.store(h.tag);
        s->rejected.store(true);
        return;
      }
      uint64_t prev = s->peer_consumed.load();
      while (h.value > prev && !s->peer_consumed.compare_exchange_weak(prev, h.value)) {
      }
      return;
    }
    case FrameKind::kOpen:
      HandleOpen(h, e);
      return;
    case FrameKind::kClose: {
      std::shared_ptr<RecvState> r;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = receivers_.find(h.comm);
        if (it != receivers_.end()) r = it->second;
      }
      if (r) {
        std::lock_guard<std::mutex> l(r->mu);
        r->peer_closed = true;
      }
      return;
    }
  }
  LogWarn("connection %s: unknown frame kind %u dropped", key_.c_str(), h.kind);
}

}  // namespace longhaul::nccl
