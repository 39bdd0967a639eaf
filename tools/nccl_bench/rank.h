// A rank process of longhaul-nccl-bench: loads the plugin as NCCL does (dlopen, newest
// table; v11 or v12 required), init / devices / getProperties / listen, sends its handle
// to the parent (kHello), connects to the next rank and accepts the previous one
// (both retried until non-NULL, as NCCL's proxy does; at most 60 s), then runs the
// parent's sizes (warm-up, timed iterations, a verified one) and reports each (kResult)
// until kExit. control.h has the protocol.
//
// Errors: a failure goes to the parent as one kError line ("rank 2: connect to the next
// rank failed"); plugin warnings go to this process's stderr, prefixed "[rank N]",
// which the parent shows with a rank's error.
#pragma once

#include <cstddef>
#include <string>

#include "tools/nccl_bench/control.h"
#include "transport/base/units.h"

namespace longhaul::nccl::bench {

struct RankOptions {
  int rank = 0;
  int ranks = 2;
  int ctrl_fd = -1;         // this rank's end of the control socketpair
  std::string plugin;       // path or name, as NCCL_NET_PLUGIN
  ByteCount max_bytes = 0;  // the largest size the parent will run
  ByteCount slice_bytes = 0;
  int recv_ahead = 16;
  int idle_nap_us = 200;
  bool check = true;  // verify one more allreduce per size
};

// Runs the rank until the parent's kExit (0) or a failure (1, reported to the parent
// when the socket still works). Everything is bounded by `deadline`.
int RankMain(const RankOptions& options, Clock::time_point deadline);

}  // namespace longhaul::nccl::bench
