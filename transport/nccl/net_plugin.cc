#include "transport/nccl/net_plugin.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "transport/api/endpoint.h"
#include "transport/base/parse.h"
#include "transport/core/profile/profile.h"
#include "transport/nccl/plugin_handle.h"

extern char** environ;

namespace longhaul::nccl {
namespace {

// ---------------------------------------------------------------------------------------
// Logging

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

void LogV(ncclDebugLogLevel level, unsigned long flags, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  ncclDebugLogger_t logger = g_logger.load();
  if (logger != nullptr) {
    logger(level, flags, "longhaul", 0, "NET/longhaul: %s", buf);
  } else if (level == NCCL_LOG_WARN) {
    fprintf(stderr, "NET/longhaul: %s\n", buf);
  }
}

// ---------------------------------------------------------------------------------------
// Frames: every longhaul message of the plugin starts with this header.

constexpr uint32_t kFrameMagic = 0x464e484c;  // "LHNF"
constexpr uint8_t kFrameVersion = 1;
enum class FrameKind : uint8_t {
  kOpen = 1,      // sender -> receiver: a send comm `comm` opens to listen comm `value`
  kData = 2,      // sender -> receiver: `value` payload bytes with `tag` follow
  kCredit = 3,    // receiver -> sender: comm `comm` has consumed `value` bytes in total
  kClose = 4,     // sender -> receiver: send comm `comm` closed
  kReject = 5,    // receiver -> sender: no listen comm `value` (closed): comm is refused
  kDataHead = 6,  // sender -> receiver: the next message is `value` payload bytes with
                  // `tag` (large messages, sent in place from NCCL's buffer)
};
struct FrameHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t version;
  uint16_t reserved;
  uint32_t comm;
  int32_t tag;
  uint64_t value;
  uint64_t instance;
};
constexpr size_t kHeaderBytes = sizeof(FrameHeader);
static_assert(kHeaderBytes == 32);
// Completion of a message sent in place (zero copy): set by the driver's callback when
// longhaul reports the message acknowledged (or cancelled).
struct ZeroCopyWait {
  std::atomic<int> state{0};  // 0 in flight, 1 acknowledged, 2 cancelled / failed
};
// Credit charged per message on top of its bytes, so zero-byte messages are bounded too.
constexpr uint64_t kMessageOverhead = 64;

constexpr uint32_t kListenMagic = 0x4c484c53;  // "LHLS"
constexpr uint32_t kSendMagic = 0x4c485344;    // "LHSD"
constexpr uint32_t kRecvMagic = 0x4c485256;    // "LHRV"
constexpr uint32_t kRequestMagic = 0x4c485251;
constexpr uint32_t kMrMagic = 0x4c484d52;
constexpr uint32_t kCtxMagic = 0x4c484358;
constexpr uint32_t kDeadMagic = 0xdeadbeef;

// ---------------------------------------------------------------------------------------
// Staging buffers for sends, reused (fresh large allocations cost a page fault per 4 KiB).

class BufferPool {
 public:
  BufferPool() : s_(std::make_shared<Shared>()) {}

  std::shared_ptr<uint8_t> Get(size_t size) {
    size_t want = std::max<size_t>(size, 1);
    uint8_t* p = nullptr;
    size_t cap = 0;
    {
      std::lock_guard<std::mutex> l(s_->mu);
      for (size_t i = s_->free.size(); i-- > 0;) {
        if (s_->free[i].first >= want && s_->free[i].first <= 2 * want + 65536) {
          cap = s_->free[i].first;
          p = s_->free[i].second;
          s_->free_bytes -= cap;
          s_->free[i] = s_->free.back();
          s_->free.pop_back();
          break;
        }
      }
    }
    if (p == nullptr) {
      cap = want <= 65536 ? want : (want + 65535) / 65536 * 65536;
      p = new uint8_t[cap];
    }
    std::shared_ptr<Shared> s = s_;
    return std::shared_ptr<uint8_t>(p, [s, cap](uint8_t* q) { s->Put(q, cap); });
  }

 private:
  struct Shared {
    std::mutex mu;
    std::vector<std::pair<size_t, uint8_t*>> free;
    size_t free_bytes = 0;
    void Put(uint8_t* p, size_t cap) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (free.size() < 128 && free_bytes + cap <= (size_t{512} << 20)) {
          free.emplace_back(cap, p);
          free_bytes += cap;
          return;
        }
      }
      delete[] p;
    }
    ~Shared() {
      for (auto& [cap, p] : free) delete[] p;
    }
  };
  std::shared_ptr<Shared> s_;
};

// ---------------------------------------------------------------------------------------
// Shared state between the NCCL-facing objects and the driver thread's event callbacks.

class Runtime;
class Link;

// A message that arrived for a recv comm and waits for its irecv.
struct Incoming {
  OwnedBuffer owned;
  const uint8_t* payload = nullptr;
  size_t size = 0;
  int tag = 0;
};

struct SendState {
  uint32_t id = 0;
  uint64_t credit = 0;
  std::atomic<uint64_t> peer_consumed{0};  // cumulative, from kCredit frames
  std::atomic<bool> rejected{false};
};

struct RecvState {
  uint32_t id = 0;  // the sender's comm id on the link
  std::mutex mu;
  std::deque<Incoming> queue;
  bool peer_closed = false;
};

class ListenState {
 public:
  uint64_t id = 0;
  int dev = 0;
  std::mutex mu;
  struct Pending {
    std::shared_ptr<Link> link;
    std::shared_ptr<RecvState> state;
  };
  std::deque<Pending> pending;
  bool closed = false;
};

// One longhaul connection: client side (our send comms to one remote instance) or
// server side (recv comms from one remote instance).
class Link : public std::enable_shared_from_this<Link> {
 public:
  enum class State { kConnecting, kReady, kFailed, kClosed };

  Link(bool client, std::string key, std::weak_ptr<Runtime> rt)
      : client_(client), key_(std::move(key)), rt_(std::move(rt)) {}

  bool client() const { return client_; }
  const std::string& key() const { return key_; }

  // Driver thread: one event of the connection.
  void OnEvent(Event& e);

  // Sends a header-only frame. Returns the connection's error if it cannot.
  absl::Status SendControl(FrameKind kind, uint32_t comm, uint64_t value, uint64_t instance);
  // Sends a data frame from a staging buffer that already holds header and payload.
  absl::Status SendData(std::shared_ptr<uint8_t> buf, size_t bytes);
  // Sends a kDataHead frame and, right behind it on the connection, `size` bytes at
  // `data` in place; `wait` completes when longhaul reports them acknowledged.
  absl::Status SendInPlace(uint32_t comm, int tag, const void* data, size_t size,
                           std::shared_ptr<ZeroCopyWait> wait);
  // Aborts the connection (pending in-place sends are cancelled: longhaul stops reading
  // their memory) and waits up to `timeout` for its end.
  void AbortAndWait(const std::string& reason, Duration timeout);

  absl::Status status() {
    std::lock_guard<std::mutex> l(mu_);
    return StatusLocked();
  }
  State state() {
    std::lock_guard<std::mutex> l(mu_);
    return state_;
  }
  std::shared_ptr<ConnectionHandle> conn() {
    std::lock_guard<std::mutex> l(mu_);
    return conn_;
  }

  void SetReady(std::shared_ptr<ConnectionHandle> conn) {
    std::lock_guard<std::mutex> l(mu_);
    conn_ = std::move(conn);
    if (state_ == State::kConnecting) state_ = State::kReady;
  }
  void SetFailed(absl::Status s) {
    std::lock_guard<std::mutex> l(mu_);
    state_ = State::kFailed;
    status_ = std::move(s);
  }

  uint32_t AddSender(std::shared_ptr<SendState> s) {
    std::lock_guard<std::mutex> l(mu_);
    uint32_t id = next_comm_id_++;
    s->id = id;
    senders_[id] = s;
    ++users_;
    return id;
  }
  // A send comm closed. Closes the connection once no comm uses it and every message
  // was acknowledged (from the driver's callback if messages are still in flight).
  void RemoveSender(uint32_t id) {
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
  void AddReceiver(const std::shared_ptr<RecvState>& s) {
    std::lock_guard<std::mutex> l(mu_);
    receivers_[s->id] = s;
  }
  void RemoveReceiver(uint32_t id) {
    std::lock_guard<std::mutex> l(mu_);
    if (receivers_.erase(id) > 0 && users_ > 0) --users_;
  }
  // Messages handed to longhaul and not yet acknowledged.
  uint64_t pending_sends() {
    std::lock_guard<std::mutex> l(mu_);
    return state_ == State::kReady ? pending_sends_ : 0;
  }
  bool idle() {
    std::lock_guard<std::mutex> l(mu_);
    return users_ == 0;
  }

  std::thread connect_thread;  // client: runs the blocking handshake

 private:
  absl::Status StatusLocked() const {
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
  void HandleFrame(const FrameHeader& h, Event& e);
  void HandlePayload(const FrameHeader& h, Event& e, const uint8_t* payload, size_t size);

  const bool client_;
  const std::string key_;
  std::weak_ptr<Runtime> rt_;
  std::mutex mu_;
  State state_ = State::kConnecting;
  absl::Status status_;
  std::shared_ptr<ConnectionHandle> conn_;
  std::unordered_map<uint32_t, std::weak_ptr<SendState>> senders_;
  std::unordered_map<uint32_t, std::shared_ptr<RecvState>> receivers_;
  uint32_t next_comm_id_ = 1;
  int users_ = 0;
  uint64_t pending_sends_ = 0;
  bool close_when_idle_ = false;
  bool reported_unknown_ = false;
  std::unordered_map<uint64_t, std::shared_ptr<ZeroCopyWait>> in_place_;  // by message id
  // Receiver: a kDataHead announced the next message.
  bool expect_payload_ = false;
  FrameHeader expected_{};
};

// ---------------------------------------------------------------------------------------
// The process-wide runtime.

struct Settings {
  TransportConfig config;
  uint64_t credit = 0;
  Duration linger = Duration::Seconds(5);
  Duration connect_timeout = Duration::Seconds(20);
  Duration spin = EndpointOptions{}.spin;
  // Sends up to this size are copied and complete at once; larger ones are sent in place
  // and complete when acknowledged.
  uint64_t copy_max = uint64_t{1} << 20;
  uint16_t port = 0;
  bool rate_given = false;
  bool rtt_given = false;
  std::string profile_path;
};

struct Context {
  uint32_t magic = kCtxMagic;
  uint64_t comm_id = 0;
  int traffic_class = -1;
};

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  Settings settings;
  std::vector<DeviceProperties> devices;
  uint64_t instance = 0;
  BufferPool pool;

  absl::Status EnsureEndpointLocked() {
    if (stopped_) return absl::FailedPreconditionError("the plugin was finalized");
    if (endpoint_) return absl::OkStatus();
    EndpointOptions eo;
    eo.spin = settings.spin;
    absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
    if (!ep.ok()) return ep.status();
    endpoint_ = *std::move(ep);
    return absl::OkStatus();
  }

  absl::StatusOr<uint16_t> ListenPort(int dev) {
    std::lock_guard<std::mutex> l(mu_);
    if (absl::Status s = EnsureEndpointLocked(); !s.ok()) return s;
    auto it = ports_.find(dev);
    if (it != ports_.end()) return it->second;
    ListenOptions lo;
    lo.config = settings.config;
    lo.backlog = 1024;
    std::weak_ptr<Runtime> weak = weak_from_this();
    const std::string dev_name = devices[dev].name;
    lo.on_accept = [weak, dev_name](std::shared_ptr<ConnectionHandle> h) {
      std::shared_ptr<Runtime> rt = weak.lock();
      if (!rt) {
        h->Abort("plugin shutting down");
        return;
      }
      rt->OnAccept(std::move(h));
    };
    absl::StatusOr<uint16_t> port = endpoint_->Listen(devices[dev].address, settings.port, lo);
    if (!port.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", dev_name, " (",
                                                 devices[dev].address,
                                                 "): ", port.status().message()));
    }
    ports_[dev] = *port;
    LogInfo("device %d (%s) listens on UDP %s:%u", dev, dev_name.c_str(),
            devices[dev].address.c_str(), *port);
    return *port;
  }

  // Driver thread: a client connected to one of our listen sockets.
  void OnAccept(std::shared_ptr<ConnectionHandle> h) {
    auto link = std::make_shared<Link>(false, h->info().peer_address, weak_from_this());
    link->SetReady(h);
    {
      std::lock_guard<std::mutex> l(mu_);
      links_.push_back(link);
    }
    std::weak_ptr<Link> weak = link;
    h->SetCallback([weak](Event& e) {
      if (std::shared_ptr<Link> lk = weak.lock()) lk->OnEvent(e);
    });
  }

  std::shared_ptr<ListenState> AddListen(int dev) {
    auto ls = std::make_shared<ListenState>();
    ls->dev = dev;
    std::lock_guard<std::mutex> l(mu_);
    ls->id = next_listen_id_++;
    listens_[ls->id] = ls;
    return ls;
  }
  std::shared_ptr<ListenState> FindListen(uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = listens_.find(id);
    return it == listens_.end() ? nullptr : it->second;
  }
  void RemoveListen(uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    listens_.erase(id);
  }

  // The client link to `address:port` of instance `instance`, created (and its
  // handshake started on a helper thread) if there is none.
  // When the link is ready, `sender` is attached to it (under the runtime's lock, so a
  // closing comm cannot retire the link in between).
  absl::StatusOr<std::shared_ptr<Link>> ClientLink(const PluginHandle& h,
                                                   const std::shared_ptr<SendState>& sender) {
    std::lock_guard<std::mutex> l(mu_);
    if (absl::Status s = EnsureEndpointLocked(); !s.ok()) return s;
    const std::string key = absl::StrCat(h.address, ":", h.port, "/", absl::Hex(h.instance));
    auto it = client_links_.find(key);
    if (it != client_links_.end()) {
      Link::State st = it->second->state();
      if (st == Link::State::kReady) it->second->AddSender(sender);
      if (st == Link::State::kConnecting || st == Link::State::kReady) return it->second;
      // Failed or closed: the caller sees this link's error once; a later call retries.
      std::shared_ptr<Link> dead = it->second;
      client_links_.erase(it);
      return dead;
    }
    auto link = std::make_shared<Link>(true, key, weak_from_this());
    client_links_[key] = link;
    links_.push_back(link);
    ConnectOptions co;
    co.config = settings.config;
    co.timeout = settings.connect_timeout;
    std::weak_ptr<Link> weak = link;
    co.callback = [weak](Event& e) {
      if (std::shared_ptr<Link> lk = weak.lock()) lk->OnEvent(e);
    };
    Endpoint* ep = endpoint_.get();
    std::string address = h.address;
    uint16_t port = h.port;
    link->connect_thread = std::thread([ep, link_raw = link.get(), address, port, co]() mutable {
      absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = ep->Connect(address, port, co);
      if (c.ok()) {
        link_raw->SetReady(*c);
      } else {
        link_raw->SetFailed(absl::UnavailableError(
            absl::StrCat("connect to ", address, ":", port, " failed: ", c.status().message())));
      }
    });
    return link;
  }

  // A send comm on `link` closed. Under the runtime's lock, so no connect can pick the
  // link while its last comm leaves: a link no comm uses is forgotten (new connects to
  // that peer make a new one) and closes once its data is acknowledged.
  void ReleaseSender(const std::shared_ptr<Link>& link, uint32_t id) {
    std::lock_guard<std::mutex> l(mu_);
    link->RemoveSender(id);
    if (!link->idle()) return;
    auto it = client_links_.find(link->key());
    if (it != client_links_.end() && it->second == link) client_links_.erase(it);
  }


  // Waits until `pred` holds (re-checked at every progress notification) or `timeout`.
  template <typename Pred>
  bool WaitFor(Pred pred, Duration timeout) {
    std::unique_lock<std::mutex> l(idle_mu_);
    return idle_cv_.wait_for(l, std::chrono::nanoseconds(timeout.ns()), pred);
  }

  void NotifyProgress() {
    std::lock_guard<std::mutex> l(idle_mu_);
    idle_cv_.notify_all();
  }

  // Waits (bounded) for data in flight, then closes the endpoint and joins threads.
  void Stop() {
    std::vector<std::shared_ptr<Link>> links;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_) return;
      stopped_ = true;
      links = links_;
    }
    // Linger: acknowledged delivery of what NCCL already considers sent.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::nanoseconds(settings.linger.ns());
    {
      std::unique_lock<std::mutex> l(idle_mu_);
      idle_cv_.wait_until(l, deadline, [&] {
        for (auto& lk : links) {
          if (lk->client() && lk->pending_sends() > 0) return false;
        }
        return true;
      });
    }
    std::unique_ptr<Endpoint> ep;
    {
      std::lock_guard<std::mutex> l(mu_);
      ep = std::move(endpoint_);
    }
    if (ep) ep->Close();  // joins the driver thread; pending Connects fail
    for (auto& lk : links) {
      if (lk->connect_thread.joinable()) lk->connect_thread.join();
    }
    std::lock_guard<std::mutex> l(mu_);
    links_.clear();
    client_links_.clear();
    listens_.clear();
    ep.reset();
  }

  bool driver_running() {
    std::lock_guard<std::mutex> l(mu_);
    return endpoint_ != nullptr;
  }

  ~Runtime() { Stop(); }

 private:
  std::mutex mu_;
  std::unique_ptr<Endpoint> endpoint_;
  bool stopped_ = false;
  std::map<int, uint16_t> ports_;
  std::unordered_map<uint64_t, std::shared_ptr<ListenState>> listens_;
  uint64_t next_listen_id_ = 1;
  std::map<std::string, std::shared_ptr<Link>> client_links_;
  std::vector<std::shared_ptr<Link>> links_;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

absl::Status Link::SendControl(FrameKind kind, uint32_t comm, uint64_t value, uint64_t instance) {
  std::shared_ptr<ConnectionHandle> c;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (absl::Status s = StatusLocked(); !s.ok()) return s;
    c = conn_;
    ++pending_sends_;
  }
  auto buf = std::shared_ptr<uint8_t>(new uint8_t[kHeaderBytes], std::default_delete<uint8_t[]>());
  FrameHeader h{kFrameMagic, static_cast<uint8_t>(kind), kFrameVersion, 0, comm, 0, value,
                instance};
  std::memcpy(buf.get(), &h, kHeaderBytes);
  absl::StatusOr<uint64_t> id = c->Send(SendBuffer{buf.get(), kHeaderBytes, buf}, 0);
  if (!id.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    --pending_sends_;
    return absl::AbortedError(
        absl::StrCat("longhaul connection ", key_, ": ", id.status().message()));
  }
  return absl::OkStatus();
}

absl::Status Link::SendData(std::shared_ptr<uint8_t> buf, size_t bytes) {
  std::shared_ptr<ConnectionHandle> c;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (absl::Status s = StatusLocked(); !s.ok()) return s;
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
                               std::shared_ptr<ZeroCopyWait> wait) {
  auto head = std::shared_ptr<uint8_t>(new uint8_t[kHeaderBytes], std::default_delete<uint8_t[]>());
  FrameHeader h{kFrameMagic,   static_cast<uint8_t>(FrameKind::kDataHead),
                kFrameVersion, 0,
                comm,          tag,
                size,          0};
  std::memcpy(head.get(), &h, kHeaderBytes);
  // Both messages under the lock: no other comm's message may come between them, and the
  // payload's id is registered before its completion can be delivered.
  std::lock_guard<std::mutex> l(mu_);
  if (absl::Status s = StatusLocked(); !s.ok()) return s;
  absl::StatusOr<uint64_t> id = conn_->Send(SendBuffer{head.get(), kHeaderBytes, head}, 0);
  if (!id.ok()) {
    return absl::AbortedError(
        absl::StrCat("longhaul connection ", key_, ": ", id.status().message()));
  }
  ++pending_sends_;
  absl::StatusOr<uint64_t> pid =
      conn_->Send(SendBuffer{static_cast<const uint8_t*>(data), size, nullptr}, 0);
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
      if (!e.status.ok() || e.data == nullptr || e.size < kHeaderBytes) {
        LogWarn("connection %s: dropped a malformed message of %llu bytes (%s)", key_.c_str(),
                static_cast<unsigned long long>(e.size), e.status.ToString().c_str());
        return;
      }
      FrameHeader h;
      std::memcpy(&h, e.data, kHeaderBytes);
      if (h.magic != kFrameMagic || h.version != kFrameVersion) {
        LogWarn("connection %s: dropped a message that is not a plugin frame", key_.c_str());
        return;
      }
      HandleFrame(h, e);
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
  Incoming in;
  in.payload = payload;
  in.size = size;
  in.tag = h.tag;
  in.owned = std::move(e.owned);
  std::lock_guard<std::mutex> l(r->mu);
  r->queue.push_back(std::move(in));
}

void Link::HandleFrame(const FrameHeader& h, Event& e) {
  switch (static_cast<FrameKind>(h.kind)) {
    case FrameKind::kData:
      HandlePayload(h, e, e.data + kHeaderBytes, e.size - kHeaderBytes);
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
        s->rejected.store(true);
        return;
      }
      uint64_t prev = s->peer_consumed.load();
      while (h.value > prev && !s->peer_consumed.compare_exchange_weak(prev, h.value)) {
      }
      return;
    }
    case FrameKind::kOpen: {
      std::shared_ptr<Runtime> rt = rt_.lock();
      std::shared_ptr<ListenState> ls = rt ? rt->FindListen(h.value) : nullptr;
      if (!ls || ls->dev < 0) {
        LogWarn("connection %s: comm %u asked for listen comm %llu, which does not exist",
                key_.c_str(), h.comm, static_cast<unsigned long long>(h.value));
        SendControl(FrameKind::kReject, h.comm, h.value, 0).IgnoreError();
        return;
      }
      auto r = std::make_shared<RecvState>();
      r->id = h.comm;
      AddReceiver(r);
      {
        std::lock_guard<std::mutex> l(mu_);
        ++users_;
      }
      std::lock_guard<std::mutex> l(ls->mu);
      ls->pending.push_back({shared_from_this(), r});
      return;
    }
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

// ---------------------------------------------------------------------------------------
// NCCL-facing objects.

struct Request {
  uint32_t magic = kRequestMagic;
  enum class Kind : uint8_t { kFree, kSend, kRecv } kind = Kind::kFree;
  void* comm = nullptr;
  bool done = false;
  absl::Status error;
  size_t send_size = 0;
  std::shared_ptr<ZeroCopyWait> in_place;  // sends above copy_max
  int n = 0;
  int nfilled = 0;
  void* data[kMaxRecvs] = {};
  size_t capacity[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  size_t got[kMaxRecvs] = {};
  bool filled[kMaxRecvs] = {};
};

struct ListenComm {
  uint32_t magic = kListenMagic;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<ListenState> state;
};

struct SendComm {
  uint32_t magic = kSendMagic;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<Link> link;
  std::shared_ptr<SendState> state;
  std::mutex mu;
  uint64_t sent = 0;  // cumulative credit charged
  Request requests[kMaxRequests];
};

struct RecvComm {
  uint32_t magic = kRecvMagic;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<Link> link;
  std::shared_ptr<RecvState> state;
  uint64_t credit = 0;
  std::mutex mu;
  std::deque<Request*> posted;
  uint64_t consumed = 0;  // cumulative
  uint64_t reported = 0;  // cumulative, sent in kCredit frames
  Request requests[kMaxRequests];
};

struct MrHandle {
  uint32_t magic = kMrMagic;
  void* data = nullptr;
  size_t size = 0;
};

std::mutex g_mu;
std::shared_ptr<Runtime> g_rt;
int g_users = 0;

std::shared_ptr<Runtime> CurrentRuntime() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_rt;
}

// ---------------------------------------------------------------------------------------
// Environment, profile and interfaces.

const char* Env(const char* name) {
  const char* v = getenv(name);
  return (v != nullptr && *v != 0) ? v : nullptr;
}

// Plugin settings that are not profile keys.
bool IsPluginKey(const std::string& key) {
  return key == "IFNAME" || key == "PROFILE" || key == "CREDIT" || key == "PORT" ||
         key == "LINGER" || key == "CONNECT_TIMEOUT" || key == "SPIN" || key == "COPY_MAX";
}

absl::StatusOr<Settings> ReadSettings() {
  Settings s;
  if (const char* p = Env("NCCL_LONGHAUL_PROFILE")) {
    absl::StatusOr<TransportConfig> c = LoadProfile(p, s.config);
    if (!c.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_PROFILE: ", c.status().message()));
    }
    s.config = *c;
    s.profile_path = p;
    s.rate_given = true;
    s.rtt_given = s.config.initial_rtt != TransportConfig{}.initial_rtt;
  }
  // NCCL_LONGHAUL_<KEY>=value overrides one profile key, in environment order.
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (!absl::StartsWith(kv, "NCCL_LONGHAUL_")) continue;
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    std::string key(kv.substr(strlen("NCCL_LONGHAUL_"), eq - strlen("NCCL_LONGHAUL_")));
    std::string value(kv.substr(eq + 1));
    if (IsPluginKey(key)) continue;
    std::string lower = absl::AsciiStrToLower(key);
    if (absl::Status st = ApplyProfileKey(&s.config, lower, value); !st.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_", key, "=", value, ": ", st.message()));
    }
    if (lower == "rate") s.rate_given = true;
    if (lower == "initial_rtt") s.rtt_given = true;
  }
  if (absl::Status st = s.config.Validate(); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("longhaul configuration from the environment: ", st.message()));
  }
  // Credit: twice the path's bandwidth-delay product, within [16 MiB, 1 GiB].
  const double bdp = s.config.rate.BytesPerSecond() * s.config.initial_rtt.seconds();
  s.credit =
      std::clamp<uint64_t>(static_cast<uint64_t>(2 * bdp), uint64_t{16} << 20, uint64_t{1} << 30);
  if (const char* c = Env("NCCL_LONGHAUL_CREDIT")) {
    absl::StatusOr<ByteCount> b = ParseByteCount(c);
    if (!b.ok() || *b < 65536 || *b > (ByteCount{64} << 30)) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_CREDIT=", c, ": expected a size in [64KiB, 64GiB]",
                       b.ok() ? "" : absl::StrCat(" (", b.status().message(), ")")));
    }
    s.credit = *b;
  }
  if (const char* c = Env("NCCL_LONGHAUL_LINGER")) {
    absl::StatusOr<Duration> d = ParseDuration(c);
    if (!d.ok() || d->ns() < 0 || *d > Duration::Seconds(600)) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_LINGER=", c, ": expected a duration in [0, 600s]"));
    }
    s.linger = *d;
  }
  if (const char* c = Env("NCCL_LONGHAUL_CONNECT_TIMEOUT")) {
    absl::StatusOr<Duration> d = ParseDuration(c);
    if (!d.ok() || *d < Duration::Milliseconds(100) || *d > Duration::Seconds(600)) {
      return absl::FailedPreconditionError(absl::StrCat("NCCL_LONGHAUL_CONNECT_TIMEOUT=", c,
                                                        ": expected a duration in [100ms, 600s]"));
    }
    s.connect_timeout = *d;
  }
  if (const char* c = Env("NCCL_LONGHAUL_COPY_MAX")) {
    absl::StatusOr<ByteCount> b = ParseByteCount(c);
    if (!b.ok() || *b > (ByteCount{1} << 30)) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_COPY_MAX=", c, ": expected a size in [0, 1GiB]"));
    }
    s.copy_max = *b;
  }
  if (const char* c = Env("NCCL_LONGHAUL_SPIN")) {
    absl::StatusOr<Duration> d = ParseDuration(c);
    if (!d.ok() || d->ns() < 0 || *d > Duration::Milliseconds(10)) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_SPIN=", c, ": expected a duration in [0, 10ms]"));
    }
    s.spin = *d;
  }
  if (const char* c = Env("NCCL_LONGHAUL_PORT")) {
    int port = 0;
    if (!absl::SimpleAtoi(c, &port) || port < 0 || port > 65535) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL_LONGHAUL_PORT=", c, ": expected a port in [0, 65535]"));
    }
    s.port = static_cast<uint16_t>(port);
  }
  return s;
}

struct Interface {
  std::string name;
  std::string address;
  bool loopback = false;
};

std::vector<Interface> UpInterfaces() {
  std::vector<Interface> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  // IPv4 first; an interface with only IPv6 (not link-local) uses that.
  for (int pass = 0; pass < 2; ++pass) {
    for (ifaddrs* a = ifa; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || !(a->ifa_flags & IFF_UP)) continue;
      const int fam = a->ifa_addr->sa_family;
      if ((pass == 0 && fam != AF_INET) || (pass == 1 && fam != AF_INET6)) continue;
      bool seen = false;
      for (const Interface& i : out) seen |= i.name == a->ifa_name;
      if (seen) continue;
      char buf[INET6_ADDRSTRLEN] = {};
      if (fam == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf,
                  sizeof(buf));
      } else {
        const in6_addr& a6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
        if (IN6_IS_ADDR_LINKLOCAL(&a6)) continue;
        inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
      }
      out.push_back({a->ifa_name, buf, (a->ifa_flags & IFF_LOOPBACK) != 0});
    }
  }
  freeifaddrs(ifa);
  return out;
}

// NCCL's interface list syntax: "eth,ib" (prefixes), "=eth0" (exact names), "^docker"
// (exclude these prefixes).
bool MatchesList(const std::string& name, std::string spec) {
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool match = false;
  for (absl::string_view p : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    if (exact ? name == p : absl::StartsWith(name, p)) match = true;
  }
  return exclude ? !match : match;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

absl::StatusOr<std::vector<DeviceProperties>> FindDevices(const Settings& s) {
  std::vector<Interface> ifs = UpInterfaces();
  std::vector<Interface> chosen;
  const char* var = "NCCL_LONGHAUL_IFNAME";
  const char* spec = Env(var);
  if (spec == nullptr) {
    var = "NCCL_SOCKET_IFNAME";
    spec = Env(var);
  }
  if (spec != nullptr) {
    for (const Interface& i : ifs) {
      if (MatchesList(i.name, spec)) chosen.push_back(i);
    }
  } else {
    for (const Interface& i : ifs) {
      if (!i.loopback) {
        chosen.push_back(i);
        break;
      }
    }
    if (chosen.empty()) {
      for (const Interface& i : ifs) {
        if (i.loopback) {
          chosen.push_back(i);
          break;
        }
      }
    }
  }
  if (chosen.empty()) {
    std::vector<std::string> names;
    for (const Interface& i : ifs) names.push_back(absl::StrCat(i.name, " (", i.address, ")"));
    return absl::FailedPreconditionError(absl::StrCat(
        spec ? absl::StrCat(var, "=", spec, " matches no interface that is up with an address")
             : std::string("no interface is up with an address"),
        "; interfaces: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  std::vector<DeviceProperties> out;
  for (size_t d = 0; d < chosen.size(); ++d) {
    DeviceProperties p;
    p.name = chosen[d].name;
    p.address = chosen[d].address;
    char real[PATH_MAX];
    std::string dev_link = absl::StrCat("/sys/class/net/", p.name, "/device");
    if (realpath(dev_link.c_str(), real) != nullptr) p.pci_path = real;
    if (s.rate_given && !s.config.rate.IsZero()) {
      p.speed_mbps = static_cast<int>(std::min(s.config.rate.bps() / 1e6, 2e9));
    } else {
      int mbps = 0;
      if (absl::SimpleAtoi(ReadFirstLine(absl::StrCat("/sys/class/net/", p.name, "/speed")),
                           &mbps) &&
          mbps > 0) {
        p.speed_mbps = mbps;
      } else {
        p.speed_mbps = 10000;  // what NCCL's socket net assumes when the kernel does not say
      }
    }
    p.latency_us = s.rtt_given ? static_cast<float>(s.config.initial_rtt.microseconds() / 2) : 0;
    p.guid = d;
    out.push_back(std::move(p));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Helpers of the data path.

Request* FreeSlot(Request* requests) {
  for (int i = 0; i < kMaxRequests; ++i) {
    if (requests[i].kind == Request::Kind::kFree) return &requests[i];
  }
  return nullptr;
}

void ResetRequest(Request* r) {
  void* comm = r->comm;
  *r = Request{};
  r->comm = comm;
}

// Moves arrived messages into the oldest posted receives; returns credit when due.
// Called with comm->mu held.
void Progress(RecvComm* c) {
  std::shared_ptr<ConnectionHandle> conn = c->link->conn();
  while (!c->posted.empty()) {
    Incoming in;
    {
      std::lock_guard<std::mutex> l(c->state->mu);
      if (c->state->queue.empty()) break;
      in = std::move(c->state->queue.front());
      c->state->queue.pop_front();
    }
    Request* r = c->posted.front();
    int slot = -1;
    for (int i = 0; i < r->n; ++i) {
      if (!r->filled[i] && (r->n == 1 || r->tags[i] == in.tag)) {
        slot = i;
        break;
      }
    }
    if (slot < 0) {
      r->error = absl::OutOfRangeError(
          absl::StrCat("a message with tag ", in.tag,
                       " matches no open buffer of the grouped receive (", r->n, " buffers)"));
    } else if (in.size > r->capacity[slot]) {
      r->error = absl::OutOfRangeError(
          absl::StrCat("message of ", in.size, " bytes is larger than the posted receive of ",
                       r->capacity[slot], " bytes (tag ", in.tag, ")"));
    } else {
      if (in.size > 0) std::memcpy(r->data[slot], in.payload, in.size);
      r->got[slot] = in.size;
      r->filled[slot] = true;
      ++r->nfilled;
    }
    c->consumed += in.size + kMessageOverhead;
    if (conn && in.owned) conn->ReturnBuffer(std::move(in.owned));
    if (!r->error.ok() || r->nfilled == r->n) {
      r->done = true;
      c->posted.pop_front();
    }
  }
  if (c->consumed > c->reported) {
    bool queue_empty;
    {
      std::lock_guard<std::mutex> l(c->state->mu);
      queue_empty = c->state->queue.empty();
    }
    if (queue_empty || c->consumed - c->reported >= c->credit / 16) {
      if (c->link->SendControl(FrameKind::kCredit, c->state->id, c->consumed, 0).ok()) {
        c->reported = c->consumed;
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------

void SetLogger(ncclDebugLogger_t logger) {
  if (logger != nullptr) g_logger.store(logger);
}

void LogWarn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  LogV(NCCL_LOG_WARN, LH_NCCL_ALL, fmt, ap);
  va_end(ap);
}

void LogInfo(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  LogV(NCCL_LOG_INFO, LH_NCCL_NET | LH_NCCL_INIT, fmt, ap);
  va_end(ap);
}

absl::Status Init(uint64_t comm_id, int traffic_class, void** ctx) {
  std::lock_guard<std::mutex> l(g_mu);
  if (!g_rt) {
    absl::StatusOr<Settings> s = ReadSettings();
    if (!s.ok()) return s.status();
    absl::StatusOr<std::vector<DeviceProperties>> devs = FindDevices(*s);
    if (!devs.ok()) return devs.status();
    auto rt = std::make_shared<Runtime>();
    rt->settings = *std::move(s);
    rt->devices = *std::move(devs);
    std::random_device rd;
    rt->instance = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
    g_rt = rt;
    g_users = 0;
    std::string names;
    for (const DeviceProperties& d : rt->devices) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", d.name, " (", d.address, ")");
    }
    LogInfo("using %s; rate %s, cc %s, fec %s, segment %llu, credit %s per comm%s%s", names.c_str(),
            FormatBandwidth(rt->settings.config.rate).c_str(),
            CongestionControlName(rt->settings.config.cc), FecModeName(rt->settings.config.fec),
            static_cast<unsigned long long>(rt->settings.config.segment),
            FormatByteCount(rt->settings.credit).c_str(),
            rt->settings.profile_path.empty() ? "" : ", profile ",
            rt->settings.profile_path.c_str());
  }
  if (g_users == 0 && g_rt->settings.profile_path.empty() && !g_rt->settings.rate_given) {
    LogWarn("no NCCL_LONGHAUL_PROFILE or NCCL_LONGHAUL_RATE: every peer connection is paced at "
            "the default %s; measure the link with longhaul-tune and set "
            "NCCL_LONGHAUL_PROFILE (docs/nccl.md)",
            FormatBandwidth(g_rt->settings.config.rate).c_str());
  }
  ++g_users;
  if (ctx != nullptr) {
    auto* c = new Context;
    c->comm_id = comm_id;
    c->traffic_class = traffic_class;
    *ctx = c;
  }
  return absl::OkStatus();
}

absl::Status Finalize(void* ctx) {
  std::shared_ptr<Runtime> to_stop;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (ctx != nullptr) {
      auto* c = static_cast<Context*>(ctx);
      if (c->magic != kCtxMagic)
        return absl::InvalidArgumentError("finalize: not a plugin context");
      c->magic = kDeadMagic;
      delete c;
    }
    if (!g_rt || g_users <= 0) return absl::InvalidArgumentError("finalize without init");
    if (--g_users == 0) to_stop = std::move(g_rt);
  }
  if (to_stop) to_stop->Stop();
  return absl::OkStatus();
}

void Shutdown() {
  std::shared_ptr<Runtime> to_stop;
  {
    std::lock_guard<std::mutex> l(g_mu);
    to_stop = std::move(g_rt);
    g_users = 0;
  }
  if (to_stop) to_stop->Stop();
}

bool RuntimeAlive() {
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  return rt && rt->driver_running();
}

absl::StatusOr<int> Devices() {
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("devices: the plugin is not initialized");
  return static_cast<int>(rt->devices.size());
}

absl::StatusOr<DeviceProperties> GetProperties(int dev) {
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("getProperties: the plugin is not initialized");
  if (dev < 0 || dev >= static_cast<int>(rt->devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "getProperties: device ", dev, " does not exist (", rt->devices.size(), " devices)"));
  }
  return rt->devices[dev];
}

absl::Status Listen(void* ctx, int dev, void* handle, void** listen_comm) {
  if (listen_comm == nullptr || handle == nullptr) {
    return absl::InvalidArgumentError("listen: NULL handle or listenComm");
  }
  *listen_comm = nullptr;
  if (ctx != nullptr && static_cast<Context*>(ctx)->magic != kCtxMagic) {
    return absl::InvalidArgumentError("listen: not a plugin context");
  }
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("listen: the plugin is not initialized");
  if (dev < 0 || dev >= static_cast<int>(rt->devices.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen: device ", dev, " does not exist (", rt->devices.size(), " devices)"));
  }
  absl::StatusOr<uint16_t> port = rt->ListenPort(dev);
  if (!port.ok()) return port.status();
  std::shared_ptr<ListenState> ls = rt->AddListen(dev);
  PluginHandle h;
  h.address = rt->devices[dev].address;
  h.port = *port;
  h.instance = rt->instance;
  h.listen_id = ls->id;
  h.credit = rt->settings.credit;
  if (absl::Status s = EncodeHandle(h, handle); !s.ok()) {
    rt->RemoveListen(ls->id);
    return s;
  }
  auto* lc = new ListenComm;
  lc->rt = rt;
  lc->state = ls;
  *listen_comm = lc;
  return absl::OkStatus();
}

absl::Status Connect(void* ctx, int dev, const void* handle, void** send_comm) {
  if (send_comm == nullptr) return absl::InvalidArgumentError("connect: NULL sendComm");
  *send_comm = nullptr;
  if (ctx != nullptr && static_cast<Context*>(ctx)->magic != kCtxMagic) {
    return absl::InvalidArgumentError("connect: not a plugin context");
  }
  std::shared_ptr<Runtime> rt = CurrentRuntime();
  if (!rt) return absl::InvalidArgumentError("connect: the plugin is not initialized");
  if (dev < 0 || dev >= static_cast<int>(rt->devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat("connect: device ", dev, " does not exist (",
                                                   rt->devices.size(), " devices)"));
  }
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  if (!h.ok()) return absl::InvalidArgumentError(absl::StrCat("connect: ", h.status().message()));
  if (h->credit == 0) return absl::InvalidArgumentError("connect: handle grants no credit");
  auto state = std::make_shared<SendState>();
  state->credit = h->credit;
  absl::StatusOr<std::shared_ptr<Link>> link = rt->ClientLink(*h, state);
  if (!link.ok()) return link.status();
  if (state->id == 0) {  // not attached: the link was not ready yet
    const Link::State st = (*link)->state();
    if (st == Link::State::kConnecting || st == Link::State::kReady) {
      return absl::OkStatus();  // NULL comm: NCCL calls again
    }
    return (*link)->status();
  }
  if (absl::Status s =
          (*link)->SendControl(FrameKind::kOpen, state->id, h->listen_id, rt->instance);
      !s.ok()) {
    rt->ReleaseSender(*link, state->id);
    return s;
  }
  auto* sc = new SendComm;
  sc->rt = rt;
  sc->link = *link;
  sc->state = state;
  for (Request& r : sc->requests) r.comm = sc;
  *send_comm = sc;
  return absl::OkStatus();
}

absl::Status Accept(void* listen_comm, void** recv_comm) {
  if (recv_comm == nullptr) return absl::InvalidArgumentError("accept: NULL recvComm");
  *recv_comm = nullptr;
  auto* lc = static_cast<ListenComm*>(listen_comm);
  if (lc == nullptr || lc->magic != kListenMagic) {
    return absl::InvalidArgumentError("accept: not a listen comm");
  }
  ListenState::Pending p;
  {
    std::lock_guard<std::mutex> l(lc->state->mu);
    if (lc->state->pending.empty()) return absl::OkStatus();  // not yet
    p = std::move(lc->state->pending.front());
    lc->state->pending.pop_front();
  }
  auto* rc = new RecvComm;
  rc->rt = lc->rt;
  rc->link = std::move(p.link);
  rc->state = std::move(p.state);
  rc->credit = lc->rt->settings.credit;
  for (Request& r : rc->requests) r.comm = rc;
  *recv_comm = rc;
  return absl::OkStatus();
}

absl::Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return absl::InvalidArgumentError("regMr: NULL mhandle");
  *mhandle = nullptr;
  auto* any = static_cast<uint32_t*>(comm);
  if (any == nullptr || (*any != kSendMagic && *any != kRecvMagic)) {
    return absl::InvalidArgumentError("regMr: not a send or recv comm");
  }
  if (type != LH_NCCL_PTR_HOST) {
    return absl::InvalidArgumentError(
        absl::StrCat("regMr: memory type ", type, " is not supported (host memory only)"));
  }
  auto* mr = new MrHandle;
  mr->data = data;
  mr->size = size;
  *mhandle = mr;
  return absl::OkStatus();
}

absl::Status DeregMr(void* comm, void* mhandle) {
  auto* mr = static_cast<MrHandle*>(mhandle);
  if (mr == nullptr || mr->magic != kMrMagic) {
    return absl::InvalidArgumentError("deregMr: not a memory handle of this plugin");
  }
  mr->magic = kDeadMagic;
  delete mr;
  return absl::OkStatus();
}

absl::Status Isend(void* send_comm, const void* data, size_t size, int tag, void** request) {
  if (request == nullptr) return absl::InvalidArgumentError("isend: NULL request");
  *request = nullptr;
  auto* c = static_cast<SendComm*>(send_comm);
  if (c == nullptr || c->magic != kSendMagic) {
    return absl::InvalidArgumentError("isend: not a send comm");
  }
  if (data == nullptr && size > 0) return absl::InvalidArgumentError("isend: NULL data");
  if (size > kMaxP2pBytes) {
    return absl::OutOfRangeError(
        absl::StrCat("isend: ", size, " bytes exceed maxP2pBytes (", kMaxP2pBytes, ")"));
  }
  if (c->state->rejected.load()) {
    return absl::AbortedError("isend: the peer refused this comm (its listen comm was closed)");
  }
  if (absl::Status s = c->link->status(); !s.ok()) return s;
  std::lock_guard<std::mutex> l(c->mu);
  Request* r = FreeSlot(c->requests);
  if (r == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("isend: ", kMaxRequests, " requests are already in flight on this comm"));
  }
  const uint64_t charge = size + kMessageOverhead;
  const uint64_t outstanding = c->sent - std::min(c->sent, c->state->peer_consumed.load());
  if (outstanding > 0 && outstanding + charge > c->state->credit) {
    return absl::OkStatus();  // back-pressure: NULL request, NCCL retries
  }
  if (size > c->rt->settings.copy_max) {
    auto wait = std::make_shared<ZeroCopyWait>();
    if (absl::Status s = c->link->SendInPlace(c->state->id, tag, data, size, wait); !s.ok()) {
      return s;
    }
    c->sent += charge;
    r->kind = Request::Kind::kSend;
    r->done = false;  // NCCL's buffer is read until longhaul reports it acknowledged
    r->in_place = std::move(wait);
    r->send_size = size;
    *request = r;
    return absl::OkStatus();
  }
  std::shared_ptr<uint8_t> buf = c->rt->pool.Get(kHeaderBytes + size);
  FrameHeader h{kFrameMagic,   static_cast<uint8_t>(FrameKind::kData),
                kFrameVersion, 0,
                c->state->id,  tag,
                size,          0};
  std::memcpy(buf.get(), &h, kHeaderBytes);
  if (size > 0) std::memcpy(buf.get() + kHeaderBytes, data, size);
  if (absl::Status s = c->link->SendData(std::move(buf), kHeaderBytes + size); !s.ok()) return s;
  c->sent += charge;
  r->kind = Request::Kind::kSend;
  r->done = true;  // the bytes are staged: NCCL may reuse its buffer
  r->send_size = size;
  *request = r;
  return absl::OkStatus();
}

absl::Status Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** request) {
  if (request == nullptr) return absl::InvalidArgumentError("irecv: NULL request");
  *request = nullptr;
  auto* c = static_cast<RecvComm*>(recv_comm);
  if (c == nullptr || c->magic != kRecvMagic) {
    return absl::InvalidArgumentError("irecv: not a recv comm");
  }
  if (n < 1 || n > kMaxRecvs) {
    return absl::InvalidArgumentError(
        absl::StrCat("irecv: n=", n, " is outside [1, maxRecvs=", kMaxRecvs, "]"));
  }
  if (data == nullptr || sizes == nullptr || tags == nullptr) {
    return absl::InvalidArgumentError("irecv: NULL data, sizes or tags");
  }
  for (int i = 0; i < n; ++i) {
    if (data[i] == nullptr && sizes[i] > 0) {
      return absl::InvalidArgumentError(absl::StrCat("irecv: NULL buffer ", i));
    }
  }
  std::lock_guard<std::mutex> l(c->mu);
  Request* r = FreeSlot(c->requests);
  if (r == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("irecv: ", kMaxRequests, " requests are already in flight on this comm"));
  }
  r->kind = Request::Kind::kRecv;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  c->posted.push_back(r);
  Progress(c);
  *request = r;
  return absl::OkStatus();
}

absl::Status Test(void* request, int* done, int* sizes) {
  if (done == nullptr) return absl::InvalidArgumentError("test: NULL done");
  *done = 0;
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || r->magic != kRequestMagic || r->kind == Request::Kind::kFree) {
    return absl::InvalidArgumentError("test: not a request in flight");
  }
  if (r->kind == Request::Kind::kSend) {
    auto* c = static_cast<SendComm*>(r->comm);
    std::lock_guard<std::mutex> l(c->mu);
    if (r->in_place) {
      const int st = r->in_place->state.load();
      if (st == 0) return absl::OkStatus();  // still in flight
      if (st == 2) {
        ResetRequest(r);
        *done = 1;
        return absl::AbortedError(
            absl::StrCat("isend did not complete: ", c->link->status().message()));
      }
    }
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(r->send_size);
    ResetRequest(r);
    return absl::OkStatus();
  }
  auto* c = static_cast<RecvComm*>(r->comm);
  std::lock_guard<std::mutex> l(c->mu);
  Progress(c);
  if (!r->done) {
    absl::Status ls = c->link->status();
    bool queue_empty;
    {
      std::lock_guard<std::mutex> q(c->state->mu);
      queue_empty = c->state->queue.empty();
    }
    if (ls.ok() || !queue_empty) return absl::OkStatus();
    // The connection is gone and nothing more can arrive: end the request.
    c->posted.erase(std::remove(c->posted.begin(), c->posted.end(), r), c->posted.end());
    ResetRequest(r);
    *done = 1;
    return absl::AbortedError(absl::StrCat("irecv cannot complete: ", ls.message()));
  }
  *done = 1;
  absl::Status err = r->error;
  if (err.ok() && sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->got[i]);
  }
  ResetRequest(r);
  return err;
}

absl::Status CloseSend(void* send_comm) {
  auto* c = static_cast<SendComm*>(send_comm);
  if (c == nullptr || c->magic != kSendMagic) {
    return absl::InvalidArgumentError("closeSend: not a send comm");
  }
  c->magic = kDeadMagic;
  // Messages sent in place are read from NCCL's memory until acknowledged: wait for them
  // (bounded); if they cannot finish, abort the connection so longhaul lets go of them.
  auto in_flight = [c] {
    for (const Request& r : c->requests) {
      if (r.in_place && r.in_place->state.load() == 0) return true;
    }
    return false;
  };
  if (in_flight() && !c->rt->WaitFor([&] { return !in_flight(); }, c->rt->settings.linger)) {
    LogWarn("closeSend: data sent in place not acknowledged within %s; aborting the connection",
            FormatDuration(c->rt->settings.linger).c_str());
    c->link->AbortAndWait("send comm closed with data in flight", Duration::Seconds(10));
  }
  if (c->link->state() == Link::State::kReady) {
    c->link->SendControl(FrameKind::kClose, c->state->id, 0, 0).IgnoreError();
  }
  c->rt->ReleaseSender(c->link, c->state->id);
  delete c;
  return absl::OkStatus();
}

absl::Status CloseRecv(void* recv_comm) {
  auto* c = static_cast<RecvComm*>(recv_comm);
  if (c == nullptr || c->magic != kRecvMagic) {
    return absl::InvalidArgumentError("closeRecv: not a recv comm");
  }
  c->magic = kDeadMagic;
  c->link->RemoveReceiver(c->state->id);
  {
    std::lock_guard<std::mutex> l(c->state->mu);
    c->state->queue.clear();
  }
  delete c;
  return absl::OkStatus();
}

absl::Status CloseListen(void* listen_comm) {
  auto* lc = static_cast<ListenComm*>(listen_comm);
  if (lc == nullptr || lc->magic != kListenMagic) {
    return absl::InvalidArgumentError("closeListen: not a listen comm");
  }
  lc->magic = kDeadMagic;
  lc->rt->RemoveListen(lc->state->id);
  std::deque<ListenState::Pending> pending;
  {
    std::lock_guard<std::mutex> l(lc->state->mu);
    lc->state->closed = true;
    pending.swap(lc->state->pending);
  }
  // Connections that arrived but were never accepted: their comms are refused.
  for (ListenState::Pending& p : pending) {
    p.link->RemoveReceiver(p.state->id);
    p.link->SendControl(FrameKind::kReject, p.state->id, lc->state->id, 0).IgnoreError();
  }
  delete lc;
  return absl::OkStatus();
}

ncclResult_t StatusToNccl(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return ncclSuccess;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      return ncclInternalError;
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return ncclInvalidUsage;
    case absl::StatusCode::kAborted:
      return ncclRemoteError;
    default:
      return ncclSystemError;
  }
}

}  // namespace longhaul::nccl
