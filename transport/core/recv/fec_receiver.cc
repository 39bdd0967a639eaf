#include "transport/core/recv/fec_receiver.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul {
namespace {

PacketNumber GetPacketNumber(const uint8_t* p) {
  PacketNumber v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

// Blocks more than this many ids below the newest one are retired even if incomplete:
// bounds the decoders alive when repair shards are lost.
constexpr uint64_t kMaxOpenBlocks = 8192;

}  // namespace

FecReceiver::FecReceiver(ByteCount max_shard, size_t max_shards_held)
    : pool_(fec::RoundUpToShardAlignment(max_shard), max_shards_held) {}

FecReceiver::Block* FecReceiver::Find(Time now, uint64_t block_id) {
  auto it = blocks_.find(block_id);
  if (it != blocks_.end()) return &it->second;
  if (block_id < floor_ || retired_.Contains(block_id)) return nullptr;
  // Bound the number of open blocks: the oldest give way.
  while (blocks_.size() >= kMaxOpenBlocks) Retire(blocks_.begin()->first);
  Block b;
  if (!spare_.empty()) {
    b.decoder = std::move(spare_.back());
    spare_.pop_back();
  } else {
    b.decoder = std::make_unique<fec::BlockDecoder>(&codec_, &pool_);
  }
  b.decoder->Begin(block_id);
  b.created = now;
  return &blocks_.emplace(block_id, std::move(b)).first->second;
}

void FecReceiver::Retire(uint64_t block_id) {
  auto it = blocks_.find(block_id);
  if (it == blocks_.end()) return;
  fec::BlockDecoder& d = *it->second.decoder;
  if (!d.complete() && (d.missing_data_shards() != 0)) ++stats_.blocks_unrecoverable;
  d.Reset();
  spare_.push_back(std::move(it->second.decoder));
  blocks_.erase(it);
  retired_.Add(block_id, block_id + 1);
  // Keep the retired set small: everything far below the open blocks is forgotten
  // (shards for such old blocks are dropped by the age check in Find's callers).
  if (retired_.interval_count() > 4096) {
    floor_ = std::max(floor_, retired_.front().second);
    retired_.EraseBelow(floor_);
  }
}

absl::Status FecReceiver::AfterAdd(uint64_t block_id, Block* b, absl::Status added) {
  if (absl::IsResourceExhausted(added)) {
    ++stats_.shards_dropped;
    return absl::OkStatus();
  }
  LH_RETURN_IF_ERROR(added);
  fec::BlockDecoder& d = *b->decoder;
  if (d.CanRecover()) {
    absl::StatusOr<std::span<const fec::RecoveredShard>> rec = d.Recover();
    if (rec.ok()) {
      // Copy out: the decoder is reset when retired below.
      size_t total = 0;
      for (const auto& r : *rec) total += r.length;
      scratch_.resize(total);
      size_t off = 0;
      for (const auto& r : *rec) {
        std::memcpy(scratch_.data() + off, r.bytes, r.length);
        off += r.length;
      }
      off = 0;
      for (const auto& r : *rec) {
        const uint8_t* p = scratch_.data() + off;
        recovered_.push_back(RecoveredPacket{GetPacketNumber(p),
                                             std::span<const uint8_t>(p + 8, r.length - 8)});
        off += r.length;
        ++stats_.recovered_packets;
      }
    } else if (absl::IsResourceExhausted(rec.status())) {
      ++stats_.shards_dropped;
    }
  }
  if (d.complete()) Retire(block_id);
  return absl::OkStatus();
}

absl::Status FecReceiver::OnSource(Time now, const wire::FecSourceFrame& tag, PacketNumber pn,
                                   std::span<const uint8_t> frames_after_tag) {
  recovered_.clear();
  Block* b = Find(now, tag.block_id);
  if (b == nullptr) return absl::OkStatus();
  uint8_t pn_bytes[8];
  for (int i = 0; i < 8; ++i) pn_bytes[i] = static_cast<uint8_t>(pn >> (56 - 8 * i));
  const std::span<const uint8_t> parts[2] = {std::span<const uint8_t>(pn_bytes, 8),
                                             frames_after_tag};
  return AfterAdd(tag.block_id, b,
                  b->decoder->AddShardParts(fec::ShardInfo::Data(tag.index, tag.k, tag.m), parts));
}

absl::Status FecReceiver::OnRepair(Time now, const wire::FecRepairFrame& repair) {
  recovered_.clear();
  if (repair.length < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("FEC repair shard of ", repair.length, " bytes is shorter than a packet number"));
  }
  Block* b = Find(now, repair.block_id);
  if (b == nullptr) return absl::OkStatus();
  return AfterAdd(repair.block_id, b,
                  b->decoder->AddShard(fec::ShardInfo::Parity(repair.index, repair.k, repair.m),
                                       repair.payload, repair.length));
}

void FecReceiver::Expire(Time horizon) {
  while (!blocks_.empty() && blocks_.begin()->second.created < horizon) {
    Retire(blocks_.begin()->first);
  }
}

}  // namespace longhaul
