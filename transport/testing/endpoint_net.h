// Test-only harness: sans-IO endpoints (transport/endpoint) joined by a virtual-time
// network, so handshake and routing tests run deterministically without sockets.
//
// Every node is one endpoint::SansIoEndpoint; each of its locals has the address
// AddressOf(node, local). A datagram sent from (node, local) to an address arrives at
// that address's node and local after `one_way_delay` (plus a filter's extra delay), with
// `from` the sender's address; datagrams to addresses nobody has are dropped and counted.
// A filter sees every datagram and may drop, duplicate, corrupt or delay it. The harness
// drains every node's endpoint events and its connections' events after each step.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "transport/endpoint/sans_io_endpoint.h"

namespace longhaul::testing {

struct NetVerdict {
  bool drop = false;
  bool duplicate = false;
  bool corrupt = false;  // flip one bit in the middle
  Duration extra_delay;
};

struct NetDatagram {
  int from_node = 0;
  endpoint::LocalId from_local = 0;
  endpoint::PeerAddress to;
  uint64_t index = 0;  // datagrams sent by from_node so far
  std::vector<uint8_t> bytes;
};

using NetFilter = std::function<NetVerdict(const NetDatagram&)>;

// Receive-side placement, as a NIC writing a payload where the receiver advertised it
// (docs/rdma.md 7.15): for a datagram with exactly one payload by reference, a placer
// names where the receiving node wants it (null: nowhere, the datagram carries it). The
// harness then writes it there when it is sent (not at all when `lose`: a lost write
// leaves whatever was there), fills its place in the datagram with garbage and hands the
// datagram over with OnPlacedDatagram.
struct Placement {
  uint8_t* to = nullptr;
  bool lose = false;
};
using NetPlacer = std::function<Placement(int from_node, const wire::DeferredPayload&)>;

struct ConnectionEvent {
  endpoint::ConnectionId id = 0;
  Event event;
};

class EndpointNet {
 public:
  explicit EndpointNet(Duration one_way_delay = Duration::Milliseconds(10));

  // Adds a node; returns its index.
  int Add(endpoint::EndpointConfig config);
  endpoint::SansIoEndpoint& node(int i) { return *nodes_[i].ep; }
  static endpoint::PeerAddress AddressOf(int node, endpoint::LocalId local);

  void set_filter(NetFilter f) { filter_ = std::move(f); }
  void set_placer(NetPlacer p) { placer_ = std::move(p); }
  // OnPlacedDatagram's answers so far: [kInPlace, kCopied, kRefused].
  const std::array<uint64_t, 3>& placed_results() const { return placed_results_; }
  Time now() const { return now_; }
  // Advances the clock (nothing happens in between that RunUntil would not do).
  void set_now(Time t) { now_ = t; }

  // Hands a datagram to a node as if it arrived now (from any address).
  endpoint::SansIoEndpoint::Verdict Inject(int node, endpoint::LocalId local,
                                     const endpoint::PeerAddress& from,
                                     std::span<const uint8_t> bytes);

  // Runs until `done()` holds, no work is left, or virtual time passes now + `limit`.
  bool RunUntil(const std::function<bool()>& done, Duration limit, uint64_t max_steps = 10'000'000);

  std::vector<endpoint::EndpointEvent>& events(int node) { return nodes_[node].events; }
  std::vector<ConnectionEvent>& connection_events(int node) { return nodes_[node].conn_events; }
  // The node's first kConnected or kConnectFailed event; nullptr while its handshake runs.
  const endpoint::EndpointEvent* ConnectResult(int node);
  // Datagrams each node sent and their bytes; datagrams that found nobody.
  uint64_t sent(int node) const { return nodes_[node].sent; }
  uint64_t sent_bytes(int node) const { return nodes_[node].sent_bytes; }
  uint64_t undeliverable() const { return undeliverable_; }
  // Payload bytes PollTransmit left in the application's memory (Transmit::referenced).
  uint64_t referenced_bytes() const { return referenced_bytes_; }
  // Everything that was sent, in order, fingerprinted (determinism checks).
  uint64_t trace_hash() const { return trace_; }

 private:
  struct Node {
    std::unique_ptr<endpoint::SansIoEndpoint> ep;
    std::vector<endpoint::EndpointEvent> events;
    std::vector<ConnectionEvent> conn_events;
    uint64_t sent = 0;
    uint64_t sent_bytes = 0;
  };
  struct PlacedAt {
    size_t offset = 0;
    const uint8_t* data = nullptr;  // null: not placed
    size_t length = 0;
  };
  struct InFlight {
    int to_node;
    endpoint::LocalId to_local;
    endpoint::PeerAddress from;
    std::vector<uint8_t> bytes;
    PlacedAt placed;
  };
  void Pump(int node);
  void Send(int node, const endpoint::Transmit& t, const uint8_t* data, PlacedAt placed);
  // Hands an arrived datagram to its node.
  void Arrive(InFlight& f);
  void Drain(int node);

  Duration delay_;
  NetFilter filter_;
  NetPlacer placer_;
  std::array<uint64_t, 3> placed_results_{};
  Time now_;
  std::vector<Node> nodes_;
  std::multimap<std::pair<int64_t, uint64_t>, InFlight> queue_;
  uint64_t seq_ = 0;
  uint64_t undeliverable_ = 0;
  uint64_t referenced_bytes_ = 0;
  uint64_t trace_ = 0xcbf29ce484222325ULL;
  std::vector<uint8_t> buf_;
  std::vector<endpoint::ConnectionId> ids_;
};

}  // namespace longhaul::testing
