// longhaul-bridge's two modes (docs/bridge.md). The client accepts TCP connections on
// each forward's listen address and carries each over one of its longhaul connections
// to the server bridge (--connections, default 1), reconnecting a connection with
// backoff when it ends; the server
// accepts longhaul connections from client bridges and connects each stream to its
// forward's target. Both drain on SIGTERM/SIGINT (no new streams; exit when the open
// ones end or --drain_timeout passes) and serve Prometheus metrics when asked to.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tools/bridge/bridge_budget.h"
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_session.h"
#include "transport/crypto/key_files.h"
#include "transport/datapath/options.h"

namespace longhaul::bridge {

struct BridgeOptions {
  bool is_client = true;
  std::vector<Forward> forwards;  // client: listen addresses; server: targets
  std::string peer_host;          // client: the server bridge
  uint16_t peer_port = 0;
  std::string listen_host;        // server: the longhaul (UDP) address
  uint16_t listen_port = 0;
  std::string metrics_host;       // empty: no metrics endpoint
  uint16_t metrics_port = 0;
  TransportConfig config;
  EndpointOptions endpoint;
  crypto::LoadedKeys keys;
  SessionOptions session;
  ClientLimits limits;  // server: per client key and for the process
  // Client: longhaul connections kept to the server (--connections, >= 1); each TCP
  // connection rides on one. EndpointOptions::engines / engine_cpus run them.
  size_t connections = 1;
  std::chrono::milliseconds connect_timeout{5000};   // client: one handshake
  std::chrono::milliseconds reconnect_max{5000};     // client: longest backoff
  std::chrono::milliseconds connect_wait{10000};     // client: a TCP connection waits this
                                                     // long for the peer when it is down
  std::chrono::milliseconds drain_timeout{30000};
  // Client: the path memory (tools/common/path_memory.h; "" for none), and whether a
  // remembered rate may set the start (no --initial_rate or --rate_min given).
  std::string path_memory;
  bool path_memory_applies = false;
};

// Run until a signal (then drain) or a fatal error. Exit status: 0 after a drain, 1 for
// errors (a port in use, the endpoint not created).
int RunClient(const BridgeOptions& o);
int RunServer(const BridgeOptions& o);

}  // namespace longhaul::bridge
