#include "transport/emu/socket_util.h"

#include <fcntl.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace longhaul::emu {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

}  // namespace

SocketBuffers SetSocketBuffers(int fd, size_t bytes) {
  SocketBuffers b;
  b.requested = bytes;
  int v = bytes > static_cast<size_t>(INT32_MAX / 2) ? INT32_MAX / 2 : static_cast<int>(bytes);
  const bool rf = setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) == 0;
  if (!rf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  const bool sf = setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) == 0;
  if (!sf) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  b.forced = rf && sf;
  int got = 0;
  socklen_t len = sizeof(got);
  if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &len) == 0)
    b.rcvbuf = static_cast<size_t>(got) / 2;
  len = sizeof(got);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len) == 0)
    b.sndbuf = static_cast<size_t>(got) / 2;
  return b;
}

absl::StatusOr<int> MakeUdpSocket(int family) {
  int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket(UDP)");
  int one = 1;
  if (family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));
  } else {
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
  }
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
  return fd;
}

absl::Status BindSocket(int fd, const SocketAddress& addr) {
  if (bind(fd, addr.sockaddr_ptr(), addr.sockaddr_len()) != 0) {
    return Errno(absl::StrCat("bind ", addr.ToString()));
  }
  return absl::OkStatus();
}

absl::Status ConnectSocket(int fd, const SocketAddress& addr) {
  if (connect(fd, addr.sockaddr_ptr(), addr.sockaddr_len()) != 0 && errno != EINPROGRESS) {
    return Errno(absl::StrCat("connect ", addr.ToString()));
  }
  return absl::OkStatus();
}

uint64_t SocketDrops(int fd) {
  uint32_t info[SK_MEMINFO_VARS] = {0};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) != 0) return 0;
  if (len < (SK_MEMINFO_DROPS + 1) * sizeof(uint32_t)) return 0;
  return info[SK_MEMINFO_DROPS];
}

uint8_t ReceivedTos(const msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), c)) {
    if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
        (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
      const size_t n = c->cmsg_len - CMSG_LEN(0);
      if (n >= sizeof(int)) {
        int v;
        std::memcpy(&v, CMSG_DATA(c), sizeof(v));
        return static_cast<uint8_t>(v);
      }
      if (n >= 1) return *CMSG_DATA(c);
    }
  }
  return 0;
}

int64_t ReceivedRealtimeNs(const msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
        c->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
      timespec ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
  }
  return -1;
}

size_t WriteTosControl(int family, uint8_t tos, void* buf) {
  static_assert(CMSG_SPACE(sizeof(int)) <= kTosControlBytes);
  std::memset(buf, 0, CMSG_SPACE(sizeof(int)));
  auto* c = static_cast<cmsghdr*>(buf);
  c->cmsg_level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  c->cmsg_type = family == AF_INET6 ? IPV6_TCLASS : IP_TOS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int v = tos;
  std::memcpy(CMSG_DATA(c), &v, sizeof(v));
  return CMSG_SPACE(sizeof(int));
}

}  // namespace longhaul::emu
