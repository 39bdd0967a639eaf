#include "tests/e2e/perf/perf_process.h"

#include <signal.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace longhaul::perf_testing {

using emu::testing::EmuProcess;
using emu::testing::RunResult;
using emu::testing::RunToCompletion;
using emu::testing::StartAndAwait;

PerfServer StartPerfServer(const std::string& perf_bin, const std::vector<std::string>& args,
                           int port) {
  std::vector<std::string> all = {"--server", "--bind=127.0.0.1", absl::StrCat("--port=", port),
                                  "--json"};
  all.insert(all.end(), args.begin(), args.end());
  PerfServer s;
  std::optional<Json> ready = StartAndAwait(perf_bin, all, "listening", kStartTimeout, &s.proc);
  if (ready) {
    s.port = (*ready)["port"].get<int>();
    s.listening = *ready;
  }
  return s;
}

void StopPerfServer(PerfServer& s) {
  ASSERT_TRUE(s.proc);
  s.proc->Signal(SIGTERM);
  absl::StatusOr<int> st = s.proc->Wait(std::chrono::milliseconds(20000));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(*st, 0) << s.proc->Stderr();
}

PerfRun RunPerfClient(const std::string& perf_bin, int port, std::vector<std::string> args,
                      bool json) {
  args.insert(args.begin(), {"--client=127.0.0.1", absl::StrCat("--port=", port)});
  if (json) args.push_back("--json");
  PerfRun c;
  absl::StatusOr<RunResult> r = RunToCompletion(perf_bin, args, kRunTimeout);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return c;
  c.status = r->status;
  c.out = r->stdout_text;
  c.err = r->stderr_text;
  if (json) c.json = Json::parse(c.out, nullptr, false);
  return c;
}

}  // namespace longhaul::perf_testing
