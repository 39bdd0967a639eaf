// The erasure code behind longhaul's FEC: a systematic MDS block code over GF(2^8).
//
// A block has k data shards and m parity shards, k >= 1, m >= 1, k + m <= 255. Parity
// shard r is the GF(2^8) dot product of the data shards with row r of a Cauchy matrix:
//
//   parity[r] = sum_j C[r][j] * data[j],   C[r][j] = 1 / (x_r XOR y_j),
//   y_j = j (data column), x_r = 255 - r (parity row).
//
// This is the Cauchy form ISA-L's gf_gen_cauchy1_matrix builds (1 / (i XOR j)), with the
// parity row elements anchored at the top of the field instead of right after the k data
// elements. The anchoring makes every coefficient depend on (r, j) only, never on k or m:
//   * a shortened block (k' < k data shards, e.g. a message's last block or one closed by
//     a flush deadline) is exactly the (k', m) code: the missing data shards act as zero,
//     so a streaming encoder that started with k in mind needs no re-encoding, and the
//     receiver needs only k' (carried by the repair frames) to decode;
//   * extra parity rows can be produced later for a block without changing the others.
// Every square submatrix of a Cauchy matrix is invertible, so the code is MDS: any k of
// the k + m shards rebuild the block.
//
// Shards are byte strings of one length per block, a multiple of kShardAlignment (ISA-L's
// vector kernels want 64-byte multiples); a shorter payload is zero-padded.
//
// Decoding: with e data shards lost and e parity rows R used, the lost shards L solve
//   C[R][L] * data[L] = parity[R] + C[R][S] * data[S]      (S: surviving data, + is XOR)
// so only the e x e matrix C[R][L] is inverted (O(e^3), e <= m), not the k x k matrix of
// the generic recipe (O(k^3), ~90 us at k = 32). DecodeMatrixByFullInversion() is the
// generic recipe, kept for tests as an independent check.
//
// Functions here are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace longhaul::fec {

// Most shards (data + parity) in one block: GF(2^8) has 256 elements, and the Cauchy
// construction needs k + m distinct ones that never collide.
inline constexpr int kMaxShards = 255;
// Shard lengths are multiples of this many bytes.
inline constexpr size_t kShardAlignment = 64;

constexpr size_t RoundUpToShardAlignment(size_t bytes) {
  return (bytes + kShardAlignment - 1) & ~(kShardAlignment - 1);
}

// OK iff 1 <= k, 1 <= m and k + m <= kMaxShards; InvalidArgument otherwise.
absl::Status ValidateGeometry(int k, int m);

// C[parity_index][data_index]; requires parity_index + data_index < kMaxShards.
uint8_t ParityCoefficient(int parity_index, int data_index);

// Writes the m x k parity matrix, row-major (out[r * k + j] = C[r][j]).
void ParityMatrix(int k, int m, uint8_t* out);

// The e x k matrix that rebuilds lost data shards.
//   lost:        the e lost data indices, strictly ascending, each < k.
//   parity_rows: the e parity rows used, strictly ascending, each < kMaxShards - k.
// Row i of `out` (e x k, row-major) rebuilds data[lost[i]] from the k inputs ordered as
// the surviving data shards in ascending index order followed by the parity shards in
// `parity_rows` order. InvalidArgument on malformed index lists.
absl::Status DecodeMatrix(int k, std::span<const uint8_t> lost,
                          std::span<const uint8_t> parity_rows, uint8_t* out);

// Same contract and result as DecodeMatrix(), computed by inverting the k x k matrix of
// the chosen input rows (ISA-L's example recipe). For tests only: O(k^3).
absl::Status DecodeMatrixByFullInversion(int k, std::span<const uint8_t> lost,
                                         std::span<const uint8_t> parity_rows, uint8_t* out);

}  // namespace longhaul::fec
