// EmuStats: a snapshot of an emulator run (UDP relay or TUN bridge), per direction the
// model's counters (what the emulated link did) and the emulator's own counters (what it
// read, sent and itself dropped), plus mode-specific numbers.
//
// "forward" is client -> --forward target (UDP relay) or namespace A -> B (TUN);
// "reverse" the other way. A value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/emu/emu_direction.h"
#include "transport/net/socket_setup.h"
#include "transport/sim/link_model.h"

namespace longhaul::emu {

struct EmuDirectionStats {
  sim::LinkCounters model;
  EmuCounters own;
  size_t pending = 0;  // datagrams waiting for their delivery time
};

struct EmuStats {
  double elapsed_s = 0;
  EmuDirectionStats forward;
  EmuDirectionStats reverse;
  uint64_t wakeups = 0;  // loop iterations (epoll returns)
  size_t pool_slot_bytes = 0;
  size_t pool_max_slots = 0;
  size_t pool_peak_slots = 0;
  // UDP relay only.
  size_t clients_active = 0;
  uint64_t clients_created = 0;
  uint64_t clients_evicted = 0;
  uint64_t clients_rebound = 0;   // flows moved to a new upstream socket (NAT rebinding)
  uint64_t port_unreachable = 0;  // ICMP port unreachable from the --forward target
  uint64_t tcp_connections = 0;   // relayed TCP connections (--tcp_relay)
  net::SocketBuffers socket_buffers;  // what the kernel granted the relay's sockets

  uint64_t OwnDrops() const { return forward.own.OwnDrops() + reverse.own.OwnDrops(); }
};

}  // namespace longhaul::emu
