// EndpointNode: a sans-IO endpoint (endpoint::SansIoEndpoint) as a simulator node
// (simulator.h), so that handshakes, routing, packet protection and the connections
// behind them run over the link model in virtual time. The driver side of the endpoint's
// contract for one peer: the node has one local (kLocal); every datagram it receives
// comes from its pair's address and every datagram it sends goes to the link.
//
// After every delivery, and whenever a transmit turn ends (PollTransmit returns 0), the
// node calls OnDrain: the owner's place to take endpoint and connection events and act
// on them (the scenario runner's endpoint mode, testing::EndpointSimNode). Deadlines are
// the endpoint's (NextTimeout); an owner with wakes of its own overrides NextTimeout and
// OnTimeout. Ownership: the node owns its endpoint. Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/base/units.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/sim/simulator.h"

namespace longhaul::sim {

class EndpointNode : public SimNode {
 public:
  static constexpr endpoint::LocalId kLocal = 1;

  // `self` and `peer` are this node's and its pair's addresses; `config` must
  // Validate() (CHECKed by the endpoint).
  EndpointNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
               endpoint::PeerAddress peer);

  endpoint::SansIoEndpoint& ep() { return ep_; }
  const endpoint::SansIoEndpoint& ep() const { return ep_; }
  const endpoint::PeerAddress& self() const { return self_; }
  const endpoint::PeerAddress& peer() const { return peer_; }
  // The virtual time of the last call into the node.
  Time now() const { return now_; }

  // sim::SimNode
  void OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn) override;
  void OnTimeout(Time now) override;
  size_t PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info) override;
  Time NextTimeout() const override;

 protected:
  // Events may be waiting (see above); `now` is the node's time.
  virtual void OnDrain(Time now) = 0;
  void set_now(Time now) { now_ = now; }

 private:
  endpoint::SansIoEndpoint ep_;
  endpoint::PeerAddress self_;
  endpoint::PeerAddress peer_;
  Time now_;
};

}  // namespace longhaul::sim
