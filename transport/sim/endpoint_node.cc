#include "transport/sim/endpoint_node.h"

#include <utility>

namespace longhaul::sim {

EndpointNode::EndpointNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
                           endpoint::PeerAddress peer)
    : ep_(std::move(config)), self_(self), peer_(peer) {}

void EndpointNode::OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn) {
  now_ = now;
  ep_.OnDatagram(now, kLocal, peer_, datagram, ecn);
  OnDrain(now);
}

// The endpoint's timers run in PollTransmit, which the simulator calls next.
void EndpointNode::OnTimeout(Time now) { now_ = now; }

size_t EndpointNode::PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info) {
  now_ = now;
  endpoint::Transmit t;
  const size_t n = ep_.PollTransmit(now, buffer, capacity, &t);
  if (n == 0) {
    OnDrain(now);
    return 0;
  }
  info->flow = 0;
  info->ecn = t.ecn;
  return n;
}

Time EndpointNode::NextTimeout() const { return ep_.NextTimeout(now_); }

}  // namespace longhaul::sim
