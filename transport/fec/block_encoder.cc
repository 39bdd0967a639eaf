#include "transport/fec/block_encoder.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"

namespace longhaul::fec {

BlockEncoder::BlockEncoder(FecCodec* codec, ShardPool* pool) : codec_(codec), pool_(pool) {
  CHECK(codec_ != nullptr);
  CHECK(pool_ != nullptr);
}

BlockEncoder::~BlockEncoder() { Abandon(); }

absl::Status BlockEncoder::Begin(uint64_t block_id, int k, int m) {
  if (open_) {
    return absl::FailedPreconditionError(absl::StrCat("FEC block ", block_id_, " is still open"));
  }
  LH_RETURN_IF_ERROR(ValidateGeometry(k, m));
  // Reuse the tables when the geometry did not change (the common case).
  if (tables_ == nullptr || tables_->k != k || tables_->rows != m) {
    LH_ASSIGN_OR_RETURN(tables_, codec_->EncodeTables(k, m));
  }
  parity_.clear();
  parity_ptrs_.clear();
  for (int r = 0; r < m; ++r) {
    uint8_t* b = pool_->Acquire();
    if (b == nullptr) {
      parity_.clear();
      parity_ptrs_.clear();
      return absl::ResourceExhaustedError("FEC shard pool exhausted (encoder)");
    }
    parity_.emplace_back(pool_, b);
    parity_ptrs_.push_back(b);
  }
  open_ = true;
  block_id_ = block_id;
  k_ = k;
  m_ = m;
  added_count_ = 0;
  extent_ = 0;
  max_len_ = 0;
  added_.reset();
  return absl::OkStatus();
}

absl::Status BlockEncoder::AddDataShard(int index, const uint8_t* bytes, size_t len) {
  const std::span<const uint8_t> part(bytes, bytes == nullptr ? 0 : len);
  if (bytes == nullptr && len != 0) return absl::InvalidArgumentError("null data shard");
  return AddDataShardParts(index, std::span<const std::span<const uint8_t>>(&part, 1));
}

void BlockEncoder::Fold(int index, const uint8_t* src, size_t len, size_t offset) {
  if (offset == 0) {
    ec_encode_data_update(static_cast<int>(len), k_, m_, index, tables_->data(),
                          const_cast<uint8_t*>(src), parity_ptrs_.data());
    return;
  }
  absl::InlinedVector<uint8_t*, 8> at(parity_ptrs_.begin(), parity_ptrs_.end());
  for (uint8_t*& p : at) p += offset;
  ec_encode_data_update(static_cast<int>(len), k_, m_, index, tables_->data(),
                        const_cast<uint8_t*>(src), at.data());
}

absl::Status BlockEncoder::AddDataShardParts(int index,
                                             std::span<const std::span<const uint8_t>> parts) {
  if (!open_) return absl::FailedPreconditionError("no open FEC block");
  if (index < 0 || index >= k_) {
    return absl::InvalidArgumentError(
        absl::StrCat("data shard index ", index, " outside block of k=", k_));
  }
  if (added_[index]) {
    return absl::InvalidArgumentError(absl::StrCat("data shard ", index, " added twice"));
  }
  size_t len = 0;
  for (const auto& part : parts) len += part.size();
  if (len == 0 || len > pool_->shard_capacity()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data shard length ", len, " outside 1..", pool_->shard_capacity()));
  }
  // Bytes past `len` are zero, and zero contributes nothing: only the shard's own bytes
  // are folded. The accumulators are zeroed lazily, up to the longest shard so far.
  const size_t padded = RoundUpToShardAlignment(len);
  max_len_ = std::max(max_len_, len);
  if (padded > extent_) {
    for (uint8_t* p : parity_ptrs_) std::memset(p + extent_, 0, padded - extent_);
    extent_ = padded;
  }
  // The kernels work on whole 64-byte vectors. Runs of 64-byte multiples are folded in
  // place; bytes straddling a piece boundary, and the final partial vector, go through
  // a small zero-padded carry buffer. Fold offsets therefore stay multiples of 64.
  alignas(kShardAlignment) uint8_t carry[kShardAlignment];
  size_t carry_len = 0;
  size_t offset = 0;
  for (const auto& part : parts) {
    const uint8_t* p = part.data();
    size_t n = part.size();
    if (carry_len > 0) {
      const size_t take = std::min(kShardAlignment - carry_len, n);
      std::memcpy(carry + carry_len, p, take);
      carry_len += take;
      p += take;
      n -= take;
      if (carry_len < kShardAlignment) continue;  // piece exhausted
      Fold(index, carry, kShardAlignment, offset);
      offset += kShardAlignment;
      carry_len = 0;
    }
    if (const size_t body = n & ~(kShardAlignment - 1); body > 0) {
      Fold(index, p, body, offset);
      offset += body;
      p += body;
      n -= body;
    }
    if (n > 0) {
      std::memcpy(carry, p, n);
      carry_len = n;
    }
  }
  if (carry_len > 0) {
    std::memset(carry + carry_len, 0, kShardAlignment - carry_len);
    Fold(index, carry, kShardAlignment, offset);
  }
  added_[index] = true;
  ++added_count_;
  return absl::OkStatus();
}

absl::StatusOr<ParityShards> BlockEncoder::Finish(int data_shards) {
  if (!open_) return absl::FailedPreconditionError("no open FEC block");
  if (data_shards < 1 || data_shards > k_ || data_shards != added_count_) {
    return absl::InvalidArgumentError(absl::StrCat("closing FEC block ", block_id_, " with ",
                                                   data_shards, " data shards; ", added_count_,
                                                   " were added (k=", k_, ")"));
  }
  for (int j = 0; j < data_shards; ++j) {
    if (!added_[j]) {
      return absl::InvalidArgumentError(
          absl::StrCat("closing FEC block ", block_id_, ": data shard ", j, " missing"));
    }
  }
  ParityShards out;
  out.block_id_ = block_id_;
  out.k_ = data_shards;
  out.length_ = extent_;
  out.data_length_ = max_len_;
  out.shards_ = std::move(parity_);
  parity_.clear();
  parity_ptrs_.clear();
  open_ = false;
  return out;
}

void BlockEncoder::Abandon() {
  parity_.clear();
  parity_ptrs_.clear();
  open_ = false;
}

}  // namespace longhaul::fec
