#include "tuner/probe/udp_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace longhaul::tuner::probe {
namespace {

absl::Status Errno(const char* what, int err) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
}

int PollMs(Duration d) {
  if (d <= Duration::Zero()) return 0;
  const int64_t ms = (d.ns() + 999999) / 1000000;
  return static_cast<int>(std::min<int64_t>(ms, 60000));
}

absl::Status SendStatus(int err, size_t size) {
  if (err == EMSGSIZE) {
    return absl::FailedPreconditionError(
        absl::StrCat("datagram of ", size, " bytes is too big for the local interface (EMSGSIZE)"));
  }
  if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
    return absl::UnavailableError("socket send buffer full");
  }
  if (err == ECONNREFUSED) {
    return absl::UnavailableError("connection refused: nothing listens on the target port");
  }
  return Errno("sendto", err);
}

}  // namespace

int64_t NowRealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

absl::StatusOr<sockaddr_in> ResolveHostPort(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected HOST:PORT (e.g. 127.0.0.1:9300), got '", host_port, "'"));
  }
  const std::string host = host_port.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad port in '", host_port, "': expected 1..65535"));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "' to an IPv4 address: ", gai_strerror(rc)));
  }
  a.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return a;
}

std::string FormatAddress(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return absl::StrCat(buf, ":", ntohs(a.sin_port));
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

UdpSocket::UdpSocket(UdpSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

UdpSocket& UdpSocket::operator=(UdpSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

static absl::StatusOr<int> NewSocket() {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket", errno);
  const int one = 1;
  // Kernel receive timestamps; without them arrival times are read times. And the
  // socket's drop counter with every datagram, so a receiver can tell its own drops
  // from the path's.
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
  return fd;
}

absl::StatusOr<UdpSocket> UdpSocket::Bind(const sockaddr_in& addr) {
  absl::StatusOr<int> fd = NewSocket();
  if (!fd.ok()) return fd.status();
  UdpSocket s(*fd);
  if (bind(s.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Errno(absl::StrCat("bind ", FormatAddress(addr)).c_str(), errno);
  }
  return s;
}

absl::StatusOr<UdpSocket> UdpSocket::Connect(const sockaddr_in& peer) {
  absl::StatusOr<int> fd = NewSocket();
  if (!fd.ok()) return fd.status();
  UdpSocket s(*fd);
  const int probe = IP_PMTUDISC_PROBE;
  if (setsockopt(s.fd_, IPPROTO_IP, IP_MTU_DISCOVER, &probe, sizeof(probe)) != 0) {
    return Errno("setsockopt IP_MTU_DISCOVER", errno);
  }
  if (connect(s.fd_, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0) {
    return Errno(absl::StrCat("connect ", FormatAddress(peer)).c_str(), errno);
  }
  return s;
}

std::pair<int, int> UdpSocket::SetBuffers(int bytes) {
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  int r = 0, w = 0;
  socklen_t len = sizeof(r);
  getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &r, &len);
  len = sizeof(w);
  getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &w, &len);
  return {r, w};
}

absl::Status UdpSocket::Send(std::span<const uint8_t> d) {
  if (send(fd_, d.data(), d.size(), 0) < 0) return SendStatus(errno, d.size());
  return absl::OkStatus();
}

absl::Status UdpSocket::SendTo(std::span<const uint8_t> d, const sockaddr_in& to) {
  if (sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) < 0) {
    return SendStatus(errno, d.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> UdpSocket::SendBatch(std::span<const std::span<const uint8_t>> ds) {
  constexpr size_t kMax = 64;
  mmsghdr msgs[kMax];
  iovec iov[kMax];
  const size_t n = std::min(ds.size(), kMax);
  for (size_t i = 0; i < n; ++i) {
    iov[i].iov_base = const_cast<uint8_t*>(ds[i].data());
    iov[i].iov_len = ds[i].size();
    std::memset(&msgs[i], 0, sizeof(msgs[i]));
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int sent = sendmmsg(fd_, msgs, static_cast<unsigned>(n), 0);
  if (sent < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return size_t{0};
    return SendStatus(errno, n ? ds[0].size() : 0);
  }
  return static_cast<size_t>(sent);
}

bool UdpSocket::WaitWritable(Duration timeout) {
  pollfd p{fd_, POLLOUT, 0};
  return poll(&p, 1, PollMs(timeout)) > 0 && (p.revents & POLLOUT);
}

absl::StatusOr<size_t> UdpSocket::Receive(std::vector<std::vector<uint8_t>>* bufs, size_t cap,
                                          std::vector<Received>* out, Duration timeout) {
  out->clear();
  pollfd p{fd_, POLLIN, 0};
  const int rc = poll(&p, 1, PollMs(timeout));
  if (rc < 0) {
    if (errno == EINTR) return size_t{0};
    return Errno("poll", errno);
  }
  if (rc == 0) return size_t{0};
  constexpr size_t kMax = 64;
  const size_t n = std::min(bufs->size(), kMax);
  mmsghdr msgs[kMax];
  iovec iov[kMax];
  sockaddr_in from[kMax];
  alignas(cmsghdr) char control[kMax][CMSG_SPACE(sizeof(timespec)) + CMSG_SPACE(sizeof(uint32_t))];
  for (size_t i = 0; i < n; ++i) {
    if ((*bufs)[i].size() < cap) (*bufs)[i].resize(cap);
    iov[i].iov_base = (*bufs)[i].data();
    iov[i].iov_len = cap;
    std::memset(&msgs[i], 0, sizeof(msgs[i]));
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
    msgs[i].msg_hdr.msg_control = control[i];
    msgs[i].msg_hdr.msg_controllen = sizeof(control[i]);
  }
  const int got = recvmmsg(fd_, msgs, static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
  if (got < 0) {
    // ICMP errors surface here on a connected socket; report port unreachable plainly.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
    if (errno == ECONNREFUSED) {
      return absl::UnavailableError("connection refused: nothing listens on the target port");
    }
    return Errno("recvmmsg", errno);
  }
  const int64_t read_time = NowRealtimeNs();
  for (int i = 0; i < got; ++i) {
    Received r;
    r.length = msgs[i].msg_len;
    r.from = from[i];
    r.at_ns = read_time;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c != nullptr;
         c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        r.at_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        std::memcpy(&r.socket_drops, CMSG_DATA(c), sizeof(r.socket_drops));
      }
    }
    out->push_back(r);
  }
  return static_cast<size_t>(got);
}

int UdpSocket::PathMtu() const {
  int mtu = 0;
  socklen_t len = sizeof(mtu);
  if (getsockopt(fd_, IPPROTO_IP, IP_MTU, &mtu, &len) != 0) return 0;
  return mtu;
}

uint16_t UdpSocket::LocalPort() const {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

}  // namespace longhaul::tuner::probe
