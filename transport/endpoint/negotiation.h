// Transport-parameter negotiation of the handshake: what a side announces, what a server
// makes of a client's Hello, and what a client makes of the server's Accept. Pure
// functions; thread-safe. docs/endpoint.md lists the rules.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/endpoint/handshake.h"

namespace longhaul::endpoint {

// What a server learns from a client's validated Hello, before it keeps any state.
struct HelloInfo {
  std::string peer_address;  // formatted: "127.0.0.1:40001"
  uint32_t segment = 0;
  ByteCount recv_window = 0;
  uint32_t max_inflight_messages = 0;
  uint32_t flows = 1;
  Duration idle_timeout;
  std::string app_data;  // the client's ConnectConfig::app_data
};

// Server policy: the configuration for a new connection, or an error whose message goes
// back to the client in a Reject ("server busy", "unsupported parameters: ..."). Called
// from SansIoEndpoint::OnDatagram; must not block.
using HelloPolicy = std::function<absl::StatusOr<TransportConfig>(const HelloInfo&)>;


// The parameters `config` announces (a client's Hello, or a server's negotiated Accept).
HandshakeParams ParamsFor(const TransportConfig& config);

// A negotiated idle timeout below this side's keepalive would end quiet but healthy
// connections: keeps at least three keepalives per idle timeout.
void KeepAliveWithinIdle(TransportConfig* config);

// The server's configuration for a client that announced `hello`: `base` (or what
// `policy` returns for the HelloInfo that `info` builds, when there is a policy), with
// the message limit and idle timeout the smaller of the two sides' and the flows the
// client asked for up to `max_flows`. Errors (their message goes back in a Reject):
// InvalidArgument "bad parameters: ..." for zero flows, segment or message limit; the
// policy's own error; InvalidArgument "unsupported parameters: ..." when the result does
// not Validate().
absl::StatusOr<TransportConfig> NegotiateServerConfig(const TransportConfig& base,
                                                      const HelloPolicy& policy,
                                                      const HandshakeParams& hello,
                                                      uint32_t max_flows,
                                                      const std::function<HelloInfo()>& info);

// The client's configuration after the server's Accept announced `accept`: the server's
// message limit and idle timeout, and at most the flows it accepts. Errors:
// InvalidArgument naming what does not Validate().
absl::StatusOr<TransportConfig> ApplyServerParams(const TransportConfig& requested,
                                                  const HandshakeParams& accept);

}  // namespace longhaul::endpoint
