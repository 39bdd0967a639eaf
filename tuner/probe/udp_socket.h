// The probe's UDP socket: a thin non-blocking socket with a poll()-based receive for the
// prober's and the responder's loops. It is opened and set up with transport/net
// (socket_setup.h: SO_TIMESTAMPNS, SO_RXQ_OVFL, DF probing; errno -> absl::Status in
// errno_status.h); what is its own is the loop shape the probe needs: wait up to a
// timeout, read a batch with one timestamp per datagram, never coalesce (no GRO: arrival
// spacing is what the probe measures).
//
// Received datagrams carry the kernel's receive timestamp (SO_TIMESTAMPNS, CLOCK_REALTIME)
// when available, so arrival spacing is measured where the packet arrived, not where a
// busy process happened to read it. Send timestamps use the same clock (NowRealtimeNs).
//
// The prober's socket is connected to the target and sets IP_MTU_DISCOVER =
// IP_PMTUDISC_PROBE: DF set, the kernel's cached path MTU ignored, so datagrams larger
// than the path are dropped on the path (or refused locally with EMSGSIZE above the
// interface MTU) instead of being fragmented.
//
// Not thread-safe: one thread uses a socket. Movable, closes on destruction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/net/socket_address.h"
#include "transport/net/socket_setup.h"

namespace longhaul::tuner::probe {

// CLOCK_REALTIME in nanoseconds (the clock of SO_TIMESTAMPNS).
int64_t NowRealtimeNs();

struct Received {
  size_t length = 0;
  int64_t at_ns = 0;  // kernel receive timestamp (or read time), CLOCK_REALTIME
  net::SocketAddress from;
  // Datagrams the socket has dropped so far for lack of buffer (SO_RXQ_OVFL; cumulative,
  // wraps at 2^32); 0 if the kernel does not report it.
  uint32_t socket_drops = 0;
};

class UdpSocket {
 public:
  UdpSocket() = default;
  ~UdpSocket();
  UdpSocket(UdpSocket&& o) noexcept;
  UdpSocket& operator=(UdpSocket&& o) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  // A socket bound to `addr` (port 0: any free port). Errors: net::BindSocket's
  // ("cannot bind UDP ...: address already in use", AlreadyExists).
  static absl::StatusOr<UdpSocket> Bind(const net::SocketAddress& addr);
  // A socket connected to `peer`, with DF probing (IP_PMTUDISC_PROBE).
  static absl::StatusOr<UdpSocket> Connect(const net::SocketAddress& peer);

  // Best effort: asks for `bytes` of send and receive buffer with the plain options, so
  // the kernel clamps them to net.core.{w,r}mem_max (no FORCE); returns what it granted.
  net::SocketBuffers SetBuffers(size_t bytes);

  // Sends on a connected socket. Errors (net::SendErrorStatus): EMSGSIZE ->
  // FailedPrecondition ("... too large ..."); a full socket buffer -> Unavailable;
  // ECONNREFUSED (ICMP port unreachable) -> Unavailable naming it.
  absl::Status Send(std::span<const uint8_t> d);
  absl::Status SendTo(std::span<const uint8_t> d, const net::SocketAddress& to);
  // Sends several datagrams (sendmmsg) on a connected socket; returns how many went out.
  absl::StatusOr<size_t> SendBatch(std::span<const std::span<const uint8_t>> ds);
  // Waits until writable, up to `timeout`.
  bool WaitWritable(Duration timeout);

  // Receives up to `max` datagrams into `bufs` (each `cap` bytes), waiting at most
  // `timeout` for the first. Returns the number received (0 on timeout).
  absl::StatusOr<size_t> Receive(std::vector<std::vector<uint8_t>>* bufs, size_t cap,
                                 std::vector<Received>* out, Duration timeout);

  // IP_MTU of a connected socket (the kernel's path-MTU view; the interface MTU for a
  // fresh route). 0 if unknown.
  int PathMtu() const { return net::PathMtu(fd_); }
  uint16_t LocalPort() const;
  int fd() const { return fd_; }

 private:
  explicit UdpSocket(int fd, net::SocketAddress peer = {}) : fd_(fd), peer_(peer) {}
  int fd_ = -1;
  net::SocketAddress peer_;  // the connected peer (for error messages)
};

}  // namespace longhaul::tuner::probe
