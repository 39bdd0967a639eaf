// The control protocol between longhaul-nccl-bench's parent and its rank processes: fixed
// structs over a SOCK_SEQPACKET socketpair (one message per send, never split), in this
// order: rank -> kHello (its plugin handle and device), parent -> kPeer (the handle of the
// next rank, redirected through longhaul-emu for an emulated edge), rank -> kReady (ring
// connected), then per size parent -> kRun and rank -> kResult, finally parent -> kExit.
// A rank that fails sends kError with one line of text and exits.
//
// Both ends are processes of the same binary, so the structs are sent as they are.
// Thread-safety: none needed (each process uses its socket from one thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl::bench {

using Clock = std::chrono::steady_clock;

enum MsgType : uint32_t { kHello = 1, kPeer, kReady, kRun, kResult, kError, kExit };
inline constexpr int kMaxIters = 1000;  // timed iterations per size (ResultMsg's capacity)

struct HelloMsg {
  uint32_t type = kHello;
  int32_t version = 0;
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  char device[64];
  int32_t speed_mbps = 0;
  float latency_us = 0;
};
struct PeerMsg {
  uint32_t type = kPeer;
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
};
struct RunMsg {
  uint32_t type = kRun;
  uint64_t bytes = 0;
  int32_t iters = 0;
  int32_t warmup = 0;
};
struct ResultMsg {
  uint32_t type = kResult;
  int64_t wrong = 0;  // elements that differ from the expected sum (verified iteration)
  int32_t iters = 0;
  double iter_us[kMaxIters];  // each timed iteration's time
};
struct ErrorMsg {
  uint32_t type = kError;
  char text[1024];
};

// Sends one message; false if it did not go whole (the peer is gone).
bool SendMsg(int fd, const void* m, size_t n);

// Receives one message (up to `cap` bytes) within `deadline`; returns its size, 0 on
// EOF, -1 on timeout or error.
ssize_t RecvMsg(int fd, void* buf, size_t cap, Clock::time_point deadline);

}  // namespace longhaul::nccl::bench
