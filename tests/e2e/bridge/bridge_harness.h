// Test harness for longhaul-bridge end to end (tests/e2e/bridge): bridge processes (run
// with the emulator tests' process helper, tests/e2e/emu/emu_process.h), their stdout
// lines and Prometheus metrics; TCP targets inside the test process (a sink, a source,
// echo servers, one that resets); and the application's side of a TCP connection
// through the client bridge. Traffic stays on 127.0.0.1.
//
// Payloads are a deterministic pattern (PatternByte(offset)); receivers check every byte
// against it, which catches what a hash would (lost, repeated, reordered or corrupted
// bytes) and says where. Every wait is bounded; processes die (SIGKILL) with their
// handles, targets stop and join their threads in their destructors.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/e2e/emu/emu_process.h"
#include "tests/support/temp_dir.h"

namespace longhaul::bridge_testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr milliseconds kStartTimeout{15000};  // a bridge's first lines
inline constexpr milliseconds kIoTimeout{30000};     // one blocking socket call

// ---------------------------------------------------------------- pattern

// The byte at `offset` of every payload in these tests.
uint8_t PatternByte(uint64_t offset);
void FillPattern(uint64_t offset, uint8_t* out, size_t n);
// The index of the first byte of `in` that is not the pattern at `offset`, or n.
size_t CheckPattern(uint64_t offset, const uint8_t* in, size_t n);

// ---------------------------------------------------------------- files and fds

// A private temporary directory, removed at the end (tests/support/temp_dir.h).
using ::longhaul::testing::TempDir;

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A TCP port on 127.0.0.1 held for a bridge to listen on: bound with SO_REUSEADDR and
// never listening, so a listener with SO_REUSEADDR (the bridge's) can take it and no
// other program can (forwards files need a port number, not 0).
class ReservedTcpPort {
 public:
  ReservedTcpPort();
  int port() const { return port_; }

 private:
  Fd fd_;
  int port_ = 0;
};

// A UDP port on 127.0.0.1 that was free a moment ago (bound to 0, then closed): for a
// server bridge to start on later.
int FreeUdpPort();

// ---------------------------------------------------------------- bridge processes

class Bridge {
 public:
  // Starts `longhaul-bridge args...`; a gtest failure and nullptr when it cannot start.
  static std::unique_ptr<Bridge> Start(const std::vector<std::string>& args);

  // The `nth` (1-based) stdout line containing `text`, reading more lines as needed for
  // at most `timeout`; nullopt when it did not come (the process ended or time ran out).
  std::optional<std::string> WaitLine(const std::string& text, milliseconds timeout, int nth = 1);
  // How many lines read so far contain `text`.
  int CountLines(const std::string& text) const;
  std::string Stdout() const;  // the lines read so far
  std::string Stderr() const { return proc_->Stderr(); }
  void Signal(int sig) { proc_->Signal(sig); }
  absl::StatusOr<int> Wait(milliseconds timeout) { return proc_->Wait(timeout); }
  pid_t pid() const { return proc_->pid(); }

  int udp_port = 0;      // server: its longhaul port
  int tcp_port = 0;      // client: the default forward's TCP port
  int metrics_port = 0;  // with --metrics

 private:
  std::unique_ptr<emu::testing::EmuProcess> proc_;
  std::vector<std::string> lines_;
};

// The port after `prefix` in `line` (e.g. "longhaul 127.0.0.1:"), or 0.
int PortAfter(const std::string& line, const std::string& prefix);

// `server --listen=127.0.0.1:0` (unless `flags` has a --listen) plus `flags`, and
// --insecure unless `flags` chooses keys; with `metrics`, --metrics=127.0.0.1:0. Waits
// for the listening line (and the metrics line); nullptr with a gtest failure otherwise.
std::unique_ptr<Bridge> StartServer(const std::vector<std::string>& flags, bool metrics = false);
// "--target=127.0.0.1:PORT".
std::string TargetFlag(int port);
// StartServer with --target=127.0.0.1:TARGET_PORT, then `flags`, serving metrics.
std::unique_ptr<Bridge> StartServerFor(int target_port, const std::vector<std::string>& flags = {});
// `client --listen=127.0.0.1:0 --peer=127.0.0.1:PEER` plus `flags` (keys as above).
// Waits for the default forward's line, the metrics line and, with `wait_connected`,
// "connected to".
std::unique_ptr<Bridge> StartClient(int peer_port, const std::vector<std::string>& flags,
                                    bool metrics = false, bool wait_connected = true);
// SIGTERM; the bridge must exit 0 within 20 s.
void StopBridge(Bridge& b);

// ---------------------------------------------------------------- metrics

// GET /metrics from 127.0.0.1:port: each sample's "name{labels}" -> value. Empty (and a
// gtest failure when `expect_ok`) if the request fails.
std::map<std::string, double> FetchMetrics(int port, bool expect_ok = true);
// Polls the metrics until `series` exists and `pred` holds (at most `timeout`); the last
// value seen in *last (NAN when the series never appeared).
bool WaitMetric(int port, const std::string& series, const std::function<bool(double)>& pred,
                milliseconds timeout, double* last = nullptr);

// ---------------------------------------------------------------- the application's side

enum class End { kEof, kReset, kTimeout, kError, kNone };
const char* EndName(End e);

// A TCP socket listening on 127.0.0.1 (a port the kernel picks) with `backlog`.
struct TcpListener {
  explicit TcpListener(int backlog = 4);
  Fd fd;
  int port = 0;
};

// A TCP listener that never accepts, with its accept queue full: connections to it are
// neither refused nor answered (the SYNs are dropped), so what a bridge server receives
// for such a target stays buffered.
struct SilentListener {
  SilentListener();
  TcpListener listener{0};
  std::vector<Fd> fillers;
  int port = 0;
};

// Connects to 127.0.0.1:port (blocking; send/receive timeouts kIoTimeout). Invalid Fd
// on failure, with the errno in *err.
Fd ConnectTcp(int port, int* err = nullptr);
void SetTimeouts(int fd, milliseconds t);
bool SendAll(int fd, const void* data, size_t n);
// Sends n pattern bytes starting at pattern offset `offset`.
bool SendPattern(int fd, uint64_t n, uint64_t offset = 0);
// Reads exactly n bytes (each read bounded by the socket's timeout); false otherwise.
bool RecvExact(int fd, size_t n, std::string* out);
// Closes with an RST (SO_LINGER 0).
void ResetClose(Fd& fd);

struct ReadResult {
  uint64_t bytes = 0;
  uint64_t first_bad = ~0ULL;  // with a pattern check: first byte that differs
  End end = End::kNone;
  int err = 0;
  std::string data;  // kept bytes (up to keep_max)
};
// Reads until EOF, an error, a receive timeout or `deadline`. With `check`, compares
// with the pattern from offset 0; keeps the first `keep_max` bytes in data.
ReadResult ReadToEnd(int fd, bool check, size_t keep_max = 0,
                     Clock::time_point deadline = Clock::now() + std::chrono::minutes(5));

// An upload through the client bridge to a Sink target: n pattern bytes, a half-close,
// then the sink's 16-byte reply (its byte count and first bad offset) and EOF.
struct Upload {
  bool connected = false;
  bool sent = false;
  ReadResult reply;
  uint64_t sink_bytes = ~0ULL;
  uint64_t sink_first_bad = 0;
};
Upload DoUpload(int port, uint64_t n);
// A download from a Source target: asks for n bytes (8 bytes, big-endian), half-closes,
// reads them (checked) and EOF.
struct Download {
  bool connected = false;
  ReadResult got;
};
Download DoDownload(int port, uint64_t n);
// Sends a Source target's request for n bytes (8 bytes, big-endian).
bool SendSourceRequest(int fd, uint64_t n);
// Connects to `port` and sends a Source target's request for n bytes; an invalid Fd (with
// a gtest failure) when either fails.
Fd OpenDownload(int port, uint64_t n);
// Through an Echo target: sends n pattern bytes while reading the echo (non-blocking,
// one poll loop), half-closes after the last byte, reads to EOF.
struct Exchange {
  bool connected = false;
  uint64_t sent = 0;
  ReadResult got;
};
Exchange DoEchoExchange(int port, uint64_t n, milliseconds timeout);
// DoEchoExchange of each of `sizes`, all at once (one thread each).
std::vector<Exchange> DoEchoExchanges(int port, const std::vector<uint64_t>& sizes,
                                      milliseconds timeout);
// Each exchange connected, sent its size and got it all back intact, ending with EOF.
void ExpectEchoesIntact(const std::vector<Exchange>& results, const std::vector<uint64_t>& sizes);
// The application's read got n pattern bytes, intact, and then EOF.
void ExpectReadIntact(const ReadResult& got, uint64_t n);

// ---------------------------------------------------------------- TCP targets

enum class TargetMode {
  kSink,           // reads to EOF checking the pattern; replies count and first bad offset
  kSource,         // reads an 8-byte count, sends that many pattern bytes, half-closes
  kEcho,           // writes back what it reads; half-closes at EOF
  kReplyAfterEof,  // reads to EOF, then writes everything back and closes
  kResetAfter,     // reads `reset_after` bytes, then closes with an RST
  kHoldAfterEof,   // reads to EOF, then holds the connection open, waiting (10 s at most)
                   // for it to be reset: end is kReset, or kTimeout if it never was
};

// What a target saw on one connection.
struct TargetConn {
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t first_bad = ~0ULL;
  End end = End::kNone;  // how the reading ended
  int err = 0;
  bool done = false;
};

class Target {
 public:
  explicit Target(TargetMode mode, uint64_t reset_after = 0);
  ~Target();
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  int port() const { return port_; }
  size_t accepted() const;
  // Waits until `n` connections have ended (at most `timeout`); returns every
  // connection's record so far, in accept order.
  std::vector<TargetConn> WaitDone(size_t n, milliseconds timeout);
  // Waits until the connections have read `n` bytes in all.
  bool WaitBytesIn(uint64_t n, milliseconds timeout);
  // Waits until `n` connections have read EOF.
  bool WaitEofs(int n, milliseconds timeout);

 private:
  struct Conn;
  void AcceptLoop();
  void Serve(std::shared_ptr<Conn> c);

  const TargetMode mode_;
  const uint64_t reset_after_;
  Fd listen_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<int> eofs_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Conn>> conns_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

// ---------------------------------------------------------------- a target and two bridges

// A target, a server bridge connecting to it (--target) and a client bridge connected to
// the server, both serving metrics.
struct BridgePair {
  std::unique_ptr<Target> target;
  std::unique_ptr<Bridge> server, client;

  bool Start(TargetMode mode, const std::vector<std::string>& server_flags = {},
             const std::vector<std::string>& client_flags = {}, uint64_t reset_after = 0);
  // Both bridges drain and exit 0 (they never crashed meanwhile).
  void Stop();
};

// "longhaul_bridge_streams_reset_total{reason=\"REASON\",by=\"BY\"}"
std::string ResetSeries(const std::string& reason, const std::string& by);
// Waits (bounded) for `series` == want on `b`'s metrics; a gtest failure with the last
// value otherwise.
void ExpectMetric(const Bridge& b, const std::string& series, double want,
                  milliseconds timeout = milliseconds(10000));
// No stream of `b` ended by a reset.
void ExpectNoResets(const Bridge& b);
// Both bridges count `n` completed streams (longhaul_bridge_streams_completed_total).
void ExpectCompleted(const Bridge& client, const Bridge& server, double n);
// Neither bridge has a stream open (longhaul_bridge_streams_open is 0 on both).
void ExpectNoStreamsOpen(const Bridge& client, const Bridge& server);
// ExpectCompleted, and neither bridge reset a stream.
void ExpectCompletedWithoutResets(const Bridge& client, const Bridge& server, double n);
// Waits (10 s at most) for `target`'s only connection to end; a gtest failure unless
// exactly one did, and unless it ended with EOF. nullopt when there was not exactly one.
std::optional<TargetConn> WaitOnlyConnEof(Target& target,
                                          milliseconds timeout = milliseconds(10000));

// Joins the threads it holds when it goes out of scope (also on a failed ASSERT).
class ThreadGroup {
 public:
  ~ThreadGroup() { JoinAll(); }
  void Add(std::thread t) { threads_.push_back(std::move(t)); }
  void JoinAll() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::vector<std::thread> threads_;
};

}  // namespace longhaul::bridge_testing
