#include "tests/e2e/bridge/bridge_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace longhaul::bridge_testing {
namespace {

constexpr uint64_t kPeriod = 1000003;  // prime: a misplaced 64 KiB chunk never matches
constexpr size_t kBuf = 256 * 1024;

const std::vector<uint8_t>& Base() {
  static const std::vector<uint8_t> base = [] {
    std::vector<uint8_t> v(kPeriod);
    uint64_t s = 0x5EEDB41D6EULL;
    for (uint8_t& b : v) {
      uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      b = static_cast<uint8_t>(z ^ (z >> 31));
    }
    return v;
  }();
  return base;
}

int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

int LocalPortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

End Classify(int err) {
  if (err == ECONNRESET || err == EPIPE) return End::kReset;
  if (err == EAGAIN || err == EWOULDBLOCK) return End::kTimeout;
  return End::kError;
}

void PutU64(uint64_t v, uint8_t* p) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

bool HasFlag(const std::vector<std::string>& flags, const std::string& prefix) {
  return std::any_of(flags.begin(), flags.end(),
                     [&](const std::string& f) { return absl::StartsWith(f, prefix); });
}

bool ChoosesKeys(const std::vector<std::string>& flags) {
  return HasFlag(flags, "--insecure") || HasFlag(flags, "--psk_file") || HasFlag(flags, "--key");
}

}  // namespace

// ---------------------------------------------------------------- pattern

uint8_t PatternByte(uint64_t offset) {
  return static_cast<uint8_t>(Base()[offset % kPeriod] + static_cast<uint8_t>(offset / kPeriod));
}

void FillPattern(uint64_t offset, uint8_t* out, size_t n) {
  const uint8_t* base = Base().data();
  while (n > 0) {
    const uint64_t r = offset % kPeriod;
    const uint8_t k = static_cast<uint8_t>(offset / kPeriod);
    const size_t seg = static_cast<size_t>(std::min<uint64_t>(n, kPeriod - r));
    for (size_t i = 0; i < seg; ++i) out[i] = static_cast<uint8_t>(base[r + i] + k);
    out += seg;
    offset += seg;
    n -= seg;
  }
}

size_t CheckPattern(uint64_t offset, const uint8_t* in, size_t n) {
  const uint8_t* base = Base().data();
  size_t done = 0;
  while (done < n) {
    const uint64_t r = offset % kPeriod;
    const uint8_t k = static_cast<uint8_t>(offset / kPeriod);
    const size_t seg = static_cast<size_t>(std::min<uint64_t>(n - done, kPeriod - r));
    uint8_t diff = 0;
    for (size_t i = 0; i < seg; ++i) diff |= static_cast<uint8_t>(in[done + i] ^ (base[r + i] + k));
    if (diff != 0) {
      for (size_t i = 0; i < seg; ++i) {
        if (in[done + i] != static_cast<uint8_t>(base[r + i] + k)) return done + i;
      }
    }
    done += seg;
    offset += seg;
  }
  return n;
}

// ---------------------------------------------------------------- files and fds

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

int Fd::release() {
  const int f = fd_;
  fd_ = -1;
  return f;
}

void Fd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

ReservedTcpPort::ReservedTcpPort() {
  fd_ = Fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Loopback(0);
  EXPECT_EQ(bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  port_ = LocalPortOf(fd_.get());
}

int FreeUdpPort() {
  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = Loopback(0);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 0;
  return LocalPortOf(fd.get());
}

// ---------------------------------------------------------------- bridge processes

std::unique_ptr<Bridge> Bridge::Start(const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<emu::testing::EmuProcess>> p =
      emu::testing::EmuProcess::Start(LONGHAUL_BRIDGE_BIN, args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  std::unique_ptr<Bridge> b(new Bridge());
  b->proc_ = *std::move(p);
  return b;
}

std::optional<std::string> Bridge::WaitLine(const std::string& text, milliseconds timeout,
                                            int nth) {
  int seen = 0;
  for (const std::string& l : lines_) {
    if (absl::StrContains(l, text) && ++seen == nth) return l;
  }
  const auto deadline = Clock::now() + timeout;
  // Each pass consumes a line or ends (no line by the deadline, or stdout closed).
  while (true) {
    absl::StatusOr<std::string> line = proc_->ReadLine(deadline);
    if (!line.ok()) return std::nullopt;
    lines_.push_back(*line);
    if (absl::StrContains(*line, text) && ++seen == nth) return *line;
  }
}

int Bridge::CountLines(const std::string& text) const {
  return static_cast<int>(std::count_if(lines_.begin(), lines_.end(), [&](const std::string& l) {
    return absl::StrContains(l, text);
  }));
}

std::string Bridge::Stdout() const { return absl::StrJoin(lines_, "\n"); }

int PortAfter(const std::string& line, const std::string& prefix) {
  const size_t at = line.find(prefix);
  if (at == std::string::npos) return 0;
  size_t end = at + prefix.size();
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  int port = 0;
  if (!absl::SimpleAtoi(line.substr(at + prefix.size(), end - at - prefix.size()), &port)) return 0;
  return port;
}

namespace {

// Starts a bridge with `args` (its role and what it was given) plus the harness's defaults
// (a kernel-chosen listen port, --insecure unless `flags` choose keys, metrics on port
// 0), then waits for the line that starts with `ready` and reads the port after
// `port_prefix` from it into *port (and the metrics port when `metrics`).
std::unique_ptr<Bridge> StartBridge(std::vector<std::string> args,
                                    const std::vector<std::string>& flags, bool metrics,
                                    const std::string& ready, const std::string& port_prefix,
                                    int Bridge::*port) {
  const std::string role = args.front();
  if (!HasFlag(flags, "--listen=")) args.insert(args.begin() + 1, "--listen=127.0.0.1:0");
  if (!ChoosesKeys(flags)) args.push_back("--insecure");
  if (metrics) args.push_back("--metrics=127.0.0.1:0");
  args.insert(args.end(), flags.begin(), flags.end());
  std::unique_ptr<Bridge> b = Bridge::Start(args);
  if (!b) return nullptr;
  std::optional<std::string> line = b->WaitLine(ready, kStartTimeout);
  if (line) (*b).*port = PortAfter(*line, port_prefix);
  if (!line || (*b).*port == 0) {
    ADD_FAILURE() << "the " << role << " bridge did not start: " << absl::StrJoin(args, " ")
                  << "\nstdout: " << b->Stdout() << "\nstderr: " << b->Stderr();
    return nullptr;
  }
  if (metrics) {
    line = b->WaitLine("metrics: http://127.0.0.1:", kStartTimeout);
    if (line) b->metrics_port = PortAfter(*line, "http://127.0.0.1:");
    if (b->metrics_port == 0) {
      ADD_FAILURE() << "no metrics line from the " << role << " bridge: " << b->Stdout();
      return nullptr;
    }
  }
  return b;
}

}  // namespace

std::unique_ptr<Bridge> StartServer(const std::vector<std::string>& flags, bool metrics) {
  return StartBridge({"server"}, flags, metrics, "listening on longhaul ", "longhaul 127.0.0.1:",
                     &Bridge::udp_port);
}

std::string TargetFlag(int port) { return absl::StrCat("--target=127.0.0.1:", port); }

std::unique_ptr<Bridge> StartServerFor(int target_port, const std::vector<std::string>& flags) {
  std::vector<std::string> all = {TargetFlag(target_port)};
  all.insert(all.end(), flags.begin(), flags.end());
  return StartServer(all, /*metrics=*/true);
}

std::unique_ptr<Bridge> StartClient(int peer_port, const std::vector<std::string>& flags,
                                    bool metrics, bool wait_connected) {
  std::unique_ptr<Bridge> b =
      StartBridge({"client", absl::StrCat("--peer=127.0.0.1:", peer_port)}, flags, metrics,
                  "forward default: tcp ", "tcp 127.0.0.1:", &Bridge::tcp_port);
  if (b && wait_connected && !b->WaitLine("connected to ", kStartTimeout)) {
    ADD_FAILURE() << "the client bridge did not connect\nstdout: " << b->Stdout()
                  << "\nstderr: " << b->Stderr();
    return nullptr;
  }
  return b;
}

void StopBridge(Bridge& b) {
  b.Signal(SIGTERM);
  absl::StatusOr<int> st = b.Wait(milliseconds(20000));
  ASSERT_TRUE(st.ok()) << "the bridge did not exit after SIGTERM: " << st.status()
                       << "\nstderr: " << b.Stderr();
  EXPECT_EQ(*st, 0) << "stderr: " << b.Stderr();
}

// ---------------------------------------------------------------- metrics

std::map<std::string, double> FetchMetrics(int port, bool expect_ok) {
  std::map<std::string, double> out;
  int err = 0;
  Fd fd = ConnectTcp(port, &err);
  if (!fd.valid()) {
    EXPECT_FALSE(expect_ok) << "metrics port " << port << ": " << std::strerror(err);
    return out;
  }
  SetTimeouts(fd.get(), milliseconds(5000));
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (!SendAll(fd.get(), req.data(), req.size())) {
    EXPECT_FALSE(expect_ok) << "metrics request not sent";
    return out;
  }
  ReadResult r = ReadToEnd(fd.get(), false, 1 << 20, Clock::now() + milliseconds(5000));
  const size_t body = r.data.find("\r\n\r\n");
  if (r.end != End::kEof || body == std::string::npos ||
      !absl::StartsWith(r.data, "HTTP/1.0 200 OK")) {
    EXPECT_FALSE(expect_ok) << "bad metrics answer (" << EndName(r.end) << "): " << r.data;
    return out;
  }
  for (absl::string_view line : absl::StrSplit(r.data.substr(body + 4), '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == absl::string_view::npos) continue;
    double v = NAN;
    if (!absl::SimpleAtod(line.substr(sp + 1), &v)) continue;
    out[std::string(line.substr(0, sp))] = v;
  }
  return out;
}

bool WaitMetric(int port, const std::string& series, const std::function<bool(double)>& pred,
                milliseconds timeout, double* last) {
  const auto deadline = Clock::now() + timeout;
  double v = NAN;
  // Polls every 50 ms: bounded in count by the deadline.
  for (int i = 0; i < 100000; ++i) {
    std::map<std::string, double> m = FetchMetrics(port);
    if (auto it = m.find(series); it != m.end()) {
      v = it->second;
      if (pred(v)) {
        if (last) *last = v;
        return true;
      }
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  if (last) *last = v;
  return false;
}

// ---------------------------------------------------------------- the application's side

const char* EndName(End e) {
  switch (e) {
    case End::kEof:
      return "EOF";
    case End::kReset:
      return "reset";
    case End::kTimeout:
      return "timeout";
    case End::kError:
      return "error";
    case End::kNone:
      return "none";
  }
  return "?";
}

void SetTimeouts(int fd, milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

TcpListener::TcpListener(int backlog) {
  fd = Fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(fd.get(), backlog), 0);
  socklen_t len = sizeof(a);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
}

SilentListener::SilentListener() : port(listener.port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  for (int i = 0; i < 3; ++i) {  // fill the queue
    Fd f(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    connect(f.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
    fillers.push_back(std::move(f));
  }
}

Fd ConnectTcp(int port, int* err) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  SetTimeouts(fd.get(), kIoTimeout);
  sockaddr_in a = Loopback(port);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (err) *err = errno;
    return Fd();
  }
  if (err) *err = 0;
  return fd;
}

bool SendAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  // Each pass sends something or fails (SO_SNDTIMEO bounds a blocked send).
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool SendPattern(int fd, uint64_t n, uint64_t offset) {
  std::vector<uint8_t> buf(kBuf);
  uint64_t sent = 0;
  while (sent < n) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(kBuf, n - sent));
    FillPattern(offset + sent, buf.data(), k);
    if (!SendAll(fd, buf.data(), k)) return false;
    sent += k;
  }
  return true;
}

void ResetClose(Fd& fd) {
  linger l{1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  fd.reset();
}

ReadResult ReadToEnd(int fd, bool check, size_t keep_max, Clock::time_point deadline) {
  ReadResult r;
  std::vector<uint8_t> buf(kBuf);
  // Each pass reads something or ends; SO_RCVTIMEO bounds one read, `deadline` all.
  while (true) {
    if (Clock::now() >= deadline) {
      r.end = End::kTimeout;
      return r;
    }
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n == 0) {
      r.end = End::kEof;
      return r;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      r.err = errno;
      r.end = Classify(errno);
      return r;
    }
    const size_t got = static_cast<size_t>(n);
    if (check && r.first_bad == ~0ULL) {
      const size_t bad = CheckPattern(r.bytes, buf.data(), got);
      if (bad < got) r.first_bad = r.bytes + bad;
    }
    if (r.data.size() < keep_max) {
      r.data.append(reinterpret_cast<const char*>(buf.data()),
                    std::min(got, keep_max - r.data.size()));
    }
    r.bytes += got;
  }
}

Upload DoUpload(int port, uint64_t n) {
  Upload u;
  Fd fd = ConnectTcp(port);
  if (!fd.valid()) return u;
  u.connected = true;
  u.sent = SendPattern(fd.get(), n);
  shutdown(fd.get(), SHUT_WR);
  u.reply = ReadToEnd(fd.get(), false, 64);
  if (u.reply.data.size() >= 16) {
    const auto* p = reinterpret_cast<const uint8_t*>(u.reply.data.data());
    u.sink_bytes = GetU64(p);
    u.sink_first_bad = GetU64(p + 8);
  }
  return u;
}

Download DoDownload(int port, uint64_t n) {
  Download d;
  Fd fd = ConnectTcp(port);
  if (!fd.valid()) return d;
  d.connected = true;
  if (!SendSourceRequest(fd.get(), n)) return d;
  shutdown(fd.get(), SHUT_WR);
  d.got = ReadToEnd(fd.get(), true);
  return d;
}

bool SendSourceRequest(int fd, uint64_t n) {
  uint8_t req[8];
  PutU64(n, req);
  return SendAll(fd, req, sizeof(req));
}

Fd OpenDownload(int port, uint64_t n) {
  int err = 0;
  Fd fd = ConnectTcp(port, &err);
  EXPECT_TRUE(fd.valid()) << "connect to " << port << ": errno " << err;
  if (!fd.valid()) return fd;
  const bool sent = SendSourceRequest(fd.get(), n);
  EXPECT_TRUE(sent) << "sending the request for " << n << " bytes failed";
  if (!sent) return Fd();
  return fd;
}

std::vector<Exchange> DoEchoExchanges(int port, const std::vector<uint64_t>& sizes,
                                      milliseconds timeout) {
  std::vector<Exchange> results(sizes.size());
  ThreadGroup threads;
  for (size_t i = 0; i < sizes.size(); ++i) {
    threads.Add(std::thread([&, i] { results[i] = DoEchoExchange(port, sizes[i], timeout); }));
  }
  threads.JoinAll();
  return results;
}

void ExpectReadIntact(const ReadResult& got, uint64_t n) {
  EXPECT_EQ(got.end, End::kEof) << EndName(got.end) << " errno " << got.err;
  EXPECT_EQ(got.bytes, n);
  EXPECT_EQ(got.first_bad, ~0ULL) << "wrong byte at " << got.first_bad;
}

void ExpectEchoesIntact(const std::vector<Exchange>& results, const std::vector<uint64_t>& sizes) {
  ASSERT_EQ(results.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("stream ", i, " of ", sizes[i], " bytes"));
    ASSERT_TRUE(results[i].connected);
    EXPECT_EQ(results[i].sent, sizes[i]);
    ExpectReadIntact(results[i].got, sizes[i]);
  }
}

Exchange DoEchoExchange(int port, uint64_t n, milliseconds timeout) {
  Exchange x;
  Fd fd = ConnectTcp(port);
  if (!fd.valid()) return x;
  x.connected = true;
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  std::vector<uint8_t> out(64 * 1024), in(kBuf);
  if (n == 0) shutdown(fd.get(), SHUT_WR);
  const auto deadline = Clock::now() + timeout;
  ReadResult& r = x.got;
  // Bounded by the deadline (and a generous count).
  for (int iter = 0; iter < 50'000'000; ++iter) {
    if (Clock::now() >= deadline) {
      r.end = End::kTimeout;
      return x;
    }
    pollfd p{fd.get(), static_cast<short>(POLLIN | (x.sent < n ? POLLOUT : 0)), 0};
    if (poll(&p, 1, std::min(MsLeft(deadline), 1000)) <= 0) continue;
    if (x.sent < n && (p.revents & POLLOUT)) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(out.size(), n - x.sent));
      FillPattern(x.sent, out.data(), k);
      const ssize_t w = send(fd.get(), out.data(), k, MSG_NOSIGNAL);
      if (w > 0) {
        x.sent += static_cast<uint64_t>(w);
        if (x.sent == n) shutdown(fd.get(), SHUT_WR);
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        r.err = errno;
        r.end = Classify(errno);
        return x;
      }
    }
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      const ssize_t got = recv(fd.get(), in.data(), in.size(), 0);
      if (got == 0) {
        r.end = End::kEof;
        return x;
      }
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        r.err = errno;
        r.end = Classify(errno);
        return x;
      }
      if (r.first_bad == ~0ULL) {
        const size_t bad = CheckPattern(r.bytes, in.data(), static_cast<size_t>(got));
        if (bad < static_cast<size_t>(got)) r.first_bad = r.bytes + bad;
      }
      r.bytes += static_cast<uint64_t>(got);
    }
  }
  r.end = End::kTimeout;
  return x;
}

bool RecvExact(int fd, size_t n, std::string* out) {
  out->clear();
  std::vector<char> buf(std::min<size_t>(n, kBuf) + 1);
  // Each pass reads something or fails (SO_RCVTIMEO bounds a read).
  while (out->size() < n) {
    const ssize_t got = recv(fd, buf.data(), std::min(buf.size(), n - out->size()), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out->append(buf.data(), static_cast<size_t>(got));
  }
  return true;
}

// ---------------------------------------------------------------- a target and two bridges

bool BridgePair::Start(TargetMode mode, const std::vector<std::string>& server_flags,
                       const std::vector<std::string>& client_flags, uint64_t reset_after) {
  target = std::make_unique<Target>(mode, reset_after);
  std::vector<std::string> sf = server_flags;
  sf.push_back(absl::StrCat("--target=127.0.0.1:", target->port()));
  server = StartServer(sf, /*metrics=*/true);
  if (!server) return false;
  client = StartClient(server->udp_port, client_flags, /*metrics=*/true);
  return client != nullptr;
}

void BridgePair::Stop() {
  if (client) StopBridge(*client);
  if (server) StopBridge(*server);
}

std::string ResetSeries(const std::string& reason, const std::string& by) {
  return absl::StrCat("longhaul_bridge_streams_reset_total{reason=\"", reason, "\",by=\"", by,
                      "\"}");
}

void ExpectMetric(const Bridge& b, const std::string& series, double want, milliseconds timeout) {
  double last = NAN;
  EXPECT_TRUE(WaitMetric(
      b.metrics_port, series, [&](double v) { return v == want; }, timeout, &last))
      << series << " is " << last << ", want " << want;
}

void ExpectNoResets(const Bridge& b) {
  for (const auto& [series, v] : FetchMetrics(b.metrics_port)) {
    EXPECT_FALSE(absl::StartsWith(series, "longhaul_bridge_streams_reset_total"))
        << series << " " << v;
  }
}

void ExpectCompleted(const Bridge& client, const Bridge& server, double n) {
  ExpectMetric(client, "longhaul_bridge_streams_completed_total", n);
  ExpectMetric(server, "longhaul_bridge_streams_completed_total", n);
}

void ExpectNoStreamsOpen(const Bridge& client, const Bridge& server) {
  ExpectMetric(client, "longhaul_bridge_streams_open", 0);
  ExpectMetric(server, "longhaul_bridge_streams_open", 0);
}

void ExpectCompletedWithoutResets(const Bridge& client, const Bridge& server, double n) {
  ExpectCompleted(client, server, n);
  ExpectNoResets(client);
  ExpectNoResets(server);
}

std::optional<TargetConn> WaitOnlyConnEof(Target& target, milliseconds timeout) {
  std::vector<TargetConn> seen = target.WaitDone(1, timeout);
  EXPECT_EQ(seen.size(), 1u);
  if (seen.size() != 1) return std::nullopt;
  EXPECT_EQ(seen[0].end, End::kEof) << EndName(seen[0].end) << " errno " << seen[0].err;
  return seen[0];
}

// ---------------------------------------------------------------- TCP targets

struct Target::Conn {
  int fd = -1;  // guarded by mu_; -1 once closed
  TargetConn rec;
};

Target::Target(TargetMode mode, uint64_t reset_after) : mode_(mode), reset_after_(reset_after) {
  listen_ = Fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  setsockopt(listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Loopback(0);
  const bool ok = bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  listen(listen_.get(), 128) == 0;
  EXPECT_TRUE(ok) << "target: " << std::strerror(errno);
  port_ = LocalPortOf(listen_.get());
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

Target::~Target() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& c : conns_) {
      if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);  // wakes a blocked read or write
    }
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Target::AcceptLoop() {
  // Ends with the target (stop_), polling every 100 ms.
  while (!stop_.load()) {
    pollfd p{listen_.get(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0 || stop_.load()) continue;
    const int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    std::lock_guard<std::mutex> l(mu_);
    conns_.push_back(c);
    threads_.emplace_back([this, c] { Serve(c); });
  }
}

size_t Target::accepted() const {
  std::lock_guard<std::mutex> l(mu_);
  return conns_.size();
}

std::vector<TargetConn> Target::WaitDone(size_t n, milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [&] {
    return static_cast<size_t>(std::count_if(conns_.begin(), conns_.end(),
                                             [](const auto& c) { return c->rec.done; })) >= n;
  });
  std::vector<TargetConn> out;
  for (const auto& c : conns_) out.push_back(c->rec);
  return out;
}

namespace {

// Polls `done` every 10 ms until it holds (true) or `timeout` has passed (false).
bool PollUntil(const std::function<bool()>& done, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < 1000000; ++i) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

}  // namespace

bool Target::WaitBytesIn(uint64_t n, milliseconds timeout) {
  return PollUntil([&] { return bytes_in_.load() >= n; }, timeout);
}

bool Target::WaitEofs(int n, milliseconds timeout) {
  return PollUntil([&] { return eofs_.load() >= n; }, timeout);
}

void Target::Serve(std::shared_ptr<Conn> c) {
  int fd;
  {
    std::lock_guard<std::mutex> l(mu_);
    fd = c->fd;
  }
  SetTimeouts(fd, kIoTimeout);
  TargetConn rec;
  std::vector<uint8_t> buf(kBuf);
  std::string kept;  // kReplyAfterEof
  bool reset_now = false;
  auto on_bytes = [&](size_t got) {
    if (mode_ == TargetMode::kSink && rec.first_bad == ~0ULL) {
      const size_t bad = CheckPattern(rec.bytes_in, buf.data(), got);
      if (bad < got) rec.first_bad = rec.bytes_in + bad;
    }
    if (mode_ == TargetMode::kReplyAfterEof && kept.size() < (64u << 20)) {
      kept.append(reinterpret_cast<const char*>(buf.data()), got);
    }
    rec.bytes_in += got;
    bytes_in_ += got;
  };
  auto send_all = [&](const void* p, size_t n) {
    if (SendAll(fd, p, n)) {
      rec.bytes_out += n;
      return true;
    }
    rec.err = errno;
    return false;
  };
  // Reads until EOF or an error (each read bounded by SO_RCVTIMEO); for kSource the
  // request first, for kResetAfter until reset_after_ bytes.
  bool request_read = false;
  uint8_t req[8] = {};
  for (int pass = 0; pass < 100'000'000; ++pass) {
    size_t want = buf.size();
    if (mode_ == TargetMode::kSource && !request_read) want = 8 - rec.bytes_in;
    const ssize_t n = recv(fd, buf.data(), want, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      rec.end = End::kEof;
      break;
    }
    if (n < 0) {
      rec.err = errno;
      rec.end = Classify(errno);
      break;
    }
    const size_t got = static_cast<size_t>(n);
    if (mode_ == TargetMode::kSource && !request_read) {
      // The 8-byte request: how many bytes to send.
      std::memcpy(req + rec.bytes_in, buf.data(), got);
      on_bytes(got);
      if (rec.bytes_in < 8) continue;
      request_read = true;
      const uint64_t total = GetU64(req);
      std::vector<uint8_t> out(kBuf);
      bool ok = true;
      for (uint64_t sent = 0; ok && sent < total;) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(kBuf, total - sent));
        FillPattern(sent, out.data(), k);
        ok = send_all(out.data(), k);
        sent += k;
      }
      shutdown(fd, SHUT_WR);
      continue;
    }
    on_bytes(got);
    if (mode_ == TargetMode::kEcho && !send_all(buf.data(), got)) {
      rec.end = Classify(rec.err);
      break;
    }
    if (mode_ == TargetMode::kResetAfter && rec.bytes_in >= reset_after_) {
      reset_now = true;
      break;
    }
  }
  if (rec.end == End::kEof) ++eofs_;
  if (rec.end == End::kEof && mode_ == TargetMode::kHoldAfterEof) {
    // Held open: only error conditions are polled for (POLLERR/POLLHUP come without
    // asking); 100 ms at a time so that the destructor's shutdown is seen, 10 s in all.
    rec.end = End::kTimeout;
    const auto deadline = Clock::now() + milliseconds(10000);
    while (!stop_.load() && Clock::now() < deadline) {
      pollfd p{fd, 0, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rec.err = err;
      // An RST after the FIN shows as EPIPE (CLOSE_WAIT), before it as ECONNRESET.
      rec.end = err == 0 ? End::kEof : Classify(err);
      break;
    }
  }
  if (rec.end == End::kEof) {
    if (mode_ == TargetMode::kSink) {
      uint8_t reply[16];
      PutU64(rec.bytes_in, reply);
      PutU64(rec.first_bad, reply + 8);
      send_all(reply, sizeof(reply));
    } else if (mode_ == TargetMode::kReplyAfterEof) {
      send_all(kept.data(), kept.size());
    } else if (mode_ == TargetMode::kEcho) {
      shutdown(fd, SHUT_WR);
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  if (c->fd >= 0) {
    if (reset_now) {
      linger lg{1, 0};
      setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(c->fd);
    c->fd = -1;
  }
  rec.done = true;
  c->rec = rec;
  cv_.notify_all();
}

}  // namespace longhaul::bridge_testing
