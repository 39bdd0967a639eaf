#include "tools/nccl_bench/ring.h"

#include <sched.h>
#include <time.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::nccl::bench {

absl::Status Ring::Allocate(size_t max_count) {
  sendbuf_.assign(max_count, 0.0f);
  recvbuf_.assign(max_count, 0.0f);
  tmp_.assign(static_cast<size_t>(ahead_) * slice_elems_, 0.0f);
  for (size_t i = 0; i < max_count; ++i) sendbuf_[i] = Value(i, rank_);
  Deregister();
  const size_t bytes = max_count * sizeof(float);
  if (bytes > 0) {
    if (ncclResult_t r = net_->regMr(send_, sendbuf_.data(), bytes, LH_NCCL_PTR_HOST, &send_mh_);
        r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("regMr: ncclResult ", r));
    }
    if (ncclResult_t r = net_->regMr(send_, recvbuf_.data(), bytes, LH_NCCL_PTR_HOST, &recv_mh_);
        r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("regMr: ncclResult ", r));
    }
  }
  if (!tmp_.empty()) {
    if (ncclResult_t r = net_->regMr(recv_, tmp_.data(), tmp_.size() * sizeof(float),
                                     LH_NCCL_PTR_HOST, &tmp_mh_);
        r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("regMr: ncclResult ", r));
    }
  }
  return absl::OkStatus();
}

void Ring::Deregister() {
  if (send_mh_ != nullptr) net_->deregMr(send_, send_mh_);
  if (recv_mh_ != nullptr) net_->deregMr(send_, recv_mh_);
  if (tmp_mh_ != nullptr) net_->deregMr(recv_, tmp_mh_);
  send_mh_ = recv_mh_ = tmp_mh_ = nullptr;
}

absl::Status Ring::Run(size_t count, Clock::time_point deadline) {
  const size_t chunk_max = (count + n_ - 1) / n_;
  const size_t nslices = std::max<size_t>(1, (chunk_max + slice_elems_ - 1) / slice_elems_);
  const size_t total = 2 * (n_ - 1) * nslices;
  std::vector<void*> rreq(total, nullptr);
  std::vector<void*> sreq;
  sreq.reserve(32);
  size_t sreq_head = 0;
  size_t next_send = 0, next_post = 0, next_proc = 0;
  int idle = 0;
  auto chunk_of = [&](size_t step, bool sending) -> size_t {
    const int s = static_cast<int>(step);
    int c;
    if (s < n_ - 1) {
      c = sending ? rank_ - s : rank_ - s - 1;
    } else {
      const int a = s - (n_ - 1);
      c = sending ? rank_ + 1 - a : rank_ - a;
    }
    return static_cast<size_t>(((c % n_) + n_) % n_);
  };
  auto range = [&](size_t m, bool sending, size_t* begin, size_t* len) {
    const size_t step = m / nslices, j = m % nslices;
    const size_t c = chunk_of(step, sending);
    const size_t cs = count * c / n_, ce = count * (c + 1) / n_;
    const size_t b = std::min(ce, cs + j * slice_elems_);
    const size_t e = std::min(ce, b + slice_elems_);
    *begin = b;
    *len = e - b;
  };
  while (next_proc < total || next_send < total || sreq_head < sreq.size()) {
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("allreduce of ", count, " floats did not finish in time (", next_proc, "/",
                       total, " receives, ", next_send, "/", total, " sends)"));
    }
    bool progress = false;
    // Post receives ahead.
    while (next_post < total && next_post - next_proc < static_cast<size_t>(ahead_)) {
      size_t b, len;
      range(next_post, false, &b, &len);
      const bool rs = next_post / nslices < static_cast<size_t>(n_ - 1);
      void* dst = rs ? TmpSlice(next_post) : recvbuf_.data() + b;
      size_t bytes = len * sizeof(float);
      int tag = (rank_ - 1 + n_) % n_;
      void* req = nullptr;
      ncclResult_t r = net_->irecv(recv_, 1, &dst, &bytes, &tag, nullptr, nullptr, &req);
      if (r != ncclSuccess) return absl::InternalError(absl::StrCat("irecv: ncclResult ", r));
      if (req == nullptr) break;
      rreq[next_post++] = req;
      progress = true;
    }
    // Complete receives in order; reduce-scatter adds our contribution.
    while (next_proc < next_post) {
      int done = 0, size = 0;
      ncclResult_t r = net_->test(rreq[next_proc], &done, &size);
      if (r != ncclSuccess) return absl::InternalError(absl::StrCat("test(recv): ncclResult ", r));
      if (!done) break;
      size_t b, len;
      range(next_proc, false, &b, &len);
      if (static_cast<size_t>(size) != len * sizeof(float)) {
        return absl::InternalError(
            absl::StrCat("received ", size, " bytes, expected ", len * sizeof(float)));
      }
      if (next_proc / nslices < static_cast<size_t>(n_ - 1)) {
        const float* t = TmpSlice(next_proc);
        const float* in = sendbuf_.data() + b;
        float* out = recvbuf_.data() + b;
        for (size_t i = 0; i < len; ++i) out[i] = in[i] + t[i];
      }
      ++next_proc;
      progress = true;
    }
    // Sends whose data is ready (step 0: our own; later: what the previous step reduced).
    while (next_send < total && (next_send < nslices || next_send - nslices < next_proc) &&
           sreq.size() - sreq_head < 30) {
      size_t b, len;
      range(next_send, true, &b, &len);
      const float* src = next_send < nslices ? sendbuf_.data() + b : recvbuf_.data() + b;
      void* req = nullptr;
      ncclResult_t r = net_->isend(send_, const_cast<float*>(src), len * sizeof(float), rank_,
                                   next_send < nslices ? send_mh_ : recv_mh_, nullptr, &req);
      if (r != ncclSuccess) return absl::InternalError(absl::StrCat("isend: ncclResult ", r));
      if (req == nullptr) break;  // back-pressure
      sreq.push_back(req);
      ++next_send;
      progress = true;
    }
    while (sreq_head < sreq.size()) {
      int done = 0;
      ncclResult_t r = net_->test(sreq[sreq_head], &done, nullptr);
      if (r != ncclSuccess) return absl::InternalError(absl::StrCat("test(send): ncclResult ", r));
      if (!done) break;
      ++sreq_head;
      progress = true;
    }
    if (sreq_head == sreq.size()) {
      sreq.clear();
      sreq_head = 0;
    }
    // Idle: yield, then nap briefly (the driver threads and other ranks share the cores).
    if (progress) {
      idle = 0;
    } else if (++idle < 32) {
      sched_yield();
    } else {
      timespec ts{0, static_cast<long>(std::clamp(idle_nap_us_, 0, 10000)) * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Ring::Check(size_t count, Clock::time_point deadline) {
  std::fill(recvbuf_.begin(), recvbuf_.begin() + count, std::nanf(""));
  LH_RETURN_IF_ERROR(Run(count, deadline));
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < n_; ++r) expected += Value(i, r);
    if (recvbuf_[i] != expected) ++wrong;
  }
  return wrong;
}

}  // namespace longhaul::nccl::bench
