// CRC32C (Castagnoli), as used by iSCSI and SCTP, through ISA-L's crc32_iscsi
// (PCLMUL/AVX-512 folding where the CPU has it). Crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::wire {

uint32_t Crc32c(const uint8_t* data, size_t len);

// The same CRC over consecutive pieces: start from kCrc32cStart, Crc32cUpdate each piece
// in order, Crc32cFinish the state. Crc32cCopy copies `len` bytes from `src` to `dst`
// (not overlapping) and extends the state over them in the same pass: it works in pieces
// small enough that the checksum reads what the copy just wrote from the L1 cache.
inline constexpr uint32_t kCrc32cStart = 0xFFFFFFFFu;
uint32_t Crc32cUpdate(uint32_t state, const uint8_t* data, size_t len);
uint32_t Crc32cCopy(uint32_t state, uint8_t* dst, const uint8_t* src, size_t len);
inline uint32_t Crc32cFinish(uint32_t state) { return state ^ 0xFFFFFFFFu; }

}  // namespace longhaul::wire
