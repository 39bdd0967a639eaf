#include "transport/core/send/data_writer.h"

#include <algorithm>

#include "glog/logging.h"

namespace longhaul {
namespace {

// FEC_REPAIR frame header at its largest (type, 8-byte block id, index, k, m, length).
constexpr uint64_t kRepairFrameOverhead = 1 + 8 + 3 + 4;
// Below this much room a packet is not worth continuing into the next message.
constexpr uint64_t kMinContinuation = 64;

// Payload room for one more DATA frame: what remains minus a full-width frame header.
uint64_t DataRoom(const wire::PacketWriter& w) {
  const size_t r = w.remaining();
  return r > wire::kMaxDataFrameHeaderSize ? r - wire::kMaxDataFrameHeaderSize : 0;
}

// Writes one message piece as a DATA frame. False (nothing written) if it does not fit.
bool WritePiece(const MessagePiece& piece, wire::PacketWriter* w) {
  wire::DataFrame df;
  df.flags = (piece.last ? wire::kDataFlagLast : 0) |
             (piece.message->unordered ? wire::kDataFlagUnordered : 0);
  df.message_id = piece.message->id;
  df.message_length = piece.message->size;
  df.offset = piece.offset;
  df.stream_base = piece.message->base;
  df.length = piece.length;
  df.payload = piece.length ? piece.message->data + piece.offset : nullptr;
  df.region = piece.message->region;
  df.placement_key = piece.message->placement_key;
  return w->WriteData(df) != nullptr;
}

}  // namespace

void WriteStreamRun(const SendStream& stream, uint64_t start, uint64_t units,
                    wire::PacketWriter* w) {
  uint64_t u = start, left = units;
  while (left > 0) {
    MessagePiece piece = stream.PieceAt(u, left);
    CHECK(WritePiece(piece, w)) << "DATA frame did not fit";
    u += piece.units;
    left -= piece.units;
  }
}

bool WriteDataPacket(Time now, PacketNumber pn, const DataLimits& limits, SendStream* stream,
                     FecSender* fec_tx, wire::PacketWriter* w, SentPacket* rec) {
  uint64_t start = 0, units = 0;
  bool retx = false;
  const bool fec = fec_tx->active() && w->remaining() > wire::kFecSourceFrameSize + 64;
  // With FEC the frames after the tag become a shard that must fit a repair packet.
  auto fec_room = [&]() -> uint64_t {
    uint64_t r = DataRoom(*w);
    if (!fec) return r;
    r = r > wire::kFecSourceFrameSize ? r - wire::kFecSourceFrameSize : 0;
    const uint64_t shard_budget = limits.max_datagram - wire::kPacketOverhead -
                                  kRepairFrameOverhead - 8 - wire::kMaxDataFrameHeaderSize;
    return std::min(r, shard_budget);
  };
  uint64_t max_units = std::min<uint64_t>(fec_room(), limits.segment);
  if (max_units == 0) return false;
  if (stream->TakeRetransmission(max_units, &start, &units)) {
    retx = true;
  } else if (!(stream->has_unsent() &&
               stream->NextUnsentMessageAllowed(limits.max_inflight_messages) &&
               stream->TakeUnsent(max_units, limits.credit, &start, &units))) {
    return false;
  }
  uint8_t* tag_end = nullptr;
  const size_t elided_before = w->elided();
  if (fec) {
    w->set_defer_payload(false);  // the encoder reads the shard from the packet
    wire::FecSourceFrame tag = fec_tx->NextSource(now);
    CHECK(w->WriteFecSource(tag));
    tag_end = w->cursor();
    rec->fec_member = true;
    rec->fec_block = tag.block_id;
    rec->fec_index = tag.index;
  }
  uint64_t run_start = start, run_units = 0;
  uint64_t budget = std::min<uint64_t>(limits.segment, fec ? max_units : limits.segment);
  while (true) {
    WriteStreamRun(*stream, start, units, w);
    run_units += units;
    budget -= std::min(budget, units);
    // Small messages: keep filling with the next contiguous new units.
    if (retx || budget == 0) break;
    uint64_t more = std::min<uint64_t>(DataRoom(*w), budget);
    if (more < kMinContinuation || !stream->has_unsent() ||
        stream->next_unsent() != start + units ||
        !stream->NextUnsentMessageAllowed(limits.max_inflight_messages)) {
      break;
    }
    uint64_t s2, u2;
    if (!stream->TakeUnsent(more, limits.credit, &s2, &u2)) break;
    start = s2;
    units = u2;
  }
  if (fec) {
    fec_tx->AddShard(pn, std::span<const uint8_t>(tag_end, w->cursor() - tag_end),
                     w->elided() - elided_before);
  }
  rec->stream_start = run_start;
  rec->stream_units = static_cast<uint32_t>(run_units);
  rec->retransmission = retx;
  return true;
}

bool WriteDataCopy(const SendStream& stream, uint64_t start, uint64_t units, wire::PacketWriter* w,
                   SentPacket* rec) {
  // The original packet had no ACK in front of its data; this one may: copy the
  // leading pieces that fit. A run of small messages is one frame (and one frame
  // header) per message, so the room is checked piece by piece.
  uint64_t u = start, left = units, copied = 0;
  while (left > 0 && w->remaining() > wire::kMaxDataFrameHeaderSize) {
    MessagePiece piece = stream.PieceAt(u, left);
    if (piece.length > 0) {
      const uint64_t room = DataRoom(*w);
      if (room == 0) break;
      if (piece.units > room) piece = stream.PieceAt(u, room);
    }
    if (!WritePiece(piece, w)) break;
    u += piece.units;
    left -= piece.units;
    copied += piece.units;
  }
  if (copied == 0) return false;
  rec->stream_start = start;
  rec->stream_units = static_cast<uint32_t>(copied);
  rec->retransmission = true;
  return true;
}

}  // namespace longhaul
