// Command-line flags shared by the comparison peers (longhaul-tcp-peer,
// longhaul-udt-peer): role, the workload (the same as longhaul-perf's) and output. Each
// peer defines its own --port and its transport's flags. Tool-layer code (gflags).
#pragma once

#include <netinet/in.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gflags/gflags.h"
#include "nlohmann/json.hpp"
#include "tools/bench/peers/peer_common/peer_workload.h"
#include "transport/base/units.h"

DECLARE_bool(server);
DECLARE_string(client);
DECLARE_string(bind);
DECLARE_bool(one_off);
DECLARE_string(accept_timeout);
DECLARE_string(workload);
DECLARE_string(message_size);
DECLARE_string(bytes);
DECLARE_uint64(messages);
DECLARE_string(time);
DECLARE_string(omit);
DECLARE_string(rate);
DECLARE_double(load);
DECLARE_string(timeout);
DECLARE_bool(json);

namespace longhaul::bench {

// A peer's name and what its --help says above its flags: `what` it is, then the
// server's and the client's command lines with the default --port and the peer's own
// `client_flags`.
struct PeerUsage {
  const char* tool;
  const char* what;
  int port;
  const char* client_flags;
};

// Starts the peer through InitTool: parses the command line (flags defined under
// tools/bench/peers/; exit 2 naming a bad flag, --help prints `usage` and the flags),
// then glog to stderr; checks that exactly one of --server and --client was given.
// `usage.tool` also prefixes Fail's messages.
void ParsePeerFlags(int argc, char** argv, const PeerUsage& usage);

// After ParsePeerFlags, what the peer does: with --server `serve()`; else the workload
// flags, checked (a bad one: Fail), and `send(options)`. Returns their exit status.
int ServeOrSend(const std::function<int()>& serve,
                const std::function<int(const WorkloadOptions&)>& send);

// Reports `s` on stderr (prefixed with the tool's name) and, with `json`, as
// {"error": ...} on stdout. Returns the exit status: 2 for InvalidArgument (a bad flag or
// value), else 1.
int Fail(const absl::Status& s, bool json);

// HOST:PORT as an IPv4 socket address; InvalidArgument naming the flag `what` when HOST
// is not A.B.C.D.
absl::StatusOr<sockaddr_in> Ipv4(const std::string& host, int port, const char* what);

// The workload flags as WorkloadOptionsFromFlags takes them.
WorkloadFlags WorkloadFlagsFromCommandLine();

// Prints a client's result on stdout: the JSON document with --json, else one summary
// line (goodput in Mbit/s, retransmits). Returns the exit status 0.
int PrintClientResult(const nlohmann::json& result);

// Prints the server's {"event": "test"} line for one client's run (RunServer's result:
// its byte count, or why it failed). Returns 0 when the run worked, 1 when not.
int PrintServerTest(const absl::StatusOr<nlohmann::json>& result);

// A server's address and accept timeout: --bind with the peer's `port`, --accept_timeout.
// InvalidArgument naming the bad one.
struct ServerFlags {
  sockaddr_in at;
  Duration accept_timeout;
};
absl::StatusOr<ServerFlags> ServerFlagsFromCommandLine(int port);

// One wait of a peer's listener for its next client, at most `timeout`: the accepted
// client's stream; nullptr when this wait gave none but the server should wait again (a
// signal, an accept that failed); DeadlineExceeded when no client came in time; any other
// error ends the server.
using AcceptClient = std::function<absl::StatusOr<std::unique_ptr<ByteStream>>(Duration)>;

// The server loop both peers run once they listen: accepts each client through `accept`
// (waiting at most `accept_timeout`), serves it with RunServer (an hour at most), closes
// it and prints its test line (PrintServerTest); with --one_off stops after the first.
// Returns the exit status: the last test's, or 1 when no client came in time ("TOOL: no
// client within --accept_timeout" on stderr) or waiting failed.
int ServeClients(Duration accept_timeout, const AcceptClient& accept);

}  // namespace longhaul::bench
