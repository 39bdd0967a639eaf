// Interleaver: maps the sender's sequence of FEC-protected data packets onto blocks.
//
// With depth D, packets are dealt round-robin over a group of D open blocks: packet j of
// a group goes to block (base + j mod D) as data shard (j / D). A group holds D * k
// packets; consecutive shards of one block are D packets apart on the wire, so a burst
// of b consecutive losses costs each block about ceil(b / D) shards instead of costing
// one block b shards. D = 1 is plain consecutive blocking.
//
// Block ids are consecutive across groups. A group can end early (Flush(): message end
// or flush deadline); its non-empty blocks then close shortened (k' < k), the next
// packet starts a new group, and the ids stay consecutive (empty blocks get no id).
//
// Parity emission: the loss model behind the auto policy assumes a block's repair
// packets are spread like its data. The transport should therefore queue the repair
// shards of closing blocks and send them round-robin across blocks (repair r of every
// closing block before repair r + 1 of any), not m back to back; see docs/fec.md.
//
// Pure value type: no allocation except Flush()'s result for D > 16; thread-compatible.
#pragma once

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"

namespace longhaul::fec {

struct InterleaveSlot {
  uint64_t block_id = 0;
  uint32_t block_in_group = 0;  // 0..D-1
  uint32_t shard_index = 0;     // data shard index within the block, 0..k-1
  bool opens_block = false;     // first shard of the block: BlockEncoder::Begin() it
  bool closes_block = false;    // k-th shard: the block is full, Finish(k) it
  bool closes_group = false;    // last packet of the group (all D blocks are full)
};

// The slot of packet `j` (0-based) in an uninterrupted run of full groups whose first
// block id is `base_block`. Pure. Requires k >= 1 and depth >= 1.
InterleaveSlot MapToBlock(uint64_t j, uint32_t k, uint32_t depth, uint64_t base_block = 0);

struct ClosedBlock {
  uint64_t block_id = 0;
  uint32_t block_in_group = 0;  // same as the InterleaveSlot of its shards
  uint32_t data_shards = 0;     // k' for BlockEncoder::Finish()
};

class Interleaver {
 public:
  // k: data shards per full block (1..254); depth: blocks per group (>= 1).
  Interleaver(uint32_t k, uint32_t depth, uint64_t first_block_id = 0);

  // Assigns the next data packet.
  InterleaveSlot Next();

  // Ends the current group early. Returns its blocks that hold shards and are not yet
  // full (the full ones were already reported by closes_block), in id order, with their
  // data shard counts. Empty when the group is empty.
  absl::InlinedVector<ClosedBlock, 16> Flush();

  // Changes k and depth. Only between groups (after Flush() or a closes_group slot);
  // FailedPrecondition otherwise, InvalidArgument for k or depth of 0.
  absl::Status Reconfigure(uint32_t k, uint32_t depth);

  uint32_t k() const { return k_; }
  uint32_t depth() const { return depth_; }
  uint64_t group_base() const { return base_; }       // first block id of this group
  uint64_t packets_in_group() const { return pos_; }  // packets assigned in this group
  uint64_t next_block_id() const;  // first id the next group will use if this one ends now

 private:
  uint32_t k_;
  uint32_t depth_;
  uint64_t base_;
  uint64_t pos_ = 0;
};

}  // namespace longhaul::fec
