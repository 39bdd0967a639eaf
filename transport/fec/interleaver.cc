#include "transport/fec/interleaver.h"

#include <algorithm>

#include "glog/logging.h"

namespace longhaul::fec {

InterleaveSlot MapToBlock(uint64_t j, uint32_t k, uint32_t depth, uint64_t base_block) {
  DCHECK_GE(k, 1u);
  DCHECK_GE(depth, 1u);
  const uint64_t group_size = static_cast<uint64_t>(k) * depth;
  const uint64_t group = j / group_size;
  const uint64_t pos = j % group_size;
  InterleaveSlot s;
  s.block_in_group = static_cast<uint32_t>(pos % depth);
  s.shard_index = static_cast<uint32_t>(pos / depth);
  s.block_id = base_block + group * depth + s.block_in_group;
  s.opens_block = s.shard_index == 0;
  s.closes_block = s.shard_index + 1 == k;
  s.closes_group = pos + 1 == group_size;
  return s;
}

Interleaver::Interleaver(uint32_t k, uint32_t depth, uint64_t first_block_id)
    : k_(std::max<uint32_t>(k, 1)), depth_(std::max<uint32_t>(depth, 1)), base_(first_block_id) {
  DCHECK_GE(k, 1u);
  DCHECK_GE(depth, 1u);
}

InterleaveSlot Interleaver::Next() {
  InterleaveSlot s = MapToBlock(pos_, k_, depth_, base_);
  if (s.closes_group) {
    base_ += depth_;
    pos_ = 0;
  } else {
    ++pos_;
  }
  return s;
}

uint64_t Interleaver::next_block_id() const { return base_ + std::min<uint64_t>(pos_, depth_); }

absl::InlinedVector<ClosedBlock, 16> Interleaver::Flush() {
  absl::InlinedVector<ClosedBlock, 16> out;
  if (pos_ == 0) return out;
  // Block b holds the packets j < pos_ with j mod D == b.
  const uint64_t used = std::min<uint64_t>(pos_, depth_);
  for (uint64_t b = 0; b < used; ++b) {
    const uint64_t count = (pos_ - b + depth_ - 1) / depth_;
    if (count < k_)
      out.push_back(ClosedBlock{base_ + b, static_cast<uint32_t>(b), static_cast<uint32_t>(count)});
  }
  base_ += used;
  pos_ = 0;
  return out;
}

absl::Status Interleaver::Reconfigure(uint32_t k, uint32_t depth) {
  if (k == 0 || depth == 0)
    return absl::InvalidArgumentError("interleaver k and depth must be >= 1");
  if (pos_ != 0)
    return absl::FailedPreconditionError("interleaver group is not empty; Flush() first");
  k_ = k;
  depth_ = depth;
  return absl::OkStatus();
}

}  // namespace longhaul::fec
