// Writing the send stream into a packet as DATA frames (the sender's packetizer).
//
// A data packet carries one contiguous run of stream units: the lowest range queued for
// retransmission, or else new units, where small messages share the packet (the run
// goes on into the next message while at least 64 bytes of room remain). A run is
// written as one DATA frame per message piece (docs/wire-format.md).
//
// With FEC active the packet is a source packet: a FEC_SOURCE tag (block, index, k, m)
// from the FecSender comes first, and the frames after it form the packet's shard, which
// the FecSender folds into its block's parity once written. A shard must fit into a
// repair packet of the same datagram size, so the run is cut to that budget.
//
// Functions over the caller's objects, no state of their own; the caller (the
// Connection) counts what was written from the SentPacket record. Not thread-safe.
#pragma once

#include <cstdint>

#include "transport/base/units.h"
#include "transport/core/send/fec_sender.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"
#include "transport/wire/packet.h"

namespace longhaul {

// What the packet may carry.
struct DataLimits {
  uint64_t segment = 0;                // most stream units per packet (the current segment)
  ByteCount max_datagram = 0;          // datagram size of the current segment (shard budget)
  uint64_t credit = 0;                 // the peer's credit: only units below it may be sent
  uint32_t max_inflight_messages = 0;  // TransportConfig::max_inflight_messages
};

// Fills the packet with one run of stream units, repairs first, as a FEC source packet
// when `fec` is active and the tag fits. Records the run (stream_start, stream_units,
// retransmission) and the FEC membership (fec_member, fec_block, fec_index) in `record`.
// `pn` is the packet's number (part of its shard). False if nothing was written (no
// data may be sent, or no room).
bool WriteDataPacket(Time now, PacketNumber pn, const DataLimits& limits, SendStream* stream,
                     FecSender* fec, wire::PacketWriter* w, SentPacket* record);

// Writes the units [start, start + units) again (a tail-protection copy), cut to what
// fits behind what the packet already holds. Records the run as a retransmission. False
// if nothing fits.
bool WriteDataCopy(const SendStream& stream, uint64_t start, uint64_t units, wire::PacketWriter* w,
                   SentPacket* record);

// Writes the units [start, start + units) as one DATA frame per message piece; they must
// fit (CHECK).
void WriteStreamRun(const SendStream& stream, uint64_t start, uint64_t units,
                    wire::PacketWriter* w);

}  // namespace longhaul
