#include "tests/e2e/emu/emu_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;

namespace longhaul::emu::testing {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmuProcess>> EmuProcess::Start(
    const std::string& binary, const std::vector<std::string>& args) {
  std::unique_ptr<EmuProcess> p(new EmuProcess());
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
  char tmpl[] = "/tmp/lh-emu-test-stderr-XXXXXX";
  int err_fd = mkstemp(tmpl);
  if (err_fd < 0) return absl::InternalError("mkstemp");
  p->err_path_ = tmpl;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&p->pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err_fd);
  if (rc != 0) {
    close(out[0]);
    return absl::InternalError(absl::StrCat("posix_spawn ", binary, ": ", strerror(rc)));
  }
  p->out_fd_ = out[0];
  p->pidfd_ = PidfdOpen(p->pid_);
  return p;
}

EmuProcess::~EmuProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (pidfd_ >= 0) close(pidfd_);
  if (!err_path_.empty()) unlink(err_path_.c_str());
}

absl::StatusOr<std::string> EmuProcess::ReadLine(Clock::time_point deadline) {
  while (true) {
    if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    pollfd p{out_fd_, POLLIN, 0};
    const int r = poll(&p, 1, MsLeft(deadline));
    if (r == 0) return absl::DeadlineExceededError("no output line in time");
    if (r < 0 && errno == EINTR) continue;
    char buf[65536];
    const ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n <= 0) return absl::UnavailableError("the emulator closed its stdout");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<nlohmann::json> EmuProcess::WaitEvent(const std::string& event,
                                                     std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    absl::StatusOr<std::string> line = ReadLine(deadline);
    if (!line.ok()) return line.status();
    nlohmann::json j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::DataLossError(absl::StrCat("not JSON: ", *line));
    if (j.value("event", "") == event) return j;
  }
}

absl::StatusOr<nlohmann::json> EmuProcess::WaitStats(
    const std::function<bool(const nlohmann::json&)>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    absl::StatusOr<std::string> line = ReadLine(deadline);
    if (!line.ok()) return line.status();
    nlohmann::json j = nlohmann::json::parse(*line, nullptr, false);
    if (j.is_discarded()) return absl::DataLossError(absl::StrCat("not JSON: ", *line));
    const std::string ev = j.value("event", "");
    if ((ev == "stats" || ev == "final") && pred(j)) return j;
    if (ev == "final") return absl::FailedPreconditionError("final line reached first");
  }
}

void EmuProcess::Signal(int sig) {
  if (pid_ > 0 && !exited_) kill(pid_, sig);
}

absl::StatusOr<int> EmuProcess::Wait(std::chrono::milliseconds timeout) {
  if (exited_) return status_;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
      return status_;
    }
    if (Clock::now() >= deadline) return absl::DeadlineExceededError("process did not exit");
    // The pidfd becomes readable when the child exits.
    pollfd p{pidfd_, POLLIN, 0};
    poll(&p, 1, std::min(MsLeft(deadline), 1000));
  }
}

std::string EmuProcess::Stderr() const {
  std::ifstream f(err_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::optional<nlohmann::json> StartAndAwait(const std::string& binary,
                                            const std::vector<std::string>& args,
                                            const std::string& event,
                                            std::chrono::milliseconds timeout,
                                            std::unique_ptr<EmuProcess>* proc) {
  absl::StatusOr<std::unique_ptr<EmuProcess>> p = EmuProcess::Start(binary, args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return std::nullopt;
  *proc = *std::move(p);
  absl::StatusOr<nlohmann::json> e = (*proc)->WaitEvent(event, timeout);
  EXPECT_TRUE(e.ok()) << e.status() << "\nstderr: " << (*proc)->Stderr();
  if (!e.ok()) return std::nullopt;
  return *std::move(e);
}

EmuRelay StartEmuRelay(const std::string& emu_bin, const std::string& link, int forward_port,
                       const std::vector<std::string>& args, const std::string& max_time) {
  std::vector<std::string> all = {absl::StrCat("--link=", link), "--listen=127.0.0.1:0",
                                  absl::StrCat("--forward=127.0.0.1:", forward_port), "--json",
                                  absl::StrCat("--max_time=", max_time)};
  all.insert(all.end(), args.begin(), args.end());
  EmuRelay e;
  std::optional<nlohmann::json> ready =
      StartAndAwait(emu_bin, all, "ready", std::chrono::seconds(10), &e.proc);
  if (ready) e.port = (*ready)["listen_port"].get<int>();
  return e;
}

absl::StatusOr<RunResult> RunToCompletion(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          std::chrono::milliseconds timeout) {
  absl::StatusOr<std::unique_ptr<EmuProcess>> p = EmuProcess::Start(binary, args);
  if (!p.ok()) return p.status();
  RunResult r;
  const auto deadline = Clock::now() + timeout;
  // Drain stdout until EOF so a chatty child cannot block on a full pipe.
  while (true) {
    absl::StatusOr<std::string> line = (*p)->ReadLine(deadline);
    if (!line.ok()) break;
    r.stdout_text += *line + "\n";
  }
  absl::StatusOr<int> st = (*p)->Wait(std::chrono::milliseconds(MsLeft(deadline) + 1));
  if (!st.ok()) return st.status();
  r.status = *st;
  r.stderr_text = (*p)->Stderr();
  return r;
}

int BoundUdpSocket(int rcvbuf) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // Without root the kernel caps SO_RCVBUF at net.core.rmem_max.
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int LocalPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

std::optional<std::vector<uint8_t>> RecvWithTimeout(int fd, std::chrono::milliseconds timeout,
                                                    uint8_t* tos, std::string* from) {
  const auto deadline = Clock::now() + timeout;
  std::vector<uint8_t> buf(65536);
  while (true) {
    sockaddr_in src{};
    alignas(cmsghdr) uint8_t control[64];
    iovec iov{buf.data(), buf.size()};
    msghdr h{};
    h.msg_name = &src;
    h.msg_namelen = sizeof(src);
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd, &h, MSG_DONTWAIT);
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      if (tos != nullptr) {
        *tos = 0;
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
          if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) *tos = *CMSG_DATA(c);
        }
      }
      if (from != nullptr) *from = absl::StrCat(ntohs(src.sin_port));
      return buf;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED) return std::nullopt;
    const int left = MsLeft(deadline);
    if (left <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, left);
  }
}

SinkCollector::SinkCollector(int fd) : fd_(fd) {
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      uint8_t tos = 0;
      // Short polls so Finish() is noticed quickly; the loop ends with the collector.
      auto d = RecvWithTimeout(fd_, std::chrono::milliseconds(20), &tos);
      if (!d) continue;
      std::lock_guard<std::mutex> l(mu_);
      got_.push_back({*std::move(d), tos});
      cv_.notify_all();
    }
  });
}

SinkCollector::~SinkCollector() { Finish(); }

size_t SinkCollector::WaitFor(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [&] { return got_.size() >= n; });
  return got_.size();
}

std::vector<SinkCollector::Datagram> SinkCollector::Finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> l(mu_);
  return got_;
}

}  // namespace longhaul::emu::testing
