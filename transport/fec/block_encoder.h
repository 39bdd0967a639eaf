// BlockEncoder: streaming encoder for one FEC block on the sender.
//
// Each data shard is folded into the m parity accumulators as the packet carrying it is
// built (ec_encode_data_update), so the sender never keeps a block's data shards for
// coding; when the block closes, Finish() hands out the parity shards.
//
// Shard layout (set by the transport, see docs/fec.md): data shard = the packet's frames
// after its FEC source tag, implicitly zero-padded to the block's shard length. The shard
// length of a block is the largest data shard added, rounded up to 64 bytes; the parity
// shards have that length and travel in FEC repair frames of that length.
//
// Usage per block (the transport keeps one encoder per interleaved block and reuses it):
//   Begin(block_id, k, m)                       when the block's first packet is built
//   AddDataShard(index, bytes, len)             per data packet, index = 0, 1, ...
//   Finish(k_actual) -> ParityShards            when the block is full (k_actual == k) or
//                                               closed early (message end, flush deadline)
// Shards may be added in any index order, each once. A shortened block (k_actual < k)
// needs no re-encoding: the code's coefficients do not depend on k (cauchy_code.h).
//
// Memory: parity accumulators come from the ShardPool; Finish() moves them into the
// returned ParityShards, which returns them to the pool when destroyed. Neither the
// encoder nor ParityShards allocates on the heap for m <= 8 once the pool is warm.
// Ownership: `codec` and `pool` must outlive the encoder and every ParityShards.
// Thread-safety: none (same thread as its codec and pool).
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/fec/cauchy_code.h"
#include "transport/fec/fec_codec.h"
#include "transport/fec/shard_pool.h"

namespace longhaul::fec {

// The parity of one closed block. Move-only; owns its shard buffers.
class ParityShards {
 public:
  ParityShards() = default;
  ParityShards(ParityShards&&) = default;
  ParityShards& operator=(ParityShards&&) = default;

  uint64_t block_id() const { return block_id_; }
  int k() const { return k_; }  // data shards in the block (the repair frame's k)
  int m() const { return static_cast<int>(shards_.size()); }
  size_t shard_length() const { return length_; }  // bytes per parity shard, multiple of 64
  // The longest data shard of the block, exactly. Parity bytes past it are zero (every
  // data shard is zero there), so a repair frame need only carry this many bytes.
  size_t data_length() const { return data_length_; }
  const uint8_t* shard(int parity_index) const { return shards_[parity_index].data(); }

 private:
  friend class BlockEncoder;
  uint64_t block_id_ = 0;
  int k_ = 0;
  size_t length_ = 0;
  size_t data_length_ = 0;
  absl::InlinedVector<PooledShard, 8> shards_;
};

class BlockEncoder {
 public:
  BlockEncoder(FecCodec* codec, ShardPool* pool);
  ~BlockEncoder();
  BlockEncoder(const BlockEncoder&) = delete;
  BlockEncoder& operator=(const BlockEncoder&) = delete;

  // Opens a block of at most k data shards and m parity shards. FailedPrecondition if a
  // block is open, InvalidArgument on a bad geometry, ResourceExhausted if the pool has
  // no buffers left.
  absl::Status Begin(uint64_t block_id, int k, int m);

  // Folds data shard `index` (< k) of `len` bytes (1..pool shard capacity) into the
  // parity. `bytes` is only read during the call. InvalidArgument on a bad index, a
  // duplicate or a bad length; FailedPrecondition without an open block.
  absl::Status AddDataShard(int index, const uint8_t* bytes, size_t len);

  // Same, for a shard made of several pieces laid end to end (e.g. the packet number
  // from the header followed by the frames after the FEC tag), without assembling it.
  // The shard length is the sum of the pieces.
  absl::Status AddDataShardParts(int index, std::span<const std::span<const uint8_t>> parts);

  // Closes the block with `data_shards` data shards, which must be exactly indices
  // 0..data_shards-1 (1 <= data_shards <= k). Returns the m parity shards; the encoder is
  // then idle until the next Begin(). On error the block stays open.
  absl::StatusOr<ParityShards> Finish(int data_shards);

  // Drops the open block, if any (its buffers go back to the pool).
  void Abandon();

  bool open() const { return open_; }
  uint64_t block_id() const { return block_id_; }
  int k() const { return k_; }
  int m() const { return m_; }
  // Current shard length of the block (largest shard added, rounded up to 64).
  size_t shard_length() const { return extent_; }

 private:
  // Folds `len` bytes (a positive multiple of 64) of data shard `index` into parity bytes
  // [offset, offset + len).
  void Fold(int index, const uint8_t* src, size_t len, size_t offset);

  FecCodec* codec_;
  ShardPool* pool_;
  bool open_ = false;
  uint64_t block_id_ = 0;
  int k_ = 0;
  int m_ = 0;
  int added_count_ = 0;
  size_t extent_ = 0;  // parity bytes [0, extent_) are initialised
  size_t max_len_ = 0;  // longest data shard added
  std::bitset<kMaxShards> added_;
  std::shared_ptr<const GfTables> tables_;
  absl::InlinedVector<PooledShard, 8> parity_;
  absl::InlinedVector<uint8_t*, 8> parity_ptrs_;  // parity_[r].data(), for ISA-L
};

}  // namespace longhaul::fec
