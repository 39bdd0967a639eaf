// The allreduce of longhaul-nccl-bench's ranks: out of place, floats, sum, over a ring of
// NCCL net comms (one send comm to rank+1, one recv comm from rank-1) driven through the
// plugin's v11/v12 table as NCCL's proxy would: reduce-scatter, then allgather, each of
// the n chunks cut in slices of `slice_bytes`, pipelined (a slice of step s goes as soon
// as the same slice of step s-1 arrived and was reduced), `recv_ahead` receives posted
// ahead, isend retried while the plugin applies back-pressure (NULL request).
//
// Rank r's input element i is Value(i, r) (integer-valued floats, so the sum is exact
// in any order); Check() poisons the output with NaN, runs once more and counts the
// elements that differ from the expected sum.
//
// Ownership: the Ring borrows the table and the comms (the caller closes them) and owns
// its buffers. Not thread-safe: one rank thread drives it.
//
// Errors: Internal naming the call and its ncclResult_t (or a received size that is not
// the slice's); DeadlineExceeded with how many receives and sends finished.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/nccl_bench/control.h"
#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl::bench {

class Ring {
 public:
  // `idle_nap_us`: a rank with nothing to do yields 32 times, then sleeps this long per
  // poll (clamped to [0, 10000]).
  Ring(const ncclNet_v12_t* net, void* send, void* recv, int rank, int n, size_t slice_bytes,
       int recv_ahead, int idle_nap_us)
      : net_(net),
        send_(send),
        recv_(recv),
        rank_(rank),
        n_(n),
        slice_elems_(std::max<size_t>(1, slice_bytes / sizeof(float))),
        ahead_(std::clamp(recv_ahead, 1, 32)),
        idle_nap_us_(idle_nap_us) {}

  // Buffers for up to `max_count` floats per rank; fills the input. As NCCL does, the
  // buffers sends come from are registered with the send comm (regMr, host memory) and
  // their handles passed to isend: the plugin may send them without copying; the
  // reduce-scatter's receive slices are registered with the recv comm, and with the
  // result buffer every irecv lands in registered memory the plugin may offer for
  // placement.
  absl::Status Allocate(size_t max_count);
  // deregMr of what Allocate registered (before the comms close). Idempotent.
  void Deregister();

  static float Value(size_t i, int rank) {
    return static_cast<float>(((i % 251) + 1) * (rank + 1) % 1021);
  }

  // One allreduce of `count` floats; error on a plugin failure or the deadline.
  absl::Status Run(size_t count, Clock::time_point deadline);

  // Poisons the result, runs once more and counts wrong elements.
  absl::StatusOr<int64_t> Check(size_t count, Clock::time_point deadline);

 private:
  const ncclNet_v12_t* net_;
  void* send_;
  void* recv_;
  int rank_, n_;
  size_t slice_elems_;
  int ahead_;
  int idle_nap_us_;
  std::vector<float> sendbuf_, recvbuf_;
  void* send_mh_ = nullptr;  // regMr of sendbuf_ on the send comm
  void* recv_mh_ = nullptr;  // of recvbuf_ (what later steps send from)
  void* tmp_mh_ = nullptr;   // of tmp_ on the recv comm (NCCL registers its receive buffers)
  // The reduce-scatter's receive slices: ahead_ of slice_elems_ floats, one block.
  std::vector<float> tmp_;
  float* TmpSlice(size_t i) { return tmp_.data() + (i % static_cast<size_t>(ahead_)) * slice_elems_; }
};

}  // namespace longhaul::nccl::bench
