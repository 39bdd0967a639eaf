#include "transport/nccl/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/nccl/plugin_log.h"

namespace longhaul::nccl {

absl::StatusOr<uint64_t> RandomId() {
  uint64_t v = 0;
  ssize_t n;
  do {
    n = getrandom(&v, sizeof(v), 0);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(v))) return v;
  const int getrandom_errno = n < 0 ? errno : 0;
  if (n < 0 && errno == ENOSYS) {
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      do {
        n = read(fd, &v, sizeof(v));
      } while (n < 0 && errno == EINTR);
      close(fd);
      if (n == static_cast<ssize_t>(sizeof(v))) return v;
    }
  }
  return absl::UnavailableError(
      absl::StrCat("no system randomness for an id: getrandom ",
                   getrandom_errno != 0 ? strerror(getrandom_errno) : "gave too few bytes",
                   getrandom_errno == ENOSYS ? " and /dev/urandom could not be read" : ""));
}

TransportConfig LaneConfig(const TransportConfig& config, uint32_t lanes) {
  TransportConfig c = config;
  if (lanes <= 1) return c;
  auto share = [lanes](Bandwidth b) { return Bandwidth::BitsPerSecond(b.bps() / lanes); };
  c.rate = share(c.rate);
  c.rate_min = share(c.rate_min);
  c.initial_rate = share(c.initial_rate);
  return c;
}

absl::Status Runtime::EnsureEndpointLocked() {
  if (stopped_) return absl::FailedPreconditionError("the plugin was finalized");
  if (endpoint_) return absl::OkStatus();
  EndpointOptions eo;
  eo.spin = settings.spin;
  eo.send_quantum = settings.send_quantum;
  eo.security = keys.security;  // the driver sets the entropy source
  LH_ASSIGN_OR_RETURN(eo.datapath,
                      ParseDatapath(settings.datapath.empty() ? "udp" : settings.datapath));
  LH_ASSIGN_OR_RETURN(eo.verbs.qp_type,
                      ParseQpType(settings.qp_type.empty() ? "ud" : settings.qp_type));
  // Auto (0) is one engine for verbs, which runs one (ReadSettings refused more).
  eo.engines = eo.datapath == Datapath::kUdp ? settings.engines : 1;
  eo.engine_cpus = settings.engine_cpus;
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
  if (!ep.ok()) {
    return absl::Status(ep.status().code(),
                        absl::StrCat("longhaul endpoint (", kSettingPrefix,
                                     "ENGINES=", settings.engines, "): ", ep.status().message()));
  }
  endpoint_ = *std::move(ep);
  engines_ = std::max<uint32_t>(1, endpoint_->stats().engines);
  std::string cpus;
  for (int cpu : settings.engine_cpus) absl::StrAppend(&cpus, cpus.empty() ? "" : ",", cpu);
  LogInfo("endpoint: %u engine%s (threads lh-engine-0..%u, %s)%s", engines_,
          engines_ == 1 ? "" : "s", engines_ - 1,
          cpus.empty() ? "not pinned" : absl::StrCat("pinned to CPUs ", cpus).c_str(),
          engines_ == 1 ? ""
                        : absl::StrCat("; each peer's comms spread over ", engines_,
                                       " connections, each paced at ",
                                       FormatBandwidth(LaneConfig(settings.config, engines_).rate))
                              .c_str());
  return absl::OkStatus();
}

absl::StatusOr<uint16_t> Runtime::ListenPort(int dev) {
  std::lock_guard<std::mutex> l(mu_);
  LH_RETURN_IF_ERROR(EnsureEndpointLocked());
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
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", dev_name, " (", devices[dev].address, "): ", port.status().message()));
  }
  ports_[dev] = *port;
  LogInfo("device %d (%s) listens on UDP %s:%u", dev, dev_name.c_str(),
          devices[dev].address.c_str(), *port);
  return *port;
}

// Engine thread, several at once with engines > 1: the Link is new and its own; links_
// is shared (mu_). Its events start only after this returns (SetCallback below), on this
// same engine's thread.
void Runtime::OnAccept(std::shared_ptr<ConnectionHandle> h) {
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

absl::StatusOr<std::shared_ptr<ListenState>> Runtime::AddListen(int dev, bool has_comm_id,
                                                                uint64_t comm_id) {
  auto ls = std::make_shared<ListenState>();
  ls->dev = dev;
  ls->has_comm_id = has_comm_id;
  ls->comm_id = has_comm_id ? comm_id : 0;
  // A fresh id, never 0 and never one in use (a repeat of 64 random bits is not expected;
  // the loop is bounded all the same).
  for (int attempt = 0; attempt < 8; ++attempt) {
    LH_ASSIGN_OR_RETURN(uint64_t id, RandomId());
    if (id == 0) continue;
    std::lock_guard<std::mutex> l(mu_);
    if (!listens_.emplace(id, ls).second) continue;
    ls->id = id;
    return ls;
  }
  return absl::UnavailableError("no unused random listen id in 8 draws");
}

namespace {

constexpr const char* kRefusedNames[6] = {"no such listen comm",
                                          "other communicator",
                                          "bound to another peer",
                                          "over the pending bound",
                                          "credit exceeded",
                                          "malformed"};

}  // namespace

std::string Runtime::CountRefusedOpen(RejectReason reason, uint64_t* total) {
  std::lock_guard<std::mutex> l(count_mu_);
  const auto i = static_cast<size_t>(reason);
  if (i < 6) ++refused_[i];
  ++refused_total_;
  if (total != nullptr) *total = refused_total_;
  std::string text = absl::StrCat(refused_total_, " OPENs refused since init (");
  bool first = true;
  for (size_t k = 0; k < 6; ++k) {
    if (refused_[k] == 0) continue;
    absl::StrAppend(&text, first ? "" : ", ", kRefusedNames[k], " ", refused_[k]);
    first = false;
  }
  absl::StrAppend(&text, ")");
  return text;
}

std::string Runtime::CountCreditEnded() {
  std::lock_guard<std::mutex> l(count_mu_);
  ++credit_ended_;
  return absl::StrCat(credit_ended_, " comms ended for exceeding their credit since init");
}

std::shared_ptr<ListenState> Runtime::FindListen(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = listens_.find(id);
  return it == listens_.end() ? nullptr : it->second;
}

void Runtime::RemoveListen(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  listens_.erase(id);
}

absl::StatusOr<std::shared_ptr<Link>> Runtime::ClientLink(
    const PluginHandle& h, const std::shared_ptr<SendState>& sender) {
  std::lock_guard<std::mutex> l(mu_);
  LH_RETURN_IF_ERROR(EnsureEndpointLocked());
  const std::string key = absl::StrCat(h.address, ":", h.port, "/", absl::Hex(h.instance));
  ClientPeer& peer = client_peers_[key];
  if (peer.lanes.empty()) peer.lanes.resize(engines_);
  // The lane: the one this listen comm's connects took before (NCCL retries a connect
  // until it returns a comm), else the peer's next.
  uint32_t lane = 0;
  if (engines_ == 1) {
    // One lane: nothing to choose or remember.
  } else if (auto it = peer.lane_of_listen.find(h.listen_id); it != peer.lane_of_listen.end()) {
    lane = it->second;
  } else {
    lane = peer.next_lane;
    peer.next_lane = (lane + 1) % engines_;
    if (peer.lane_of_listen.size() >= kMaxLaneMemory) peer.lane_of_listen.clear();
    peer.lane_of_listen[h.listen_id] = lane;
  }
  if (std::shared_ptr<Link> existing = peer.lanes[lane]) {
    Link::State st = existing->state();
    if (st == Link::State::kReady) existing->AddSender(sender);
    if (st == Link::State::kConnecting || st == Link::State::kReady) return existing;
    // Failed or closed: the caller sees this link's error once; a later call retries.
    ForgetLaneLocked(key, lane, existing);
    return existing;
  }
  auto link = std::make_shared<Link>(true, key, weak_from_this(), lane);
  peer.lanes[lane] = link;
  links_.push_back(link);
  ConnectOptions co;
  co.config = LaneConfig(settings.config, engines_);
  co.timeout = settings.connect_timeout;
  co.engine = static_cast<int>(lane % 256);  // lane i on engine i on both sides
  if (h.public_key) co.server_key = *h.public_key;
  std::weak_ptr<Link> weak = link;
  co.callback = [weak](Event& e) {
    if (std::shared_ptr<Link> lk = weak.lock()) lk->OnEvent(e);
  };
  Endpoint* ep = endpoint_.get();
  std::string address = h.address;
  uint16_t port = h.port;
  const uint32_t lanes = engines_;
  link->connect_thread =
      std::thread([ep, link_raw = link.get(), address, port, co, lane, lanes]() mutable {
        absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = ep->Connect(address, port, co);
        if (c.ok()) {
          if (lanes > 1) {
            LogInfo("connection %s lane %u of %u up on engine %u", link_raw->key().c_str(), lane,
                    lanes, (*c)->info().engine);
          }
          link_raw->SetReady(*c);
        } else {
          link_raw->SetFailed(absl::UnavailableError(
              absl::StrCat("connect to ", address, ":", port, " failed: ", c.status().message())));
        }
      });
  return link;
}

void Runtime::ForgetLaneLocked(const std::string& key, uint32_t lane,
                               const std::shared_ptr<Link>& link) {
  auto it = client_peers_.find(key);
  if (it == client_peers_.end() || lane >= it->second.lanes.size() ||
      it->second.lanes[lane] != link) {
    return;
  }
  ClientPeer& peer = it->second;
  peer.lanes[lane].reset();
  for (const std::shared_ptr<Link>& lk : peer.lanes) {
    if (lk) return;
  }
  client_peers_.erase(it);  // no lane left: the next connect starts afresh
}

void Runtime::ReleaseSender(const std::shared_ptr<Link>& link, uint32_t id) {
  std::lock_guard<std::mutex> l(mu_);
  link->RemoveSender(id);
  if (!link->idle()) return;
  ForgetLaneLocked(link->key(), link->lane(), link);
}

void Runtime::NotifyProgress() {
  std::lock_guard<std::mutex> l(idle_mu_);
  idle_cv_.notify_all();
}

bool Runtime::zero_copy() const {
  const absl::StatusOr<Datapath> d = ParseDatapath(settings.datapath);
  const absl::StatusOr<QpType> q = ParseQpType(settings.qp_type);
  return d.ok() && *d == Datapath::kVerbs && q.ok() && *q == QpType::kUc;
}

uint64_t Runtime::RegisterMemory(void* data, size_t size) {
  if (!zero_copy()) return 0;  // other datapaths copy whatever is registered
  absl::StatusOr<uint64_t> region = absl::FailedPreconditionError("no longhaul endpoint yet");
  {
    // Not under mu_: registering waits for the driver thread, whose callbacks (OnAccept)
    // take mu_. reg_mu_ keeps Stop from closing the endpoint meanwhile.
    std::lock_guard<std::mutex> r(reg_mu_);
    if (Endpoint* ep = endpoint_for_registration()) region = ep->RegisterMemory(data, size);
  }
  std::lock_guard<std::mutex> l(count_mu_);
  if (!region.ok()) {
    if (mr_.refused++ == 0) {
      LogWarn("regMr of %zu bytes: %s; sends from it are copied (logged once)", size,
              std::string(region.status().message()).c_str());
    }
    return 0;
  }
  ++mr_.registered;
  mr_.bytes += size;
  return *region;
}

void Runtime::DeregisterMemory(uint64_t region) {
  if (region == 0) return;
  std::lock_guard<std::mutex> r(reg_mu_);  // as RegisterMemory
  if (Endpoint* ep = endpoint_for_registration()) (void)ep->DeregisterMemory(region);
}

Endpoint* Runtime::endpoint_for_registration() {
  std::lock_guard<std::mutex> l(mu_);
  return endpoint_.get();
}

Runtime::MrCounts Runtime::mr_counts() {
  std::lock_guard<std::mutex> l(count_mu_);
  return mr_;
}

void Runtime::CountInPlaceSend(uint64_t bytes) {
  std::lock_guard<std::mutex> l(count_mu_);
  ++mr_.in_place_sends;
  mr_.in_place_bytes += bytes;
}

void Runtime::CountRecv(bool placed, uint64_t bytes) {
  std::lock_guard<std::mutex> l(count_mu_);
  if (placed) {
    ++recv_.placed_messages;
    recv_.placed_bytes += bytes;
  } else {
    ++recv_.copied_messages;
    recv_.copied_bytes += bytes;
  }
}

void Runtime::CountOffer() {
  std::lock_guard<std::mutex> l(count_mu_);
  ++recv_.offered;
}

Runtime::RecvCounts Runtime::recv_counts() {
  std::lock_guard<std::mutex> l(count_mu_);
  return recv_;
}

void Runtime::Stop() {
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
    std::lock_guard<std::mutex> r(reg_mu_);  // no registration in flight
    std::lock_guard<std::mutex> l(mu_);
    ep = std::move(endpoint_);
  }
  if (ep) ep->Close();  // joins the engine threads; pending Connects fail
  if (ep && zero_copy()) {
    // What zero copy did (docs/nccl.md section 3, "Zero copy"): regMr and the gathers.
    const EndpointStats s = ep->stats();
    const MrCounts m = mr_counts();
    LogInfo("regMr: %llu regions registered (%llu bytes), %llu refused; %llu sends in place "
            "(%llu bytes); zero copy: %llu payload bytes gathered from registered memory, "
            "%llu copied",
            static_cast<unsigned long long>(m.registered),
            static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.refused),
            static_cast<unsigned long long>(m.in_place_sends),
            static_cast<unsigned long long>(m.in_place_bytes),
            static_cast<unsigned long long>(s.uc_payload_bytes_referenced),
            static_cast<unsigned long long>(s.uc_payload_bytes_copied));
    const RecvCounts r = recv_counts();
    LogInfo("irecv: %llu buffers offered; %llu messages (%llu bytes) placed in NCCL's buffers "
            "by the NIC, %llu messages (%llu bytes) copied into them; placement: %llu buffers "
            "advertised, %llu direct chunks received (%llu bytes checked in place, %llu "
            "copied)",
            static_cast<unsigned long long>(r.offered),
            static_cast<unsigned long long>(r.placed_messages),
            static_cast<unsigned long long>(r.placed_bytes),
            static_cast<unsigned long long>(r.copied_messages),
            static_cast<unsigned long long>(r.copied_bytes),
            static_cast<unsigned long long>(s.uc_placements_advertised),
            static_cast<unsigned long long>(s.uc_direct_chunks_received),
            static_cast<unsigned long long>(s.uc_direct_bytes_in_place),
            static_cast<unsigned long long>(s.uc_direct_bytes_copied));
  }
  for (auto& lk : links) {
    if (lk->connect_thread.joinable()) lk->connect_thread.join();
  }
  std::lock_guard<std::mutex> l(mu_);
  links_.clear();
  client_peers_.clear();
  listens_.clear();
  ep.reset();
}

bool Runtime::driver_running() {
  std::lock_guard<std::mutex> l(mu_);
  return endpoint_ != nullptr;
}

uint32_t Runtime::engines() {
  std::lock_guard<std::mutex> l(mu_);
  return engines_;
}

}  // namespace longhaul::nccl
