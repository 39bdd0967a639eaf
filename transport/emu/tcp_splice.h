// TcpSplice: relays TCP connections accepted on one address to another, unmodelled, in
// the caller's epoll loop. The UDP relay uses it (--tcp_relay) for control channels that
// accompany UDP tests, such as iperf3's: the client's TCP connection to the relay's port
// is joined to the same port of the --forward target while the UDP data crosses the
// emulated link.
//
// Every connection pair has a 256 KiB buffer per direction; a half-close is passed on
// once the buffered bytes are written; a reset or error on either side closes both. At
// most `max_connections` pairs; extra connections are accepted and closed at once.
//
// Thread-safety: none; runs in the loop that owns the epoll instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/net/socket_address.h"

namespace longhaul::emu {

class TcpSplice {
 public:
  // Listens on `listen` (same address and port as the UDP relay) and registers with
  // `epoll_fd`, using epoll data `tag_base | index` (index < 2^24) for its events.
  static absl::StatusOr<std::unique_ptr<TcpSplice>> Create(const net::SocketAddress& listen,
                                                           const net::SocketAddress& forward,
                                                           int epoll_fd, uint64_t tag_base,
                                                           size_t max_connections = 64);
  ~TcpSplice();

  // Handles an epoll event whose data had tag_base; `index` is the low 24 bits.
  void OnEvent(uint32_t index, uint32_t events);

  uint64_t accepted() const { return accepted_; }
  size_t open() const;

 private:
  struct Pair;
  TcpSplice() = default;
  void Accept();
  void Pump(uint32_t pair_index);
  void ClosePair(uint32_t pair_index);

  net::SocketAddress forward_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  uint64_t tag_base_ = 0;
  size_t max_connections_ = 0;
  std::vector<std::unique_ptr<Pair>> pairs_;
  uint64_t accepted_ = 0;
};

}  // namespace longhaul::emu
