// The NCCL data path: isend (copied into a pooled staging buffer and completed at once up
// to copy_max, else sent in place and completed when acknowledged, both within the
// receiver's credit), irecv (posted receives matched in order and by tag) and test.
// Copies into NCCL's buffers and credit returns happen here, on NCCL's progress thread.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/nccl/comms.h"
#include "transport/nccl/frames.h"
#include "transport/nccl/net_plugin.h"
#include "transport/nccl/plugin_log.h"

namespace longhaul::nccl {
namespace {

Request* FreeSlot(Request* requests) {
  for (int i = 0; i < kMaxRequests; ++i) {
    if (requests[i].kind == Request::Kind::kFree) return &requests[i];
  }
  return nullptr;
}

void ResetRequest(Request* r) {
  void* comm = r->comm;
  *r = Request{};
  r->comm = comm;
}

// Why the comm was ended by the driver thread (OK while it goes on).
absl::Status Ended(RecvComm* c) {
  std::lock_guard<std::mutex> l(c->state->mu);
  return c->state->ended;
}

// Whether request `r`'s buffer is NCCL's again as far as the offer goes: never offered,
// ended by its message delivered in it, or withdrawn (asked for here, once). Called with
// comm->mu held.
bool OfferSettled(RecvComm* c, Request* r) {
  if (r->offer == 0) return true;
  {
    std::lock_guard<std::mutex> l(c->state->mu);
    if (!c->state->offers.contains(r->offer)) {
      r->offer = 0;
      r->withdrawing = false;
      return true;
    }
  }
  if (!r->withdrawing) {
    r->withdrawing = true;
    if (std::shared_ptr<ConnectionHandle> conn = c->link->conn()) conn->WithdrawOffer(r->offer);
  }
  return false;
}

// A message of `size` bytes went into slot `slot` of `r`: copied unless the NIC put it
// there (its message adopted the offered buffer); counted either way.
void Fill(RecvComm* c, Request* r, int slot, const Incoming& in) {
  const bool placed = in.size > 0 && in.payload == r->data[slot];
  if (in.size > 0 && !placed) std::memcpy(r->data[slot], in.payload, in.size);
  if (in.size > 0) c->rt->CountRecv(placed, in.size);
  if (placed && r->offer != 0) {  // the offer ended with its message's delivery
    std::lock_guard<std::mutex> l(c->state->mu);
    c->state->offers.erase(r->offer);
    r->offer = 0;
  }
}

// Moves arrived messages into the oldest posted receives; returns credit when due.
// Called with comm->mu held.
void Progress(RecvComm* c) {
  std::shared_ptr<ConnectionHandle> conn = c->link->conn();
  while (!c->posted.empty()) {
    Incoming in;
    {
      std::lock_guard<std::mutex> l(c->state->mu);
      if (c->state->queue.empty()) break;
      in = std::move(c->state->queue.front());
      c->state->queue.pop_front();
    }
    Request* r = c->posted.front();
    int slot = -1;
    for (int i = 0; i < r->n; ++i) {
      if (!r->filled[i] && (r->n == 1 || r->tags[i] == in.tag)) {
        slot = i;
        break;
      }
    }
    if (slot < 0) {
      r->error = absl::OutOfRangeError(
          absl::StrCat("a message with tag ", in.tag,
                       " matches no open buffer of the grouped receive (", r->n, " buffers)"));
    } else if (in.size > r->capacity[slot]) {
      r->error = absl::OutOfRangeError(
          absl::StrCat("message of ", in.size, " bytes is larger than the posted receive of ",
                       r->capacity[slot], " bytes (tag ", in.tag, ")"));
    } else {
      Fill(c, r, slot, in);
      r->got[slot] = in.size;
      r->filled[slot] = true;
      ++r->nfilled;
    }
    c->consumed += in.size + kMessageOverhead;
    if (conn && in.owned) conn->ReturnBuffer(std::move(in.owned));
    if (!r->error.ok()) c->offering = false;  // later keys may name other messages
    if (!r->error.ok() || r->nfilled == r->n) {
      // An offer still out (the message was copied) is withdrawn first.
      r->done = OfferSettled(c, r);
      r->settling = !r->done;
      c->posted.pop_front();
    }
  }
  // Before the credit report below: the driver thread checks arrivals against it.
  c->state->consumed.store(c->consumed);
  if (c->consumed > c->reported) {
    bool queue_empty;
    {
      std::lock_guard<std::mutex> l(c->state->mu);
      queue_empty = c->state->queue.empty();
    }
    if (queue_empty || c->consumed - c->reported >= c->credit / 16) {
      if (c->link->SendControl(FrameKind::kCredit, c->state->id, c->consumed, 0).ok()) {
        c->reported = c->consumed;
      }
    }
  }
}

}  // namespace

absl::Status Isend(void* send_comm, const void* data, size_t size, int tag, void* mhandle,
                   void** request) {
  if (request == nullptr) return absl::InvalidArgumentError("isend: NULL request");
  *request = nullptr;
  auto* c = static_cast<SendComm*>(send_comm);
  if (c == nullptr || c->magic != kSendMagic) {
    return absl::InvalidArgumentError("isend: not a send comm");
  }
  if (data == nullptr && size > 0) return absl::InvalidArgumentError("isend: NULL data");
  if (size > kMaxP2pBytes) {
    return absl::OutOfRangeError(
        absl::StrCat("isend: ", size, " bytes exceed maxP2pBytes (", kMaxP2pBytes, ")"));
  }
  if (c->state->rejected.load()) {
    return absl::AbortedError(absl::StrCat("isend: the receiver refused or ended this comm: ",
                                           RejectReasonText(c->state->reject_reason.load())));
  }
  LH_RETURN_IF_ERROR(c->link->status());
  std::lock_guard<std::mutex> l(c->mu);
  Request* r = FreeSlot(c->requests);
  if (r == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("isend: ", kMaxRequests, " requests are already in flight on this comm"));
  }
  const uint64_t charge = size + kMessageOverhead;
  const uint64_t outstanding = c->sent - std::min(c->sent, c->state->peer_consumed.load());
  if (outstanding > 0 && outstanding + charge > c->state->credit) {
    return absl::OkStatus();  // back-pressure: NULL request, NCCL retries
  }
  if (size > c->rt->settings.copy_max) {
    auto wait = std::make_shared<ZeroCopyWait>();
    // Zero copy: memory regMr registered, where this send lies within it.
    const auto* mr = static_cast<const MrHandle*>(mhandle);
    const auto* p = static_cast<const uint8_t*>(data);
    const auto* base = mr != nullptr && mr->magic == kMrMagic
                           ? static_cast<const uint8_t*>(mr->data) : nullptr;
    const uint64_t region =
        base != nullptr && p >= base && size <= mr->size && size_t(p - base) <= mr->size - size
            ? mr->region : 0;
    // The receiver's irecv buffer for this message, if it offered it (placement).
    const uint64_t key = region != 0 ? OfferKey(c->state->id, c->seq) : 0;
    if (absl::Status s =
            c->link->SendInPlace(c->state->id, tag, data, size, wait, region, key);
        !s.ok()) {
      return s;
    }
    c->rt->CountInPlaceSend(size);
    c->sent += charge;
    ++c->seq;
    r->kind = Request::Kind::kSend;
    r->done = false;  // NCCL's buffer is read until longhaul reports it acknowledged
    r->in_place = std::move(wait);
    r->send_size = size;
    *request = r;
    return absl::OkStatus();
  }
  std::shared_ptr<uint8_t> buf = c->rt->pool.Get(kFrameHeaderBytes + size);
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kData, c->state->id, tag, size, 0), buf.get());
  if (size > 0) std::memcpy(buf.get() + kFrameHeaderBytes, data, size);
  if (absl::Status s = c->link->SendData(std::move(buf), kFrameHeaderBytes + size); !s.ok()) {
    return s;
  }
  c->sent += charge;
  ++c->seq;
  r->kind = Request::Kind::kSend;
  r->done = true;  // the bytes are staged: NCCL may reuse its buffer
  r->send_size = size;
  *request = r;
  return absl::OkStatus();
}

absl::Status Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** request) {
  if (request == nullptr) return absl::InvalidArgumentError("irecv: NULL request");
  *request = nullptr;
  auto* c = static_cast<RecvComm*>(recv_comm);
  if (c == nullptr || c->magic != kRecvMagic) {
    return absl::InvalidArgumentError("irecv: not a recv comm");
  }
  if (n < 1 || n > kMaxRecvs) {
    return absl::InvalidArgumentError(
        absl::StrCat("irecv: n=", n, " is outside [1, ", kMaxRecvs, "] (buffers per receive)"));
  }
  if (data == nullptr || sizes == nullptr || tags == nullptr) {
    return absl::InvalidArgumentError("irecv: NULL data, sizes or tags");
  }
  for (int i = 0; i < n; ++i) {
    if (data[i] == nullptr && sizes[i] > 0) {
      return absl::InvalidArgumentError(absl::StrCat("irecv: NULL buffer ", i));
    }
  }
  std::lock_guard<std::mutex> l(c->mu);
  if (absl::Status ended = Ended(c); !ended.ok()) {
    return absl::Status(ended.code(), absl::StrCat("irecv: ", ended.message()));
  }
  Request* r = FreeSlot(c->requests);
  if (r == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("irecv: ", kMaxRequests, " requests are already in flight on this comm"));
  }
  r->kind = Request::Kind::kRecv;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  const uint64_t seq = c->seq;
  c->seq += static_cast<uint64_t>(n);
  // Placement: a buffer that takes an in-place send is offered for the comm's message
  // `seq`; where the UC datapath advertised it in time, the NIC writes that message there.
  if (c->offering && n == 1 && sizes[0] > c->rt->settings.copy_max && sizes[0] >= 4096) {
    if (std::shared_ptr<ConnectionHandle> conn = c->link->conn()) {
      const uint64_t key = OfferKey(c->state->id, seq);
      {
        std::lock_guard<std::mutex> l(c->state->mu);
        c->state->offers.insert(key);
      }
      if (conn->OfferReceive(key, static_cast<uint8_t*>(data[0]), sizes[0]).ok()) {
        r->offer = key;
        c->rt->CountOffer();
      } else {
        std::lock_guard<std::mutex> l(c->state->mu);
        c->state->offers.erase(key);
      }
    }
  }
  c->posted.push_back(r);
  Progress(c);
  *request = r;
  return absl::OkStatus();
}

void WithdrawOffers(RecvComm* c) {
  std::lock_guard<std::mutex> l(c->mu);
  for (Request& r : c->requests) {
    if (r.kind == Request::Kind::kRecv) (void)OfferSettled(c, &r);
  }
  // Bounded: the connection's close ends every offer, and the driver answers a
  // withdrawal within a few completions.
  std::unique_lock<std::mutex> s(c->state->mu);
  if (!c->state->offers_cv.wait_for(s, std::chrono::seconds(10),
                                    [&] { return c->state->offers.empty(); })) {
    LogWarn("closeRecv: %zu irecv buffers still offered to the connection after 10 s",
            c->state->offers.size());
  }
}

absl::Status Test(void* request, int* done, int* sizes) {
  if (done == nullptr) return absl::InvalidArgumentError("test: NULL done");
  *done = 0;
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || r->magic != kRequestMagic || r->kind == Request::Kind::kFree) {
    return absl::InvalidArgumentError("test: not a request in flight");
  }
  if (r->kind == Request::Kind::kSend) {
    auto* c = static_cast<SendComm*>(r->comm);
    std::lock_guard<std::mutex> l(c->mu);
    if (r->in_place) {
      const int st = r->in_place->state.load();
      if (st == 0) return absl::OkStatus();  // still in flight
      if (st == 2) {
        ResetRequest(r);
        *done = 1;
        return absl::AbortedError(
            absl::StrCat("isend did not complete: ", c->link->status().message()));
      }
    }
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(r->send_size);
    ResetRequest(r);
    return absl::OkStatus();
  }
  auto* c = static_cast<RecvComm*>(r->comm);
  std::lock_guard<std::mutex> l(c->mu);
  Progress(c);
  if (r->settling) {  // received; its buffer's offer is being withdrawn
    if (!OfferSettled(c, r)) return absl::OkStatus();
    r->settling = false;
    r->done = true;
  }
  if (!r->done) {
    if (absl::Status ended = Ended(c); !ended.ok()) {
      // The comm was ended (its sender exceeded the credit): nothing more will arrive.
      if (!OfferSettled(c, r)) return absl::OkStatus();  // its buffer may still be written
      c->posted.erase(std::remove(c->posted.begin(), c->posted.end(), r), c->posted.end());
      ResetRequest(r);
      *done = 1;
      return absl::Status(ended.code(), absl::StrCat("irecv cannot complete: ", ended.message()));
    }
    absl::Status ls = c->link->status();
    bool queue_empty;
    {
      std::lock_guard<std::mutex> q(c->state->mu);
      queue_empty = c->state->queue.empty();
    }
    if (ls.ok() || !queue_empty) return absl::OkStatus();
    // The connection is gone and nothing more can arrive: end the request (its offer
    // went with the connection).
    if (!OfferSettled(c, r)) return absl::OkStatus();
    c->posted.erase(std::remove(c->posted.begin(), c->posted.end(), r), c->posted.end());
    ResetRequest(r);
    *done = 1;
    return absl::AbortedError(absl::StrCat("irecv cannot complete: ", ls.message()));
  }
  *done = 1;
  absl::Status err = r->error;
  if (err.ok() && sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->got[i]);
  }
  ResetRequest(r);
  return err;
}
}  // namespace longhaul::nccl
