// Command-line flags shared by the comparison peers (longhaul-tcp-peer,
// longhaul-udt-peer): role, the workload (the same as longhaul-perf's) and output. Each
// peer defines its own --port and its transport's flags. Tool-layer code (gflags).
#pragma once

#include <string>

#include "gflags/gflags.h"
#include "tools/bench/peer_common/peer_workload.h"

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

// Parses the command line (flags defined under tools/bench/; exit 2 naming a bad flag,
// --help prints `usage` and the flags) and checks that exactly one of --server and
// --client was given.
void ParsePeerFlags(int argc, char** argv, const char* tool, const char* usage);

// The workload flags as WorkloadOptionsFromFlags takes them.
WorkloadFlags WorkloadFlagsFromCommandLine();

}  // namespace longhaul::bench
