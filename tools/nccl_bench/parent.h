// The parent process of longhaul-nccl-bench: checks the options and the plugin, sets the
// ranks' transport environment, spawns the N rank processes (fork + exec of this binary
// with --rank), splits them into two data centres (ranks 0..N/2-1 and N/2..N-1), passes
// each rank the handle of the next one (redirected through a longhaul-emu UDP relay per
// ring edge that crosses between the data centres when a link is given), then runs the
// size sweep and prints the table or the JSON object (report.h).
//
// Everything is bounded by the timeout; ranks and emulators are reaped (killed after 5 s)
// on every exit path, their temporary stderr files removed.
//
// Packet protection: --security=psk|keys|insecure generates what the ranks need for this
// run in a temporary directory (a pre-shared key; or one key pair per rank and a file of
// every rank's public key, labelled "rank-N") and sets NCCL_LONGHAUL_PSK_FILE, _KEY (per
// rank) and _PEER_KEY, or NCCL_LONGHAUL_INSECURE=1; without it the environment (or the
// profile) must choose, as the plugin requires.
//
// Errors: one line naming the cause on stderr (or {"error": ...} with --json) and exit
// status 1: a bad option, no choice of keys, the plugin not usable (dlerror's text),
// longhaul-emu not found or not ready, a rank's error (with the stderr of every rank that
// wrote any), a deadline.
// Exit status 0 only if every size verified. Not thread-safe (one thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/nccl_bench/control.h"
#include "transport/base/units.h"
#include "transport/nccl/plugin_handle.h"
#include "transport/sim/link_spec.h"

namespace longhaul::nccl::bench {

// The command line of a run (longhaul_nccl_bench_main.cc's flags), unparsed.
struct ParentOptions {
  int ranks = 2;
  std::string link;  // empty: direct loopback
  std::string min_bytes = "1MiB";
  std::string max_bytes = "64MiB";
  int step_factor = 2;
  int iters = 20;
  int warmup_iters = 1;
  std::string slice_bytes = "4MiB";
  int recv_ahead = 16;
  int idle_nap_us = 200;
  bool check = true;
  bool json = false;
  std::string plugin;  // empty: NCCL_NET_PLUGIN, else <bin>/../lib/libnccl-net-longhaul.so
  std::string emu;     // empty: longhaul-emu next to this binary
  std::string timeout = "600s";
  std::string security;  // psk | keys | insecure; empty: the environment's choice
};

class Parent {
 public:
  explicit Parent(ParentOptions options) : o_(std::move(options)) {}
  ~Parent() { Cleanup(); }
  Parent(const Parent&) = delete;
  Parent& operator=(const Parent&) = delete;

  // The whole run; the process's exit status. `argv0` names this binary when
  // /proc/self/exe cannot be read.
  int Run(const char* argv0);

 private:
  struct Child {
    pid_t pid = -1;
    int fd = -1;
    std::string stderr_path;
  };
  struct Emulator {
    pid_t pid = -1;
    int out_fd = -1;
    uint16_t port = 0;
    std::string edge;
    std::string err_path;
  };

  // Parses and checks the options into the members below; the error text, or "".
  std::string ParseOptions();
  // Loads the plugin once (a missing library is one clear error) and resolves its path.
  std::string ResolvePlugin();
  // The link and the emulator binary (with a link).
  std::string ResolveLink();
  // --security: generates the keys and sets the ranks' variables (rank_keys_ for the
  // per-rank NCCL_LONGHAUL_KEY); without it, checks that the environment chooses.
  std::string PrepareSecurity();
  std::string SpawnRanks(const char* argv0);
  // Waits for one message of `type` and `expect` bytes from every rank, in any order; the
  // first error ends the wait. The error text (RankError's), or "".
  std::string Gather(std::vector<std::unique_ptr<ResultMsg>>* out, size_t expect, uint32_t type);
  // The error of rank r (its kError text, or how it failed), with the stderr of every rank
  // that wrote any (the first failure is often another rank's).
  std::string RankError(int r, ssize_t got, const void* buf);
  // Collects the handles, starts the emulators of crossing edges, sends each rank its
  // peer's handle and waits until every ring is connected.
  std::string ExchangeHandles();
  absl::StatusOr<uint16_t> StartEmulator(const PluginHandle& target, int edge_from, int edge_to);
  std::string ChildStderr(int rank);

  int Fail(const std::string& text);
  void Cleanup();
  // Waits up to 5 s for `*pid`, then kills it.
  static void Reap(pid_t* pid);

  const ParentOptions o_;
  ByteCount min_bytes_ = 0;
  ByteCount max_bytes_ = 0;
  ByteCount slice_bytes_ = 0;
  Clock::time_point deadline_;
  std::string plugin_;
  std::string emu_;
  sim::LinkSpec spec_;
  std::vector<std::string> env_shown_;
  std::vector<HelloMsg> hellos_;
  std::vector<std::string> crossing_;
  std::vector<Child> children_;
  std::vector<Emulator> emus_;
  std::string keys_dir_;                // generated keys (removed at Cleanup); empty: none
  std::vector<std::string> rank_keys_;  // NCCL_LONGHAUL_KEY of each rank (--security=keys)
  std::string security_;                // what the ranks use, for the report
};

}  // namespace longhaul::nccl::bench
