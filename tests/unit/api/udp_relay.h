// Test-only UDP relay on 127.0.0.1: forwards datagrams between clients and one server,
// one upstream socket per client address (so the server sees the clients' distinct
// ports), and can be told to drop everything (a peer that vanished). Runs its own thread,
// bounded by a stop flag checked every 10 ms.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>

namespace longhaul::testing {

class UdpRelay {
 public:
  explicit UdpRelay(uint16_t server_port);
  ~UdpRelay();
  uint16_t port() const { return port_; }
  void set_drop(bool drop) { drop_.store(drop); }
  // Distinct client source ports seen so far.
  size_t client_ports() const { return client_ports_.load(); }
  uint64_t forwarded() const { return forwarded_.load(); }

 private:
  void Run();
  uint16_t server_port_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drop_{false};
  std::atomic<size_t> client_ports_{0};
  std::atomic<uint64_t> forwarded_{0};
  std::thread thread_;
};

}  // namespace longhaul::testing
