// Counters and debug state a Connection exports, for tools' JSON and for tests that assert
// on behaviour rather than internals.
#pragma once

#include <cstdint>

#include "transport/base/units.h"

namespace longhaul {

struct ConnectionStats {
  // sender
  uint64_t packets_sent = 0;           // every datagram built
  uint64_t data_packets_sent = 0;      // datagrams carrying message data
  uint64_t packets_retransmitted = 0;  // datagrams carrying repaired (resent) data
  uint64_t packets_lost = 0;           // declared lost by the loss detector
  uint64_t tail_protect_packets = 0;   // idle-time copies of the newest packets
  uint64_t spurious_losses = 0;        // declared lost, then acknowledged after all
  uint64_t pto_count = 0;              // probe timeouts that fired
  uint64_t bytes_sent = 0;             // datagram bytes
  uint64_t data_bytes_sent = 0;        // message bytes, first transmissions
  uint64_t data_bytes_retransmitted = 0;
  uint64_t messages_sent = 0;          // send completions
  uint64_t acks_received = 0;
  uint64_t flow_control_blocked = 0;   // times the receiver's credit stopped sending
  // receiver
  uint64_t packets_received = 0;       // valid packets
  uint64_t bytes_received = 0;
  uint64_t data_bytes_received = 0;    // new message bytes
  uint64_t duplicate_data_bytes = 0;   // message bytes that had already arrived
  uint64_t messages_received = 0;
  uint64_t acks_sent = 0;
  uint64_t checksum_failures = 0;      // dropped: CRC32C mismatch (treated as loss)
  uint64_t malformed_packets = 0;      // dropped: undecodable or for another connection
  // Receive-side placement (Connection::OnPlacedDatagram): DATA payload bytes the datapath
  // wrote where their message lands (checked there, never copied), and placed bytes that
  // had to be copied (their message lands elsewhere). Checksum matches only.
  uint64_t placed_payload_bytes = 0;
  uint64_t placed_payload_bytes_copied = 0;
  uint64_t ecn_ce_received = 0;
  // FEC
  uint64_t fec_repair_packets_sent = 0;
  uint64_t fec_overhead_bytes = 0;     // datagram bytes of repair packets
  uint64_t fec_recovered_packets = 0;  // data packets rebuilt by the receiver
  uint64_t fec_blocks_unrecoverable = 0;
  // driver state (Connection::SetDriverState): frames sent (first sends and resends),
  // resends after the loss of the packet that carried the state, frames received
  // (older and repeated copies included)
  uint64_t driver_state_sent = 0;
  uint64_t driver_state_resent = 0;
  uint64_t driver_state_received = 0;
};

struct ConnectionDebugState {
  Duration srtt;
  Duration min_rtt;
  Duration rttvar;
  Duration latest_rtt;
  Bandwidth pacing_rate;
  ByteCount bytes_in_flight = 0;
  ByteCount congestion_window = 0;
  uint32_t reorder_packets = 0;  // current packet threshold (adapts)
  double reorder_rtt_fraction = 0;
  uint32_t pto_backoff = 0;
  const char* cc_mode = "";
  Bandwidth cc_bandwidth_estimate;
  double cc_pacing_gain = 1.0;
  bool cc_competed = false;  // cc=bbr competed with queue-building traffic at some point
  uint32_t fec_k = 0;
  uint32_t fec_m = 0;
  uint32_t fec_interleave = 0;
  // FEC auto: the policy's last decision: why (fec::FecPolicyReasonName: "meets-target",
  // "best-effort" where no parity within fec_max_overhead meets the target, ...; "start"
  // before the first, "" outside mode auto), the loss rate and mean burst it decided on,
  // and the repair rounds per message it expects of its choice.
  const char* fec_reason = "";
  double fec_loss_estimate = 0;
  double fec_burst_estimate = 0;
  double fec_expected_repairs = 0;
  double peer_loss_rate = 0;
  double peer_mean_burst = 0;
  ByteCount datagram_size = 0;     // largest packet sent now (path MTU search, path_mtu.h)
  uint64_t pmtu_black_holes = 0;   // falls to the base size after large packets vanished
  uint64_t pmtu_probes_sent = 0;
};

}  // namespace longhaul
