// FecReceiver: the receiver's side of forward error correction.
//
// Every FEC-tagged data packet's shard (8-byte packet number + frames after the tag) and
// every repair shard goes to the decoder of its block. When a block holds enough shards
// to rebuild its missing data packets, they are rebuilt at once and handed back as
// (packet number, frames) for the Connection to process as if they had arrived: their
// data lands, and their packet numbers are acknowledged, so the sender never resends
// them. Blocks are retired when complete, or when older than the retirement horizon
// (then, if data was still missing, they count as unrecoverable: selective repeat
// repairs exactly the missing packets).
//
// Memory is bounded: decoders live only while their block is open (a few groups), and
// shards come from a pool with a limit; a full pool drops shards (counted), never crashes.
// Not thread-safe; owned by the Connection.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "transport/base/interval_set.h"
#include "transport/base/units.h"
#include "transport/fec/block_decoder.h"
#include "transport/fec/fec_codec.h"
#include "transport/fec/shard_pool.h"
#include "transport/wire/packet.h"

namespace longhaul {

struct RecoveredPacket {
  PacketNumber packet_number = 0;
  std::span<const uint8_t> frames;  // valid until the next call into the FecReceiver
};

struct FecReceiverStats {
  uint64_t recovered_packets = 0;
  uint64_t blocks_unrecoverable = 0;
  uint64_t shards_dropped = 0;  // pool exhausted
};

class FecReceiver {
 public:
  explicit FecReceiver(ByteCount max_shard, size_t max_shards_held = 1 << 16);

  // A data packet's shard. InvalidArgument if it contradicts its block (protocol error).
  absl::Status OnSource(Time now, const wire::FecSourceFrame& tag, PacketNumber pn,
                        std::span<const uint8_t> frames_after_tag);
  absl::Status OnRepair(Time now, const wire::FecRepairFrame& repair);

  // Packets rebuilt by the last OnSource/OnRepair call.
  const std::vector<RecoveredPacket>& recovered() const { return recovered_; }

  // Retires blocks created before `horizon`.
  void Expire(Time horizon);

  const FecReceiverStats& stats() const { return stats_; }

 private:
  struct Block {
    std::unique_ptr<fec::BlockDecoder> decoder;
    Time created;
  };
  Block* Find(Time now, uint64_t block_id);
  absl::Status AfterAdd(uint64_t block_id, Block* b, absl::Status added);
  void Retire(uint64_t block_id);

  fec::FecCodec codec_;
  fec::ShardPool pool_;
  absl::btree_map<uint64_t, Block> blocks_;
  IntervalSet retired_;  // block ids already complete or given up
  uint64_t floor_ = 0;   // ids below this (and not open) are long gone: ignored
  std::vector<std::unique_ptr<fec::BlockDecoder>> spare_;
  std::vector<RecoveredPacket> recovered_;
  std::vector<uint8_t> scratch_;
  FecReceiverStats stats_;
};

}  // namespace longhaul
