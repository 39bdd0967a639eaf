#include "tools/bench/peers/peer_common/peer_flags.h"

#include <arpa/inet.h>

#include <cstdint>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"

#include "tools/common/tool_flags.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"

DEFINE_bool(server, false, "run as the receiving server");
DEFINE_string(client, "", "run as the sending client of the server at this IPv4 address");
DEFINE_string(bind, "0.0.0.0", "server: address to listen on; client: local address");
DEFINE_bool(one_off, false, "server: serve one test, then exit with its status");
DEFINE_string(accept_timeout, "120s", "server: give up when no client came within this long");
DEFINE_string(workload, "bulk", "bulk, messages or transfer");
DEFINE_string(message_size, "1MiB", "message size (messages) or write size (bulk, transfer)");
DEFINE_string(bytes, "", "bytes to send (transfer; messages: instead of --time)");
DEFINE_uint64(messages, 0, "messages: how many to send (sets --bytes)");
DEFINE_string(time, "",
              "seconds to send (bulk: after --omit; messages: at most); default 10, no bound "
              "for messages with --messages/--bytes");
DEFINE_string(omit, "0", "bulk: seconds at the start left out of the goodput (iperf3 -O)");
DEFINE_string(rate, "1gbit",
              "link rate: the messages schedule, the ideal completion time (and UDT's window "
              "sizing)");
DEFINE_double(load, 0.5, "messages: offered load as a fraction of --rate");
DEFINE_string(timeout, "0", "client: abort after this long (0: time + 60 s, 1 h with --bytes)");
DEFINE_bool(json, true, "print the result as one JSON object (else a summary line)");

namespace longhaul::bench {
namespace {

const char* tool_name = "longhaul-peer";  // ParsePeerFlags sets it

}  // namespace

void ParsePeerFlags(int argc, char** argv, const PeerUsage& usage) {
  const char* tool = usage.tool;
  tool_name = tool;
  const std::vector<std::string> dirs = {"tools/bench/peers/"};
  ToolFlagOptions options;
  options.dirs = dirs;
  InitTool(argc, argv, options, tool, [&] {
    std::cout << usage.what << "\n  " << tool << " --server [--bind=ADDR] [--port=" << usage.port
              << "] [--one_off]\n  " << tool << " --client=HOST [--port=" << usage.port << "] "
              << usage.client_flags << " --workload=...\n\nflags:\n";
    PrintToolFlags(std::cout, dirs);
  });
  if (FLAGS_server == !FLAGS_client.empty()) {
    ToolUsage(tool).Fail("give exactly one of --server and --client=HOST");
  }
}

int ServeOrSend(const std::function<int()>& serve,
                const std::function<int(const WorkloadOptions&)>& send) {
  if (FLAGS_server) return serve();
  absl::StatusOr<WorkloadOptions> o = WorkloadOptionsFromFlags(WorkloadFlagsFromCommandLine());
  if (!o.ok()) return Fail(o.status(), FLAGS_json);
  return send(*o);
}

WorkloadFlags WorkloadFlagsFromCommandLine() {
  WorkloadFlags f;
  f.workload = FLAGS_workload;
  f.message_size = FLAGS_message_size;
  f.bytes = FLAGS_bytes;
  f.messages = FLAGS_messages;
  f.time = FLAGS_time;
  f.omit = FLAGS_omit;
  f.rate = FLAGS_rate;
  f.load = FLAGS_load;
  f.timeout = FLAGS_timeout;
  return f;
}

int Fail(const absl::Status& s, bool json) {
  if (json) {
    std::cout << nlohmann::json({{"error", std::string(s.message())}}).dump() << std::endl;
  }
  std::cerr << tool_name << ": " << s.message() << std::endl;
  return absl::IsInvalidArgument(s) ? 2 : 1;
}

absl::StatusOr<sockaddr_in> Ipv4(const std::string& host, int port, const char* what) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", host, " is not an IPv4 address (A.B.C.D)"));
  }
  return a;
}

int PrintClientResult(const nlohmann::json& result) {
  if (FLAGS_json) {
    std::cout << result.dump() << std::endl;
  } else {
    const nlohmann::json& e = result["end"];
    std::cout << "goodput " << e["sum_received"]["bits_per_second"].get<double>() / 1e6
              << " Mbit/s, retransmits " << e["sum_sent"]["retransmits"] << std::endl;
  }
  return 0;
}

int PrintServerTest(const absl::StatusOr<nlohmann::json>& result) {
  nlohmann::json ev = {{"event", "test"}, {"ok", result.ok()}};
  int status;
  if (!result.ok()) {
    ev["error"] = std::string(result.status().message());
    status = 1;
  } else {
    ev["bytes"] = (*result)["bytes"];
    status = 0;
  }
  std::cout << ev.dump() << std::endl;
  return status;
}

absl::StatusOr<ServerFlags> ServerFlagsFromCommandLine(int port) {
  LH_ASSIGN_OR_RETURN(const sockaddr_in at, Ipv4(FLAGS_bind, port, "--bind"));
  absl::StatusOr<Duration> accept_timeout = ParseDuration(FLAGS_accept_timeout);
  if (!accept_timeout.ok()) return absl::InvalidArgumentError(accept_timeout.status().message());
  return ServerFlags{at, *accept_timeout};
}

int ServeClients(Duration accept_timeout, const AcceptClient& accept) {
  int status = 0;
  while (true) {
    absl::StatusOr<std::unique_ptr<ByteStream>> client = accept(accept_timeout);
    if (!client.ok()) {
      if (absl::IsDeadlineExceeded(client.status())) {
        std::cerr << tool_name << ": no client within " << FLAGS_accept_timeout << std::endl;
      }
      status = 1;
      break;
    }
    if (*client == nullptr) continue;
    absl::StatusOr<nlohmann::json> r = RunServer(**client, 3600);
    client->reset();
    status = PrintServerTest(r);
    if (FLAGS_one_off) break;
  }
  return status;
}

}  // namespace longhaul::bench
