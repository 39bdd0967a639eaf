// Control messages (cmsg) of UDP sockets: reading what the kernel attached to a received
// datagram (TOS byte, arrival time, GRO segment size, drop counter) and writing what a
// send carries (TOS byte for ECN, UDP_SEGMENT for GSO). One parser and one set of writers
// for the driver, the emulator and the prober.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace longhaul::net {

// What the kernel attached to one received message (socket_setup.h turns the options on).
struct ReceivedControl {
  // IP_TOS / IPV6_TCLASS byte (UdpSocketFlags::recv_ecn); the ECN codepoint is its low
  // two bits. 0 when absent.
  uint8_t tos = 0;
  // SO_TIMESTAMPNS arrival time (UdpSocketFlags::rx_timestamps), CLOCK_REALTIME in ns;
  // -1 when absent.
  int64_t realtime_ns = -1;
  // UDP_GRO segment size: the message holds several datagrams of this size (the last may
  // be shorter; gro.h splits them). 0 when absent: one datagram.
  uint32_t gro_segment = 0;
  // SO_RXQ_OVFL (UdpSocketFlags::rx_drop_counter): datagrams the socket dropped so far
  // for lack of buffer, cumulative, wrapping at 2^32. The kernel attaches it only once
  // the socket has dropped something.
  bool has_drop_counter = false;
  uint32_t drop_counter = 0;
};

// Walks the control messages of a message recvmsg/recvmmsg filled.
ReceivedControl ParseReceivedControl(const msghdr& msg);

// Shorthands of ParseReceivedControl for one field.
uint8_t ReceivedTos(const msghdr& msg);         // 0 when absent
int64_t ReceivedRealtimeNs(const msghdr& msg);  // -1 when absent

// Writers: each writes one control message at `buf` (aligned for cmsghdr, at least the
// given size, zeroed by the writer) and returns the bytes used, a multiple of the cmsg
// alignment, so a second message may follow at buf + returned bytes.
//
// IP_TOS (AF_INET) or IPV6_TCLASS (AF_INET6) carrying `tos` (ECN in the low two bits).
inline constexpr size_t kTosControlBytes = 32;
size_t WriteTosControl(int family, uint8_t tos, void* buf);
// UDP_SEGMENT (GSO): the message's payload is cut into datagrams of `segment` bytes.
inline constexpr size_t kSegmentControlBytes = 24;
size_t WriteSegmentControl(uint16_t segment, void* buf);

}  // namespace longhaul::net
