#include "transport/emu/tcp_splice.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/net/errno_status.h"
#include "transport/net/socket_setup.h"

namespace longhaul::emu {

namespace {
constexpr size_t kBufferBytes = 256 * 1024;
constexpr uint32_t kListenIndex = 0xffffff;
}  // namespace

struct TcpSplice::Pair {
  int fd[2] = {-1, -1};           // 0: accepted client side, 1: connection to forward
  std::vector<char> buf[2];       // bytes read from fd[i], to be written to fd[1 - i]
  size_t off[2] = {0, 0};         // first unwritten byte
  size_t len[2] = {0, 0};         // bytes held
  bool eof[2] = {false, false};   // fd[i] reached end of stream
  bool shut[2] = {false, false};  // shutdown(SHUT_WR) done on fd[1 - i]
  bool connected = false;         // fd[1] finished connecting
};

absl::StatusOr<std::unique_ptr<TcpSplice>> TcpSplice::Create(const net::SocketAddress& listen,
                                                             const net::SocketAddress& forward,
                                                             int epoll_fd, uint64_t tag_base,
                                                             size_t max_connections) {
  std::unique_ptr<TcpSplice> s(new TcpSplice());
  s->forward_ = forward;
  s->epoll_fd_ = epoll_fd;
  s->tag_base_ = tag_base;
  s->max_connections_ = max_connections;
  s->listen_fd_ = socket(listen.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return net::ErrnoStatus(errno, "cannot open a TCP socket");
  int one = 1;
  setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (absl::Status st = net::BindSocket(s->listen_fd_, listen); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("--tcp_relay: ", st.message()));
  }
  if (::listen(s->listen_fd_, 16) != 0) {
    return net::ErrnoStatus(errno, absl::StrCat("cannot listen on TCP ", listen.ToString()));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag_base | kListenIndex;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, s->listen_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
  }
  return s;
}

TcpSplice::~TcpSplice() {
  for (uint32_t i = 0; i < pairs_.size(); ++i) ClosePair(i);
  if (listen_fd_ >= 0) close(listen_fd_);
}

size_t TcpSplice::open() const {
  size_t n = 0;
  for (const auto& p : pairs_) n += p != nullptr;
  return n;
}

void TcpSplice::OnEvent(uint32_t index, uint32_t events) {
  if (index == kListenIndex) {
    Accept();
    return;
  }
  const uint32_t pair = index / 2;
  if (pair >= pairs_.size() || pairs_[pair] == nullptr) return;  // closed in this batch
  Pair& p = *pairs_[pair];
  if (index % 2 == 1 && !p.connected) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(p.fd[1], SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      LOG(WARNING) << "tcp relay: connect " << forward_.ToString() << ": " << strerror(err);
      ClosePair(pair);
      return;
    }
    if (events & (EPOLLOUT | EPOLLIN)) p.connected = true;
  }
  Pump(pair);
}

void TcpSplice::Accept() {
  for (int i = 0; i < 16; ++i) {
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return;
    ++accepted_;
    uint32_t slot = 0;
    while (slot < pairs_.size() && pairs_[slot] != nullptr) ++slot;
    if (slot >= max_connections_ || slot * 2 + 1 >= kListenIndex) {
      LOG(WARNING) << "tcp relay: too many connections; closing a new one";
      close(c);
      continue;
    }
    int up = socket(forward_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (up < 0 || !net::ConnectSocket(up, forward_).ok()) {
      LOG(WARNING) << "tcp relay: cannot connect to " << forward_.ToString();
      if (up >= 0) close(up);
      close(c);
      continue;
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto p = std::make_unique<Pair>();
    p->fd[0] = c;
    p->fd[1] = up;
    p->buf[0].resize(kBufferBytes);
    p->buf[1].resize(kBufferBytes);
    if (slot == pairs_.size()) pairs_.emplace_back();
    pairs_[slot] = std::move(p);
    for (int side = 0; side < 2; ++side) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      ev.data.u64 = tag_base_ | (slot * 2 + side);
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pairs_[slot]->fd[side], &ev);
    }
  }
}

void TcpSplice::Pump(uint32_t pair) {
  Pair& p = *pairs_[pair];
  // Edge-triggered: keep moving bytes until neither direction makes progress.
  for (int round = 0; round < 64; ++round) {
    bool progress = false;
    for (int i = 0; i < 2; ++i) {
      const int from = p.fd[i], to = p.fd[1 - i];
      const bool can_write = i == 1 || p.connected;  // fd[1] must finish connecting
      if (p.len[i] > 0 && can_write) {
        ssize_t w = send(to, p.buf[i].data() + p.off[i], p.len[i], MSG_NOSIGNAL);
        if (w > 0) {
          p.off[i] += static_cast<size_t>(w);
          p.len[i] -= static_cast<size_t>(w);
          if (p.len[i] == 0) p.off[i] = 0;
          progress = true;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) {
          ClosePair(pair);
          return;
        }
      }
      const bool can_read = i == 0 || p.connected;
      if (!p.eof[i] && can_read && p.off[i] + p.len[i] < p.buf[i].size()) {
        ssize_t r = recv(from, p.buf[i].data() + p.off[i] + p.len[i],
                         p.buf[i].size() - p.off[i] - p.len[i], 0);
        if (r > 0) {
          p.len[i] += static_cast<size_t>(r);
          progress = true;
        } else if (r == 0) {
          p.eof[i] = true;
          progress = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) {
          ClosePair(pair);
          return;
        }
      }
      if (p.eof[i] && p.len[i] == 0 && !p.shut[i] && can_write) {
        shutdown(to, SHUT_WR);
        p.shut[i] = true;
      }
    }
    if (p.shut[0] && p.shut[1]) {
      ClosePair(pair);
      return;
    }
    if (!progress) return;
  }
  // Still busy after many rounds: yield to the rest of the loop and re-arm both edges
  // (EPOLL_CTL_MOD re-checks readiness, so a pending edge is not lost).
  for (int side = 0; side < 2; ++side) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = tag_base_ | (pair * 2 + side);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, p.fd[side], &ev);
  }
}

void TcpSplice::ClosePair(uint32_t pair) {
  if (pair >= pairs_.size() || pairs_[pair] == nullptr) return;
  for (int fd : pairs_[pair]->fd) {
    if (fd >= 0) close(fd);  // closing removes it from the epoll set
  }
  pairs_[pair].reset();
}

}  // namespace longhaul::emu
