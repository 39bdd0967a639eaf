#include "transport/testing/endpoint_net.h"

#include <algorithm>
#include <cstring>

namespace longhaul::testing {
namespace {
constexpr uint8_t kTag = 0xee;  // first byte of the harness's addresses
}  // namespace

EndpointNet::EndpointNet(Duration one_way_delay)
    : delay_(one_way_delay), now_(Time::FromNanoseconds(int64_t{1000} * 1000000000)) {
  buf_.resize(65536);
}

int EndpointNet::Add(endpoint::EndpointConfig config) {
  Node n;
  n.ep = std::make_unique<endpoint::SansIoEndpoint>(std::move(config));
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size() - 1);
}

endpoint::PeerAddress EndpointNet::AddressOf(int node, endpoint::LocalId local) {
  const uint8_t b[7] = {kTag,
                        static_cast<uint8_t>(node >> 8),
                        static_cast<uint8_t>(node),
                        static_cast<uint8_t>(local >> 24),
                        static_cast<uint8_t>(local >> 16),
                        static_cast<uint8_t>(local >> 8),
                        static_cast<uint8_t>(local)};
  return endpoint::PeerAddress(std::span<const uint8_t>(b, sizeof(b)));
}

const endpoint::EndpointEvent* EndpointNet::ConnectResult(int node) {
  for (const endpoint::EndpointEvent& e : nodes_[node].events) {
    if (e.type == endpoint::EndpointEvent::Type::kConnected ||
        e.type == endpoint::EndpointEvent::Type::kConnectFailed) {
      return &e;
    }
  }
  return nullptr;
}

endpoint::SansIoEndpoint::Verdict EndpointNet::Inject(int node, endpoint::LocalId local,
                                                const endpoint::PeerAddress& from,
                                                std::span<const uint8_t> bytes) {
  endpoint::SansIoEndpoint::Verdict v = nodes_[node].ep->OnDatagram(now_, local, from, bytes);
  Drain(node);
  return v;
}

void EndpointNet::Send(int node, const endpoint::Transmit& t, const uint8_t* data,
                       PlacedAt placed) {
  Node& n = nodes_[node];
  NetDatagram d;
  d.from_node = node;
  d.from_local = t.local;
  d.to = t.to;
  d.index = n.sent++;
  d.bytes.assign(data, data + t.size);
  n.sent_bytes += t.size;
  for (uint8_t b : d.bytes) trace_ = (trace_ ^ b) * 0x100000001b3ULL;
  trace_ = (trace_ ^ static_cast<uint64_t>(now_.ns())) * 0x100000001b3ULL;
  NetVerdict v;
  if (filter_) v = filter_(d);
  if (v.drop) return;
  std::span<const uint8_t> to = t.to.bytes();
  if (to.size() != 7 || to[0] != kTag) {
    ++undeliverable_;
    return;
  }
  const int to_node = (to[1] << 8) | to[2];
  const endpoint::LocalId to_local = (static_cast<uint32_t>(to[3]) << 24) |
                                     (static_cast<uint32_t>(to[4]) << 16) |
                                     (static_cast<uint32_t>(to[5]) << 8) | to[6];
  if (to_node >= static_cast<int>(nodes_.size())) {
    ++undeliverable_;
    return;
  }
  if (v.corrupt && !d.bytes.empty()) d.bytes[d.bytes.size() / 2] ^= 0x10;
  const Time arrive = now_ + delay_ + v.extra_delay;
  InFlight f{to_node, to_local, AddressOf(node, t.local), std::move(d.bytes), placed};
  if (v.duplicate) queue_.emplace(std::make_pair(arrive.ns() + 1, seq_++), f);
  queue_.emplace(std::make_pair(arrive.ns(), seq_++), std::move(f));
}

void EndpointNet::Drain(int node) {
  Node& n = nodes_[node];
  endpoint::EndpointEvent e;
  while (n.ep->PollEvent(&e)) n.events.push_back(std::move(e));
  n.ep->ListConnections(&ids_);
  std::sort(ids_.begin(), ids_.end());
  for (endpoint::ConnectionId id : ids_) {
    Connection* c = n.ep->ConnectionAt(id);
    Event ev;
    while (c->PollEvent(&ev)) n.conn_events.push_back(ConnectionEvent{id, std::move(ev)});
    n.ep->Touch(id);
  }
}

void EndpointNet::Pump(int node) {
  endpoint::Transmit t;
  for (int i = 0; i < 1'000'000; ++i) {
    const size_t len = nodes_[node].ep->PollTransmit(now_, buf_.data(), buf_.size(), &t);
    if (len == 0) break;
    // Payloads sent by reference (Connection::SetPayloadByReference): a driver gathers
    // them from the application's memory; here they are copied in, and counted.
    PlacedAt placed;
    for (const wire::DeferredPayload& d : t.referenced()) {
      referenced_bytes_ += d.length;
      const Placement p =
          placer_ && t.referenced().size() == 1 ? placer_(node, d) : Placement{};
      if (p.to == nullptr) {
        std::memcpy(buf_.data() + d.offset, d.source, d.length);
        continue;
      }
      if (!p.lose) std::memcpy(p.to, d.source, d.length);
      std::memset(buf_.data() + d.offset, 0xa5, d.length);
      placed = PlacedAt{d.offset, p.to, d.length};
    }
    Send(node, t, buf_.data(), placed);
  }
  Drain(node);
}

void EndpointNet::Arrive(InFlight& f) {
  endpoint::SansIoEndpoint& ep = *nodes_[f.to_node].ep;
  if (f.placed.data == nullptr) {
    ep.OnDatagram(now_, f.to_local, f.from, f.bytes);
  } else {
    const Connection::Placed r = ep.OnPlacedDatagram(now_, f.to_local, f.from, f.bytes,
                                                     f.placed.offset, f.placed.data,
                                                     f.placed.length);
    ++placed_results_[static_cast<size_t>(r)];
  }
  Drain(f.to_node);
}

bool EndpointNet::RunUntil(const std::function<bool()>& done, Duration limit,
                           uint64_t max_steps) {
  const Time end = now_ + limit;
  for (uint64_t step = 0; step < max_steps; ++step) {
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) Pump(i);
    if (done()) return true;
    Time next = Time::Infinite();
    for (Node& n : nodes_) next = std::min(next, n.ep->NextTimeout(now_));
    if (!queue_.empty()) next = std::min(next, Time::FromNanoseconds(queue_.begin()->first.first));
    if (next.IsInfinite() || next > end) return done();
    if (next > now_) now_ = next;
    while (!queue_.empty() && queue_.begin()->first.first <= now_.ns()) {
      InFlight f = std::move(queue_.begin()->second);
      queue_.erase(queue_.begin());
      Arrive(f);
    }
  }
  return done();
}

}  // namespace longhaul::testing
