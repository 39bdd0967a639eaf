// CRC32C (Castagnoli), as used by iSCSI and SCTP, through ISA-L's crc32_iscsi
// (PCLMUL/AVX-512 folding where the CPU has it). Crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::wire {

uint32_t Crc32c(const uint8_t* data, size_t len);

}  // namespace longhaul::wire
