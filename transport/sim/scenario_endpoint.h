// The scenario runner's endpoint mode (ScenarioOptions::nodes = NodeKind::kEndpoint):
// each side of a pair is a whole endpoint::SansIoEndpoint on a sim::EndpointNode. The
// client (left, the sender) connects at the pair's start; the server (right, the
// receiver) listens; the handshake crosses the simulated link both ways. When the client
// is connected its workload starts (PairState::start moves to that time); when the
// server's connection is confirmed (kIncoming) its receiver posts its buffers. Packet
// protection uses keys derived from the scenario seed (EndpointSecurity), so a seed gives
// the same run. Internal to the scenario runner. Thread-safety: none.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "transport/endpoint/security_config.h"
#include "transport/sim/scenario.h"
#include "transport/sim/scenario_apps.h"

namespace longhaul::sim::internal {

// How long a client keeps retrying its handshake (virtual time) before kConnectFailed.
inline constexpr Duration kScenarioHandshakeTimeout = Duration::Seconds(30);

// The security settings of one side of pair `pair` under `security`, with keys and
// entropy derived from `seed` (the scenario's) alone.
absl::StatusOr<endpoint::SecurityConfig> ScenarioSecurityConfig(EndpointSecurity security,
                                                                uint64_t seed, int pair,
                                                                bool server);

// Pair `pair`'s two endpoint nodes, listening and ready to connect; `client_seed` and
// `server_seed` seed their endpoints (connection ids, the connections' randomness).
// Errors: the security settings' (InvalidArgument), the listen's.
struct EndpointPair {
  std::unique_ptr<ScenarioSide> client;
  std::unique_ptr<ScenarioSide> server;
};
absl::StatusOr<EndpointPair> MakeEndpointPair(const ScenarioOptions& opt, PairState* pair,
                                              SenderApp* sender, ReceiverApp* receiver,
                                              uint64_t client_seed, uint64_t server_seed);

}  // namespace longhaul::sim::internal
