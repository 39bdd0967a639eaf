// UDP ports on 127.0.0.1 for tests of refused and silent peers.
#pragma once

#include <cstdint>

namespace longhaul::testing {

// A UDP socket bound to 127.0.0.1 on a port the kernel chose; it never answers. Closed
// with the object.
class SilentUdpSocket {
 public:
  SilentUdpSocket();
  ~SilentUdpSocket();
  SilentUdpSocket(const SilentUdpSocket&) = delete;
  SilentUdpSocket& operator=(const SilentUdpSocket&) = delete;

  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A UDP port on 127.0.0.1 that was free a moment ago: nothing listens there, so a
// datagram sent to it is refused.
uint16_t UnusedUdpPort();

}  // namespace longhaul::testing
