// Test-only: a sans-IO endpoint (transport/endpoint) as a simulator node, so that
// handshakes and connections run over the link model in virtual time: loss, bursts,
// reordering, duplication, corruption, queues. The node itself is sim::EndpointNode
// (transport/sim/endpoint_node.h, one local kLocal, every datagram from and to its
// pair); this adds what tests look at: endpoint events and connection events are
// collected after every call, and a script runs.
#pragma once

#include <functional>
#include <vector>

#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/sim/endpoint_node.h"
#include "transport/testing/endpoint_net.h"

namespace longhaul::testing {

class EndpointSimNode final : public sim::EndpointNode {
 public:
  // `self` and `peer` are this node's and its pair's addresses.
  EndpointSimNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
                  endpoint::PeerAddress peer);

  std::vector<endpoint::EndpointEvent>& events() { return events_; }
  std::vector<ConnectionEvent>& connection_events() { return conn_events_; }
  // Runs after every delivery and transmit turn, once events were collected: the place
  // for a test's actions (Send when connected, ...); deadlines are refreshed after it.
  void set_script(std::function<void()> script) { script_ = std::move(script); }
  // Drains events, runs the script and refreshes deadlines.
  void Drain();

 private:
  void OnDrain(Time) override { Drain(); }

  std::vector<endpoint::EndpointEvent> events_;
  std::vector<ConnectionEvent> conn_events_;
  std::vector<endpoint::ConnectionId> ids_;
  std::function<void()> script_;
};

}  // namespace longhaul::testing
