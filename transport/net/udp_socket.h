// UdpSocket: the UDP driver's batch socket, opened with socket_setup.h, owned by a
// Boost.Asio socket (the driver waits on it through its io_context) and driven through the
// native handle with the batch system calls Linux offers:
//   - sendmmsg, with UDP_SEGMENT (GSO) for runs of equal-sized datagrams to the same
//     destination, and the ECN codepoint per datagram (IP_TOS / IPV6_TCLASS cmsg);
//   - recvmmsg, with UDP_GRO (coalesced runs are split by the gso_size cmsg) and
//     IP_RECVTOS / IPV6_RECVTCLASS to read the ECN codepoint.
// GSO and GRO are probed when the socket opens and used only where the kernel has them;
// a GSO send the kernel refuses at run time (EIO/EINVAL) turns GSO off for the socket and
// the batch is sent again without it.
//
// Ownership: the socket owns its descriptor (through the Asio socket). Not thread-safe:
// the driver thread uses it. Errors from the kernel (errno) become absl::Status through
// errno_status.h.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/udp.hpp"
#include "transport/base/ecn.h"
#include "transport/base/units.h"
#include "transport/net/socket_address.h"

namespace longhaul::net {

struct SocketOptions {
  // SO_RCVBUF / SO_SNDBUF asked for (bytes), FORCE variants first (SetSocketBuffer).
  ByteCount recv_buffer = 32 << 20;
  ByteCount send_buffer = 32 << 20;
  bool gso = true;  // use UDP_SEGMENT if the kernel has it
  bool gro = true;  // use UDP_GRO if the kernel has it
  // SO_TIMESTAMPNS: kernel receive times on received datagrams (RxDatagram::kernel_time_ns).
  bool rx_timestamps = false;
  // SO_REUSEPORT: the socket joins the port's group (a server's engines).
  bool reuse_port = false;
};

// What the kernel granted.
struct SocketInfo {
  ByteCount recv_buffer = 0;  // as getsockopt reports it (the kernel doubles the request)
  ByteCount send_buffer = 0;
  bool recv_buffer_capped = false;  // below the request: net.core.rmem_max limits it
  bool send_buffer_capped = false;
  bool gso = false;
  bool gro = false;
};

// One datagram to send. `dest` is ignored on a connected socket.
struct TxDatagram {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  Ecn ecn = Ecn::kNotEct;
  const SocketAddress* dest = nullptr;
};

// A run of datagrams sent as one message: with GSO, `count` datagrams of `segment` bytes
// (the last may be shorter); without, count == 1.
struct GsoGroup {
  size_t first = 0;
  size_t count = 0;
  uint32_t segment = 0;
};

// Groups consecutive datagrams for GSO: same destination, same ECN, equal length (the last
// of a group may be shorter), at most `max_segments` and `max_bytes` per group. Pure.
void PlanGsoGroups(std::span<const TxDatagram> d, size_t max_segments, size_t max_bytes,
                   std::vector<GsoGroup>* groups);

struct SendResult {
  size_t sent = 0;           // datagrams handed to the kernel (a prefix of the batch)
  bool would_block = false;  // the socket buffer is full: wait for writability
  size_t dropped = 0;        // datagrams skipped because the kernel refused them
  absl::Status error;        // the last error other than EAGAIN (ConnectionRefused etc.)
};

// Received datagrams, split from GRO buffers: views valid until the next Receive().
struct RxDatagram {
  std::span<const uint8_t> data;
  Ecn ecn = Ecn::kNotEct;
  uint32_t source = 0;  // index into RxBatch::sources()
  // CLOCK_REALTIME receive time from the kernel (SocketOptions::rx_timestamps), else 0.
  // The datagrams of one GRO buffer share it.
  int64_t kernel_time_ns = 0;
};

class RxBatch {
 public:
  // `messages` buffers of 64 KiB (a GRO buffer holds up to 64 KiB).
  explicit RxBatch(size_t messages = 32);
  RxBatch(const RxBatch&) = delete;  // holds pointers into itself
  RxBatch& operator=(const RxBatch&) = delete;
  const std::vector<RxDatagram>& datagrams() const { return datagrams_; }
  const SocketAddress& source(uint32_t i) const { return sources_[i]; }
  uint64_t syscall_messages() const { return last_messages_; }
  size_t capacity() const { return messages_; }

 private:
  friend class UdpSocket;
  static constexpr size_t kBufferSize = 65536;
  static constexpr size_t kControlSize = 128;
  size_t messages_;
  std::vector<uint8_t> buffers_;
  std::vector<uint8_t> control_;
  std::vector<sockaddr_storage> names_;
  std::vector<SocketAddress> sources_;
  std::vector<RxDatagram> datagrams_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  uint64_t last_messages_ = 0;
};

struct RecvResult {
  size_t messages = 0;   // kernel messages (GRO buffers count once)
  size_t datagrams = 0;  // after splitting
  size_t truncated = 0;  // messages the kernel truncated (dropped)
  absl::Status error;    // ConnectionRefused etc. (not EAGAIN)
};

class UdpSocket {
 public:
  // Opens a socket bound to `bind` (port 0: any), connected to `connect_to` when that is
  // valid. Errors: the bind/connect failure with the address and the system's reason.
  static absl::StatusOr<std::unique_ptr<UdpSocket>> Open(boost::asio::io_context& io,
                                                         const SocketAddress& bind,
                                                         const SocketAddress& connect_to,
                                                         const SocketOptions& options);
  ~UdpSocket();

  int fd() const { return fd_; }
  boost::asio::ip::udp::socket& asio_socket() { return socket_; }
  const SocketAddress& local_address() const { return local_; }
  const SocketAddress& peer_address() const { return peer_; }
  bool connected() const { return peer_.valid(); }
  const SocketInfo& info() const { return info_; }

  // Sends a prefix of `batch` (as much as the kernel takes without blocking).
  SendResult Send(std::span<const TxDatagram> batch);
  // Receives what is queued, up to the batch's capacity, without blocking.
  RecvResult Receive(RxBatch* batch);

  uint64_t send_syscalls() const { return send_syscalls_; }
  uint64_t gso_messages() const { return gso_messages_; }
  uint64_t recv_syscalls() const { return recv_syscalls_; }
  uint64_t gro_messages() const { return gro_messages_; }

 private:
  explicit UdpSocket(boost::asio::io_context& io);
  void Configure(const SocketOptions& options);
  SendResult SendGroups(std::span<const TxDatagram> batch, bool use_gso);

  boost::asio::ip::udp::socket socket_;
  int fd_ = -1;
  SocketAddress local_;
  SocketAddress peer_;
  SocketInfo info_;
  std::vector<GsoGroup> groups_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<uint8_t> control_;
  uint64_t send_syscalls_ = 0;
  uint64_t gso_messages_ = 0;
  uint64_t recv_syscalls_ = 0;
  uint64_t gro_messages_ = 0;
};

}  // namespace longhaul::net
