#include "transport/net/udp_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"
#include "transport/net/control_messages.h"
#include "transport/net/errno_status.h"
#include "transport/net/gro.h"
#include "transport/net/socket_setup.h"

namespace longhaul::net {
namespace {

// Room for a UDP_SEGMENT and a TOS control message.
constexpr size_t kTxControlSize = 64;
static_assert(kSegmentControlBytes + kTosControlBytes <= kTxControlSize);

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
  UdpSocketFlags flags;
  flags.rx_timestamps = options.rx_timestamps;
  flags.reuse_port = options.reuse_port;
  LH_ASSIGN_OR_RETURN(int fd, OpenUdpSocket(bind.family(), flags));
  boost::system::error_code ec;
  const bool v6 = bind.family() == AF_INET6;
  s->socket_.assign(v6 ? boost::asio::ip::udp::v6() : boost::asio::ip::udp::v4(), fd, ec);
  if (ec) {
    close(fd);
    return absl::InternalError(absl::StrCat("cannot hand the UDP socket to Asio: ", ec.message()));
  }
  s->fd_ = fd;
  s->socket_.non_blocking(true, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot make the socket non-blocking: ", ec.message()));
  LH_RETURN_IF_ERROR(BindSocket(s->fd_, bind));
  if (connect_to.valid()) {
    LH_RETURN_IF_ERROR(ConnectSocket(s->fd_, connect_to));
    s->peer_ = connect_to;
  }
  if (absl::StatusOr<SocketAddress> local = LocalAddress(s->fd_); local.ok()) s->local_ = *local;
  s->Configure(options);
  return s;
}

void UdpSocket::Configure(const SocketOptions& o) {
  const BufferGrant r = SetSocketBuffer(fd_, BufferKind::kReceive, o.recv_buffer);
  const BufferGrant w = SetSocketBuffer(fd_, BufferKind::kSend, o.send_buffer);
  info_.recv_buffer = r.kernel_bytes;
  info_.send_buffer = w.kernel_bytes;
  info_.recv_buffer_capped = r.capped();
  info_.send_buffer_capped = w.capped();
  if (o.gso) info_.gso = ProbeGso(fd_);
  if (o.gro) info_.gro = EnableGro(fd_);
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
        h.msg_namelen = first.dest->sockaddr_len();
      }
      h.msg_iov = &iovs_[gr.first];
      h.msg_iovlen = gr.count;
      uint8_t* ctl = &control_[g * kTxControlSize];
      size_t used = 0;
      if (gr.count > 1) used += WriteSegmentControl(static_cast<uint16_t>(gr.segment), ctl);
      if (first.ecn != Ecn::kNotEct) {
        used += WriteTosControl(local_.family(), static_cast<uint8_t>(first.ecn), ctl + used);
      }
      h.msg_control = used > 0 ? ctl : nullptr;
      h.msg_controllen = used;
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
        LOG(WARNING) << "UDP GSO send refused on " << local_.ToString() << " (" << strerror(e)
                     << "); sending datagrams one by one from now on";
        info_.gso = false;
        use_gso = false;
        break;  // re-plan the rest without GSO
      }
      // ECONNREFUSED: the pending ICMP error was consumed; drop this group and carry on.
      const TxDatagram& d = rest[gr.first];
      r.error = SendErrorStatus(e, d.len, connected() || d.dest == nullptr ? peer_ : *d.dest);
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
    r.error = ReceiveErrorStatus(e, peer_);
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
    const ReceivedControl ctl = ParseReceivedControl(h);
    const Ecn ecn = EcnFromTos(ctl.tos);
    const int64_t kernel_ns = ctl.realtime_ns > 0 ? ctl.realtime_ns : 0;
    b->sources_[i] =
        SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&b->names_[i]), h.msg_namelen);
    const uint8_t* base = &b->buffers_[i * RxBatch::kBufferSize];
    GroSegments segs(msgs[i].msg_len, ctl.gro_segment);
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

}  // namespace longhaul::net
