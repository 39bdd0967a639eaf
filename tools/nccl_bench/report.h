// longhaul-nccl-bench's results: one row per size in nccl-tests' all_reduce_perf columns
// (size, count, type, redop, root, time, algbw, busbw, #wrong) plus p50 and p99 of the
// per-iteration time, as a table line or a JSON object.
//
// Units: sizes in bytes, times in microseconds, bandwidths in GB/s (10^9 bytes/s);
// algbw = size / time, busbw = algbw x 2(n-1)/n (nccl-tests' allreduce factor). Each
// iteration's time is the mean over the ranks (nccl-tests' -a 1); `time` is the mean of
// the iterations.
//
// Pure functions, except the Print* ones, which write to stdout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/nccl_bench/control.h"

namespace longhaul::nccl::bench {

struct SizeResult {
  uint64_t bytes = 0;
  size_t count = 0;  // floats per rank
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = 0;  // summed over the ranks
  double p50_us = 0;
  double p99_us = 0;
  std::vector<double> iter_us;  // per iteration, the mean over the ranks
};

// The row for `bytes` from every rank's kResult (`results[r]`, each with `iters` times).
SizeResult Summarize(uint64_t bytes, int iters,
                     const std::vector<std::unique_ptr<ResultMsg>>& results);

// The header lines of the table: the run's description, then the two column lines.
struct TableHeader {
  int ranks = 0;
  std::string link;                   // the spec; empty: direct loopback
  std::vector<std::string> crossing;  // emulated edges ("1->2")
  std::string plugin;                 // its path
  int plugin_version = 0;
  std::string device;
  int speed_mbps = 0;
  float latency_us = 0;
  std::vector<std::string> env;  // NCCL_LONGHAUL_* of the ranks, sorted
  std::string security;          // the packet protection the ranks were given
  std::string slice;             // formatted size
  int recv_ahead = 0;
  int warmup_iters = 0;
  int iters = 0;
  std::string load_average;
};
void PrintTableHeader(const TableHeader& h);
void PrintTableRow(const SizeResult& r);
// The footer: out-of-bounds total, average busbw, the load average after the run.
void PrintTableFooter(int64_t wrong_total, double avg_busbw, const std::string& load_after);

// The JSON object of one size ("size", "count", ..., "iter_us").
nlohmann::json SizeResultJson(const SizeResult& r);

}  // namespace longhaul::nccl::bench
