#include "tools/common/engine_flags.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "transport/base/parse.h"
#include "transport/datapath/engine_group.h"

DEFINE_int32(engines, 1,
             "engines: driver threads, each with its own sockets, running the endpoint's "
             "connections (a server's port is shared by all of them; a client places its "
             "connections on them in turn); 0: one per CPU this process may run on, at most "
             "8; at most 64; more than 1 needs --datapath=udp");
DEFINE_string(engine_cpus, "",
              "CPUs to pin the engines to, e.g. 0,2,4-7: engine i runs on the i-th (in "
              "turn when there are fewer than engines); empty: not pinned");

namespace longhaul {

void EnginesFromFlags(const ToolUsage& usage, EndpointOptions* o) {
  if (FLAGS_engines < 0 || static_cast<uint32_t>(FLAGS_engines) > kMaxEngines) {
    usage.Fail(absl::StrCat("--engines must be in [0 (one per CPU), ", kMaxEngines, "]: got ",
                            FLAGS_engines));
  }
  o->engines = static_cast<uint32_t>(FLAGS_engines);
  o->engine_cpus.clear();
  if (!FLAGS_engine_cpus.empty()) {
    o->engine_cpus = usage.Or(ParseCpuList(FLAGS_engine_cpus), "engine_cpus");
  }
  // What the endpoint would refuse (a CPU outside this process's set, several engines on
  // the verbs datapath), as a usage error naming the flag.
  if (absl::StatusOr<uint32_t> n = datapath::ResolveEngines(*o); !n.ok()) {
    const std::string message(n.status().message());
    usage.Fail(absl::StartsWith(message, "engine_cpus") ? absl::StrCat("--", message)
                                                        : absl::StrCat("--engines: ", message));
  }
}

}  // namespace longhaul
