#include "transport/core/fec/block_encoder.h"

#include <isa-l/erasure_code.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace longhaul::fec {

BlockEncoder::BlockEncoder(FecCodec* codec, ShardPool* pool) : codec_(codec), pool_(pool) {
  CHECK(codec_ != nullptr);
  CHECK(pool_ != nullptr);
}

BlockEncoder::~BlockEncoder() { Abandon(); }

absl::Status BlockEncoder::Begin(uint64_t block_id, int k, int m) {
  if (open_) {
    return absl::FailedPreconditionError(
        absl::StrCat("FEC block ", block_id_, " is still open"));
  }
  if (absl::Status s = ValidateGeometry(k, m); !s.ok()) return s;
  // Reuse the tables when the geometry did not change (the common case).
  if (tables_ == nullptr || tables_->k != k || tables_->rows != m) {
    absl::StatusOr<std::shared_ptr<const GfTables>> tables = codec_->EncodeTables(k, m);
    if (!tables.ok()) return tables.status();
    tables_ = *std::move(tables);
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
  added_.reset();
  return absl::OkStatus();
}

absl::Status BlockEncoder::AddDataShard(int index, const uint8_t* bytes, size_t len) {
  if (!open_) return absl::FailedPreconditionError("no open FEC block");
  if (index < 0 || index >= k_) {
    return absl::InvalidArgumentError(
        absl::StrCat("data shard index ", index, " outside block of k=", k_));
  }
  if (added_[index]) {
    return absl::InvalidArgumentError(absl::StrCat("data shard ", index, " added twice"));
  }
  if (len == 0 || len > pool_->shard_capacity() || bytes == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data shard length ", len, " outside 1..", pool_->shard_capacity()));
  }
  // Bytes past `len` are zero, and zero contributes nothing: only the shard's own bytes
  // are folded. The accumulators are zeroed lazily, up to the longest shard so far.
  const size_t padded = RoundUpToShardAlignment(len);
  if (padded > extent_) {
    for (uint8_t* p : parity_ptrs_) std::memset(p + extent_, 0, padded - extent_);
    extent_ = padded;
  }
  const size_t body = len & ~(kShardAlignment - 1);
  if (body > 0) {
    ec_encode_data_update(static_cast<int>(body), k_, m_, index, tables_->data(),
                          const_cast<uint8_t*>(bytes), parity_ptrs_.data());
  }
  if (const size_t tail = len - body; tail > 0) {
    // The kernels read whole 64-byte vectors: fold the tail from a zero-padded copy.
    alignas(kShardAlignment) uint8_t last[kShardAlignment] = {};
    std::memcpy(last, bytes + body, tail);
    absl::InlinedVector<uint8_t*, 8> at(parity_ptrs_.begin(), parity_ptrs_.end());
    for (uint8_t*& p : at) p += body;
    ec_encode_data_update(static_cast<int>(kShardAlignment), k_, m_, index, tables_->data(),
                          last, at.data());
  }
  added_[index] = true;
  ++added_count_;
  return absl::OkStatus();
}

absl::StatusOr<ParityShards> BlockEncoder::Finish(int data_shards) {
  if (!open_) return absl::FailedPreconditionError("no open FEC block");
  if (data_shards < 1 || data_shards > k_ || data_shards != added_count_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "closing FEC block ", block_id_, " with ", data_shards, " data shards; ",
        added_count_, " were added (k=", k_, ")"));
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
