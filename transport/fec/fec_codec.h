// FecCodec: ISA-L lookup tables for the Cauchy code (cauchy_code.h), cached, plus
// one-shot block encode and reconstruct.
//
// ISA-L multiplies by a coefficient through 32-byte lookup tables (ec_init_tables), so
// encoding a (k, m) block needs 32*k*m bytes of tables, and rebuilding e lost data shards
// needs 32*k*e bytes built from a decode matrix that depends on the erasure pattern.
// This class builds each table set once and caches it:
//   * encode tables per (k, m), in a small LRU (a connection uses one or two geometries);
//   * decode tables per (k, lost data indices, parity rows used), in an LRU bounded by
//     bytes. m is not part of the key: the code's coefficients do not depend on m.
//     Patterns with more than kMaxCachedErasures erasures are built per call, uncached.
//   * PrecomputeSingleErasures(k, m) pins the tables of every single-erasure pattern
//     (k lost indices x m parity rows), the common case at low loss, outside the LRU.
// Building decode tables inverts only an e x e matrix (see cauchy_code.h), a few
// microseconds at e <= 8, so even a miss is cheap; the cache removes that and the table
// expansion from the per-block path. Counters in stats() let tests and operators see it.
//
// Table sets are immutable and shared (std::shared_ptr): an evicted set stays valid for
// whoever still holds it.
//
// Thread-safety: none. Use one FecCodec per thread (e.g. per Connection / driver thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/fec/cauchy_code.h"

namespace longhaul::fec {

// Expanded GF(2^8) multiplication tables for `rows` output shards over `k` inputs, in
// ec_init_tables() layout (32 bytes per coefficient, row-major).
struct GfTables {
  int k = 0;
  int rows = 0;
  std::vector<uint8_t> bytes;  // 32 * k * rows
  uint8_t* data() const { return const_cast<uint8_t*>(bytes.data()); }
};

// Decode patterns with more erasures than this are not cached.
inline constexpr int kMaxCachedErasures = 16;

struct FecCodecOptions {
  size_t encode_cache_entries = 16;              // (k, m) encode table sets kept
  size_t decode_cache_bytes = size_t{16} << 20;  // LRU budget for decode tables
  size_t pinned_cache_bytes = size_t{16} << 20;  // budget for PrecomputeSingleErasures
};

struct FecCodecStats {
  uint64_t encode_table_hits = 0;
  uint64_t encode_table_builds = 0;
  uint64_t decode_pinned_hits = 0;  // served from precomputed single-erasure tables
  uint64_t decode_hits = 0;         // served from the LRU
  uint64_t decode_misses = 0;       // built (and inserted, if cacheable)
  uint64_t decode_uncacheable = 0;  // misses with > kMaxCachedErasures erasures
  uint64_t decode_evictions = 0;
  size_t decode_cache_entries = 0;
  size_t decode_cache_bytes = 0;
  size_t pinned_entries = 0;
  size_t pinned_bytes = 0;
};

class FecCodec {
 public:
  explicit FecCodec(const FecCodecOptions& options = {});
  FecCodec(const FecCodec&) = delete;
  FecCodec& operator=(const FecCodec&) = delete;

  // Tables for encoding (k, m) blocks. InvalidArgument on a bad geometry.
  absl::StatusOr<std::shared_ptr<const GfTables>> EncodeTables(int k, int m);

  // Tables that rebuild data[lost[i]] (row i) from the k inputs ordered as in
  // DecodeMatrix(): surviving data ascending, then the parity rows given. `lost` and
  // `parity_rows` are ascending and of equal length e >= 1.
  absl::StatusOr<std::shared_ptr<const GfTables>> DecodeTables(
      int k, std::span<const uint8_t> lost, std::span<const uint8_t> parity_rows);

  // Pins decode tables for every single-erasure pattern of (k, m) blocks (lost data j,
  // parity row r < m). ResourceExhausted if the pinned budget would be exceeded (nothing
  // is pinned then); InvalidArgument on a bad geometry. Idempotent.
  absl::Status PrecomputeSingleErasures(int k, int m);

  // One-shot encode of a (k, m) block: parity[r] (len bytes each) from data[0..k).
  // `len` must be a positive multiple of kShardAlignment. Buffers must not overlap.
  absl::Status Encode(int k, int m, size_t len, const uint8_t* const* data, uint8_t* const* parity);

  // Rebuilds every missing data shard of a (k, m) block.
  //   shards: k + m pointers, data 0..k-1 then parity 0..m-1; nullptr = missing.
  //   out:    k pointers; out[j] receives data shard j (len bytes) for each missing j
  //           (other entries are ignored and may be null).
  // Uses the lowest-numbered parity shards present. FailedPrecondition when more data
  // shards are missing than parity shards are present (the block is not recoverable;
  // fall back to retransmission). `len` as for Encode().
  absl::Status Reconstruct(int k, int m, size_t len, const uint8_t* const* shards,
                           uint8_t* const* out);

  const FecCodecStats& stats() const { return stats_; }
  const FecCodecOptions& options() const { return options_; }

 private:
  struct EncodeKey {
    int k, m;
    bool operator==(const EncodeKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const EncodeKey& key) {
      return H::combine(std::move(h), key.k, key.m);
    }
  };
  struct DecodeKey {
    uint8_t k = 0;
    uint8_t e = 0;
    uint8_t ids[2 * kMaxCachedErasures] = {};  // lost[0..e), then parity rows [e..2e)
    bool operator==(const DecodeKey& o) const;
    template <typename H>
    friend H AbslHashValue(H h, const DecodeKey& key) {
      return H::combine_contiguous(H::combine(std::move(h), key.k, key.e), key.ids,
                                   2 * static_cast<size_t>(key.e));
    }
  };
  struct LruEntry {
    DecodeKey key;
    std::shared_ptr<const GfTables> tables;
  };

  static absl::StatusOr<std::shared_ptr<const GfTables>> BuildDecodeTables(
      int k, std::span<const uint8_t> lost, std::span<const uint8_t> parity_rows);
  static size_t EntryBytes(const GfTables& t);
  void EvictDecodeUntilFits(size_t incoming);

  FecCodecOptions options_;
  FecCodecStats stats_;

  std::list<std::pair<EncodeKey, std::shared_ptr<const GfTables>>> encode_lru_;

  std::list<LruEntry> decode_lru_;  // front: most recently used
  absl::flat_hash_map<DecodeKey, std::list<LruEntry>::iterator> decode_index_;
  absl::flat_hash_map<DecodeKey, std::shared_ptr<const GfTables>> pinned_;
};

}  // namespace longhaul::fec
