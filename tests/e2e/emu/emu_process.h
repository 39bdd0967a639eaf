// Test helper: runs longhaul-emu as a child process, reads its JSON lines (--json) from
// stdout with bounded waits, signals it and waits for its exit (pidfd, bounded), and
// gives its stderr. Also small UDP helpers for tests (bounded receive).
//
// Every wait has a timeout; the destructor kills (SIGKILL) and reaps a child still
// running. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace longhaul::emu::testing {

using Clock = std::chrono::steady_clock;

class EmuProcess {
 public:
  // Starts `binary` with `args` (stdout piped, stderr to a temporary file).
  static absl::StatusOr<std::unique_ptr<EmuProcess>> Start(const std::string& binary,
                                                           const std::vector<std::string>& args);
  ~EmuProcess();

  // The next JSON line whose "event" equals `event` (earlier lines are skipped), or
  // DeadlineExceeded/Unavailable (the process closed stdout).
  absl::StatusOr<nlohmann::json> WaitEvent(const std::string& event,
                                           std::chrono::milliseconds timeout);
  // The first "stats" (or "final") line for which `pred` holds.
  absl::StatusOr<nlohmann::json> WaitStats(const std::function<bool(const nlohmann::json&)>& pred,
                                           std::chrono::milliseconds timeout);
  void Signal(int sig);
  // Exit status (>= 0) or -signal; DeadlineExceeded if it did not exit in time.
  absl::StatusOr<int> Wait(std::chrono::milliseconds timeout);
  // Everything written to stderr so far.
  std::string Stderr() const;
  pid_t pid() const { return pid_; }
  // Reads one line from stdout, waiting at most until `deadline`.
  absl::StatusOr<std::string> ReadLine(Clock::time_point deadline);

 private:
  EmuProcess() = default;

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int out_fd_ = -1;
  std::string err_path_;
  std::string buffer_;
  bool exited_ = false;
  int status_ = 0;
};

// Runs `binary args...` to completion (at most `timeout`); returns exit status and the
// stderr text.
struct RunResult {
  int status = -1;
  std::string stdout_text;
  std::string stderr_text;
};
// Starts `binary` with `args` and waits up to `timeout` for its JSON line `event`. A
// failure to start or to see the event in time is a test failure (EXPECT, with the
// process's stderr). Returns the event, or nullopt; *proc holds the process whenever it
// started.
std::optional<nlohmann::json> StartAndAwait(const std::string& binary,
                                            const std::vector<std::string>& args,
                                            const std::string& event,
                                            std::chrono::milliseconds timeout,
                                            std::unique_ptr<EmuProcess>* proc);

// longhaul-emu relaying between the test's sockets.
struct EmuRelay {
  std::unique_ptr<EmuProcess> proc;
  int port = 0;  // where clients send
};

// `emu_bin --link=LINK --listen=127.0.0.1:0 --forward=127.0.0.1:FORWARD --json
// --max_time=MAX_TIME` plus `args` (a --seed=...), started and ready.
EmuRelay StartEmuRelay(const std::string& emu_bin, const std::string& link, int forward_port,
                       const std::vector<std::string>& args = {},
                       const std::string& max_time = "300s");

absl::StatusOr<RunResult> RunToCompletion(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          std::chrono::milliseconds timeout);

// A non-blocking UDP socket bound to 127.0.0.1:0 (with `rcvbuf` bytes of receive buffer).
int BoundUdpSocket(int rcvbuf = 8 << 20);
// The local port of `fd`.
int LocalPort(int fd);
// Waits up to `timeout` for one datagram on `fd`; returns its bytes (nullopt on timeout).
std::optional<std::vector<uint8_t>> RecvWithTimeout(int fd, std::chrono::milliseconds timeout,
                                                    uint8_t* tos = nullptr,
                                                    std::string* from = nullptr);

// Drains a UDP socket on its own thread into memory, so a test can send a burst while the
// datagrams are read as they arrive (a socket's default receive buffer is small without
// root). Stops (and joins) in the destructor; every wait is bounded.
class SinkCollector {
 public:
  struct Datagram {
    std::vector<uint8_t> bytes;
    uint8_t tos = 0;
  };
  explicit SinkCollector(int fd);
  ~SinkCollector();
  // Waits until at least `n` datagrams arrived or `timeout` passed; returns the count.
  size_t WaitFor(size_t n, std::chrono::milliseconds timeout);
  // Stops reading and returns everything received.
  std::vector<Datagram> Finish();

 private:
  int fd_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Datagram> got_;
  std::thread thread_;
};

}  // namespace longhaul::emu::testing
