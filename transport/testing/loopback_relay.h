// LoopbackRelay: the emulator's UDP relay (transport/emu/udp_relay.h) in front of a server
// on 127.0.0.1, running on its own thread for the life of the object, for tests that need
// a hop between client and server. Clients send to port(); every client source address
// gets its own upstream socket to the server, so the server sees one peer per client
// flow, and answers go back the same way.
//
// The default link is clean and fast (CleanLink); Cut() makes it drop everything, as a
// peer that vanished without a CLOSE looks. Stop() returns the relay's counters
// (EmuStats: clients seen, datagrams relayed and dropped).
//
// The relay's loop stops at Stop() or the destructor, and by itself after kMaxRun.
// Thread-safety: port() and Cut() from any thread; Stop() from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/emu/emu_stats.h"
#include "transport/emu/udp_relay.h"
#include "transport/sim/link_spec.h"

namespace longhaul::testing {

class LoopbackRelay {
 public:
  static constexpr Duration kMaxRun = Duration::Seconds(600);

  // 100 Gbit/s, no delay, no loss, a 64 MiB queue, datagrams up to 64 KiB (mtu 65535):
  // nothing a loopback test sends is held back or dropped.
  static sim::LinkSpec CleanLink();

  // Relays 127.0.0.1:port() to 127.0.0.1:server_port over `link`. Errors: the relay's
  // (UdpRelay::Create).
  static absl::StatusOr<std::unique_ptr<LoopbackRelay>> Start(
      uint16_t server_port, const sim::LinkSpec& link = CleanLink());
  ~LoopbackRelay();
  LoopbackRelay(const LoopbackRelay&) = delete;
  LoopbackRelay& operator=(const LoopbackRelay&) = delete;

  uint16_t port() const { return port_; }

  // From the loop's next wake on, the link drops every datagram in both directions.
  void Cut();

  // Stops the loop, joins its thread and returns the final counters (the same on later
  // calls). Errors: the loop's own failure (UdpRelay::Run).
  absl::StatusOr<emu::EmuStats> Stop();

 private:
  LoopbackRelay(std::unique_ptr<emu::UdpRelay> relay, sim::LinkSpec link);

  std::unique_ptr<emu::UdpRelay> relay_;
  sim::LinkSpec link_;
  uint16_t port_ = 0;
  std::thread thread_;
  absl::Status run_status_;  // written by the thread, read after join
  std::optional<absl::StatusOr<emu::EmuStats>> result_;
};

}  // namespace longhaul::testing
