#include "tools/nccl_bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_join.h"

namespace longhaul::nccl::bench {

SizeResult Summarize(uint64_t bytes, int iters,
                     const std::vector<std::unique_ptr<ResultMsg>>& results) {
  const int n = static_cast<int>(results.size());
  SizeResult out;
  out.bytes = bytes;
  out.count = bytes / sizeof(float);
  // Per iteration: the mean over ranks (nccl-tests' -a 1); the time is their mean.
  std::vector<double> iter(iters, 0.0);
  int64_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < iters; ++i) iter[i] += results[r]->iter_us[i] / n;
    wrong += results[r]->wrong;
  }
  double mean = 0;
  for (double t : iter) mean += t / iters;
  std::vector<double> sorted = iter;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) {
    size_t idx = static_cast<size_t>(std::ceil(q * sorted.size())) - 1;
    return sorted[std::min(idx, sorted.size() - 1)];
  };
  out.p50_us = pct(0.5);
  out.p99_us = pct(0.99);
  out.time_us = mean;
  out.algbw_gbps = static_cast<double>(bytes) / 1e9 / (mean * 1e-6);
  out.busbw_gbps = out.algbw_gbps * 2.0 * (n - 1) / n;
  out.wrong = wrong;
  out.iter_us = std::move(iter);
  return out;
}

void PrintTableHeader(const TableHeader& h) {
  const int n = h.ranks, half = n / 2;
  printf("# longhaul-nccl-bench: %d ranks, data centres: ranks 0-%d | %d-%d\n", n, half - 1, half,
         n - 1);
  if (h.link.empty()) {
    printf("# link: none (direct loopback)\n");
  } else {
    printf("# link: %s through longhaul-emu on edges %s\n", h.link.c_str(),
           absl::StrJoin(h.crossing, ", ").c_str());
  }
  printf("# plugin: %s (ncclNetPlugin_v%d), device %s, speed %d Mbps, latency %.0f us\n",
         h.plugin.c_str(), h.plugin_version, h.device.c_str(), h.speed_mbps, h.latency_us);
  printf("# env: %s\n", absl::StrJoin(h.env, " ").c_str());
  printf("# security: %s\n", h.security.c_str());
  printf("# slice %s, %d receives ahead, %d warm-up + %d timed iterations, load average %s\n",
         h.slice.c_str(), h.recv_ahead, h.warmup_iters, h.iters, h.load_average.c_str());
  printf("#\n");
  printf("#%12s %12s %8s %6s %6s %12s %8s %8s %7s %12s %12s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong", "p50", "p99");
  printf("#%12s %12s %8s %6s %6s %12s %8s %8s %7s %12s %12s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)");
  fflush(stdout);
}

void PrintTableRow(const SizeResult& r) {
  printf(" %12llu %12zu %8s %6s %6d %12.1f %8.3f %8.3f %7lld %12.1f %12.1f\n",
         static_cast<unsigned long long>(r.bytes), r.count, "float", "sum", -1, r.time_us,
         r.algbw_gbps, r.busbw_gbps, static_cast<long long>(r.wrong), r.p50_us, r.p99_us);
  fflush(stdout);
}

void PrintTableFooter(int64_t wrong_total, double avg_busbw, const std::string& load_after) {
  printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
         wrong_total == 0 ? "OK" : "FAILED");
  printf("# Avg bus bandwidth    : %.3f\n", avg_busbw);
  printf("# load average after   : %s\n", load_after.c_str());
}

nlohmann::json SizeResultJson(const SizeResult& r) {
  return {{"size", r.bytes},
          {"count", r.count},
          {"type", "float"},
          {"redop", "sum"},
          {"time_us", r.time_us},
          {"algbw_GBps", r.algbw_gbps},
          {"busbw_GBps", r.busbw_gbps},
          {"wrong", r.wrong},
          {"p50_us", r.p50_us},
          {"p99_us", r.p99_us},
          {"p99_over_p50", r.p50_us > 0 ? r.p99_us / r.p50_us : 0},
          {"iter_us", r.iter_us}};
}

}  // namespace longhaul::nccl::bench
