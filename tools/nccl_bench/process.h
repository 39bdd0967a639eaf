// Process helpers of longhaul-nccl-bench's parent: where the binary lives, the load
// average, and spawning a child (a rank or longhaul-emu) with its output redirected.
//
// Not thread-safe (the parent runs on one thread).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace longhaul::nccl::bench {

// The directory of this process's executable (/proc/self/exe), "." if unknown.
std::string SelfDir();

// The first three fields of /proc/loadavg ("6.87 6.42 6.42").
std::string LoadAverage();

// Spawns `args` (args[0] is the path) with this environment, stdout to a pipe whose read
// end goes to *out_fd (when out_fd != NULL) and stderr to the file `err_path` (when not
// empty). Internal naming the program when it cannot be started.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, int* out_fd,
                            const std::string& err_path);

}  // namespace longhaul::nccl::bench
