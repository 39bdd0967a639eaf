// UdpRelay: the emulator's UDP mode (no privileges needed). Clients send datagrams to the
// listen address; each datagram crosses the emulated link's forward direction and is sent
// to the forward address; answers cross the reverse direction back to the client.
//
//   client --> listen socket --[forward EmuDirection]--> upstream socket --> forward target
//   client <-- listen socket <--[reverse EmuDirection]-- upstream socket <-- forward target
//
// Every client source address (IP + port) gets its own upstream socket, connected to the
// forward target, so a multi-flow client keeps its flows apart and the target sees one
// peer per client flow; answers go back to the client address of the upstream socket
// that received them. The client table is bounded (ClientMap, least recently used
// evicted). ECN: the TOS byte of each client datagram is read (IP_RECVTOS) and sent on
// with the datagram (IP_TOS control message); the model's CE mark sets CE in it.
//
// One thread runs the loop: epoll with a nanosecond timeout to the earliest delivery
// time, recvmmsg/sendmmsg batches of 64, and at each wake every datagram due is sent, so
// the release timer cannot drift from the modelled rate. Runs of equal-sized datagrams
// of one flow that are due together leave as one UDP GSO message (UDP_SEGMENT); the
// receiver still sees separate datagrams (or a GRO batch if it asked for UDP_GRO). Datagrams wait
// in a bounded PacketPool; what the relay itself drops (pool full, send errors, kernel drops at its
// sockets, evicted clients) is counted apart from modelled loss (EmuCounters).
//
// Sockets and addresses come from transport/net (socket_setup.h, control_messages.h).
//
// NAT rebinding (rebind_times, RebindClients()): every client flow moves to a fresh
// upstream socket (a new source port as the target sees it); the old socket is closed, so
// what the target still sends to the old port is lost, as behind a NAT whose mapping
// changed. Datagrams already queued in either direction keep their client.
//
// Thread-safety: Run() on one thread; Stop() from any thread or a signal handler;
// ChangeLink() and RebindClients() from any thread; Stats() only from the thread that ran Run() (or the
// on_stats callback, or after Run()).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/emu/client_map.h"
#include "transport/emu/emu_direction.h"
#include "transport/emu/emu_stats.h"
#include "transport/emu/loop_util.h"
#include "transport/emu/packet_pool.h"
#include "transport/emu/tcp_splice.h"
#include "transport/net/socket_address.h"
#include "transport/net/socket_setup.h"
#include "transport/sim/link_spec.h"

namespace longhaul::emu {

struct UdpRelayOptions {
  sim::LinkSpec link;
  uint64_t seed = 1;     // randomness of both directions
  net::SocketAddress listen;                   // port 0: any free port (see listen_address())
  net::SocketAddress forward;
  size_t max_clients = 1024;                   // client flows (one upstream socket each)
  size_t buffer_bytes = size_t{1} << 30;       // datagram memory (pool), both directions
  size_t socket_buffer_bytes = 64 << 20;       // SO_RCVBUF/SO_SNDBUF of every socket
  bool tcp_relay = false;                      // also relay TCP listen -> forward, unmodelled
  bool gso = true;                             // send runs of equal datagrams with UDP GSO
  Duration stats_interval = Duration::Zero();  // > 0: call on_stats this often
  Duration max_time = Duration::Zero();        // > 0: Run() returns after this long
  int realtime_priority = 0;  // > 0: run the loop under SCHED_FIFO at this priority (root)
  // Link changes over time (--link_schedule): step i's spec (ResolveLinkSchedule) takes
  // effect at schedule_times[i] after Run() starts.
  std::vector<Duration> schedule_times;
  std::vector<sim::LinkSpec> schedule_specs;
  // NAT rebinding (--rebind_at): at each of these times after Run() starts, every client
  // flow gets a new upstream socket (RebindClients()).
  std::vector<Duration> rebind_times;
  std::function<void(const EmuStats&)> on_stats;
};

class UdpRelay {
 public:
  // Validates the options and binds the listen socket (and the TCP one with tcp_relay).
  // Errors: InvalidArgument (bad options); Unavailable naming the address when a bind
  // fails (address in use, not local, ...); other socket and epoll failures as their
  // calls report them (net/errno_status.h).
  static absl::StatusOr<std::unique_ptr<UdpRelay>> Create(const UdpRelayOptions& options);
  ~UdpRelay();

  // The bound listen address (the actual port when options.listen had port 0).
  const net::SocketAddress& listen_address() const { return listen_addr_; }

  // Relays until Stop() or max_time. Datagrams still waiting for their delivery time at
  // the end are discarded (counted in pending). Returns an error only if the loop cannot
  // run (epoll failure).
  absl::Status Run();

  // Makes Run() return soon. Async-signal-safe and thread-safe.
  void Stop() const { stop_.Raise(); }
  int stop_fd() const { return stop_.fd(); }

  // Changes the link of both directions while Run() runs, as a --link_schedule step does:
  // datagrams already queued keep their delivery times. It takes effect when the loop
  // next wakes; the datagrams read from then on cross the new link (with loss=1, a cut
  // link, none gets through). The datagram buffers keep the size options.link gave them
  // (UdpSlotBytes). Thread-safe. Errors: InvalidArgument for a zero rate.
  absl::Status ChangeLink(const sim::LinkSpec& spec);

  // Moves every client flow to a new upstream socket (new source port towards the
  // forward target) when the loop next wakes, closing the old one: the target sees each
  // client's address change mid-flow, as after a NAT rebinding. Thread-safe.
  void RebindClients() { rebind_pending_.store(true, std::memory_order_release); }

  EmuStats Stats() const;

 private:
  struct Flow {
    int fd = -1;
    uint64_t drops_seen = 0;  // net::SocketDrops() already counted
  };
  static constexpr int kBatch = 64;
  struct RxBatch;
  struct TxBatch;

  UdpRelay(const UdpRelayOptions& options, StopSignal stop);
  absl::Status Init();
  int64_t Now() const { return MonotonicNs() - epoch_ns_; }
  void ReadSocket(int fd, bool from_client, uint32_t flow);
  // The client-map index for `addr`, creating its upstream socket; -1 on failure.
  int64_t FlowFor(const net::SocketAddress& addr, int64_t now);
  void CloseFlow(uint32_t index);
  void ReleaseDue(int64_t now);
  // Adds `d` to the batch, to the last message (GSO) when it fits; false if full.
  bool Append(TxBatch& batch, const PendingDatagram& d, const net::SocketAddress* to);
  void Flush(TxBatch& batch, int fd, int family, EmuDirection& dir);
  void SampleSocketDrops();
  void ApplyLinkChange(int64_t now);
  // Opens an upstream socket connected to the forward target and registers it for
  // `index`; -1 on failure (logged).
  int OpenUpstream(uint32_t index, const net::SocketAddress& client);
  void ApplyRebind();

  UdpRelayOptions options_;
  StopSignal stop_;
  std::mutex link_mu_;
  std::optional<sim::LinkSpec> link_change_;  // guarded by link_mu_
  std::atomic<bool> link_change_pending_{false};
  std::atomic<bool> rebind_pending_{false};
  uint64_t rebinds_ = 0;  // client flows moved to a new upstream socket
  net::SocketAddress listen_addr_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  net::SocketBuffers buffers_;
  PacketPool pool_;
  EmuDirection forward_;
  EmuDirection reverse_;
  ClientMap clients_;
  std::vector<Flow> flows_;
  uint64_t listen_drops_seen_ = 0;
  uint32_t last_flow_ = UINT32_MAX;
  std::unique_ptr<TcpSplice> tcp_;
  std::unique_ptr<RxBatch> rx_;
  std::unique_ptr<TxBatch> tx_;
  std::vector<uint8_t> scratch_;
  int64_t epoch_ns_ = 0;
  int64_t now_ns_ = 0;  // time of the last loop iteration (for Stats())
  uint64_t wakeups_ = 0;
  uint64_t port_unreachable_ = 0;
  bool gso_ = true;
};

// The largest UDP payload a slot must hold for `spec` (mtu - overhead, at least 64,
// at most 65535): longer datagrams are too big for the model anyway.
size_t UdpSlotBytes(const sim::LinkSpec& spec);

}  // namespace longhaul::emu
