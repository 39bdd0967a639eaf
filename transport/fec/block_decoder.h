// BlockDecoder: collects the shards of one FEC block on the receiver and rebuilds lost
// data shards once enough have arrived.
//
// The transport delivers every data packet as usual (the code is systematic) and also
// hands its shard here; repair packets only come here. When the loss detector declares
// data packets of the block missing, CanRecover() says whether the shards at hand rebuild
// them, and Recover() returns the rebuilt shards (packet frames plus zero padding, which
// parses as PADDING frames) for the transport to process as if they had arrived.
//
// Geometry on the wire: source tags carry the block's nominal k (an upper bound: the
// sender may close the block early), repair frames carry the exact data shard count k'
// and the shard length. So the block's size is known once any repair shard arrives;
// recovery needs one anyway.
//
// Storage: data shards are copied (the datagram buffer is transient) into pool buffers.
// A repair shard is copied only while it can still be needed, i.e. while the shards held
// are fewer than k'; in a loss-free block no repair shard is ever copied. Recovery with
// e data shards missing uses the e lowest-numbered repair shards held, and decode tables
// from the codec's cache (no matrix inversion in the common case).
//
// Failure is a status, never a crash: more than m losses -> CanRecover() stays false and
// Recover() returns FailedPrecondition (fall back to selective repeat); a shard that
// contradicts the block (geometry, length, index) -> InvalidArgument, a protocol
// violation by the peer. A decoder with no block begun accepts shards for block 0.
//
// Ownership: `codec` and `pool` must outlive the decoder. Views returned by Recover() are
// valid until the next Begin()/Reset() or destruction.
// Thread-safety: none.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/fec/cauchy_code.h"
#include "transport/fec/fec_codec.h"
#include "transport/fec/shard_pool.h"

namespace longhaul::fec {

// What a shard's FEC frame says about it.
struct ShardInfo {
  bool parity = false;
  int index = 0;  // data: 0..k-1; parity: 0..m-1
  int k = 0;      // data: nominal k (upper bound); parity: exact data shard count
  int m = 0;      // parity shards in the block
  static ShardInfo Data(int index, int k, int m) { return {false, index, k, m}; }
  static ShardInfo Parity(int index, int k, int m) { return {true, index, k, m}; }
};

struct RecoveredShard {
  int index = 0;                   // data shard index
  const uint8_t* bytes = nullptr;  // `length` bytes: the shard, zero-padded
  size_t length = 0;               // the block's shard length (multiple of 64)
};

class BlockDecoder {
 public:
  BlockDecoder(FecCodec* codec, ShardPool* pool);
  ~BlockDecoder();
  BlockDecoder(const BlockDecoder&) = delete;
  BlockDecoder& operator=(const BlockDecoder&) = delete;

  // Releases everything held and starts collecting block `block_id`.
  void Begin(uint64_t block_id);
  void Reset() { Begin(0); }

  // Adds one shard of `len` bytes (data: 1..pool capacity; parity: the block's shard
  // length, either padded to a multiple of 64 or exactly the longest data shard's
  // length, in which case the decoder supplies the zero padding; <= pool capacity). Duplicates are ignored (OK).
  // InvalidArgument if the shard contradicts the block; ResourceExhausted if the pool
  // is out of buffers (the shard is dropped; the block may still recover later).
  absl::Status AddShard(const ShardInfo& info, const uint8_t* bytes, size_t len);
  // Same, for a shard made of pieces laid end to end (see BlockEncoder::AddDataShardParts).
  absl::Status AddShardParts(const ShardInfo& info,
                             std::span<const std::span<const uint8_t>> parts);

  // The data shard count k' is known (some repair shard arrived).
  bool size_known() const { return k_ > 0; }
  // All k' data shards are present (received or recovered): nothing to do.
  bool complete() const { return k_ > 0 && data_count_ == k_; }
  // Data shards missing, or -1 while k' is unknown.
  int missing_data_shards() const { return k_ > 0 ? k_ - data_count_ : -1; }
  // Some data shard is missing and the shards held are enough to rebuild all of them.
  bool CanRecover() const {
    return k_ > 0 && data_count_ < k_ && data_count_ + parity_count_ >= k_;
  }

  // Rebuilds every missing data shard and returns them (empty when none was missing).
  // Rebuilt shards then count as present. FailedPrecondition when not CanRecover().
  absl::StatusOr<std::span<const RecoveredShard>> Recover();

  struct DebugState {
    uint64_t block_id = 0;
    int k_bound = 0;  // largest nominal k seen on data shards (0: none)
    int k = 0;        // exact data shard count (0: unknown)
    int m = 0;
    size_t shard_length = 0;  // 0 until a repair shard arrives
    int data_present = 0;
    int parity_held = 0;
    int parity_seen = 0;  // including those not stored
    uint64_t duplicates = 0;
    int recovered = 0;
  };
  DebugState debug_state() const;

 private:
  absl::Status CheckGeometry(const ShardInfo& info, size_t len);

  FecCodec* codec_;
  ShardPool* pool_;
  uint64_t block_id_ = 0;
  int k_bound_ = 0;
  int k_ = 0;
  int m_ = 0;
  size_t length_ = 0;       // padded shard length (multiple of 64)
  size_t wire_length_ = 0;  // repair shard length as received
  size_t max_data_len_ = 0;
  int max_data_index_ = -1;
  int data_count_ = 0;
  int parity_count_ = 0;
  int parity_seen_ = 0;
  int recovered_total_ = 0;
  uint64_t duplicates_ = 0;
  std::array<uint8_t*, kMaxShards> data_{};
  std::array<uint32_t, kMaxShards> data_len_{};
  std::array<uint8_t*, kMaxShards> parity_{};
  std::array<bool, kMaxShards> parity_seen_flags_{};
  absl::InlinedVector<RecoveredShard, 8> recovered_;
};

}  // namespace longhaul::fec
