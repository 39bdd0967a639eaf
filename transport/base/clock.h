// The process's clocks, for the code at the edges that reads time:
// drivers, the emulator's loops, the prober and the tools. The sans-IO core never calls
// these: it is handed `now`. Its own CMake target (longhaul_clock), outside the core
// layer, so a core library that started reading the clock would have to say so.
//
//   MonotonicNs()  CLOCK_MONOTONIC (std::chrono::steady_clock): intervals, deadlines
//   RealtimeNs()   CLOCK_REALTIME (std::chrono::system_clock): the clock of the kernel's
//                  packet timestamps (SO_TIMESTAMPNS) and of send times carried in
//                  messages between two hosts
//   MonotonicSeconds()   MonotonicNs() in seconds (wall time of a run)
//   ProcessCpuSeconds()  CLOCK_PROCESS_CPUTIME_ID in seconds: CPU time of the whole
//                        process, every thread
//
// The simulator is handed the last two as clocks (sim::ScenarioOptions::wall_seconds,
// cpu_seconds) by the tools that run it.
//
// Thread-safe; async-signal-safe (clock_gettime).
#pragma once

#include <time.h>

#include <cstdint>

namespace longhaul {

inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline double MonotonicSeconds() { return static_cast<double>(MonotonicNs()) * 1e-9; }

inline double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace longhaul
