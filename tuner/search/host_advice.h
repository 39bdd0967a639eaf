// Host settings a tuned TransportConfig needs, so users are not silently capped:
//
//  * socket buffers: SO_RCVBUF / SO_SNDBUF requests are clamped to
//    net.core.rmem_max / wmem_max (the kernel stores twice the request). The advice is
//    to let a socket hold the window (receive side: the receive window), up to the
//    kernel's int limit 2147483647;
//  * MTU: the chosen segment's datagrams need an IP MTU of MaxDatagramSize() + 28 on
//    both hosts' interfaces and on the path.
//
// AdviseHost() is pure; ReadHostSettings() reads /proc/sys (Linux), reporting what it
// could not read as 0. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "transport/base/units.h"
#include "transport/core/config.h"

namespace longhaul::tuner {

struct HostSettings {
  ByteCount rmem_max = 0;  // net.core.rmem_max (0: unknown)
  ByteCount wmem_max = 0;  // net.core.wmem_max
};

// Reads /proc/sys/net/core/{rmem,wmem}_max.
HostSettings ReadHostSettings();

struct HostAdvice {
  ByteCount rmem_max_needed = 0;
  ByteCount wmem_max_needed = 0;
  ByteCount mtu_needed = 0;     // IP MTU for the chosen segment
  HostSettings current;
  bool rmem_ok = true;          // current >= needed (unknown counts as not ok)
  bool wmem_ok = true;
  // Shell lines to apply (sysctl -w ..., ip link set ... mtu ...), with comments.
  std::vector<std::string> commands;
  // One line per setting: "net.core.rmem_max: need 1073741824, have 4194304 (raise it)".
  std::vector<std::string> lines;
};

HostAdvice AdviseHost(const TransportConfig& config, const HostSettings& current);

}  // namespace longhaul::tuner
