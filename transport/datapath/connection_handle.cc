#include "transport/datapath/connection_handle.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"

namespace longhaul {

ConnectionHandle::ConnectionHandle(ConnectionHost* host, ConnectionInfo info)
    : info_(std::move(info)), host_(host) {}

ConnectionHandle::~ConnectionHandle() = default;

void ConnectionHandle::WakeLocked() {
  if (!wake_queued_ && host_ != nullptr) {
    wake_queued_ = true;
    host_->Wake(this);
  }
}

void ConnectionHandle::TakenLocked(const Event& e) {
  if (e.credit_units == 0) return;
  const uint64_t pending = consumed_.fetch_add(e.credit_units, std::memory_order_relaxed) +
                           e.credit_units;
  if (events_.empty() || pending >= info_.config.recv_window / 8) WakeLocked();
}

absl::StatusOr<uint64_t> ConnectionHandle::Send(SendBuffer buffer, uint64_t tag) {
  if (buffer.data == nullptr && buffer.size > 0) {
    return absl::InvalidArgumentError("Send: null data with non-zero size");
  }
  std::lock_guard<std::mutex> l(mu_);
  if (closed_ || host_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("connection is closed; cannot send",
                     status_.ok() ? "" : absl::StrCat(" (", status_.message(), ")")));
  }
  if (closing_) return absl::FailedPreconditionError("connection is closing; cannot send");
  submitted_units_.fetch_add(buffer.size == 0 ? 1 : buffer.size, std::memory_order_relaxed);
  Op op;
  op.kind = Op::Kind::kSend;
  op.send = std::move(buffer);
  op.tag = tag;
  op.expected_id = next_send_id_++;
  ops_.push_back(std::move(op));
  WakeLocked();
  return ops_.back().expected_id;
}

absl::Status ConnectionHandle::PostReceive(uint8_t* data, ByteCount capacity, uint64_t tag) {
  if (data == nullptr && capacity > 0) {
    return absl::InvalidArgumentError("PostReceive: null buffer with non-zero capacity");
  }
  return QueueReceive(Op::Kind::kPost, data, capacity, tag);
}

absl::Status ConnectionHandle::OfferReceive(uint64_t key, uint8_t* data, ByteCount capacity) {
  if (absl::Status s = Connection::CheckOffer(key, data, capacity); !s.ok()) return s;
  return QueueReceive(Op::Kind::kOffer, data, capacity, key);
}

absl::Status ConnectionHandle::QueueReceive(Op::Kind kind, uint8_t* data, ByteCount capacity,
                                            uint64_t tag) {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_ || host_ == nullptr) {
    return absl::FailedPreconditionError("connection is closed; cannot receive");
  }
  Op op;
  op.kind = kind;
  op.data = data;
  op.capacity = capacity;
  op.tag = tag;
  ops_.push_back(std::move(op));
  WakeLocked();
  return absl::OkStatus();
}

void ConnectionHandle::WithdrawOffer(uint64_t key) {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_ || host_ == nullptr) return;  // the close ended every offer
  Op op;
  op.kind = Op::Kind::kWithdraw;
  op.tag = key;
  ops_.push_back(std::move(op));
  WakeLocked();
}

void ConnectionHandle::ReturnBuffer(OwnedBuffer buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> l(mu_);
  if (closed_ || host_ == nullptr) return;  // freed here
  Op op;
  op.kind = Op::Kind::kReturn;
  op.owned = std::move(buffer);
  ops_.push_back(std::move(op));
  WakeLocked();
}

void ConnectionHandle::Close() {
  std::lock_guard<std::mutex> l(mu_);
  if (closing_ || closed_ || host_ == nullptr) return;
  closing_ = true;
  Op op;
  op.kind = Op::Kind::kClose;
  op.code = CloseCode::kNoError;
  ops_.push_back(std::move(op));
  WakeLocked();
}

void ConnectionHandle::Abort(std::string reason) {
  std::lock_guard<std::mutex> l(mu_);
  if (closing_ || closed_ || host_ == nullptr) return;
  closing_ = true;
  Op op;
  op.kind = Op::Kind::kClose;
  op.code = CloseCode::kApplication;
  op.reason = std::move(reason);
  ops_.push_back(std::move(op));
  WakeLocked();
}

bool ConnectionHandle::Poll(Event* event) {
  std::lock_guard<std::mutex> l(mu_);
  if (events_.empty() || flush_pending_) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  TakenLocked(*event);
  return true;
}

bool ConnectionHandle::Wait(Event* event, Duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(std::max<int64_t>(0, timeout.ns()));
  ++waiters_;
  cv_.wait_until(l, deadline, [&] { return (!events_.empty() && !flush_pending_) || closed_; });
  --waiters_;
  if (events_.empty() || flush_pending_) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  TakenLocked(*event);
  return true;
}

void ConnectionHandle::SetCallback(EventCallback callback) {
  {
    std::lock_guard<std::mutex> l(mu_);
    callback_ = std::move(callback);
    if (!callback_ || events_.empty()) return;
    flush_pending_ = true;
    if (host_ != nullptr) {
      // The driver passes the queued events to the callback on its thread.
      if (!wake_queued_) {
        wake_queued_ = true;
        host_->Wake(this);
      }
      return;
    }
  }
  // Detached (the connection ended before the callback was set): no driver thread will
  // flush, so the queued events, the kClosed among them, go to the callback here.
  FlushToCallback();
}

bool ConnectionHandle::WaitClosed(Duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(std::max<int64_t>(0, timeout.ns()));
  ++waiters_;
  bool ok = cv_.wait_until(l, deadline, [&] { return closed_; });
  --waiters_;
  return ok;
}

bool ConnectionHandle::closed() const {
  std::lock_guard<std::mutex> l(mu_);
  return closed_;
}

absl::Status ConnectionHandle::status() const {
  std::lock_guard<std::mutex> l(mu_);
  return status_;
}

ConnectionStats ConnectionHandle::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

ConnectionDebugState ConnectionHandle::debug_state() const {
  std::lock_guard<std::mutex> l(mu_);
  return debug_;
}

// ---- driver side ----

void ConnectionHandle::TakeOps(std::vector<Op>* ops) {
  std::lock_guard<std::mutex> l(mu_);
  for (Op& op : ops_) ops->push_back(std::move(op));
  ops_.clear();
  wake_queued_ = false;
}

void ConnectionHandle::Deliver(std::vector<Event>* events) {
  if (events->empty()) return;
  std::unique_lock<std::mutex> l(mu_);
  for (const Event& e : *events) {
    if (e.type == Event::Type::kClosed) {
      closed_ = true;
      status_ = e.status;
    }
  }
  if (callback_ && !flush_pending_) {
    EventCallback cb = callback_;
    l.unlock();
    uint64_t taken = 0;
    for (Event& e : *events) {
      taken += e.credit_units;
      cb(e);
    }
    consumed_.fetch_add(taken, std::memory_order_relaxed);
    l.lock();
  } else {
    for (Event& e : *events) events_.push_back(std::move(e));
  }
  if (waiters_ > 0) cv_.notify_all();
  l.unlock();
  events->clear();
}

void ConnectionHandle::FlushToCallback() {
  std::unique_lock<std::mutex> l(mu_);
  if (!flush_pending_) return;
  flush_pending_ = false;
  if (!callback_) return;
  std::deque<Event> queued;
  queued.swap(events_);
  EventCallback cb = callback_;
  l.unlock();
  uint64_t taken = 0;
  for (Event& e : queued) {
    taken += e.credit_units;
    cb(e);
  }
  consumed_.fetch_add(taken, std::memory_order_relaxed);
}

void ConnectionHandle::PublishStats(const ConnectionStats& stats,
                                    const ConnectionDebugState& debug) {
  std::lock_guard<std::mutex> l(mu_);
  stats_ = stats;
  debug_ = debug;
}

void ConnectionHandle::Detach(absl::Status status) {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> l(mu_);
    host_ = nullptr;
    for (Op& op : ops_) {
      if (op.kind == Op::Kind::kOffer) {  // never applied: the buffer goes back
        Event e;
        e.type = Event::Type::kOfferWithdrawn;
        e.tag = op.tag;
        e.data = op.data;
        e.size = op.capacity;
        e.status = absl::CancelledError("connection closed before the buffer was offered");
        events.push_back(std::move(e));
        continue;
      }
      if (op.kind != Op::Kind::kSend) continue;
      Event e;
      e.type = Event::Type::kSendComplete;
      e.message_id = op.expected_id;
      e.tag = op.tag;
      e.size = op.send.size;
      e.status = absl::CancelledError(absl::StrCat("connection closed before the message was sent",
                                                   status.ok() ? "" : ": ",
                                                   status.ok() ? "" : status.message()));
      events.push_back(std::move(e));
    }
    ops_.clear();
    if (!closed_) {
      Event c;
      c.type = Event::Type::kClosed;
      c.status = status;
      events.push_back(std::move(c));
    }
    flush_pending_ = false;
  }
  Deliver(&events);
}

}  // namespace longhaul
