#include "transport/nccl/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
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

absl::Status Runtime::EnsureEndpointLocked() {
  if (stopped_) return absl::FailedPreconditionError("the plugin was finalized");
  if (endpoint_) return absl::OkStatus();
  EndpointOptions eo;
  eo.spin = settings.spin;
  eo.send_quantum = settings.send_quantum;
  eo.security = keys.security;  // the driver sets the entropy source
  LH_ASSIGN_OR_RETURN(eo.datapath,
                      ParseDatapath(settings.datapath.empty() ? "udp" : settings.datapath));
  LH_ASSIGN_OR_RETURN(endpoint_, Endpoint::Create(eo));
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
  if (h.public_key) co.server_key = *h.public_key;
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

void Runtime::ReleaseSender(const std::shared_ptr<Link>& link, uint32_t id) {
  std::lock_guard<std::mutex> l(mu_);
  link->RemoveSender(id);
  if (!link->idle()) return;
  auto it = client_links_.find(link->key());
  if (it != client_links_.end() && it->second == link) client_links_.erase(it);
}

void Runtime::NotifyProgress() {
  std::lock_guard<std::mutex> l(idle_mu_);
  idle_cv_.notify_all();
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

bool Runtime::driver_running() {
  std::lock_guard<std::mutex> l(mu_);
  return endpoint_ != nullptr;
}

}  // namespace longhaul::nccl
