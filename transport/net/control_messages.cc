#include "transport/net/control_messages.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <time.h>

#include <cstring>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace longhaul::net {

static_assert(CMSG_SPACE(sizeof(int)) <= kTosControlBytes);
static_assert(CMSG_SPACE(sizeof(uint16_t)) <= kSegmentControlBytes);

ReceivedControl ParseReceivedControl(const msghdr& msg) {
  ReceivedControl r;
  msghdr& h = const_cast<msghdr&>(msg);
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    const size_t n = c->cmsg_len - CMSG_LEN(0);
    if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
        (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
      // IP_TOS arrives as one byte, IPV6_TCLASS as an int.
      if (n >= sizeof(int)) {
        int v;
        std::memcpy(&v, CMSG_DATA(c), sizeof(v));
        r.tos = static_cast<uint8_t>(v);
      } else if (n >= 1) {
        r.tos = *CMSG_DATA(c);
      }
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
               n >= sizeof(timespec)) {
      timespec ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      r.realtime_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && n >= sizeof(int)) {
      int v;
      std::memcpy(&v, CMSG_DATA(c), sizeof(v));
      r.gro_segment = v > 0 ? static_cast<uint32_t>(v) : 0;
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
               n >= sizeof(uint32_t)) {
      std::memcpy(&r.drop_counter, CMSG_DATA(c), sizeof(uint32_t));
      r.has_drop_counter = true;
    }
  }
  return r;
}

uint8_t ReceivedTos(const msghdr& msg) { return ParseReceivedControl(msg).tos; }

int64_t ReceivedRealtimeNs(const msghdr& msg) { return ParseReceivedControl(msg).realtime_ns; }

size_t WriteTosControl(int family, uint8_t tos, void* buf) {
  std::memset(buf, 0, CMSG_SPACE(sizeof(int)));
  auto* c = static_cast<cmsghdr*>(buf);
  c->cmsg_level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  c->cmsg_type = family == AF_INET6 ? IPV6_TCLASS : IP_TOS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int v = tos;
  std::memcpy(CMSG_DATA(c), &v, sizeof(v));
  return CMSG_SPACE(sizeof(int));
}

size_t WriteSegmentControl(uint16_t segment, void* buf) {
  std::memset(buf, 0, CMSG_SPACE(sizeof(uint16_t)));
  auto* c = static_cast<cmsghdr*>(buf);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
  return CMSG_SPACE(sizeof(uint16_t));
}

}  // namespace longhaul::net
