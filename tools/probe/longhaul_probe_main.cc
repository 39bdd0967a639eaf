// longhaul-probe: measures a path with the probe protocol, or answers probes.
//
//   longhaul-probe --target=HOST:PORT [--json] [probe flags]   probe a responder
//   longhaul-probe --server=ADDR:PORT [--server_duration=D]    be a responder
//
// See docs/tuning.md. Exit status: 0 ok, 1 the probe failed (no responder, refused,
// nothing got through), 2 bad flags.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/common/tool_flags.h"
#include "tools/common/transport_flags.h"
#include "tools/common/probe_flags.h"
#include "transport/base/parse.h"
#include "tuner/probe/responder.h"

DEFINE_string(target, "", "HOST:PORT of a probe responder to measure the path to");
DEFINE_string(server, "", "ADDR:PORT to answer probes on (e.g. 127.0.0.1:9300)");
DEFINE_string(server_duration, "0", "server: stop after this long (0: until SIGINT/SIGTERM)");
DEFINE_bool(json, false, "print the probe report as one JSON object");

namespace longhaul {
namespace {

constexpr ToolUsage kUsage("longhaul-probe");

tuner::probe::ProbeServer* g_server = nullptr;

void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();
}

int Main(int argc, char** argv) {
  InitTool(&argc, &argv,
           "measures a path (RTT, rate, loss, burstiness, reordering, path MTU) against a probe "
           "responder, or runs one.\n"
           "usage: longhaul-probe --target=HOST:PORT [--json] [--duration=10s] [--max_bytes=1GiB]\n"
           "       longhaul-probe --server=ADDR:PORT [--server_duration=D]\n"
           "A longhaul-perf server answers probes on its own port too (--target=HOST:5201).\n"
           "docs/tuning.md describes the phases, the protocol and the estimators.");
  if (argc > 1) kUsage.Fail(absl::StrCat("unexpected argument '", argv[1], "'"));
  if (FLAGS_target.empty() == FLAGS_server.empty()) {
    kUsage.Fail("give exactly one of --target=HOST:PORT (probe) or --server=ADDR:PORT (respond)");
  }
  if (!FLAGS_server.empty()) {
    const Duration duration = kUsage.Or(ParseDuration(FLAGS_server_duration), "server_duration");
    absl::StatusOr<std::unique_ptr<tuner::probe::ProbeServer>> server =
        tuner::probe::ProbeServer::Create(FLAGS_server);
    if (!server.ok()) {
      std::cerr << "longhaul-probe: cannot serve on " << FLAGS_server << ": "
                << server.status().message() << "\n";
      return absl::IsInvalidArgument(server.status()) ? 2 : 1;
    }
    g_server = server->get();
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    std::cerr << "longhaul-probe: answering probes on port " << (*server)->port() << "\n";
    absl::Status s = (*server)->Run(duration);
    g_server = nullptr;
    const auto& st = (*server)->responder().stats();
    std::cerr << "longhaul-probe: served " << st.sessions_opened << " sessions, " << st.datagrams
              << " datagrams (" << st.malformed << " malformed, " << st.refused << " refused)\n";
    if (!s.ok()) {
      std::cerr << "longhaul-probe: " << s.message() << "\n";
      return 1;
    }
    return 0;
  }
  absl::StatusOr<tuner::ProbeOptions> opt = ProbeOptionsFromFlags(FLAGS_target);
  if (!opt.ok()) kUsage.Fail(opt.status().message());
  opt->progress = [](const std::string& line) { std::cerr << "longhaul-probe: " << line << "\n"; };
  absl::StatusOr<tuner::ProbeReport> r = tuner::RunProbe(*opt);
  if (!r.ok()) {
    std::cerr << "longhaul-probe: " << r.status().message() << "\n";
    return absl::IsInvalidArgument(r.status()) ? 2 : 1;
  }
  if (FLAGS_json) {
    std::cout << ProbeReportToJson(*r).dump(2) << "\n";
  } else {
    std::cout << ProbeReportText(*r);
  }
  return 0;
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) { return longhaul::Main(argc, argv); }
