// longhaul-perf and longhaul-emu as child processes for end-to-end tests: a server that
// reports its kernel-chosen port, a client run to completion with its JSON, a relay in
// front of a server. Shared by tests/e2e/perf, tests/e2e/security and tests/e2e/tuner.
// Failures are reported through gtest (EXPECT/ASSERT) and leave the returned value empty
// (port 0, status -1); every wait is bounded; processes die with their handles.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/emu/emu_process.h"

namespace longhaul::perf_testing {

using Json = nlohmann::json;

inline constexpr std::chrono::milliseconds kStartTimeout{10000};
inline constexpr std::chrono::milliseconds kRunTimeout{120000};

struct PerfServer {
  std::unique_ptr<emu::testing::EmuProcess> proc;
  int port = 0;
  Json listening;  // the server's "listening" event
};

// `perf_bin --server --bind=127.0.0.1 --port=PORT --json` plus `args` (keys or --insecure);
// port 0 asks for a free one.
PerfServer StartPerfServer(const std::string& perf_bin, const std::vector<std::string>& args,
                           int port = 0);

// SIGTERM; the server must exit 0 within 20 s (it never crashed meanwhile).
void StopPerfServer(PerfServer& s);

struct PerfRun {
  int status = -1;
  Json json;  // null unless --json was asked for and the output parses
  std::string out, err;
};

// `perf_bin --client=127.0.0.1 --port=PORT` plus `args` (and --json when `json`), run to
// completion within kRunTimeout.
PerfRun RunPerfClient(const std::string& perf_bin, int port, std::vector<std::string> args,
                      bool json = true);

// The emulator between the two (tests/e2e/emu/emu_process.h).
using emu::testing::EmuRelay;
using emu::testing::StartEmuRelay;

}  // namespace longhaul::perf_testing
