#include "transport/fec/cauchy_code.h"

#include <isa-l/erasure_code.h>

#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"

namespace longhaul::fec {
namespace {

// Checks the index lists of DecodeMatrix() and fills `surviving` with the data indices
// not in `lost`, ascending.
absl::Status CheckDecodeArgs(int k, std::span<const uint8_t> lost,
                             std::span<const uint8_t> parity_rows,
                             std::array<uint8_t, kMaxShards>& surviving) {
  if (k < 1 || k >= kMaxShards) return absl::InvalidArgumentError(absl::StrCat("bad k=", k));
  if (lost.size() != parity_rows.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(lost.size(), " lost shards but ", parity_rows.size(), " parity rows"));
  }
  if (lost.size() > static_cast<size_t>(k)) {
    return absl::InvalidArgumentError("more lost shards than data shards");
  }
  std::array<bool, kMaxShards> is_lost{};
  for (size_t i = 0; i < lost.size(); ++i) {
    if (lost[i] >= k || (i > 0 && lost[i] <= lost[i - 1])) {
      return absl::InvalidArgumentError("lost indices must be ascending and < k");
    }
    is_lost[lost[i]] = true;
    if (parity_rows[i] >= kMaxShards - k || (i > 0 && parity_rows[i] <= parity_rows[i - 1])) {
      return absl::InvalidArgumentError("parity rows must be ascending and < 255 - k");
    }
  }
  int s = 0;
  for (int j = 0; j < k; ++j) {
    if (!is_lost[j]) surviving[s++] = static_cast<uint8_t>(j);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGeometry(int k, int m) {
  if (k < 1 || m < 1 || k + m > kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrCat("FEC block geometry k=", k, " m=", m, " needs k>=1, m>=1, k+m<=255"));
  }
  return absl::OkStatus();
}

uint8_t ParityCoefficient(int parity_index, int data_index) {
  DCHECK_GE(parity_index, 0);
  DCHECK_GE(data_index, 0);
  DCHECK_LT(parity_index + data_index, kMaxShards);
  const uint8_t x = static_cast<uint8_t>(255 - parity_index);
  const uint8_t y = static_cast<uint8_t>(data_index);
  return gf_inv(static_cast<uint8_t>(x ^ y));
}

void ParityMatrix(int k, int m, uint8_t* out) {
  for (int r = 0; r < m; ++r) {
    for (int j = 0; j < k; ++j) out[r * k + j] = ParityCoefficient(r, j);
  }
}

absl::Status DecodeMatrix(int k, std::span<const uint8_t> lost,
                          std::span<const uint8_t> parity_rows, uint8_t* out) {
  std::array<uint8_t, kMaxShards> surviving;
  LH_RETURN_IF_ERROR(CheckDecodeArgs(k, lost, parity_rows, surviving));
  const int e = static_cast<int>(lost.size());
  if (e == 0) return absl::OkStatus();
  const int s = k - e;

  // inv = C[R][L]^-1 (e x e). gf_invert_matrix destroys its input.
  std::vector<uint8_t> sub(static_cast<size_t>(e) * e);
  std::vector<uint8_t> inv(static_cast<size_t>(e) * e);
  for (int i = 0; i < e; ++i) {
    for (int c = 0; c < e; ++c) sub[i * e + c] = ParityCoefficient(parity_rows[i], lost[c]);
  }
  // A square submatrix of a Cauchy matrix is never singular.
  CHECK_EQ(gf_invert_matrix(sub.data(), inv.data(), e), 0) << "singular Cauchy submatrix";

  for (int i = 0; i < e; ++i) {
    uint8_t* row = out + static_cast<size_t>(i) * k;
    for (int t = 0; t < s; ++t) {
      uint8_t acc = 0;
      for (int l = 0; l < e; ++l) {
        acc ^= gf_mul(inv[i * e + l], ParityCoefficient(parity_rows[l], surviving[t]));
      }
      row[t] = acc;
    }
    for (int l = 0; l < e; ++l) row[s + l] = inv[i * e + l];
  }
  return absl::OkStatus();
}

absl::Status DecodeMatrixByFullInversion(int k, std::span<const uint8_t> lost,
                                         std::span<const uint8_t> parity_rows, uint8_t* out) {
  std::array<uint8_t, kMaxShards> surviving;
  LH_RETURN_IF_ERROR(CheckDecodeArgs(k, lost, parity_rows, surviving));
  const int e = static_cast<int>(lost.size());
  if (e == 0) return absl::OkStatus();
  const int s = k - e;

  // Rows of the generator matrix for the k inputs: unit rows for surviving data, Cauchy
  // rows for the parity used.
  std::vector<uint8_t> b(static_cast<size_t>(k) * k, 0);
  std::vector<uint8_t> inv(static_cast<size_t>(k) * k);
  for (int t = 0; t < s; ++t) b[t * k + surviving[t]] = 1;
  for (int l = 0; l < e; ++l) {
    for (int j = 0; j < k; ++j) b[(s + l) * k + j] = ParityCoefficient(parity_rows[l], j);
  }
  if (gf_invert_matrix(b.data(), inv.data(), k) != 0) {
    return absl::InternalError("generator submatrix is singular");
  }
  for (int i = 0; i < e; ++i) {
    for (int j = 0; j < k; ++j) out[i * k + j] = inv[lost[i] * k + j];
  }
  return absl::OkStatus();
}

}  // namespace longhaul::fec
