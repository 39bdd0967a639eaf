#include "transport/drivers/udp/engine_steering.h"

#include <sys/socket.h>

#include <cerrno>

#include "transport/net/errno_status.h"
#include "transport/wire/packet.h"

namespace longhaul::udp {
namespace {

// Offsets in the UDP payload (transport/wire/packet.h's header).
constexpr uint32_t kVersionOffset = 0;
constexpr uint32_t kTypeOffset = 1;
constexpr uint32_t kIdTopByteOffset = 4;  // the connection id's most significant byte
// A Hello (handshake.h, docs/wire-format.md section 8): the header, then the HANDSHAKE
// frame's type byte and varint length, then the body: kind (u8), version (u32), client_cid.
constexpr uint32_t kHandshakeLengthOffset = wire::kHeaderSize + 1;
constexpr uint32_t kClientCidInBody = 1 + 4;  // past kind and version

}  // namespace

std::vector<sock_filter> EngineSteeringProgram(uint32_t engines) {
  const uint32_t initial = static_cast<uint32_t>(wire::PacketType::kInitial);
  const uint32_t type_mask = 0xFFu & ~static_cast<uint32_t>(wire::kKeyPhaseBit);
  return {
      /* 0*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kVersionOffset),
      /* 1*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kVersion, 0, 5),  // else -> 7
      /* 2*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kTypeOffset),
      /* 3*/ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, type_mask),
      /* 4*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, initial, 3, 0),  // Initial -> 8
      /* 5*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kIdTopByteOffset),
      /* 6*/ BPF_STMT(BPF_RET | BPF_A, 0),
      /* 7*/ BPF_STMT(BPF_RET | BPF_K, 0),
      // A Hello: the varint length of its HANDSHAKE frame gives the body's offset; the
      // top 16 bits of the body's client_cid, modulo the group, pick the engine.
      /* 8*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kHandshakeLengthOffset),
      /* 9*/ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 6),  // the varint's length code 0..3
      /*10*/ BPF_STMT(BPF_MISC | BPF_TAX, 0),
      /*11*/ BPF_STMT(BPF_LD | BPF_IMM, 1),
      /*12*/ BPF_STMT(BPF_ALU | BPF_LSH | BPF_X, 0),  // its length: 1, 2, 4 or 8 bytes
      /*13*/ BPF_STMT(BPF_MISC | BPF_TAX, 0),
      /*14*/ BPF_STMT(BPF_LD | BPF_H | BPF_IND, kHandshakeLengthOffset + kClientCidInBody),
      /*15*/ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, engines),
      /*16*/ BPF_STMT(BPF_RET | BPF_A, 0),
  };
}

absl::Status AttachEngineSteering(int fd, uint32_t engines) {
  if (engines == 0) return absl::InvalidArgumentError("engine steering: no engines");
  std::vector<sock_filter> code = EngineSteeringProgram(engines);
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(code.size());
  prog.filter = code.data();
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0) {
    return net::ErrnoStatus(errno, "setsockopt SO_ATTACH_REUSEPORT_CBPF (engine steering)");
  }
  return absl::OkStatus();
}

}  // namespace longhaul::udp
