#include "tuner/probe/udp_socket.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport/base/clock.h"
#include "transport/base/status.h"
#include "transport/net/control_messages.h"
#include "transport/net/errno_status.h"

namespace longhaul::tuner::probe {
namespace {

int PollMs(Duration d) {
  if (d <= Duration::Zero()) return 0;
  const int64_t ms = (d.ns() + 999999) / 1000000;
  return static_cast<int>(std::min<int64_t>(ms, 60000));
}

// Kernel receive timestamps (without them arrival times are read times) and the socket's
// drop counter with every datagram, so a receiver can tell its own drops from the path's.
net::UdpSocketFlags ProbeFlags(bool pmtu_probe) {
  net::UdpSocketFlags f;
  f.recv_ecn = false;
  f.rx_timestamps = true;
  f.rx_drop_counter = true;
  f.pmtu_probe = pmtu_probe;
  return f;
}

}  // namespace

int64_t NowRealtimeNs() { return RealtimeNs(); }

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

UdpSocket::UdpSocket(UdpSocket&& o) noexcept : fd_(o.fd_), peer_(o.peer_) { o.fd_ = -1; }

UdpSocket& UdpSocket::operator=(UdpSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    peer_ = o.peer_;
    o.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<UdpSocket> UdpSocket::Bind(const net::SocketAddress& addr) {
  LH_ASSIGN_OR_RETURN(int fd, net::OpenUdpSocket(addr.family(), ProbeFlags(false)));
  UdpSocket s(fd);
  LH_RETURN_IF_ERROR(net::BindSocket(s.fd_, addr));
  return s;
}

absl::StatusOr<UdpSocket> UdpSocket::Connect(const net::SocketAddress& peer) {
  LH_ASSIGN_OR_RETURN(int fd, net::OpenUdpSocket(peer.family(), ProbeFlags(true)));
  UdpSocket s(fd, peer);
  LH_RETURN_IF_ERROR(net::ConnectSocket(s.fd_, peer));
  return s;
}

net::SocketBuffers UdpSocket::SetBuffers(size_t bytes) {
  return net::SetSocketBuffers(fd_, bytes, /*force=*/false);
}

absl::Status UdpSocket::Send(std::span<const uint8_t> d) {
  if (send(fd_, d.data(), d.size(), 0) < 0) return net::SendErrorStatus(errno, d.size(), peer_);
  return absl::OkStatus();
}

absl::Status UdpSocket::SendTo(std::span<const uint8_t> d, const net::SocketAddress& to) {
  if (sendto(fd_, d.data(), d.size(), 0, to.sockaddr_ptr(), to.sockaddr_len()) < 0) {
    return net::SendErrorStatus(errno, d.size(), to);
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
    return net::SendErrorStatus(errno, n ? ds[0].size() : 0, peer_);
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
    return net::ErrnoStatus(errno, "poll");
  }
  if (rc == 0) return size_t{0};
  constexpr size_t kMax = 64;
  const size_t n = std::min(bufs->size(), kMax);
  mmsghdr msgs[kMax];
  iovec iov[kMax];
  sockaddr_storage from[kMax];
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
    return net::ReceiveErrorStatus(errno, peer_);
  }
  const int64_t read_time = NowRealtimeNs();
  for (int i = 0; i < got; ++i) {
    const msghdr& h = msgs[i].msg_hdr;
    const net::ReceivedControl ctl = net::ParseReceivedControl(h);
    Received r;
    r.length = msgs[i].msg_len;
    r.from = net::SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&from[i]),
                                              h.msg_namelen);
    r.at_ns = ctl.realtime_ns >= 0 ? ctl.realtime_ns : read_time;
    r.socket_drops = ctl.drop_counter;
    out->push_back(r);
  }
  return static_cast<size_t>(got);
}

uint16_t UdpSocket::LocalPort() const {
  absl::StatusOr<net::SocketAddress> a = net::LocalAddress(fd_);
  return a.ok() ? a->port() : 0;
}

}  // namespace longhaul::tuner::probe
