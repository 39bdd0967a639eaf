#include "transport/core/config.h"

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

constexpr ByteCount kIpUdpHeaders = 28;  // IPv4 (20) + UDP (8)
// Per-packet bytes besides the segment: packet header and checksum, a DATA frame header
// with full-width fields, and an FEC source tag.
constexpr ByteCount kPerPacketOverhead =
    wire::kPacketOverhead + wire::kMaxDataFrameHeaderSize + wire::kFecSourceFrameSize;

absl::Status Range(const char* name, double v, double lo, double hi, const char* unit = "") {
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", v, unit, " is outside [", lo, unit,
                                                   ", ", hi, unit, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

ByteCount TransportConfig::MaxDatagramSize() const { return segment + kPerPacketOverhead; }

ByteCount TransportConfig::SegmentForMtu(ByteCount mtu) {
  if (mtu <= kIpUdpHeaders + kPerPacketOverhead + 64) return 64;
  ByteCount s = mtu - kIpUdpHeaders - kPerPacketOverhead;
  return s > kMaxSegment ? kMaxSegment : s;
}

absl::Status TransportConfig::Validate() const {
  LH_RETURN_IF_ERROR(Range("segment", segment, 64, kMaxSegment, " bytes"));
  if (MaxDatagramSize() > wire::kMaxDatagramSize) {
    return absl::InvalidArgumentError("segment too large for a UDP datagram");
  }
  LH_RETURN_IF_ERROR(Range("window", window, 2 * segment, kMaxWindow, " bytes"));
  if (absl::Status s = Range("recv_window", recv_window, 2 * segment, kMaxWindow, " bytes"); !s.ok())
    return s;
  if (absl::Status s = Range("max_inflight_messages", max_inflight_messages, 1, 1u << 24); !s.ok())
    return s;
  LH_RETURN_IF_ERROR(Range("flows", flows, 1, 256));
  if (cc == CongestionControl::kFixed && rate.IsZero()) {
    return absl::InvalidArgumentError("rate must be set (> 0) for cc=fixed");
  }
  if (rate.bps() < 0 || rate.bps() > 10e12) {
    return absl::InvalidArgumentError("rate is outside [0, 10tbit]");
  }
  if (rate_min.bps() < 0 || (!rate.IsZero() && rate_min > rate)) {
    return absl::InvalidArgumentError("rate_min is outside [0, rate] (the least bandwidth cc=bbr assumes)");
  }
  if (initial_rate.bps() < 0 || initial_rate.bps() > 10e12) {
    return absl::InvalidArgumentError(
        "initial_rate is outside [0, 10tbit] (the rate cc=bbr's first round trip is paced at)");
  }
  LH_RETURN_IF_ERROR(Range("cc_loss_threshold", cc_loss_threshold, 0.0, 1.0));
  if (!(fec_tail >= 0.5 && fec_tail < 1.0)) {
    return absl::InvalidArgumentError("fec_tail is outside [0.5, 1) (the percentile, e.g. 0.999)");
  }
  if (!(fec_max_overhead > 0.0 && fec_max_overhead <= 4.0)) {
    return absl::InvalidArgumentError("fec_max_overhead is outside (0, 4] (parity per data packet)");
  }
  if (pacing_burst < Duration::Zero() || pacing_burst > Duration::Milliseconds(100)) {
    return absl::InvalidArgumentError("pacing_burst is outside [0, 100ms]");
  }
  LH_RETURN_IF_ERROR(Range("reorder_packets", reorder_packets, 1, 1u << 20));
  LH_RETURN_IF_ERROR(Range("reorder_rtt_fraction", reorder_rtt_fraction, 0.0, 4.0));
  if (initial_rtt <= Duration::Zero() || initial_rtt > Duration::Seconds(60)) {
    return absl::InvalidArgumentError("initial_rtt is outside (0, 60s]");
  }
  if (min_pto <= Duration::Zero() || min_pto > max_pto) {
    return absl::InvalidArgumentError("min_pto must be > 0 and <= max_pto");
  }
  LH_RETURN_IF_ERROR(Range("ack_every", ack_every, 1, 65536));
  if (max_ack_delay < Duration::Zero() || max_ack_delay > Duration::Seconds(1)) {
    return absl::InvalidArgumentError("max_ack_delay is outside [0, 1s]");
  }
  LH_RETURN_IF_ERROR(Range("max_ack_ranges", max_ack_ranges, 1, 4096));
  if (fec != FecMode::kOff) {
    LH_RETURN_IF_ERROR(Range("fec_k", fec_k, 1, 254));
    LH_RETURN_IF_ERROR(Range("fec_m", fec_m, 1, 254));
    if (fec_k + fec_m > 255) return absl::InvalidArgumentError("fec k+m must be <= 255");
    LH_RETURN_IF_ERROR(Range("fec_interleave", fec_interleave, 1, 1024));
  }
  if (fec_flush < Duration::Zero()) return absl::InvalidArgumentError("fec_flush must be >= 0");
  if (idle_timeout <= Duration::Zero()) return absl::InvalidArgumentError("idle_timeout must be > 0");
  if (keepalive <= Duration::Zero()) return absl::InvalidArgumentError("keepalive must be > 0");
  return absl::OkStatus();
}

const char* CongestionControlName(CongestionControl cc) {
  switch (cc) {
    case CongestionControl::kFixed: return "fixed";
    case CongestionControl::kBbr: return "bbr";
  }
  return "?";
}

const char* FecModeName(FecMode m) {
  switch (m) {
    case FecMode::kOff: return "off";
    case FecMode::kFixed: return "fixed";
    case FecMode::kAuto: return "auto";
  }
  return "?";
}

}  // namespace longhaul
