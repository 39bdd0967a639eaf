// TransportConfig: every tunable of a longhaul connection, with named defaults and
// Validate(). The tuner writes profiles (transport/profile/profile.h reads them into this
// struct); tools fill it from flags; the core only reads it. No hidden global knobs.
//
// Units are in the names or the types: bytes for sizes, Duration for times, Bandwidth
// for rates.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "transport/base/units.h"

namespace longhaul {

enum class CongestionControl { kFixed, kBbr };

enum class FecMode { kOff, kFixed, kAuto };

struct TransportConfig {
  // ---- sizes ----
  // Payload bytes of message data per packet. The datagram is larger by the packet and
  // frame headers (see MaxDatagramSize()); SegmentForMtu() picks the largest segment that
  // fits an IP MTU.
  static constexpr ByteCount kDefaultSegment = 8192;
  static constexpr ByteCount kMaxSegment = 65536 - 512;  // datagram must stay <= 65507
  ByteCount segment = kDefaultSegment;

  // Most bytes of data the sender keeps in flight (sent, not yet acknowledged nor
  // declared lost). Must hold rate x (RTT + repair time); 100 Gbit/s x 58 ms = 725 MB.
  static constexpr ByteCount kDefaultWindow = ByteCount{1} << 30;  // 1 GiB
  static constexpr ByteCount kMaxWindow = ByteCount{64} << 30;
  ByteCount window = kDefaultWindow;

  // Receive credit: the receiver accepts message bytes up to this many beyond the first
  // byte it has not yet delivered in order. Bounds receiver memory.
  // 4 GiB: at 100 Gbit/s x 58 ms a hole whose repair is itself lost twice holds the
  // in-order frontier for about 3.3 RTTs (2.4 GB); the credit must cover that.
  static constexpr ByteCount kDefaultRecvWindow = ByteCount{4} << 30;  // 4 GiB
  ByteCount recv_window = kDefaultRecvWindow;

  // Most messages the sender has outstanding (sent, not all acknowledged); bounds the
  // receiver's per-message state. Both sides must use the same value.
  uint32_t max_inflight_messages = 65536;

  // UDP flows (distinct source ports) per connection; the core spreads packets over them.
  uint32_t flows = 1;

  // ---- rate and congestion control ----
  CongestionControl cc = CongestionControl::kFixed;
  // Pacing rate of the fixed controller, and a cap for adaptive ones (zero: no cap,
  // which the fixed controller rejects).
  Bandwidth rate = Bandwidth::Gbps(1);
  // cc=bbr: the least bandwidth the controller's model holds (zero: none). The model
  // starts from it (no slow ramp from an initial window over a long RTT) and a cut never
  // takes it lower; the drain and probe gains still pace below and above it. For a link
  // whose rate the tuner measured: half that rate. Must not exceed a non-zero `rate`.
  Bandwidth rate_min = Bandwidth::Zero();
  // cc=bbr: the rate a new connection sends its first round trip at, before it has
  // measured anything: its first window is this rate over initial_rtt (at least 10
  // packets), paced at this rate; startup doubles from there (zero: the 10 packets
  // only). 100 Mbit/s fills a 1 Gbit/s x 58 ms link within about 5 round trips instead
  // of 8, and on a slower link costs at most one round trip's excess; off by default
  // because it lowered the share a flow takes beside TCP CUBIC (docs/congestion-control.md
  // "The first second"). `rate` still caps it. Unlike rate_min the model keeps nothing.
  Bandwidth initial_rate = Bandwidth::Zero();
  // cc=bbr: a round trip whose loss rate (lost / (lost + acknowledged) bytes, counted
  // from 8 lost packets) exceeds this is congestion even without queueing delay. Random
  // loss below it does not cut the rate; loss that comes with queueing delay, and CE
  // marks, always count. Set it above the path's random loss (the tuner measures it).
  double cc_loss_threshold = 0.03;
  // cc=bbr on a link shared with traffic that keeps a queue (TCP CUBIC or BBR fill a
  // buffer whatever longhaul does): true competes for a share (after queue-based cuts
  // that never empty the queue over 40 round trips, queueing delay stops being a
  // congestion signal until the queue is seen empty again; loss is answered as a
  // loss-based flow answers it where the competitor answers it too); false yields
  // (longhaul takes only what such traffic leaves, a scavenger). On by default: longhaul
  // flows among themselves empty the queue within that time and never compete
  // (docs/congestion-control.md "Sharing with TCP").
  bool cc_compete = true;
  // cc=bbr: yield fully (a scavenger), whatever cc_compete says. Every standing queue is
  // drained, none is taken for a change of the path's RTT (without it a queue that two
  // drains did not move and that stays flat is taken for the path's new RTT, which a TCP
  // flow keeping a flat queue also looks like). A route change to a longer path costs up
  // to the 10 s min-RTT window of drains.
  bool cc_yield = false;
  // ECN: datagrams are sent ECN-capable (ECT(0)) and CE marks reported by the peer reach
  // the congestion controller.
  bool ecn = true;
  // Largest burst the pacer releases back to back when the driver wakes late (catching
  // up on missed slots; the average rate is unchanged). 1 ms covers the wake-up latency
  // of a busy host without turning windows into bursts.
  Duration pacing_burst = Duration::Milliseconds(1);

  // ---- loss detection (RFC 8985 / RFC 9002 style) ----
  // A packet is lost once this many later packets are acknowledged...
  uint32_t reorder_packets = 16;
  // ...or once a later packet is acknowledged and this fraction of the RTT has passed
  // since the loss became possible (RACK reordering window; adapts upward on spurious
  // retransmissions).
  double reorder_rtt_fraction = 0.125;
  // RTT assumed before the first sample.
  Duration initial_rtt = Duration::Milliseconds(100);
  // Lower bound on the probe timeout (tail-loss probe), and the most it backs off to.
  Duration min_pto = Duration::Milliseconds(5);
  Duration max_pto = Duration::Seconds(10);

  // Tail protection: when the sender has nothing new to send and nothing to repair, it
  // spends the idle pacing slots re-sending the newest unacknowledged packets (each at
  // most once, only those sent within the last RTT), so a loss at the end of a transfer
  // or a message burst is repaired without waiting a round trip for its detection.
  bool tail_protect = true;

  // ---- acknowledgements ----
  // Acknowledge after this many ack-eliciting packets, or after max_ack_delay.
  uint32_t ack_every = 32;
  Duration max_ack_delay = Duration::Milliseconds(1);
  // Most ACK ranges per ACK frame (the newest are kept).
  uint32_t max_ack_ranges = 128;

  // ---- forward error correction ----
  FecMode fec = FecMode::kOff;
  uint32_t fec_k = 32;  // data packets per block (kFixed; the upper bound for kAuto)
  uint32_t fec_m = 4;   // parity packets per block
  // Blocks filled round-robin: a burst of b losses costs each block about b / D shards.
  uint32_t fec_interleave = 8;
  // An FEC group that received no data packet for this long is closed (its blocks
  // shortened) so a stalled sender's last packets do not wait for parity; a sender with
  // nothing left to send closes it at once.
  Duration fec_flush = Duration::Milliseconds(1);
  // Mode auto: the message-completion percentile to protect (0.999: p99.9). The policy
  // aims for at most (1 - fec_tail) / 4 repair rounds per message, so that fewer than
  // that fraction of messages wait for a retransmission.
  double fec_tail = 0.999;
  // Mode auto: the most parity per data packet it may spend (0.25: 25 %). Where no
  // parity within it meets the target, it protects as well as it can within it and says
  // so (ConnectionDebugState::fec_reason "best-effort").
  double fec_max_overhead = 0.25;

  // ---- connection lifetime ----
  Duration idle_timeout = Duration::Seconds(30);
  Duration keepalive = Duration::Seconds(5);

  // ---- simulation ----
  // Elided payload, a simulator mode (longhaul-sim --payload=off): DATA frames carry each
  // message piece's length but, instead of its bytes, only 8-byte stamps every 4 KiB of
  // the message (wire::kStampInterval); datagrams are that much shorter and PollTransmit
  // reports the bytes they stand for (TransmitInfo::elided_bytes), which every size the
  // protocol counts (in flight, pacing, congestion control) includes. The receiver writes
  // no message bytes and reports the stamps' digest (Event::stamp_digest). Both ends must
  // agree; an endpoint without it closes on an elided frame. Not a profile key.
  bool elide_payload = false;

  // Largest datagram (UDP payload) this config builds.
  ByteCount MaxDatagramSize() const;
  // The largest segment whose datagrams fit an IP MTU (IPv4 + UDP headers included).
  static ByteCount SegmentForMtu(ByteCount mtu);

  // Checks ranges and consistency; the error names the field and the accepted range.
  absl::Status Validate() const;
};

const char* CongestionControlName(CongestionControl cc);
const char* FecModeName(FecMode m);

}  // namespace longhaul
