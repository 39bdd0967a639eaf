// The probe responder: answers the probe protocol (probe_protocol.h) for any number of
// probers, each with its own session state (trains seen, loss/reorder traces).
//
// Two layers:
//  * ProbeResponder: no sockets, no clock. Handle() takes one datagram with its sender
//    (an opaque key, e.g. the sockaddr bytes) and arrival time, and appends the replies
//    to send back to that sender. This is what another server embeds: longhaul-perf's
//    server, on the same socket as the transport, dispatches datagrams whose first byte
//    is kProbeMagic (0xB7; transport packets start with version 0x01) to Handle(), and
//    sends the replies to the datagram's source address; or it runs a ProbeServer on a
//    second port.
//  * ProbeServer: a ProbeResponder on its own UDP socket (longhaul-probe --server).
//
// Bounds (ResponderOptions): sessions, trains per session, trace length per train (the
// trace is a bitmap: 2 MiB per 16 M packets); sessions idle longer than session_idle
// are dropped. Malformed datagrams are counted and ignored, never answered. A prober
// over the limits gets an ERROR message naming the limit. No reply is larger than 3x the
// datagram it answers (sources are not validated; counted as amplification_limited).
//
// Thread-safety: none; one thread calls Handle()/Expire() (ProbeServer::Run is that
// thread for the standalone server; Stop() may be called from any thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "tuner/estimate/loss_fit.h"
#include "tuner/estimate/rate.h"
#include "tuner/estimate/reorder.h"
#include "tuner/probe/probe_protocol.h"
#include "tuner/probe/udp_socket.h"

namespace longhaul::tuner::probe {

struct ResponderOptions {
  size_t max_sessions = 16;
  uint32_t max_trains = 256;                 // per session
  uint64_t max_trace_packets = 16'000'000;   // per trace train (bitmap 2 MB)
  Duration session_idle = Duration::Seconds(30);
};

struct ResponderStats {
  uint64_t datagrams = 0;
  uint64_t malformed = 0;   // undecodable or not a probe message
  uint64_t replies = 0;
  uint64_t refused = 0;     // ERROR replies (limits, versions)
  uint64_t amplification_limited = 0;  // replies dropped: more than 3x the request
  uint64_t sessions_opened = 0;
  uint64_t sessions_expired = 0;
};

class ProbeResponder {
 public:
  explicit ProbeResponder(const ResponderOptions& options = {});
  ~ProbeResponder();

  // Handles one datagram from `peer` received at `now_ns` (any clock, consistent across
  // calls; spans and lateness are differences of it; best a kernel receive timestamp).
  // `handled_ns` (same clock; 0: now_ns) is when it is being handled: an echo reply
  // carries handled_ns - now_ns so the prober can take the responder's queueing out of
  // the RTT. Replies are appended to `replies`.
  void Handle(const std::string& peer, std::span<const uint8_t> datagram, int64_t now_ns,
              std::vector<std::vector<uint8_t>>* replies, int64_t handled_ns = 0);
  // Optional: the receiving socket's cumulative drop count (SO_RXQ_OVFL), reported per
  // train so the prober can tell the responder's own drops from path loss.
  void NoteSocketDrops(uint64_t total) { socket_drops_ = total; }
  // Drops sessions idle since before now_ns - session_idle.
  void Expire(int64_t now_ns);

  size_t sessions() const { return sessions_.size(); }
  const ResponderStats& stats() const { return stats_; }

 private:
  struct Train;
  struct Session;
  void Reply(const ProbeMessage& m, std::vector<std::vector<uint8_t>>* replies);
  void Refuse(const ProbeHeader& h, ProbeError code, const std::string& text,
              std::vector<std::vector<uint8_t>>* replies);
  // A DATA packet of `size` bytes: counted in its train (opened on its first packet),
  // echoed when it asks; `out` is the reply prepared from its header.
  void OnData(Session& s, const ProbeMessage& in, size_t size, int64_t now_ns, uint64_t hold_ns,
              ProbeMessage& out, std::vector<std::vector<uint8_t>>* replies);
  // What train `tr` received, with the loss trace over the `packets_sent` the prober names.
  void FillReport(const Train& tr, uint64_t packets_sent, TrainReport* r) const;

  ResponderOptions opt_;
  std::map<std::pair<std::string, uint32_t>, std::unique_ptr<Session>> sessions_;
  ResponderStats stats_;
  size_t request_bytes_ = 0;  // size of the datagram being handled (the 3x bound)
  uint64_t socket_drops_ = 0;
};

// A ProbeResponder on its own socket.
class ProbeServer {
 public:
  // Binds `listen` ("127.0.0.1:9300", "[::1]:9300" or a name that resolves; port 0 picks a
  // free one). Errors: net::ResolveHostPort's and net::BindSocket's.
  static absl::StatusOr<std::unique_ptr<ProbeServer>> Create(const std::string& listen,
                                                             const ResponderOptions& options = {});
  // Serves until Stop() or until `duration` has passed (zero: no time bound).
  absl::Status Run(Duration duration = Duration::Zero());
  void Stop() { stop_.store(true); }
  uint16_t port() const { return socket_.LocalPort(); }
  const ProbeResponder& responder() const { return responder_; }

 private:
  ProbeServer(UdpSocket socket, const ResponderOptions& options)
      : socket_(std::move(socket)), responder_(options) {}
  UdpSocket socket_;
  ProbeResponder responder_;
  std::atomic<bool> stop_{false};
};

}  // namespace longhaul::tuner::probe
