// The engine flags of the tools that run endpoints (longhaul-perf, longhaul-bridge),
// defined once, here:
//
//   --engines=N        driver threads (engines) per endpoint; 0: one per CPU this process
//                      may run on, at most 8; at most 64; more than 1 needs --datapath=udp
//   --engine_cpus=LIST pin engine i to the i-th CPU of LIST (in turn), e.g. 0,2,4-7
//
// docs/architecture.md "Engines". Tool-layer code (gflags). Not thread-safe: call from
// main() before starting threads.
#pragma once

#include "tools/common/tool_flags.h"
#include "transport/datapath/options.h"

namespace longhaul {

// Sets options->engines and options->engine_cpus from the flags, after options->datapath
// is set; exits through usage.Fail naming the flag on a bad value ("--engines must be in
// [0 (one per CPU), 64]: got 65", "--engine_cpus: bad CPU 'x' in '0,x' ...", "--engine_cpus:
// CPU 9 is not one this process may run on ...", "--engines: ... the verbs datapath runs
// one engine").
void EnginesFromFlags(const ToolUsage& usage, EndpointOptions* options);

}  // namespace longhaul
