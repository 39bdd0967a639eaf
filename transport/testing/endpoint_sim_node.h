// Test-only: a sans-IO endpoint (transport/endpoint) as a simulator node
// (transport/sim/simulator.h), so that handshakes and connections run over the link
// model in virtual time: loss, bursts, reordering, duplication, corruption, queues.
//
// The node has one local (kLocal); every datagram it receives comes from its pair's
// address and every datagram it sends goes to the link. Endpoint events and connection
// events are collected after every call.
#pragma once

#include <functional>
#include <vector>

#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/sim/simulator.h"
#include "transport/testing/endpoint_net.h"

namespace longhaul::testing {

class EndpointSimNode final : public sim::SimNode {
 public:
  static constexpr endpoint::LocalId kLocal = 1;

  // `self` and `peer` are this node's and its pair's addresses.
  EndpointSimNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
                  endpoint::PeerAddress peer);

  endpoint::SansIoEndpoint& ep() { return ep_; }
  const endpoint::PeerAddress& self() const { return self_; }
  const endpoint::PeerAddress& peer() const { return peer_; }
  std::vector<endpoint::EndpointEvent>& events() { return events_; }
  std::vector<ConnectionEvent>& connection_events() { return conn_events_; }
  // Runs after every delivery and transmit turn, once events were collected: the place
  // for a test's actions (Send when connected, ...); deadlines are refreshed after it.
  void set_script(std::function<void()> script) { script_ = std::move(script); }
  // Drains events, runs the script and refreshes deadlines.
  void Drain();

  // sim::SimNode
  void OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn) override;
  void OnTimeout(Time now) override;
  size_t PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info) override;
  Time NextTimeout() const override;

 private:
  endpoint::SansIoEndpoint ep_;
  endpoint::PeerAddress self_;
  endpoint::PeerAddress peer_;
  Time now_;
  std::vector<endpoint::EndpointEvent> events_;
  std::vector<ConnectionEvent> conn_events_;
  std::vector<endpoint::ConnectionId> ids_;
  std::function<void()> script_;
};

}  // namespace longhaul::testing
