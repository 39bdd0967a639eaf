#include "transport/net/socket_setup.h"

#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/net/errno_status.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif
#ifndef SO_SNDBUFFORCE
#define SO_SNDBUFFORCE 32
#endif

namespace longhaul::net {
namespace {

const char* Protocol(int fd) {
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM) return "TCP";
  return "UDP";
}

int Domain(int fd) {
  int domain = AF_UNSPEC;
  socklen_t len = sizeof(domain);
  getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
  return domain;
}

// Best-effort option: a refusal is logged, the socket works without it.
void SetFlag(int fd, int level, int name, const char* what, const char* without) {
  const int one = 1;
  if (setsockopt(fd, level, name, &one, sizeof(one)) != 0) {
    LOG(WARNING) << what << " refused (" << std::strerror(errno) << "); " << without;
  }
}

}  // namespace

absl::StatusOr<int> OpenUdpSocket(int family, const UdpSocketFlags& flags) {
  if (family != AF_INET && family != AF_INET6) {
    return absl::InvalidArgumentError(
        absl::StrCat("a UDP socket needs an IPv4 or IPv6 address (address family ", family, ")"));
  }
  const int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "cannot open a UDP socket");
  const bool v6 = family == AF_INET6;
  if (flags.recv_ecn) {
    SetFlag(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_RECVTCLASS : IP_RECVTOS,
            v6 ? "IPV6_RECVTCLASS" : "IP_RECVTOS", "received ECN marks are not seen");
  }
  if (flags.rx_timestamps) {
    SetFlag(fd, SOL_SOCKET, SO_TIMESTAMPNS, "SO_TIMESTAMPNS", "receive times are read times");
  }
  if (flags.rx_drop_counter) {
    SetFlag(fd, SOL_SOCKET, SO_RXQ_OVFL, "SO_RXQ_OVFL", "socket drops are not reported");
  }
  if (flags.pmtu_probe) {
    const int probe = v6 ? IPV6_PMTUDISC_PROBE : IP_PMTUDISC_PROBE;
    if (setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER,
                   &probe, sizeof(probe)) != 0) {
      absl::Status s =
          ErrnoStatus(errno, v6 ? "setsockopt IPV6_MTU_DISCOVER" : "setsockopt IP_MTU_DISCOVER");
      close(fd);
      return s;
    }
  }
  if (flags.reuse_port) {
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
      absl::Status s = ErrnoStatus(errno, "setsockopt SO_REUSEPORT");
      close(fd);
      return s;
    }
  }
  return fd;
}

absl::Status BindSocket(int fd, const SocketAddress& addr) {
  if (bind(fd, addr.sockaddr_ptr(), addr.sockaddr_len()) != 0) {
    const int err = errno;
    return ErrnoStatus(err, absl::StrCat("cannot bind ", Protocol(fd), " ", addr.ToString()));
  }
  return absl::OkStatus();
}

absl::Status ConnectSocket(int fd, const SocketAddress& addr) {
  if (connect(fd, addr.sockaddr_ptr(), addr.sockaddr_len()) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    return ErrnoStatus(
        err, absl::StrCat("cannot connect ", Protocol(fd), " socket to ", addr.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<SocketAddress> LocalAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoStatus(errno, "getsockname");
  }
  return SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

BufferGrant SetSocketBuffer(int fd, BufferKind kind, size_t bytes, bool force) {
  const int opt = kind == BufferKind::kReceive ? SO_RCVBUF : SO_SNDBUF;
  const int force_opt = kind == BufferKind::kReceive ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;
  BufferGrant g;
  g.requested = bytes;
  const int v = static_cast<int>(std::min<size_t>(bytes, INT32_MAX / 2));
  g.forced = force && setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) == 0;
  if (!g.forced) setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
  int got = 0;
  socklen_t len = sizeof(got);
  if (getsockopt(fd, SOL_SOCKET, opt, &got, &len) == 0 && got > 0) {
    g.kernel_bytes = static_cast<size_t>(got);
  }
  return g;
}

SocketBuffers SetSocketBuffers(int fd, size_t bytes, bool force) {
  const BufferGrant r = SetSocketBuffer(fd, BufferKind::kReceive, bytes, force);
  const BufferGrant s = SetSocketBuffer(fd, BufferKind::kSend, bytes, force);
  SocketBuffers b;
  b.requested = bytes;
  b.rcvbuf = r.usable();
  b.sndbuf = s.usable();
  b.forced = r.forced && s.forced;
  return b;
}

bool ProbeGso(int fd) {
  const int zero = 0;
  return setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
}

bool EnableGro(int fd) {
  const int one = 1;
  return setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
}

uint64_t SocketDrops(int fd) {
  uint32_t info[SK_MEMINFO_VARS] = {0};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) != 0) return 0;
  if (len < (SK_MEMINFO_DROPS + 1) * sizeof(uint32_t)) return 0;
  return info[SK_MEMINFO_DROPS];
}

int PathMtu(int fd) {
  const bool v6 = Domain(fd) == AF_INET6;
  int mtu = 0;
  socklen_t len = sizeof(mtu);
  if (getsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU : IP_MTU, &mtu, &len) != 0) {
    return 0;
  }
  return mtu;
}

}  // namespace longhaul::net
