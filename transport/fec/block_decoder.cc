#include "transport/fec/block_decoder.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"

namespace longhaul::fec {

BlockDecoder::BlockDecoder(FecCodec* codec, ShardPool* pool) : codec_(codec), pool_(pool) {
  CHECK(codec_ != nullptr);
  CHECK(pool_ != nullptr);
}

BlockDecoder::~BlockDecoder() { Begin(0); }

void BlockDecoder::Begin(uint64_t block_id) {
  // Only slots that can be in use are visited: indices below the largest k seen.
  const int data_slots = std::max({k_bound_, k_, max_data_index_ + 1});
  for (int j = 0; j < data_slots; ++j) {
    if (data_[j] != nullptr) pool_->Release(data_[j]);
    data_[j] = nullptr;
    data_len_[j] = 0;
  }
  for (int r = 0; r < m_; ++r) {
    if (parity_[r] != nullptr) pool_->Release(parity_[r]);
    parity_[r] = nullptr;
    parity_seen_flags_[r] = false;
  }
  block_id_ = block_id;
  k_bound_ = 0;
  k_ = 0;
  m_ = 0;
  length_ = 0;
  wire_length_ = 0;
  max_data_len_ = 0;
  max_data_index_ = -1;
  data_count_ = 0;
  parity_count_ = 0;
  parity_seen_ = 0;
  recovered_total_ = 0;
  duplicates_ = 0;
  recovered_.clear();
}

absl::Status BlockDecoder::CheckGeometry(const ShardInfo& info, size_t len) {
  auto bad = [&](auto&&... detail) {
    return absl::InvalidArgumentError(
        absl::StrCat("FEC block ", block_id_, ", ", info.parity ? "repair" : "data", " shard ",
                     info.index, " (k=", info.k, " m=", info.m, " len=", len, "): ", detail...));
  };
  if (absl::Status s = ValidateGeometry(info.k, info.m); !s.ok()) return bad(s.message());
  if (m_ != 0 && info.m != m_) return bad("block has m=", m_);
  if (len == 0 || len > pool_->shard_capacity()) {
    return bad("length outside 1..", pool_->shard_capacity());
  }
  if (!info.parity) {
    if (info.index < 0 || info.index >= info.k) return bad("index outside k");
    if (k_ != 0 && info.index >= k_) return bad("block has ", k_, " data shards");
    if (wire_length_ != 0 && len > wire_length_) {
      return bad("longer than the block's shards (", wire_length_, ")");
    }
  } else {
    if (info.index < 0 || info.index >= info.m) return bad("index outside m");
    if (k_ != 0 && info.k != k_) return bad("block has ", k_, " data shards");
    if (info.k <= max_data_index_) return bad("block has data shard ", max_data_index_);
    if (info.k > k_bound_ && k_bound_ != 0) return bad("source tags said k<=", k_bound_);
    if (RoundUpToShardAlignment(len) > pool_->shard_capacity()) {
      return bad("padded length over ", pool_->shard_capacity());
    }
    if (wire_length_ != 0 && len != wire_length_) {
      return bad("block's shards are ", wire_length_, " bytes");
    }
    if (len < max_data_len_) return bad("shorter than data shard of ", max_data_len_, " bytes");
  }
  return absl::OkStatus();
}

absl::Status BlockDecoder::AddShard(const ShardInfo& info, const uint8_t* bytes, size_t len) {
  if (bytes == nullptr && len != 0) return absl::InvalidArgumentError("null shard bytes");
  const std::span<const uint8_t> part(bytes, bytes == nullptr ? 0 : len);
  return AddShardParts(info, std::span<const std::span<const uint8_t>>(&part, 1));
}

namespace {
void CopyParts(uint8_t* dst, std::span<const std::span<const uint8_t>> parts) {
  for (const auto& part : parts) {
    if (part.empty()) continue;
    std::memcpy(dst, part.data(), part.size());
    dst += part.size();
  }
}
}  // namespace

absl::Status BlockDecoder::AddShardParts(const ShardInfo& info,
                                         std::span<const std::span<const uint8_t>> parts) {
  size_t len = 0;
  for (const auto& part : parts) len += part.size();
  LH_RETURN_IF_ERROR(CheckGeometry(info, len));
  m_ = info.m;
  if (!info.parity) {
    k_bound_ = std::max(k_bound_, info.k);
    if (data_[info.index] != nullptr) {
      ++duplicates_;
      return absl::OkStatus();
    }
    uint8_t* b = pool_->Acquire();
    if (b == nullptr) return absl::ResourceExhaustedError("FEC shard pool exhausted (decoder)");
    CopyParts(b, parts);
    data_[info.index] = b;
    data_len_[info.index] = static_cast<uint32_t>(len);
    max_data_len_ = std::max(max_data_len_, len);
    max_data_index_ = std::max(max_data_index_, info.index);
    ++data_count_;
    return absl::OkStatus();
  }
  if (parity_seen_flags_[info.index]) {
    ++duplicates_;
    return absl::OkStatus();
  }
  parity_seen_flags_[info.index] = true;
  ++parity_seen_;
  k_ = info.k;
  wire_length_ = len;
  length_ = RoundUpToShardAlignment(len);
  // Any k' shards rebuild the block, and later data arrivals only lower the need, so a
  // repair shard is worth keeping only while fewer than k' shards are held.
  if (data_count_ + parity_count_ >= k_) return absl::OkStatus();
  uint8_t* b = pool_->Acquire();
  if (b == nullptr) return absl::ResourceExhaustedError("FEC shard pool exhausted (decoder)");
  CopyParts(b, parts);
  if (len < length_) std::memset(b + len, 0, length_ - len);
  parity_[info.index] = b;
  ++parity_count_;
  return absl::OkStatus();
}

absl::StatusOr<std::span<const RecoveredShard>> BlockDecoder::Recover() {
  recovered_.clear();
  if (complete()) return std::span<const RecoveredShard>();
  if (!CanRecover()) {
    if (k_ == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("FEC block ", block_id_, ": no repair shard received"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("FEC block ", block_id_, ": ", k_ - data_count_, " of ", k_,
                     " data shards missing, only ", parity_count_, " repair shards held"));
  }
  const int e = k_ - data_count_;
  std::array<uint8_t, kMaxShards> lost;
  std::array<uint8_t, kMaxShards> rows;
  std::array<uint8_t*, kMaxShards> inputs;
  std::array<uint8_t*, kMaxShards> outputs;
  int s = 0;
  int l = 0;
  for (int j = 0; j < k_; ++j) {
    if (data_[j] == nullptr) {
      lost[l++] = static_cast<uint8_t>(j);
      continue;
    }
    if (data_len_[j] < length_) {
      std::memset(data_[j] + data_len_[j], 0, length_ - data_len_[j]);
      data_len_[j] = static_cast<uint32_t>(length_);
    }
    inputs[s++] = data_[j];
  }
  DCHECK_EQ(l, e);
  int p = 0;
  for (int r = 0; r < m_ && p < e; ++r) {
    if (parity_[r] != nullptr) {
      rows[p] = static_cast<uint8_t>(r);
      inputs[s + p] = parity_[r];
      ++p;
    }
  }
  CHECK_EQ(p, e) << "CanRecover() promised enough repair shards";

  LH_ASSIGN_OR_RETURN(std::shared_ptr<const GfTables> tables,
                      codec_->DecodeTables(k_, std::span<const uint8_t>(lost.data(), e),
                                           std::span<const uint8_t>(rows.data(), e)));
  for (int i = 0; i < e; ++i) {
    outputs[i] = pool_->Acquire();
    if (outputs[i] == nullptr) {
      for (int u = 0; u < i; ++u) pool_->Release(outputs[u]);
      return absl::ResourceExhaustedError("FEC shard pool exhausted (recovery)");
    }
  }
  ec_encode_data(static_cast<int>(length_), k_, e, tables->data(), inputs.data(), outputs.data());
  for (int i = 0; i < e; ++i) {
    data_[lost[i]] = outputs[i];
    data_len_[lost[i]] = static_cast<uint32_t>(length_);
    recovered_.push_back(RecoveredShard{lost[i], outputs[i], length_});
  }
  data_count_ = k_;
  recovered_total_ += e;
  return std::span<const RecoveredShard>(recovered_.data(), recovered_.size());
}

BlockDecoder::DebugState BlockDecoder::debug_state() const {
  DebugState d;
  d.block_id = block_id_;
  d.k_bound = k_bound_;
  d.k = k_;
  d.m = m_;
  d.shard_length = length_;
  d.data_present = data_count_;
  d.parity_held = parity_count_;
  d.parity_seen = parity_seen_;
  d.duplicates = duplicates_;
  d.recovered = recovered_total_;
  return d;
}

}  // namespace longhaul::fec
