// Small socket helpers shared by the emulator's UDP relay and its tools and tests.
// Errors are absl::Status with the failing call and errno text.
//
// Thread-safety: pure functions of their arguments (and the kernel objects named).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/emu/socket_address.h"

namespace longhaul::emu {

// The receive and send buffer sizes a socket ended up with.
struct SocketBuffers {
  size_t requested = 0;
  size_t rcvbuf = 0;  // as the kernel reports it, halved (the kernel doubles the request)
  size_t sndbuf = 0;
  bool forced = false;  // SO_RCVBUFFORCE/SO_SNDBUFFORCE succeeded (CAP_NET_ADMIN)
  bool capped() const { return rcvbuf < requested || sndbuf < requested; }
};

// Sets SO_RCVBUF and SO_SNDBUF to `bytes`: with the *FORCE variants when permitted (root
// or CAP_NET_ADMIN, not limited by net.core.rmem_max/wmem_max), otherwise the plain ones
// (silently capped by the kernel at rmem_max/wmem_max). Reports what the kernel granted.
SocketBuffers SetSocketBuffers(int fd, size_t bytes);

// A non-blocking, close-on-exec UDP socket of `family` (AF_INET or AF_INET6) that reports
// each datagram's TOS / traffic class (IP_RECVTOS / IPV6_RECVTCLASS) and its kernel
// arrival time (SO_TIMESTAMPNS).
absl::StatusOr<int> MakeUdpSocket(int family);

// Binds `fd` to `addr`.
absl::Status BindSocket(int fd, const SocketAddress& addr);
// Connects `fd` to `addr` (UDP: fixes the peer; TCP non-blocking: may be in progress).
absl::Status ConnectSocket(int fd, const SocketAddress& addr);

// Datagrams the kernel dropped at this socket so far (receive buffer full and the
// like), from SO_MEMINFO; 0 if unavailable.
uint64_t SocketDrops(int fd);

// The TOS / traffic-class byte of a received datagram (IP_TOS or IPV6_TCLASS control
// message), 0 when absent.
uint8_t ReceivedTos(const msghdr& msg);

// The kernel's arrival time of a received datagram (SO_TIMESTAMPNS: CLOCK_REALTIME, in
// ns), or -1 when absent.
int64_t ReceivedRealtimeNs(const msghdr& msg);

// Writes an IP_TOS (AF_INET) or IPV6_TCLASS (AF_INET6) control message for `tos` into
// `buf` (at least kTosControlBytes, aligned for cmsghdr) and returns its length.
inline constexpr size_t kTosControlBytes = 32;
size_t WriteTosControl(int family, uint8_t tos, void* buf);

}  // namespace longhaul::emu
