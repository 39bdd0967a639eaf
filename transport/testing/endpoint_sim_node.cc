#include "transport/testing/endpoint_sim_node.h"

#include <algorithm>
#include <utility>

namespace longhaul::testing {

EndpointSimNode::EndpointSimNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
                                 endpoint::PeerAddress peer)
    : sim::EndpointNode(std::move(config), self, peer) {}

void EndpointSimNode::Drain() {
  endpoint::EndpointEvent e;
  while (ep().PollEvent(&e)) events_.push_back(std::move(e));
  ep().ListConnections(&ids_);
  std::sort(ids_.begin(), ids_.end());
  for (endpoint::ConnectionId id : ids_) {
    Event ev;
    while (ep().ConnectionAt(id)->PollEvent(&ev)) {
      conn_events_.push_back(ConnectionEvent{id, std::move(ev)});
    }
  }
  if (script_) script_();
  ep().ListConnections(&ids_);
  for (endpoint::ConnectionId id : ids_) ep().Touch(id);
}

}  // namespace longhaul::testing
