#include "transport/endpoint/negotiation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::endpoint {

HandshakeParams ParamsFor(const TransportConfig& c) {
  HandshakeParams p;
  p.segment = static_cast<uint32_t>(c.segment);
  p.max_datagram = static_cast<uint32_t>(c.MaxDatagramSize());
  p.recv_window = c.recv_window;
  p.max_inflight_messages = c.max_inflight_messages;
  p.flows = static_cast<uint16_t>(std::min<uint32_t>(c.flows, 65535));
  p.idle_timeout_ms = static_cast<uint32_t>(c.idle_timeout.ns() / 1000000);
  return p;
}

void KeepAliveWithinIdle(TransportConfig* c) {
  const Duration most = c->idle_timeout / 3;
  if (c->keepalive > most) c->keepalive = std::max(most, Duration::Milliseconds(1));
}

absl::StatusOr<TransportConfig> NegotiateServerConfig(const TransportConfig& base,
                                                      const HelloPolicy& policy,
                                                      const HandshakeParams& hello,
                                                      uint32_t max_flows,
                                                      const std::function<HelloInfo()>& info) {
  if (hello.flows == 0 || hello.max_inflight_messages == 0 || hello.segment == 0) {
    return absl::InvalidArgumentError(
        "bad parameters: flows, segment and max_inflight_messages must be > 0");
  }
  TransportConfig config = base;
  if (policy) {
    LH_ASSIGN_OR_RETURN(config, policy(info()));
  }
  // The message limit and idle timeout are the smaller of the two sides', the flows the
  // client asked for up to our limit.
  config.max_inflight_messages = std::min(config.max_inflight_messages, hello.max_inflight_messages);
  if (hello.idle_timeout_ms > 0) {
    config.idle_timeout =
        std::min(config.idle_timeout, Duration::Milliseconds(hello.idle_timeout_ms));
  }
  config.flows = std::min<uint32_t>(hello.flows, std::max<uint32_t>(1, max_flows));
  KeepAliveWithinIdle(&config);
  if (absl::Status v = config.Validate(); !v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported parameters: ", v.message()));
  }
  return config;
}

absl::StatusOr<TransportConfig> ApplyServerParams(const TransportConfig& requested,
                                                  const HandshakeParams& accept) {
  TransportConfig config = requested;
  config.max_inflight_messages = accept.max_inflight_messages;
  if (accept.idle_timeout_ms > 0) {
    config.idle_timeout = Duration::Milliseconds(accept.idle_timeout_ms);
  }
  config.flows = std::max<uint32_t>(1, std::min<uint32_t>(config.flows, accept.flows));
  KeepAliveWithinIdle(&config);
  LH_RETURN_IF_ERROR(config.Validate());
  return config;
}

}  // namespace longhaul::endpoint
