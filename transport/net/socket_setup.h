// Opening UDP sockets and setting their options, once for the tree: the UDP driver's
// batch socket (udp_socket.h), the emulator's relay and the prober all open their sockets
// here, so buffer sizes, ECN, timestamps and the offloads are set up the same way
// everywhere. Descriptors are plain ints owned by the caller (close(2) them); errors are
// converted by errno_status.h.
//
// Thread-safety: functions of the descriptor passed; one thread per descriptor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/net/socket_address.h"

namespace longhaul::net {

// The kernel's limit on segments per UDP GSO send (UDP_MAX_SEGMENTS of older kernels).
inline constexpr size_t kMaxGsoSegments = 64;
// The largest UDP payload of one send over IPv4 (65535 - 20 - 8): a GSO message's bound.
inline constexpr size_t kMaxGsoBytes = 65507;

// What OpenUdpSocket turns on.
struct UdpSocketFlags {
  // IP_RECVTOS / IPV6_RECVTCLASS: each datagram's TOS byte (ECN) as a control message.
  bool recv_ecn = true;
  // SO_TIMESTAMPNS: each datagram's kernel arrival time (CLOCK_REALTIME).
  bool rx_timestamps = false;
  // SO_RXQ_OVFL: the socket's drop counter with each datagram.
  bool rx_drop_counter = false;
  // IP_MTU_DISCOVER / IPV6_MTU_DISCOVER = *_PMTUDISC_PROBE: DF set and the kernel's
  // cached path MTU ignored, so datagrams larger than the path are dropped on the path
  // (or refused with EMSGSIZE above the interface MTU) instead of being fragmented.
  bool pmtu_probe = false;
  // SO_REUSEPORT, before bind: several sockets of this process (one per engine) share a
  // port; must succeed.
  bool reuse_port = false;
};

// A non-blocking, close-on-exec UDP socket of `family` (AF_INET or AF_INET6) with
// `flags`. recv_ecn, rx_timestamps and rx_drop_counter are best effort (a refusal is
// logged and the socket works without); pmtu_probe must succeed. Errors: ErrnoStatus of
// the failing socket()/setsockopt() call; InvalidArgument for another family.
absl::StatusOr<int> OpenUdpSocket(int family, const UdpSocketFlags& flags = {});

// Binds `fd` to `addr`. Errors (ErrnoStatus): "cannot bind UDP 0.0.0.0:5201: address
// already in use" (AlreadyExists), ... ("TCP" for a stream socket).
absl::Status BindSocket(int fd, const SocketAddress& addr);
// Connects `fd` to `addr`: UDP fixes the peer; a non-blocking TCP connect may still be in
// progress (EINPROGRESS is success). Errors: "cannot connect UDP socket to ADDR: ...".
absl::Status ConnectSocket(int fd, const SocketAddress& addr);
// The address `fd` is bound to (getsockname).
absl::StatusOr<SocketAddress> LocalAddress(int fd);

// ---- buffers ----

enum class BufferKind { kReceive, kSend };

// One buffer as the kernel granted it.
struct BufferGrant {
  size_t requested = 0;     // bytes asked for
  size_t kernel_bytes = 0;  // as getsockopt reports it (the kernel doubles the request)
  bool forced = false;      // the FORCE option was permitted (CAP_NET_ADMIN)
  size_t usable() const { return kernel_bytes / 2; }
  bool capped() const { return usable() < requested; }
};

// Sets SO_RCVBUF (kReceive) or SO_SNDBUF (kSend) to `bytes` (at most INT32_MAX / 2, the
// kernel's own limit). With `force`, SO_RCVBUFFORCE / SO_SNDBUFFORCE first: permitted with
// CAP_NET_ADMIN and not limited by net.core.rmem_max / wmem_max; where it is not
// permitted (or without `force`) the plain option, which the kernel silently caps at
// rmem_max / wmem_max. Reads back what the kernel granted.
BufferGrant SetSocketBuffer(int fd, BufferKind kind, size_t bytes, bool force = true);

// Both buffers of one socket at one size, as the emulator reports them.
struct SocketBuffers {
  size_t requested = 0;
  size_t rcvbuf = 0;  // usable bytes granted (BufferGrant::usable)
  size_t sndbuf = 0;
  bool forced = false;  // both FORCE options were permitted
  bool capped() const { return rcvbuf < requested || sndbuf < requested; }
};
SocketBuffers SetSocketBuffers(int fd, size_t bytes, bool force = true);

// ---- offloads and counters ----

// UDP GSO: true when the kernel has UDP_SEGMENT (probed by setting a zero segment size,
// which changes nothing). Sends then pass the segment size per message
// (control_messages.h WriteSegmentControl).
bool ProbeGso(int fd);
// UDP GRO: asks the kernel to coalesce runs of datagrams from one source into one
// receive (split them with gro.h); true when it agreed.
bool EnableGro(int fd);

// Datagrams the kernel dropped at this socket so far (receive buffer full and the
// like), from SO_MEMINFO; 0 if unavailable.
uint64_t SocketDrops(int fd);

// IP_MTU / IPV6_MTU of a connected socket: the kernel's path-MTU view (the interface MTU
// for a fresh route). 0 if unknown.
int PathMtu(int fd);

}  // namespace longhaul::net
