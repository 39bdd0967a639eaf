#include "transport/drivers/udp/udp_socket.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/drivers/udp/gro.h"

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

namespace longhaul::udp {
namespace {

// The kernel's limit on segments per GSO send (UDP_MAX_SEGMENTS).
constexpr size_t kMaxGsoSegments = 64;
// Largest UDP payload of one send (IPv4: 65535 - 20 - 8).
constexpr size_t kMaxGsoBytes = 65507;
constexpr size_t kTxControlSize = 64;

std::string ErrnoText(int e) { return std::string(strerror(e)); }

// Sets SO_RCVBUF/SO_SNDBUF, tries the FORCE variant (works with CAP_NET_ADMIN), and reads
// back what the kernel granted (it reports twice the usable size).
ByteCount SetBuffer(int fd, int opt, int force_opt, ByteCount want, bool* capped) {
  int v = static_cast<int>(std::min<ByteCount>(want, 1u << 30));
  setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
  int got = 0;
  socklen_t len = sizeof(got);
  getsockopt(fd, SOL_SOCKET, opt, &got, &len);
  if (static_cast<ByteCount>(got) < 2 * static_cast<ByteCount>(v)) {
    setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v));
    len = sizeof(got);
    getsockopt(fd, SOL_SOCKET, opt, &got, &len);
  }
  *capped = static_cast<ByteCount>(got) < 2 * static_cast<ByteCount>(v);
  return static_cast<ByteCount>(got);
}

Ecn EcnFromTos(int tos) { return static_cast<Ecn>(tos & 3); }

}  // namespace

void PlanGsoGroups(std::span<const TxDatagram> d, size_t max_segments, size_t max_bytes,
                   std::vector<GsoGroup>* groups) {
  groups->clear();
  size_t i = 0;
  while (i < d.size()) {
    GsoGroup g;
    g.first = i;
    g.count = 1;
    g.segment = d[i].len;
    size_t bytes = d[i].len;
    size_t j = i + 1;
    // A group continues while datagrams have the group's size; one shorter datagram may
    // end it.
    while (j < d.size() && g.count < max_segments && d[j].ecn == d[i].ecn &&
           (d[j].dest == d[i].dest ||
            (d[j].dest != nullptr && d[i].dest != nullptr && *d[j].dest == *d[i].dest)) &&
           d[j].len <= g.segment && bytes + d[j].len <= max_bytes) {
      bytes += d[j].len;
      ++g.count;
      ++j;
      if (d[j - 1].len < g.segment) break;
    }
    groups->push_back(g);
    i = j;
  }
}

RxBatch::RxBatch(size_t messages)
    : messages_(messages),
      buffers_(messages * kBufferSize),
      control_(messages * kControlSize),
      names_(messages),
      sources_(messages) {
  datagrams_.reserve(messages * 8);
  msgs_.resize(messages);
  iov_.resize(messages);
  for (size_t i = 0; i < messages; ++i) {
    iov_[i].iov_base = &buffers_[i * kBufferSize];
    iov_[i].iov_len = kBufferSize;
    msghdr& h = msgs_[i].msg_hdr;
    std::memset(&h, 0, sizeof(h));
    h.msg_name = &names_[i];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_iov = &iov_[i];
    h.msg_iovlen = 1;
    h.msg_control = &control_[i * kControlSize];
    h.msg_controllen = kControlSize;
  }
}

UdpSocket::UdpSocket(boost::asio::io_context& io) : socket_(io) {}

UdpSocket::~UdpSocket() {
  boost::system::error_code ec;
  socket_.close(ec);
}

absl::StatusOr<std::unique_ptr<UdpSocket>> UdpSocket::Open(boost::asio::io_context& io,
                                                           const SocketAddress& bind,
                                                           const SocketAddress& connect_to,
                                                           const SocketOptions& options) {
  std::unique_ptr<UdpSocket> s(new UdpSocket(io));
  boost::system::error_code ec;
  const bool v6 = bind.family() == AF_INET6;
  s->socket_.open(v6 ? boost::asio::ip::udp::v6() : boost::asio::ip::udp::v4(), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot open a UDP socket: ", ec.message()));
  }
  s->fd_ = s->socket_.native_handle();
  s->socket_.non_blocking(true, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot make the socket non-blocking: ", ec.message()));
  if (::bind(s->fd_, bind.sockaddr_ptr(), bind.len()) != 0) {
    int e = errno;
    if (e == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrCat("cannot bind UDP ", bind.ToString(), ": address already in use"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot bind UDP ", bind.ToString(), ": ", ErrnoText(e)));
  }
  if (connect_to.valid()) {
    if (::connect(s->fd_, connect_to.sockaddr_ptr(), connect_to.len()) != 0) {
      int e = errno;
      return absl::UnavailableError(
          absl::StrCat("cannot connect UDP socket to ", connect_to.ToString(), ": ", ErrnoText(e)));
    }
    s->peer_ = connect_to;
  }
  sockaddr_storage local;
  socklen_t len = sizeof(local);
  if (getsockname(s->fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    s->local_ = SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&local), len);
  }
  absl::Status st = s->Configure(options);
  if (!st.ok()) return st;
  return s;
}

absl::Status UdpSocket::Configure(const SocketOptions& o) {
  info_.recv_buffer =
      SetBuffer(fd_, SO_RCVBUF, SO_RCVBUFFORCE, o.recv_buffer, &info_.recv_buffer_capped);
  info_.send_buffer =
      SetBuffer(fd_, SO_SNDBUF, SO_SNDBUFFORCE, o.send_buffer, &info_.send_buffer_capped);
  const int one = 1;
  if (local_.family() == AF_INET6) {
    setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));
  } else {
    setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
  }
  if (o.gso) {
    // Probe: setting a zero segment size is accepted exactly when the kernel has GSO.
    int zero = 0;
    info_.gso = setsockopt(fd_, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
  }
  if (o.gro) {
    info_.gro = setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  }
  if (o.rx_timestamps && setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0) {
    LOG(WARNING) << "SO_TIMESTAMPNS refused on " << local_.ToString() << " (" << ErrnoText(errno)
                 << "); receive times are read times";
  }
  return absl::OkStatus();
}

SendResult UdpSocket::Send(std::span<const TxDatagram> batch) {
  SendResult r = SendGroups(batch, info_.gso);
  return r;
}

SendResult UdpSocket::SendGroups(std::span<const TxDatagram> batch, bool use_gso) {
  SendResult r;
  size_t done = 0;  // datagrams of `batch` sent or dropped
  while (done < batch.size()) {
    std::span<const TxDatagram> rest = batch.subspan(done);
    PlanGsoGroups(rest, use_gso ? kMaxGsoSegments : 1, kMaxGsoBytes, &groups_);
    const size_t n = groups_.size();
    msgs_.resize(n);
    iovs_.resize(rest.size());
    control_.assign(n * kTxControlSize, 0);
    for (size_t g = 0; g < n; ++g) {
      const GsoGroup& gr = groups_[g];
      for (size_t k = 0; k < gr.count; ++k) {
        const TxDatagram& d = rest[gr.first + k];
        iovs_[gr.first + k].iov_base = const_cast<uint8_t*>(d.data);
        iovs_[gr.first + k].iov_len = d.len;
      }
      msghdr& h = msgs_[g].msg_hdr;
      std::memset(&h, 0, sizeof(h));
      const TxDatagram& first = rest[gr.first];
      if (!connected() && first.dest != nullptr) {
        h.msg_name = const_cast<sockaddr*>(first.dest->sockaddr_ptr());
        h.msg_namelen = first.dest->len();
      }
      h.msg_iov = &iovs_[gr.first];
      h.msg_iovlen = gr.count;
      uint8_t* ctl = &control_[g * kTxControlSize];
      h.msg_control = ctl;
      h.msg_controllen = kTxControlSize;
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      size_t used = 0;
      if (gr.count > 1) {
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = static_cast<uint16_t>(gr.segment);
        std::memcpy(CMSG_DATA(c), &seg, sizeof(seg));
        used += CMSG_SPACE(sizeof(uint16_t));
        c = CMSG_NXTHDR(&h, c);
      }
      if (first.ecn != Ecn::kNotEct) {
        int tos = static_cast<int>(first.ecn);
        if (local_.family() == AF_INET6) {
          c->cmsg_level = IPPROTO_IPV6;
          c->cmsg_type = IPV6_TCLASS;
        } else {
          c->cmsg_level = IPPROTO_IP;
          c->cmsg_type = IP_TOS;
        }
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &tos, sizeof(tos));
        used += CMSG_SPACE(sizeof(int));
      }
      h.msg_controllen = used;
      if (used == 0) h.msg_control = nullptr;
    }
    size_t g = 0;
    while (g < n) {
      ++send_syscalls_;
      int k = sendmmsg(fd_, &msgs_[g], static_cast<unsigned>(n - g), MSG_DONTWAIT);
      if (k > 0) {
        for (int x = 0; x < k; ++x) {
          const GsoGroup& gr = groups_[g + x];
          if (gr.count > 1) ++gso_messages_;
          r.sent += gr.count;
          done += gr.count;
        }
        g += static_cast<size_t>(k);
        continue;
      }
      const int e = k < 0 ? errno : EAGAIN;
      if (e == EINTR) continue;
      if (e == EAGAIN || e == EWOULDBLOCK) {
        r.would_block = true;
        return r;
      }
      const GsoGroup& gr = groups_[g];
      if ((e == EIO || e == EINVAL) && gr.count > 1) {
        // The kernel or the device refuses this GSO send (no checksum offload, segment
        // larger than the route MTU, ...): stop using GSO on this socket.
        LOG(WARNING) << "UDP GSO send refused on " << local_.ToString() << " (" << ErrnoText(e)
                     << "); sending datagrams one by one from now on";
        info_.gso = false;
        use_gso = false;
        break;  // re-plan the rest without GSO
      }
      if (e == ECONNREFUSED) {
        const SocketAddress& to = connected() ? peer_ : *rest[gr.first].dest;
        r.error = absl::UnavailableError(absl::StrCat("connection refused by ", to.ToString(),
                                                      ": nothing listens on that UDP port"));
        // The pending ICMP error was consumed; drop this group and carry on.
      } else if (e == EMSGSIZE) {
        r.error = absl::InvalidArgumentError(
            absl::StrCat("datagram of ", rest[gr.first].len, " bytes is too large for the path (",
                         ErrnoText(e), "); use a smaller --mtu or --segment"));
      } else {
        r.error = absl::UnavailableError(absl::StrCat("UDP send failed: ", ErrnoText(e)));
      }
      r.dropped += gr.count;
      done += gr.count;
      ++g;
    }
  }
  return r;
}

RecvResult UdpSocket::Receive(RxBatch* b) {
  RecvResult r;
  b->datagrams_.clear();
  std::vector<mmsghdr>& msgs = b->msgs_;
  for (size_t i = 0; i < b->messages_; ++i) {
    msghdr& h = msgs[i].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_controllen = RxBatch::kControlSize;
    h.msg_flags = 0;
  }
  int k;
  do {
    ++recv_syscalls_;
    k = recvmmsg(fd_, msgs.data(), static_cast<unsigned>(b->messages_), MSG_DONTWAIT, nullptr);
  } while (k < 0 && errno == EINTR);
  if (k < 0) {
    int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) return r;
    if (e == ECONNREFUSED) {
      r.error = absl::UnavailableError(absl::StrCat("connection refused by ", peer_.ToString(),
                                                    ": nothing listens on that UDP port"));
    } else {
      r.error = absl::UnavailableError(absl::StrCat("UDP receive failed: ", ErrnoText(e)));
    }
    return r;
  }
  r.messages = static_cast<size_t>(k);
  b->last_messages_ = r.messages;
  for (size_t i = 0; i < r.messages; ++i) {
    const msghdr& h = msgs[i].msg_hdr;
    if (h.msg_flags & MSG_TRUNC) {
      ++r.truncated;
      continue;
    }
    int gso_size = 0;
    int64_t kernel_ns = 0;
    Ecn ecn = Ecn::kNotEct;
    for (cmsghdr* c = CMSG_FIRSTHDR(const_cast<msghdr*>(&h)); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        std::memcpy(&gso_size, CMSG_DATA(c), sizeof(int));
      } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        uint8_t tos = 0;
        std::memcpy(&tos, CMSG_DATA(c), 1);
        ecn = EcnFromTos(tos);
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        int tclass = 0;
        std::memcpy(&tclass, CMSG_DATA(c), sizeof(int));
        ecn = EcnFromTos(tclass);
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts{};
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        kernel_ns = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
      }
    }
    b->sources_[i] =
        SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&b->names_[i]), h.msg_namelen);
    const uint8_t* base = &b->buffers_[i * RxBatch::kBufferSize];
    GroSegments segs(msgs[i].msg_len, gso_size > 0 ? static_cast<size_t>(gso_size) : 0);
    if (segs.count() > 1) ++gro_messages_;
    for (size_t s = 0; s < segs.count(); ++s) {
      GroSegment g = segs[s];
      b->datagrams_.push_back(RxDatagram{std::span<const uint8_t>(base + g.offset, g.length), ecn,
                                         static_cast<uint32_t>(i), kernel_ns});
    }
  }
  r.datagrams = b->datagrams_.size();
  return r;
}

}  // namespace longhaul::udp
