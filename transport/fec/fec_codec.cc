#include "transport/fec/fec_codec.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"

namespace longhaul::fec {
namespace {

absl::Status CheckLength(size_t len) {
  if (len == 0 || len % kShardAlignment != 0 || len > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard length ", len, " must be a positive multiple of 64"));
  }
  return absl::OkStatus();
}

}  // namespace

bool FecCodec::DecodeKey::operator==(const DecodeKey& o) const {
  return k == o.k && e == o.e && std::memcmp(ids, o.ids, 2 * static_cast<size_t>(e)) == 0;
}

FecCodec::FecCodec(const FecCodecOptions& options) : options_(options) {
  if (options_.encode_cache_entries == 0) options_.encode_cache_entries = 1;
}

size_t FecCodec::EntryBytes(const GfTables& t) {
  // Table bytes plus a rough allowance for the list node, index slot and control block.
  return t.bytes.size() + 128;
}

absl::StatusOr<std::shared_ptr<const GfTables>> FecCodec::EncodeTables(int k, int m) {
  LH_RETURN_IF_ERROR(ValidateGeometry(k, m));
  const EncodeKey key{k, m};
  for (auto it = encode_lru_.begin(); it != encode_lru_.end(); ++it) {
    if (it->first == key) {
      ++stats_.encode_table_hits;
      if (it != encode_lru_.begin()) encode_lru_.splice(encode_lru_.begin(), encode_lru_, it);
      return encode_lru_.front().second;
    }
  }
  ++stats_.encode_table_builds;
  auto tables = std::make_shared<GfTables>();
  tables->k = k;
  tables->rows = m;
  tables->bytes.resize(32 * static_cast<size_t>(k) * m);
  std::vector<uint8_t> matrix(static_cast<size_t>(k) * m);
  ParityMatrix(k, m, matrix.data());
  ec_init_tables(k, m, matrix.data(), tables->bytes.data());
  encode_lru_.emplace_front(key, std::move(tables));
  while (encode_lru_.size() > options_.encode_cache_entries) encode_lru_.pop_back();
  return encode_lru_.front().second;
}

absl::StatusOr<std::shared_ptr<const GfTables>> FecCodec::BuildDecodeTables(
    int k, std::span<const uint8_t> lost, std::span<const uint8_t> parity_rows) {
  const int e = static_cast<int>(lost.size());
  std::vector<uint8_t> matrix(static_cast<size_t>(e) * k);
  LH_RETURN_IF_ERROR(DecodeMatrix(k, lost, parity_rows, matrix.data()));
  auto tables = std::make_shared<GfTables>();
  tables->k = k;
  tables->rows = e;
  tables->bytes.resize(32 * static_cast<size_t>(k) * e);
  ec_init_tables(k, e, matrix.data(), tables->bytes.data());
  return tables;
}

void FecCodec::EvictDecodeUntilFits(size_t incoming) {
  while (!decode_lru_.empty() &&
         stats_.decode_cache_bytes + incoming > options_.decode_cache_bytes) {
    const LruEntry& victim = decode_lru_.back();
    stats_.decode_cache_bytes -= EntryBytes(*victim.tables);
    decode_index_.erase(victim.key);
    decode_lru_.pop_back();
    ++stats_.decode_evictions;
  }
  stats_.decode_cache_entries = decode_lru_.size();
}

absl::StatusOr<std::shared_ptr<const GfTables>> FecCodec::DecodeTables(
    int k, std::span<const uint8_t> lost, std::span<const uint8_t> parity_rows) {
  const size_t e = lost.size();
  if (e == 0 || e != parity_rows.size() || k < 1 || k >= kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode tables need 1..k lost shards and as many parity rows (k=", k,
                     ", lost=", e, ", parity=", parity_rows.size(), ")"));
  }
  if (e > static_cast<size_t>(kMaxCachedErasures)) {
    ++stats_.decode_misses;
    ++stats_.decode_uncacheable;
    return BuildDecodeTables(k, lost, parity_rows);
  }
  DecodeKey key;
  key.k = static_cast<uint8_t>(k);
  key.e = static_cast<uint8_t>(e);
  std::copy(lost.begin(), lost.end(), key.ids);
  std::copy(parity_rows.begin(), parity_rows.end(), key.ids + e);

  if (!pinned_.empty()) {
    if (auto it = pinned_.find(key); it != pinned_.end()) {
      ++stats_.decode_pinned_hits;
      return it->second;
    }
  }
  if (auto it = decode_index_.find(key); it != decode_index_.end()) {
    ++stats_.decode_hits;
    if (it->second != decode_lru_.begin()) {
      decode_lru_.splice(decode_lru_.begin(), decode_lru_, it->second);
    }
    return it->second->tables;
  }

  ++stats_.decode_misses;
  LH_ASSIGN_OR_RETURN(std::shared_ptr<const GfTables> built,
                      BuildDecodeTables(k, lost, parity_rows));
  const size_t bytes = EntryBytes(*built);
  if (bytes <= options_.decode_cache_bytes) {
    EvictDecodeUntilFits(bytes);
    decode_lru_.push_front(LruEntry{key, built});
    decode_index_.emplace(key, decode_lru_.begin());
    stats_.decode_cache_bytes += bytes;
    stats_.decode_cache_entries = decode_lru_.size();
  }
  return built;
}

absl::Status FecCodec::PrecomputeSingleErasures(int k, int m) {
  LH_RETURN_IF_ERROR(ValidateGeometry(k, m));
  size_t needed = 0;
  for (int r = 0; r < m; ++r) {
    for (int j = 0; j < k; ++j) {
      DecodeKey key;
      key.k = static_cast<uint8_t>(k);
      key.e = 1;
      key.ids[0] = static_cast<uint8_t>(j);
      key.ids[1] = static_cast<uint8_t>(r);
      if (!pinned_.contains(key)) needed += 32 * static_cast<size_t>(k) + 128;
    }
  }
  if (stats_.pinned_bytes + needed > options_.pinned_cache_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pinning single-erasure tables for k=", k, " m=", m, " needs ", needed,
                     " bytes; budget left ", options_.pinned_cache_bytes - stats_.pinned_bytes));
  }
  for (int r = 0; r < m; ++r) {
    for (int j = 0; j < k; ++j) {
      DecodeKey key;
      key.k = static_cast<uint8_t>(k);
      key.e = 1;
      key.ids[0] = static_cast<uint8_t>(j);
      key.ids[1] = static_cast<uint8_t>(r);
      if (pinned_.contains(key)) continue;
      const uint8_t lost = key.ids[0];
      const uint8_t row = key.ids[1];
      LH_ASSIGN_OR_RETURN(std::shared_ptr<const GfTables> built,
                          BuildDecodeTables(k, std::span<const uint8_t>(&lost, 1),
                                            std::span<const uint8_t>(&row, 1)));
      stats_.pinned_bytes += EntryBytes(*built);
      pinned_.emplace(key, std::move(built));
    }
  }
  stats_.pinned_entries = pinned_.size();
  return absl::OkStatus();
}

absl::Status FecCodec::Encode(int k, int m, size_t len, const uint8_t* const* data,
                              uint8_t* const* parity) {
  LH_RETURN_IF_ERROR(CheckLength(len));
  LH_ASSIGN_OR_RETURN(std::shared_ptr<const GfTables> tables, EncodeTables(k, m));
  ec_encode_data(static_cast<int>(len), k, m, tables->data(), const_cast<unsigned char**>(data),
                 const_cast<unsigned char**>(parity));
  return absl::OkStatus();
}

absl::Status FecCodec::Reconstruct(int k, int m, size_t len, const uint8_t* const* shards,
                                   uint8_t* const* out) {
  LH_RETURN_IF_ERROR(ValidateGeometry(k, m));
  LH_RETURN_IF_ERROR(CheckLength(len));
  std::array<uint8_t, kMaxShards> lost;
  std::array<uint8_t, kMaxShards> rows;
  std::array<const uint8_t*, kMaxShards> inputs;
  std::array<uint8_t*, kMaxShards> outputs;
  int e = 0;
  int s = 0;
  for (int j = 0; j < k; ++j) {
    if (shards[j] == nullptr) {
      if (out[j] == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("no output buffer for data shard ", j));
      }
      lost[e] = static_cast<uint8_t>(j);
      outputs[e] = out[j];
      ++e;
    } else {
      inputs[s++] = shards[j];
    }
  }
  if (e == 0) return absl::OkStatus();
  int p = 0;
  for (int r = 0; r < m && p < e; ++r) {
    if (shards[k + r] != nullptr) {
      rows[p] = static_cast<uint8_t>(r);
      inputs[s + p] = shards[k + r];
      ++p;
    }
  }
  if (p < e) {
    return absl::FailedPreconditionError(
        absl::StrCat(e, " of ", k, " data shards missing but only ", p, " parity shards present"));
  }
  LH_ASSIGN_OR_RETURN(std::shared_ptr<const GfTables> tables,
                      DecodeTables(k, std::span<const uint8_t>(lost.data(), e),
                                   std::span<const uint8_t>(rows.data(), e)));
  ec_encode_data(static_cast<int>(len), k, e, tables->data(),
                 const_cast<unsigned char**>(inputs.data()), outputs.data());
  return absl::OkStatus();
}

}  // namespace longhaul::fec
