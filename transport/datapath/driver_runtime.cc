#include "transport/datapath/driver_runtime.h"

#include <pthread.h>
#include <sched.h>
#include <sys/random.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"

namespace longhaul::datapath {

endpoint::EndpointConfig EndpointConfigFor(const EndpointOptions& o,
                                           endpoint::AddressFormatter format_address) {
  const auto word = [] {
    uint8_t b[8];
    SystemEntropy(b);
    uint64_t w;
    std::memcpy(&w, b, sizeof(w));
    return w;
  };
  endpoint::EndpointConfig c;
  c.cookie_lifetime = o.cookie_lifetime;
  c.max_connections = o.max_connections;
  c.max_flows = std::clamp<uint32_t>(o.max_flows, 1, 65535);
  c.seed = o.seed != 0 ? o.seed : word();
  c.cookie_secret = endpoint::SipKey{word(), word()};
  c.id_entropy = SystemEntropy;  // connection ids: never from the seed
  c.format_address = std::move(format_address);
  c.security = o.security;
  c.send_quantum = o.send_quantum;
  // Client ids' top 16 bits count connections from a random start: a server with several
  // engines spreads one client's connections evenly, and many clients' first ones too.
  c.client_id_tag = [tags = std::make_shared<std::atomic<uint32_t>>(
                         static_cast<uint32_t>(word()))] {
    return static_cast<uint16_t>(tags->fetch_add(1, std::memory_order_relaxed));
  };
  if (!c.security.insecure && !c.security.entropy) c.security.entropy = SystemEntropy;
  return c;
}

endpoint::EndpointConfig EngineConfigFor(const EndpointOptions& o,
                                         endpoint::AddressFormatter format_address,
                                         const EngineSlot& slot) {
  endpoint::EndpointConfig c = EndpointConfigFor(o, std::move(format_address));
  c.engine = slot.index;
  c.engine_count = slot.count;
  // max_connections bounds the endpoint, not each engine: every engine holds its share
  // (rounded up), so N engines hold at most max_connections + N - 1.
  c.max_connections = (o.max_connections + slot.count - 1) / slot.count;
  if (slot.cookie_secret) c.cookie_secret = *slot.cookie_secret;
  if (slot.client_tags) {
    c.client_id_tag = [tags = slot.client_tags] {
      return static_cast<uint16_t>(tags->fetch_add(1, std::memory_order_relaxed));
    };
  }
  return c;
}

void SetUpEngineThread(const EngineSlot& slot) {
  pthread_setname_np(pthread_self(), absl::StrCat("lh-engine-", slot.index).c_str());
  if (slot.cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(slot.cpu, &set);
  if (const int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
    LOG(WARNING) << "engine " << slot.index << ": cannot pin its thread to CPU " << slot.cpu
                 << ": " << std::strerror(err) << " (it runs unpinned)";
  }
}

double ThisThreadCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

absl::Status ValidateEndpointOptions(const EndpointOptions& options) {
  if (options.tx_batch == 0 || options.tx_batch > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("tx_batch=", options.tx_batch, " is outside [1, 1024]"));
  }
  if (options.spin < Duration::Zero() || options.spin > Duration::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spin=", FormatDuration(options.spin), " is outside [0, 10ms]"));
  }
  if (options.cookie_lifetime < Duration::Seconds(1)) {
    return absl::InvalidArgumentError("cookie_lifetime must be at least 1s");
  }
  if (options.send_quantum > (ByteCount{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("send_quantum=", options.send_quantum, " is outside [0, 1MiB]"));
  }
  return EndpointConfigFor(options, nullptr).Validate();
}

absl::Status ValidateConnectOptions(const ConnectOptions& options) {
  LH_RETURN_IF_ERROR(options.config.Validate());
  if (options.app_data.size() > endpoint::kMaxAppDataSize) {
    return absl::InvalidArgumentError(absl::StrCat("connect: application data of ",
                                                   options.app_data.size(), " bytes exceeds ",
                                                   endpoint::kMaxAppDataSize));
  }
  if (options.engine < -1 || options.engine > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connect: engine=", options.engine, " is outside [-1 (the next in turn), 255]"));
  }
  return absl::OkStatus();
}

void RunOnDriverThread(bool on_driver_thread,
                       const std::function<bool(std::function<void()>)>& post,
                       const std::function<void()>& fn) {
  if (on_driver_thread) {
    fn();
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  const bool posted = post([&] {
    fn();
    std::lock_guard<std::mutex> l(mu);
    done = true;
    cv.notify_all();
  });
  if (!posted) return;
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
}

void SystemEntropy(std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      PLOG(FATAL) << "getrandom";
    }
    done += static_cast<size_t>(n);
  }
}

DriverRuntime::DriverRuntime(endpoint::EndpointConfig config, Hooks hooks,
                             std::shared_ptr<AcceptQueue> accept_queue)
    : endpoint_(std::move(config)),
      hooks_(std::move(hooks)),
      accept_queue_(std::move(accept_queue)) {
  if (accept_queue_ == nullptr) {
    accept_queue_ = std::make_shared<AcceptQueue>();
    owns_accept_queue_ = true;
  }
}

DriverRuntime::~DriverRuntime() = default;

// ---- any thread ----

void DriverRuntime::Wake(ConnectionHandle* h) {
  if (OnDriverThread()) {
    local_wakes_.push_back(h);
    return;
  }
  bool post = false;
  {
    std::lock_guard<std::mutex> l(wake_mu_);
    wakes_.push_back(h);
    post = !wake_posted_;
    wake_posted_ = true;
  }
  if (post) hooks_.wake();
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> DriverRuntime::Accept(Duration timeout) {
  return accept_queue_->Pop(timeout);
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> DriverRuntime::WaitConnect(
    ConnectWait& wait, Duration timeout, const std::string& server) {
  std::unique_lock<std::mutex> l(wait.mu);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(std::max<int64_t>(0, timeout.ns())) +
                        std::chrono::seconds(1);
  if (!wait.cv.wait_until(l, deadline, [&] { return wait.done; })) {
    wait.abandoned = true;
    return absl::DeadlineExceededError(
        absl::StrCat("connect to ", server, ": the driver did not finish in time"));
  }
  return wait.value;
}

void DriverRuntime::Complete(ConnectWait& wait,
                               absl::StatusOr<std::shared_ptr<ConnectionHandle>> v) {
  std::lock_guard<std::mutex> l(wait.mu);
  wait.value = std::move(v);
  wait.done = true;
  wait.cv.notify_all();
}

// ---- set-up ----

absl::Status DriverRuntime::Listen(endpoint::LocalId local, ListenOptions options) {
  endpoint::ListenConfig lc;
  lc.config = options.config;
  lc.foreign_datagrams = static_cast<bool>(options.on_foreign_datagram);
  const bool queued = !options.on_accept;
  const uint32_t backlog = options.backlog;
  // Connections without an accept callback wait in the accept queue: refuse new ones
  // while it is full, before the server keeps any state for them.
  lc.policy = [this, queued, backlog, base = options.config, policy = std::move(options.policy)](
                  const endpoint::HelloInfo& info) -> absl::StatusOr<TransportConfig> {
    if (queued && accept_queue_->Full(backlog)) {
      return absl::UnavailableError("server busy: too many connections waiting to be accepted");
    }
    if (policy) return policy(info);
    return base;
  };
  LH_RETURN_IF_ERROR(endpoint_.Listen(local, std::move(lc)));
  listeners_[local] = ListenerState{std::move(options.on_accept), backlog};
  return absl::OkStatus();
}

void DriverRuntime::StartConnect(Time now, const endpoint::PeerAddress& server,
                                   std::vector<endpoint::LocalId> locals, ConnectOptions options,
                                   std::shared_ptr<ConnectWait> wait) {
  endpoint::ConnectConfig cc;
  cc.config = std::move(options.config);
  cc.app_data = std::move(options.app_data);
  cc.timeout = options.timeout;
  cc.protocol_version = options.protocol_version;
  cc.server_key = options.server_key;
  if (options.engine >= 0) cc.id_tag = static_cast<uint16_t>(options.engine);
  absl::StatusOr<endpoint::ConnectionId> id = endpoint_.Connect(now, server, locals, std::move(cc));
  if (!id.ok()) {
    for (endpoint::LocalId l : locals) hooks_.close_local(l);
    Complete(*wait, id.status());
    return;
  }
  wait->callback = std::move(options.callback);
  waits_[*id] = std::move(wait);
}

// ---- endpoint events ----

std::shared_ptr<ConnectionHandle> DriverRuntime::MakeHandle(endpoint::ConnectionId id) {
  const endpoint::ConnectionMeta* meta = endpoint_.MetaAt(id);
  Connection* conn = endpoint_.ConnectionAt(id);
  CHECK(meta != nullptr && conn != nullptr);
  ConnectionInfo info;
  info.config = conn->config();
  info.local_id = meta->id;
  info.peer_id = meta->peer_id;
  info.local_address = hooks_.local_address(meta->is_server ? meta->listener : meta->locals[0]);
  info.peer_address = endpoint_.Format(meta->peer);
  info.peer_app_data = meta->peer_app_data;
  info.is_server = meta->is_server;
  info.engine = endpoint_.config().engine;
  info.security = endpoint::SecurityModeName(meta->security);
  if (meta->security != endpoint::SecurityMode::kPlaintext) {
    info.cipher = crypto::CipherName(meta->cipher);
  }
  if (meta->peer_static_key) info.peer_key = crypto::ToHex(*meta->peer_static_key);
  auto handle = std::make_shared<ConnectionHandle>(this, std::move(info));
  handle_index_[handle.get()] = id;
  // The handle queues events for the application: what it holds counts against the
  // receive credit until the application takes it.
  conn->SetConsumptionTracking(true);
  return handle;
}

void DriverRuntime::OnIncoming(endpoint::ConnectionId id) {
  // The client has confirmed the connection (with keys: proved them), so a replayed Hello
  // never reaches an accept callback or Accept().
  const endpoint::ConnectionMeta* meta = endpoint_.MetaAt(id);
  if (meta == nullptr) return;
  Entry& e = entries_[id];
  e.handle = MakeHandle(id);
  if (hooks_.connection_up) hooks_.connection_up(id);
  auto l = listeners_.find(meta->listener);
  if (l != listeners_.end() && l->second.on_accept) {
    l->second.on_accept(e.handle);
    ApplyOps(id, e);  // what the callback queued applies before the data is delivered
    return;
  }
  if (!accept_queue_->Push(e.handle)) e.handle->Detach(absl::CancelledError("endpoint closed"));
}

void DriverRuntime::OnConnected(const endpoint::EndpointEvent& ev) {
  for (endpoint::LocalId l : ev.locals) hooks_.close_local(l);
  std::shared_ptr<ConnectWait> wait;
  if (auto w = waits_.find(ev.id); w != waits_.end()) {
    wait = std::move(w->second);
    waits_.erase(w);
  }
  Entry& e = entries_[ev.id];
  e.handle = MakeHandle(ev.id);
  if (hooks_.connection_up) hooks_.connection_up(ev.id);
  if (wait == nullptr) return;
  if (wait->callback) e.handle->SetCallback(wait->callback);
  bool abandoned;
  {
    std::lock_guard<std::mutex> l(wait->mu);
    abandoned = wait->abandoned;
  }
  if (abandoned) {
    endpoint_.ConnectionAt(ev.id)->Close(CloseCode::kApplication,
                                         "client gave up waiting for the handshake");
    endpoint_.Touch(ev.id);
  }
  Complete(*wait, e.handle);
}

void DriverRuntime::OnConnectFailed(const endpoint::EndpointEvent& ev) {
  for (endpoint::LocalId l : ev.locals) hooks_.close_local(l);
  auto w = waits_.find(ev.id);
  if (w == waits_.end()) return;
  std::shared_ptr<ConnectWait> wait = std::move(w->second);
  waits_.erase(w);
  Complete(*wait, ev.status);
}

void DriverRuntime::ProcessEndpointEvents() {
  endpoint::EndpointEvent e;
  while (endpoint_.PollEvent(&e)) {
    switch (e.type) {
      case endpoint::EndpointEvent::Type::kIncoming:
        OnIncoming(e.id);
        break;
      case endpoint::EndpointEvent::Type::kConnected:
        OnConnected(e);
        break;
      case endpoint::EndpointEvent::Type::kConnectFailed:
        OnConnectFailed(e);
        break;
      case endpoint::EndpointEvent::Type::kDriverState:
        // The verbs driver's UC lanes; the UDP driver sets no state.
        if (hooks_.driver_state) hooks_.driver_state(e.id);
        break;
    }
  }
}

// ---- application operations ----

void DriverRuntime::ApplyWakes() {
  std::vector<ConnectionHandle*> list;
  {
    std::lock_guard<std::mutex> l(wake_mu_);
    list.swap(wakes_);
    wake_posted_ = false;
  }
  list.insert(list.end(), local_wakes_.begin(), local_wakes_.end());
  local_wakes_.clear();
  for (ConnectionHandle* h : list) {
    auto it = handle_index_.find(h);
    if (it == handle_index_.end()) continue;
    auto e = entries_.find(it->second);
    if (e == entries_.end()) continue;
    ApplyOps(it->second, e->second);
  }
}

void DriverRuntime::ApplyOps(endpoint::ConnectionId id, Entry& entry) {
  Connection* conn = endpoint_.ConnectionAt(id);
  if (conn == nullptr) return;
  ops_.clear();
  entry.handle->TakeOps(&ops_);
  std::vector<Event> failed;
  for (ConnectionHandle::Op& op : ops_) {
    switch (op.kind) {
      case ConnectionHandle::Op::Kind::kSend: {
        const uint64_t size = op.send.size;
        absl::StatusOr<uint64_t> sent = conn->Send(std::move(op.send), op.tag);
        if (!sent.ok()) {
          Event e;
          e.type = Event::Type::kSendComplete;
          e.message_id = op.expected_id;
          e.tag = op.tag;
          e.size = size;
          e.status = absl::CancelledError(sent.status().message());
          failed.push_back(std::move(e));
        } else {
          DCHECK_EQ(*sent, op.expected_id);
        }
        break;
      }
      case ConnectionHandle::Op::Kind::kPost:
        conn->PostReceive(op.data, op.capacity, op.tag).IgnoreError();
        break;
      case ConnectionHandle::Op::Kind::kReturn:
        conn->ReturnBuffer(std::move(op.owned));
        break;
      case ConnectionHandle::Op::Kind::kClose:
        conn->Close(op.code, std::move(op.reason));
        break;
      case ConnectionHandle::Op::Kind::kOffer:
        if (absl::Status s = conn->OfferReceive(op.tag, op.data, op.capacity); !s.ok()) {
          Event e;
          e.type = Event::Type::kOfferWithdrawn;
          e.tag = op.tag;
          e.data = op.data;
          e.size = op.capacity;
          e.status = s;
          failed.push_back(std::move(e));
        }
        break;
      case ConnectionHandle::Op::Kind::kWithdraw:
        conn->WithdrawOffer(op.tag);
        break;
    }
  }
  ops_.clear();
  if (!failed.empty()) entry.handle->Deliver(&failed);
  entry.handle->FlushToCallback();
  conn->OnConsumed(entry.handle->TakeConsumed());
  endpoint_.Touch(id);
}

// ---- events and teardown ----

void DriverRuntime::DeliverAll(Time now) {
  endpoint_.ListConnections(&ids_);
  std::vector<endpoint::ConnectionId> dead;
  for (endpoint::ConnectionId id : ids_) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    Connection* conn = endpoint_.ConnectionAt(id);
    const bool closed = conn->closed();
    if (closed && hooks_.connection_closed) hooks_.connection_closed(id);
    events_.clear();
    Event ev;
    while (conn->PollEvent(&ev)) events_.push_back(std::move(ev));
    e.handle->PublishSent(conn->stream_units_sent());
    if (closed || now - e.last_publish >= kStatsPublishPeriod) {
      e.handle->PublishStats(conn->stats(), conn->debug_state());
      e.last_publish = now;
    }
    if (!events_.empty()) e.handle->Deliver(&events_);
    if (const uint64_t taken = e.handle->TakeConsumed(); taken > 0) {
      conn->OnConsumed(taken);
      endpoint_.Touch(id);  // the credit may be worth an ACK now
    }
    if (closed) dead.push_back(id);
  }
  for (endpoint::ConnectionId id : dead) {
    auto it = entries_.find(id);
    std::shared_ptr<ConnectionHandle> h = std::move(it->second.handle);
    entries_.erase(it);
    handle_index_.erase(h.get());
    h->Detach(h->status());
    if (hooks_.connection_gone) hooks_.connection_gone(id);
    for (endpoint::LocalId l : endpoint_.Release(id)) hooks_.close_local(l);
  }
}

void DriverRuntime::BeginShutdown(Time now) {
  endpoint_.CloseAll(now, "endpoint closed");
  ProcessEndpointEvents();  // fails the waiting Connects
  ApplyWakes();
}

void DriverRuntime::FinishShutdown(Time now) {
  DeliverAll(now);
  for (auto& [id, e] : entries_) {
    e.handle->Detach(absl::CancelledError("endpoint closed"));
  }
  entries_.clear();
  handle_index_.clear();
  for (auto& [id, wait] : waits_) Complete(*wait, absl::CancelledError("endpoint is shut down"));
  waits_.clear();
  if (owns_accept_queue_) accept_queue_->Stop();
}

void DriverRuntime::AddStats(EndpointStats* s) const {
  const endpoint::EndpointCounters& c = endpoint_.counters();
  s->undecodable += c.undecodable;
  s->unknown_connection += c.unknown_connection;
  s->foreign_datagrams += c.foreign_datagrams;
  s->hellos_received += c.hellos_received;
  s->short_initials += c.short_initials;
  s->retries_sent += c.retries_sent;
  s->cookies_invalid += c.cookies_invalid;
  s->cookies_expired += c.cookies_expired;
  s->version_mismatches += c.version_mismatches;
  s->rejects_sent += c.rejects_sent;
  s->connections_accepted += c.connections_accepted;
  s->unconfirmed_expired += c.unconfirmed_expired;
  s->handshake_errors += c.handshake_errors;
  s->handshake_wrong_source += c.handshake_wrong_source;
  s->amplification_limited += c.amplification_limited;
  s->stalled_deadlines += c.stalled_deadlines;
  s->handshake_auth_failures += c.handshake_auth_failures;
  s->security_mismatches += c.security_mismatches;
  s->keys_refused += c.keys_refused;
  s->packets_unauthenticated += c.packets_unauthenticated;
  s->packets_replayed += c.packets_replayed;
  s->packets_too_old += c.packets_too_old;
  s->plaintext_refused += c.plaintext_refused;
  s->confirms_refused += c.confirms_refused;
  s->payloads_opened_in_place += c.payloads_opened_in_place;
  s->in_place_auth_failures += c.in_place_auth_failures;
  s->connections_active += endpoint_.connection_count();
}

}  // namespace longhaul::datapath
