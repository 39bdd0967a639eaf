// The verbs driver's service locator: how a client finds a server's UD queue pair.
//
// A listening verbs driver also binds a UDP socket to the listen address and port. A
// client sends it a LOCATE request (48 bytes, first byte 'L', so it is neither a longhaul
// datagram, first byte 0x01, nor a tuner probe, 0xB7) and gets back the server's GID,
// queue pair number, Q_Key and active MTU (48 bytes, never more than the request). The
// client then runs longhaul's handshake to that queue pair, over UD, through the sans-IO
// endpoint: the cookie, negotiation and everything after are the same as over UDP.
// docs/rdma.md section 2 says why this and not librdmacm.
//
// The same socket carries the other datagrams that reach the port (the tuner's probes:
// ListenOptions::on_foreign_datagram), so longhaul-probe and longhaul-tune measure the
// path over UDP beside the queue pair.
//
// Thread-safety: the codec is pure; Locate blocks the calling thread (not the driver's);
// a LocatorSocket belongs to the driver thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/drivers/verbs/peer_address.h"
#include "transport/net/socket_address.h"

namespace longhaul::verbs {

inline constexpr size_t kLocateSize = 48;
inline constexpr uint8_t kLocateVersion = 1;

struct LocateAnswer {
  UdAddress address;  // the server's GID and queue pair number
  uint32_t qkey = 0;  // kQkey
  uint32_t mtu = 0;   // the server port's active MTU
};

// The codec. A request carries a nonce that the answer repeats.
std::vector<uint8_t> EncodeLocateRequest(uint64_t nonce);
std::vector<uint8_t> EncodeLocateAnswer(uint64_t nonce, const LocateAnswer& a);
// The nonce of a request; nullopt when `d` is not one.
std::optional<uint64_t> DecodeLocateRequest(std::span<const uint8_t> d);
// nullopt when `d` is not an answer to `nonce`.
std::optional<LocateAnswer> DecodeLocateAnswer(std::span<const uint8_t> d, uint64_t nonce);
// True when `d` looks like a locator message (so a listener never treats it as foreign).
bool IsLocateMessage(std::span<const uint8_t> d);

// Asks the server at `server` for its queue pair; retries every 100 ms doubling to 1 s
// until `timeout`. Errors: Unavailable "connection refused by ..." (ICMP port
// unreachable: nothing listens there), DeadlineExceeded (no answer), the socket's errors.
absl::StatusOr<LocateAnswer> Locate(const net::SocketAddress& server, Duration timeout);

// The local IPv4 address (network order) the kernel would send from towards `to`; 0
// when there is no route.
uint32_t SourceAddressTowards(const net::SocketAddress& to);

// One datagram read from a listener's locator socket. `data` points into the socket's
// buffer and is valid until the next Read.
struct LocatorDatagram {
  std::span<const uint8_t> data;
  net::SocketAddress from;
  int64_t kernel_time_ns = 0;  // kernel arrival time (CLOCK_REALTIME); 0 if none
};

// A listener's UDP socket: LOCATE requests and whatever else reaches the port (the
// tuner's probes, which are as large as the path MTU allows: up to 65507 bytes).
class LocatorSocket {
 public:
  // Binds a non-blocking UDP socket to `bind` (IPv4), with kernel receive timestamps when
  // `timestamps` (the probe responder needs arrival times) and a 4 MiB receive buffer
  // (a probe train of 64 datagrams of 9000 bytes, twice). Errors: the socket's.
  static absl::StatusOr<std::unique_ptr<LocatorSocket>> Open(const net::SocketAddress& bind,
                                                             bool timestamps);
  ~LocatorSocket();
  LocatorSocket(const LocatorSocket&) = delete;
  LocatorSocket& operator=(const LocatorSocket&) = delete;

  int fd() const { return fd_; }
  const net::SocketAddress& local() const { return local_; }
  // The next waiting datagram, whole; false when none is waiting. Datagrams that did not
  // fit (none can: the buffer holds the largest UDP payload) are counted in
  // `truncated()` and skipped.
  bool Read(LocatorDatagram* out);
  // Sends `d` to `to`; the error text on failure (the socket's buffer full, no route).
  absl::Status Send(std::span<const uint8_t> d, const net::SocketAddress& to);
  uint64_t truncated() const { return truncated_; }

 private:
  LocatorSocket(int fd, net::SocketAddress local) : fd_(fd), local_(std::move(local)) {}
  int fd_;
  net::SocketAddress local_;
  std::vector<uint8_t> buf_;
  uint64_t truncated_ = 0;
};

}  // namespace longhaul::verbs
