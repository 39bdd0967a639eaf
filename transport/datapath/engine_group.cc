#include "transport/datapath/engine_group.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::datapath {

absl::StatusOr<uint32_t> ResolveEngines(const EndpointOptions& o) {
  if (o.engines > kMaxEngines) {
    return absl::InvalidArgumentError(
        absl::StrCat("engines=", o.engines, " is outside [0 (one per CPU), ", kMaxEngines, "]"));
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool known = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  for (int cpu : o.engine_cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("engine_cpus: CPU ", cpu, " is outside [0, ", CPU_SETSIZE - 1, "]"));
    }
    if (known && !CPU_ISSET(cpu, &allowed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "engine_cpus: CPU ", cpu, " is not one this process may run on (", CPU_COUNT(&allowed),
          " allowed; see taskset -p ", getpid(), ")"));
    }
  }
  uint32_t engines = o.engines;
  if (engines == 0) engines = std::min<uint32_t>(known ? std::max(1, CPU_COUNT(&allowed)) : 1, kMaxAutoEngines);
  if (o.datapath != Datapath::kUdp) {
    if (o.engines == 0) return 1;  // auto: the one engine this datapath runs
    if (engines > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "engines=", engines, ": several engines need datapath udp; the ",
          DatapathName(o.datapath), " datapath runs one engine"));
    }
  }
  return engines;
}

void AddEndpointStats(EndpointStats* sum, const EndpointStats& s) {
  sum->datagrams_sent += s.datagrams_sent;
  sum->datagrams_received += s.datagrams_received;
  sum->bytes_sent += s.bytes_sent;
  sum->bytes_received += s.bytes_received;
  sum->send_syscalls += s.send_syscalls;
  sum->recv_syscalls += s.recv_syscalls;
  sum->gso_sends += s.gso_sends;
  sum->gro_receives += s.gro_receives;
  sum->send_blocked += s.send_blocked;
  sum->send_errors += s.send_errors;
  sum->stalled_deadlines += s.stalled_deadlines;
  sum->receive_truncated += s.receive_truncated;
  sum->undecodable += s.undecodable;
  sum->unknown_connection += s.unknown_connection;
  sum->foreign_datagrams += s.foreign_datagrams;
  sum->foreign_replies += s.foreign_replies;
  sum->hellos_received += s.hellos_received;
  sum->short_initials += s.short_initials;
  sum->retries_sent += s.retries_sent;
  sum->cookies_invalid += s.cookies_invalid;
  sum->cookies_expired += s.cookies_expired;
  sum->version_mismatches += s.version_mismatches;
  sum->rejects_sent += s.rejects_sent;
  sum->connections_accepted += s.connections_accepted;
  sum->unconfirmed_expired += s.unconfirmed_expired;
  sum->handshake_errors += s.handshake_errors;
  sum->handshake_wrong_source += s.handshake_wrong_source;
  sum->amplification_limited += s.amplification_limited;
  sum->handshake_auth_failures += s.handshake_auth_failures;
  sum->security_mismatches += s.security_mismatches;
  sum->keys_refused += s.keys_refused;
  sum->packets_unauthenticated += s.packets_unauthenticated;
  sum->packets_replayed += s.packets_replayed;
  sum->packets_too_old += s.packets_too_old;
  sum->plaintext_refused += s.plaintext_refused;
  sum->confirms_refused += s.confirms_refused;
  sum->payloads_opened_in_place += s.payloads_opened_in_place;
  sum->in_place_auth_failures += s.in_place_auth_failures;
  sum->connections_active += s.connections_active;
  sum->cpu_s += s.cpu_s;
}

absl::StatusOr<std::unique_ptr<EngineGroup>> EngineGroup::Create(const EndpointOptions& options,
                                                                uint32_t engines,
                                                                const Factory& factory) {
  auto queue = std::make_shared<AcceptQueue>();
  uint8_t b[16];
  SystemEntropy(b);
  endpoint::SipKey secret{};
  std::memcpy(&secret.k0, b, 8);
  std::memcpy(&secret.k1, b + 8, 8);
  uint8_t t[4];  // the client tags' start: its own draw (ids are seen on the wire)
  SystemEntropy(t);
  uint32_t start;
  std::memcpy(&start, t, sizeof(start));
  auto tags = std::make_shared<std::atomic<uint32_t>>(start);
  std::vector<std::unique_ptr<Driver>> drivers;
  for (uint32_t i = 0; i < engines; ++i) {
    EngineSlot slot;
    slot.index = i;
    slot.count = engines;
    slot.cookie_secret = secret;
    slot.accept_queue = queue;
    slot.client_tags = tags;
    if (!options.engine_cpus.empty()) slot.cpu = options.engine_cpus[i % options.engine_cpus.size()];
    absl::StatusOr<std::unique_ptr<Driver>> d = factory(slot);
    if (!d.ok()) {
      for (auto& made : drivers) made->Shutdown();
      queue->Stop();
      return absl::Status(d.status().code(), absl::StrCat("engine ", i, ": ", d.status().message()));
    }
    drivers.push_back(*std::move(d));
  }
  return std::unique_ptr<EngineGroup>(new EngineGroup(std::move(drivers), std::move(queue)));
}

EngineGroup::EngineGroup(std::vector<std::unique_ptr<Driver>> engines,
                         std::shared_ptr<AcceptQueue> queue)
    : engines_(std::move(engines)), queue_(std::move(queue)) {}

EngineGroup::~EngineGroup() { Shutdown(); }

absl::StatusOr<uint16_t> EngineGroup::Listen(const std::string& address, uint16_t port,
                                             ListenOptions options) {
  LH_ASSIGN_OR_RETURN(const uint16_t bound, engines_[0]->Listen(address, port, options));
  for (size_t i = 1; i < engines_.size(); ++i) {
    absl::StatusOr<uint16_t> p = engines_[i]->Listen(address, bound, options);
    if (!p.ok()) {
      return absl::Status(p.status().code(),
                          absl::StrCat("engine ", i, " cannot join port ", bound, ": ",
                                       p.status().message()));
    }
  }
  return bound;
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> EngineGroup::Connect(const std::string& host,
                                                                       uint16_t port,
                                                                       ConnectOptions options) {
  const uint32_t i = options.engine >= 0
                         ? static_cast<uint32_t>(options.engine) % engines_.size()
                         : next_connect_.fetch_add(1, std::memory_order_relaxed) % engines_.size();
  return engines_[i]->Connect(host, port, std::move(options));
}

absl::StatusOr<std::shared_ptr<ConnectionHandle>> EngineGroup::Accept(Duration timeout) {
  return queue_->Pop(timeout);
}

void EngineGroup::Shutdown() {
  for (auto& e : engines_) e->Shutdown();
  queue_->Stop();
}

EndpointStats EngineGroup::stats() const {
  std::vector<EndpointStats> per = engine_stats();
  EndpointStats sum = per[0];
  for (size_t i = 1; i < per.size(); ++i) AddEndpointStats(&sum, per[i]);
  sum.engines = static_cast<uint32_t>(per.size());
  return sum;
}

std::vector<EndpointStats> EngineGroup::engine_stats() const {
  std::vector<EndpointStats> out;
  out.reserve(engines_.size());
  for (const auto& e : engines_) {
    out.push_back(e->stats());
    out.back().engines = static_cast<uint32_t>(engines_.size());
  }
  return out;
}

}  // namespace longhaul::datapath
