#include "transport/wire/crc32c.h"

#include <isa-l/crc.h>

namespace longhaul::wire {

uint32_t Crc32c(const uint8_t* data, size_t len) {
  // ISA-L's crc32_iscsi takes and returns the register without the final inversion.
  return crc32_iscsi(const_cast<uint8_t*>(data), static_cast<int>(len), 0xFFFFFFFFu) ^
         0xFFFFFFFFu;
}

}  // namespace longhaul::wire
