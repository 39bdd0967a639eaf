#include "transport/wire/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>

namespace longhaul::wire {

uint32_t Crc32c(const uint8_t* data, size_t len) {
  // ISA-L's crc32_iscsi takes and returns the register without the final inversion.
  return crc32_iscsi(const_cast<uint8_t*>(data), static_cast<int>(len), 0xFFFFFFFFu) ^
         0xFFFFFFFFu;
}

uint32_t Crc32cUpdate(uint32_t state, const uint8_t* data, size_t len) {
  return len == 0 ? state : crc32_iscsi(const_cast<uint8_t*>(data), static_cast<int>(len), state);
}

uint32_t Crc32cCopy(uint32_t state, uint8_t* dst, const uint8_t* src, size_t len) {
  constexpr size_t kPiece = 2048;
  while (len > 0) {
    const size_t n = std::min(len, kPiece);
    std::memcpy(dst, src, n);
    state = crc32_iscsi(dst, static_cast<int>(n), state);
    dst += n;
    src += n;
    len -= n;
  }
  return state;
}

}  // namespace longhaul::wire
