// The process's clocks in integer nanoseconds, for the code at the edges that reads time:
// drivers, the emulator's loops, the prober and the tools. The sans-IO core never calls
// these: it is handed `now`. Its own CMake target (longhaul_clock), outside the core
// layer, so a core library that started reading the clock would have to say so.
//
//   MonotonicNs()  CLOCK_MONOTONIC (std::chrono::steady_clock): intervals, deadlines
//   RealtimeNs()   CLOCK_REALTIME (std::chrono::system_clock): the clock of the kernel's
//                  packet timestamps (SO_TIMESTAMPNS) and of send times carried in
//                  messages between two hosts
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

}  // namespace longhaul
