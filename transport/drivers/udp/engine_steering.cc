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
constexpr uint32_t kSpread = 0xFFFFFFFFu;  // past any group: the kernel's hash decides

}  // namespace

std::vector<sock_filter> EngineSteeringProgram() {
  const uint32_t initial = static_cast<uint32_t>(wire::PacketType::kInitial);
  const uint32_t type_mask = 0xFFu & ~static_cast<uint32_t>(wire::kKeyPhaseBit);
  return {
      /*0*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kVersionOffset),
      /*1*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kVersion, 0, 5),  // else -> 7
      /*2*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kTypeOffset),
      /*3*/ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, type_mask),
      /*4*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, initial, 3, 0),  // Initial -> 8
      /*5*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kIdTopByteOffset),
      /*6*/ BPF_STMT(BPF_RET | BPF_A, 0),
      /*7*/ BPF_STMT(BPF_RET | BPF_K, 0),
      /*8*/ BPF_STMT(BPF_RET | BPF_K, kSpread),
  };
}

absl::Status AttachEngineSteering(int fd) {
  std::vector<sock_filter> code = EngineSteeringProgram();
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(code.size());
  prog.filter = code.data();
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0) {
    return net::ErrnoStatus(errno, "setsockopt SO_ATTACH_REUSEPORT_CBPF (engine steering)");
  }
  return absl::OkStatus();
}

}  // namespace longhaul::udp
