#include "tests/e2e/perf/perf_process.h"

#include <signal.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace longhaul::perf_testing {

using emu::testing::EmuProcess;
using emu::testing::RunResult;
using emu::testing::RunToCompletion;

PerfServer StartPerfServer(const std::string& perf_bin, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--server", "--bind=127.0.0.1", "--port=0", "--json"};
  all.insert(all.end(), args.begin(), args.end());
  PerfServer s;
  absl::StatusOr<std::unique_ptr<EmuProcess>> p = EmuProcess::Start(perf_bin, all);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return s;
  s.proc = *std::move(p);
  absl::StatusOr<Json> ready = s.proc->WaitEvent("listening", kStartTimeout);
  EXPECT_TRUE(ready.ok()) << ready.status() << "\nstderr: " << s.proc->Stderr();
  if (ready.ok()) {
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

EmuRelay StartEmuRelay(const std::string& emu_bin, const std::string& link, int forward_port,
                       const std::vector<std::string>& args) {
  std::vector<std::string> all = {absl::StrCat("--link=", link), "--listen=127.0.0.1:0",
                                  absl::StrCat("--forward=127.0.0.1:", forward_port), "--json",
                                  "--max_time=300s"};
  all.insert(all.end(), args.begin(), args.end());
  EmuRelay e;
  absl::StatusOr<std::unique_ptr<EmuProcess>> p = EmuProcess::Start(emu_bin, all);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return e;
  e.proc = *std::move(p);
  absl::StatusOr<Json> ready = e.proc->WaitEvent("ready", kStartTimeout);
  EXPECT_TRUE(ready.ok()) << ready.status() << "\nstderr: " << e.proc->Stderr();
  if (ready.ok()) e.port = (*ready)["listen_port"].get<int>();
  return e;
}

}  // namespace longhaul::perf_testing
