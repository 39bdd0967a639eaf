#include "transport/testing/endpoint_sim_node.h"

#include <algorithm>

namespace longhaul::testing {

EndpointSimNode::EndpointSimNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
                                 endpoint::PeerAddress peer)
    : ep_(std::move(config)), self_(self), peer_(peer) {}

void EndpointSimNode::Drain() {
  endpoint::EndpointEvent e;
  while (ep_.PollEvent(&e)) events_.push_back(std::move(e));
  ep_.ListConnections(&ids_);
  std::sort(ids_.begin(), ids_.end());
  for (endpoint::ConnectionId id : ids_) {
    Event ev;
    while (ep_.ConnectionAt(id)->PollEvent(&ev)) {
      conn_events_.push_back(ConnectionEvent{id, std::move(ev)});
    }
  }
  if (script_) script_();
  ep_.ListConnections(&ids_);
  for (endpoint::ConnectionId id : ids_) ep_.Touch(id);
}

void EndpointSimNode::OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn) {
  now_ = now;
  ep_.OnDatagram(now, kLocal, peer_, datagram, ecn);
  Drain();
}

void EndpointSimNode::OnTimeout(Time now) { now_ = now; }

size_t EndpointSimNode::PollTransmit(Time now, uint8_t* buffer, size_t capacity,
                                     TransmitInfo* info) {
  now_ = now;
  endpoint::Transmit t;
  const size_t n = ep_.PollTransmit(now, buffer, capacity, &t);
  if (n == 0) {
    Drain();
    return 0;
  }
  info->flow = 0;
  info->ecn = t.ecn;
  return n;
}

Time EndpointSimNode::NextTimeout() const { return ep_.NextTimeout(now_); }

}  // namespace longhaul::testing
