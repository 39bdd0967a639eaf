// longhaul-nccl-bench: ring allreduce of floats over an NCCL net plugin between N rank
// processes on this machine, reported like nccl-tests' all_reduce_perf. docs/nccl-runs.md.
//
// The parent process (parent.h) spawns the ranks (fork + exec of this binary with
// --rank; rank.h), splits them into two data centres, exchanges the plugin handles (the
// ring edges that cross between the data centres are redirected through a longhaul-emu
// UDP relay per edge when --link is given), then runs the size sweep: per size, every
// rank runs warm-up and timed iterations of a chunked, pipelined ring allreduce
// (ring.h), then one more untimed iteration whose result is verified against the
// expected sum; the parent prints the results (report.h). Each rank loads the plugin with
// dlopen as NCCL does. --recommend prints NCCL settings for a link (recommend.h).
// Everything is bounded by --timeout; children and emulators are killed on any error.
//
// This file only defines and reads the flags.

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "gflags/gflags.h"
#include "tools/common/tool_flags.h"
#include "tools/nccl_bench/parent.h"
#include "tools/nccl_bench/rank.h"
#include "tools/nccl_bench/recommend.h"
#include "transport/base/parse.h"

DEFINE_int32(ranks, 2, "rank processes (2..16), split into two data centres");
DEFINE_string(link, "",
              "link spec of the edges between the data centres (through longhaul-emu), e.g. "
              "rate=1gbit,rtt=58ms,loss=1e-3; empty: direct loopback");
DEFINE_string(min_bytes, "1MiB", "smallest message size (bytes per rank)");
DEFINE_string(max_bytes, "64MiB", "largest message size");
DEFINE_int32(step_factor, 2, "size multiplier between steps");
DEFINE_int32(iters, 20, "timed iterations per size (1..1000)");
DEFINE_int32(warmup_iters, 1, "untimed iterations per size before the timed ones");
DEFINE_string(slice_bytes, "4MiB", "pipelining unit: largest message one ring step sends");
DEFINE_int32(recv_ahead, 16, "receives each rank keeps posted (1..32)");
DEFINE_int32(idle_nap_us, 200,
             "a rank with nothing to do yields 32 times, then sleeps this long per poll (the "
             "ranks share the cores with the transport's threads)");
DEFINE_bool(check, true, "verify one more allreduce per size against the expected sum");
DEFINE_bool(json, false, "print one JSON object instead of the table");
DEFINE_string(plugin, "",
              "net plugin to load (path or name, as NCCL_NET_PLUGIN); default: "
              "NCCL_NET_PLUGIN, else <bin>/../lib/libnccl-net-longhaul.so, else "
              "libnccl-net-longhaul.so from the library path (an installed package's)");
DEFINE_string(emu, "", "longhaul-emu binary (default: next to this binary)");
DEFINE_string(timeout, "600s", "bound on the whole run");
DEFINE_bool(recommend, false,
            "print the NCCL settings recommended for --link=SPEC or --profile=FILE and exit");
DEFINE_string(profile, "", "longhaul profile for the ranks (sets NCCL_LONGHAUL_PROFILE)");
DEFINE_string(security, "",
              "packet protection of the ranks, generated for this run: psk (one pre-shared "
              "key), keys (a key pair per rank and a file of every rank's public key) or "
              "insecure (plaintext); empty: NCCL_LONGHAUL_KEY/_PEER_KEY/_PSK_FILE/_INSECURE "
              "(or the profile) must choose");
DEFINE_int32(rank, -1, "internal: run as this rank");
DEFINE_int32(ctrl_fd, -1, "internal: control socket of a rank");

int main(int argc, char** argv) {
  longhaul::InitTool(
      &argc, &argv,
      "ring allreduce over the longhaul NCCL net plugin between N rank processes\n"
      "  longhaul-nccl-bench --ranks=N [--link=SPEC] [--min_bytes=SIZE] [--max_bytes=SIZE]\n"
      "                      [--iters=N] [--json]\n"
      "Ranks 0..N/2-1 and N/2..N-1 form two data centres; with --link the ring edges\n"
      "between them go through longhaul-emu. Columns as nccl-tests' all_reduce_perf\n"
      "(busbw = algbw x 2(n-1)/n), plus p50/p99 of the per-iteration time. Transport\n"
      "settings come from NCCL_LONGHAUL_PROFILE / NCCL_LONGHAUL_<KEY> (docs/nccl.md);\n"
      "packet protection from --security=psk|keys|insecure or NCCL_LONGHAUL_KEY,\n"
      "_PEER_KEY, _PSK_FILE, _INSECURE.");
  signal(SIGPIPE, SIG_IGN);
  namespace bench = longhaul::nccl::bench;
  if (FLAGS_recommend) return bench::Recommend(FLAGS_link, FLAGS_profile);
  if (!FLAGS_profile.empty()) setenv("NCCL_LONGHAUL_PROFILE", FLAGS_profile.c_str(), 1);
  if (FLAGS_rank >= 0) {
    absl::StatusOr<longhaul::Duration> t = longhaul::ParseDuration(FLAGS_timeout);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::nanoseconds(t.ok() ? t->ns() : int64_t{600} * 1000000000);
    // The parent passes sizes as numbers of bytes.
    absl::StatusOr<longhaul::ByteCount> max_bytes = longhaul::ParseByteCount(FLAGS_max_bytes);
    absl::StatusOr<longhaul::ByteCount> slice = longhaul::ParseByteCount(FLAGS_slice_bytes);
    if (!max_bytes.ok() || !slice.ok()) {
      fprintf(stderr, "longhaul-nccl-bench: rank %d: bad --max_bytes or --slice_bytes\n",
              FLAGS_rank);
      return 2;
    }
    bench::RankOptions o;
    o.rank = FLAGS_rank;
    o.ranks = FLAGS_ranks;
    o.ctrl_fd = FLAGS_ctrl_fd;
    o.plugin = FLAGS_plugin;
    o.max_bytes = *max_bytes;
    o.slice_bytes = *slice;
    o.recv_ahead = FLAGS_recv_ahead;
    o.idle_nap_us = FLAGS_idle_nap_us;
    o.check = FLAGS_check;
    return bench::RankMain(o, deadline);
  }
  bench::ParentOptions o;
  o.ranks = FLAGS_ranks;
  o.link = FLAGS_link;
  o.min_bytes = FLAGS_min_bytes;
  o.max_bytes = FLAGS_max_bytes;
  o.step_factor = FLAGS_step_factor;
  o.iters = FLAGS_iters;
  o.warmup_iters = FLAGS_warmup_iters;
  o.slice_bytes = FLAGS_slice_bytes;
  o.recv_ahead = FLAGS_recv_ahead;
  o.idle_nap_us = FLAGS_idle_nap_us;
  o.check = FLAGS_check;
  o.json = FLAGS_json;
  o.plugin = FLAGS_plugin;
  o.emu = FLAGS_emu;
  o.timeout = FLAGS_timeout;
  o.security = FLAGS_security;
  bench::Parent parent(o);
  return parent.Run(argv[0]);
}
