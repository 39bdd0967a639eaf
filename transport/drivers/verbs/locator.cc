#include "transport/drivers/verbs/locator.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/net/control_messages.h"
#include "transport/net/errno_status.h"
#include "transport/net/socket_setup.h"

namespace longhaul::verbs {
namespace {

constexpr uint8_t kMagic[4] = {'L', 'H', 'V', 'L'};
constexpr uint8_t kRequest = 'Q';
constexpr uint8_t kAnswer = 'A';
constexpr size_t kMaxUdpPayload = 65507;
constexpr size_t kLocatorRecvBuffer = 4 << 20;

void Put32(uint8_t* p, uint32_t v) {
  v = htonl(v);
  std::memcpy(p, &v, 4);
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return ntohl(v);
}

std::vector<uint8_t> Header(uint8_t kind, uint64_t nonce) {
  std::vector<uint8_t> b(kLocateSize, 0);
  std::memcpy(b.data(), kMagic, 4);
  b[4] = kind;
  b[5] = kLocateVersion;
  std::memcpy(b.data() + 6, &nonce, 8);
  return b;
}

bool HasHeader(std::span<const uint8_t> d, uint8_t kind) {
  return d.size() == kLocateSize && std::memcmp(d.data(), kMagic, 4) == 0 && d[4] == kind &&
         d[5] == kLocateVersion;
}

struct Fd {
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  int fd;
};

}  // namespace

std::vector<uint8_t> EncodeLocateRequest(uint64_t nonce) { return Header(kRequest, nonce); }

std::vector<uint8_t> EncodeLocateAnswer(uint64_t nonce, const LocateAnswer& a) {
  std::vector<uint8_t> b = Header(kAnswer, nonce);
  Put32(b.data() + 14, a.address.qpn);
  Put32(b.data() + 18, a.qkey);
  Put32(b.data() + 22, a.mtu);
  std::memcpy(b.data() + 26, a.address.gid.data(), 16);
  return b;
}

std::optional<uint64_t> DecodeLocateRequest(std::span<const uint8_t> d) {
  if (!HasHeader(d, kRequest)) return std::nullopt;
  uint64_t nonce;
  std::memcpy(&nonce, d.data() + 6, 8);
  return nonce;
}

std::optional<LocateAnswer> DecodeLocateAnswer(std::span<const uint8_t> d, uint64_t nonce) {
  if (!HasHeader(d, kAnswer)) return std::nullopt;
  uint64_t n;
  std::memcpy(&n, d.data() + 6, 8);
  if (n != nonce) return std::nullopt;
  LocateAnswer a;
  a.address.qpn = Get32(d.data() + 14);
  a.qkey = Get32(d.data() + 18);
  a.mtu = Get32(d.data() + 22);
  std::memcpy(a.address.gid.data(), d.data() + 26, 16);
  if (a.address.qpn == 0 || a.address.qpn > 0xffffff) return std::nullopt;
  return a;
}

bool IsLocateMessage(std::span<const uint8_t> d) {
  return d.size() >= 4 && std::memcmp(d.data(), kMagic, 4) == 0;
}

absl::StatusOr<LocateAnswer> Locate(const net::SocketAddress& server, Duration timeout) {
  Fd s(socket(server.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return net::ErrnoStatus(errno, "locator socket");
  if (connect(s.fd, server.sockaddr_ptr(), server.sockaddr_len()) != 0) {
    return net::ErrnoStatus(errno, absl::StrCat("connect to ", server.ToString()));
  }
  std::random_device rd;
  const uint64_t nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  const std::vector<uint8_t> req = EncodeLocateRequest(nonce);
  const int64_t start = MonotonicNs();
  const int64_t end = start + timeout.ns();
  int64_t wait_ns = 100'000'000;
  while (true) {
    if (send(s.fd, req.data(), req.size(), 0) < 0 && errno != ECONNREFUSED) {
      return net::ErrnoStatus(errno, absl::StrCat("locate ", server.ToString()));
    }
    const int64_t resend_at = std::min(end, MonotonicNs() + wait_ns);
    while (true) {
      const int64_t now = MonotonicNs();
      if (now >= resend_at) break;
      pollfd p{s.fd, POLLIN, 0};
      const int ms = static_cast<int>(std::max<int64_t>(1, (resend_at - now) / 1'000'000));
      if (poll(&p, 1, ms) <= 0) continue;
      uint8_t buf[256];
      const ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
      if (n < 0) {
        if (errno == ECONNREFUSED) {
          return absl::UnavailableError(absl::StrCat("connection refused by ", server.ToString(),
                                                     " (no verbs listener there)"));
        }
        continue;
      }
      std::optional<LocateAnswer> a =
          DecodeLocateAnswer(std::span<const uint8_t>(buf, static_cast<size_t>(n)), nonce);
      if (a) return *a;
    }
    if (MonotonicNs() >= end) {
      return absl::DeadlineExceededError(absl::StrCat("no answer from ", server.ToString(),
                                                      " within ", FormatDuration(timeout),
                                                      " (locating its queue pair)"));
    }
    wait_ns = std::min<int64_t>(wait_ns * 2, 1'000'000'000);
  }
}

uint32_t SourceAddressTowards(const net::SocketAddress& to) {
  Fd s(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return 0;
  if (connect(s.fd, to.sockaddr_ptr(), to.sockaddr_len()) != 0) return 0;
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return 0;
  return local.sin_addr.s_addr;
}

absl::StatusOr<std::unique_ptr<LocatorSocket>> LocatorSocket::Open(const net::SocketAddress& bind,
                                                                   bool timestamps) {
  net::UdpSocketFlags flags;
  flags.recv_ecn = false;
  flags.rx_timestamps = timestamps;
  LH_ASSIGN_OR_RETURN(int fd, net::OpenUdpSocket(bind.family(), flags));
  if (absl::Status s = net::BindSocket(fd, bind); !s.ok()) {
    close(fd);
    return s;
  }
  absl::StatusOr<net::SocketAddress> local = net::LocalAddress(fd);
  if (!local.ok()) {
    close(fd);
    return local.status();
  }
  net::SetSocketBuffer(fd, net::BufferKind::kReceive, kLocatorRecvBuffer);
  std::unique_ptr<LocatorSocket> l(new LocatorSocket(fd, *std::move(local)));
  l->buf_.resize(kMaxUdpPayload + 1);
  return l;
}

LocatorSocket::~LocatorSocket() {
  if (fd_ >= 0) close(fd_);
}

bool LocatorSocket::Read(LocatorDatagram* out) {
  while (true) {
    alignas(cmsghdr) uint8_t control[256];
    sockaddr_storage from{};
    iovec iov{buf_.data(), buf_.size()};
    msghdr m{};
    m.msg_name = &from;
    m.msg_namelen = sizeof(from);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd_, &m, 0);
    if (n < 0) return false;
    if ((m.msg_flags & MSG_TRUNC) != 0 || static_cast<size_t>(n) > kMaxUdpPayload) {
      ++truncated_;
      continue;
    }
    out->data = std::span<const uint8_t>(buf_.data(), static_cast<size_t>(n));
    out->from = net::SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&from), m.msg_namelen);
    const int64_t t = net::ReceivedRealtimeNs(m);
    out->kernel_time_ns = t > 0 ? t : 0;
    return true;
  }
}

absl::Status LocatorSocket::Send(std::span<const uint8_t> d, const net::SocketAddress& to) {
  if (sendto(fd_, d.data(), d.size(), 0, to.sockaddr_ptr(), to.sockaddr_len()) < 0) {
    return net::ErrnoStatus(errno, absl::StrCat("reply to ", to.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace longhaul::verbs
