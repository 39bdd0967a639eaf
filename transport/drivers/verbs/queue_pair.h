// UdQueuePair: one UD queue pair of the verbs driver with its registered receive ring
// and the bookkeeping of its posted sends (docs/rdma.md section 2).
//
// Receive: a ring of `recv_depth` buffers of one message each (the port's active MTU
// plus the 40-byte GRH in front of every UD message), all posted at creation; the driver
// hands each buffer back once the endpoint has read it and posts the returned ones as
// one post list (Refill).
//
// Send: the buffers are slots of the driver's shared send arena (the driver owns it);
// this class keeps which slots are posted, in order (a UD send queue completes in
// order, so a signalled completion returns every slot up to it), the post list being
// built this turn (`chain`) and what PollTransmit produced while the send queue was full
// (`backlog`). Every kSignalEvery-th work request and the last of each post list are
// signalled; datagrams up to the queue pair's inline limit are sent inline.
//
// Ownership: owns the ibv_qp and the receive ring's MR (destroyed in that order); borrows
// the device, the CQs and the address handles. Thread-compatible: the driver thread
// uses it alone.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/datapath/options.h"
#include "transport/drivers/verbs/locator.h"
#include "transport/drivers/verbs/peer_address.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

// Bytes in front of every received UD message (the GRH, or for RoCE v2 over IPv4 20
// unused bytes and the IPv4 header).
inline constexpr uint32_t kGrhBytes = 40;
inline constexpr uint32_t kSignalEvery = 16;

// Work request ids: the queue pair's id and the buffer's slot.
inline uint64_t WrId(uint32_t qp, uint32_t slot) {
  return (static_cast<uint64_t>(qp) << 32) | slot;
}
inline uint32_t WrQp(uint64_t id) { return static_cast<uint32_t>(id >> 32); }
inline uint32_t WrSlot(uint64_t id) { return static_cast<uint32_t>(id); }

// The sender's GID from the 40 bytes in front of a UD message; false when neither an
// IPv6 GRH nor an IPv4 header is there.
bool SourceGid(const uint8_t* grh, Gid* gid);

// One datagram to post: its send-arena slot, length and destination.
struct SendWr {
  uint32_t slot;
  uint32_t len;
  ibv_ah* ah;
  uint32_t remote_qpn;
};

// Where a post list's datagrams come from: the driver's registered send arena.
struct SendArena {
  uint8_t* base = nullptr;
  uint32_t lkey = 0;
  uint32_t slot_size = 0;  // bytes per slot: the port's active MTU
  uint8_t* Slot(uint32_t slot) const { return base + static_cast<size_t>(slot) * slot_size; }
};

class UdQueuePair {
 public:
  // Creates a UD queue pair on `dev`'s port over the two CQs, moves it to RTS with kQkey,
  // registers a receive ring of `recv_depth` buffers of `slot_size` + kGrhBytes and posts
  // them all (one post list, counted in stats->recv_syscalls). Inline data is asked for
  // and dropped if the device refuses it. Errors: VerbsError naming the call refused
  // (ibv_create_qp, ibv_modify_qp, ibv_reg_mr, ibv_post_recv).
  static absl::StatusOr<std::unique_ptr<UdQueuePair>> Create(
      const VerbsDevice& dev, ibv_cq* send_cq, ibv_cq* recv_cq, uint32_t id, uint32_t recv_depth,
      uint32_t send_depth, uint32_t slot_size, EndpointStats* stats);
  ~UdQueuePair();
  UdQueuePair(const UdQueuePair&) = delete;
  UdQueuePair& operator=(const UdQueuePair&) = delete;

  uint32_t id() const { return id_; }  // its endpoint::LocalId
  uint32_t qpn() const { return qpn_; }
  uint32_t recv_depth() const { return recv_depth_; }
  uint32_t send_depth() const { return send_depth_; }

  // ---- receive ring ----
  // The buffer of `slot` (kGrhBytes, then the message).
  const uint8_t* RecvBuffer(uint32_t slot) const {
    return recv_mem_.data() + static_cast<size_t>(slot) * (slot_size_ + kGrhBytes);
  }
  // `slot` may be posted again.
  void ReturnRecv(uint32_t slot) { refill_.push_back(slot); }
  size_t returned() const { return refill_.size(); }
  // Posts the returned buffers as one post list (none: nothing). Errors: VerbsError.
  absl::Status Refill(EndpointStats* stats);

  // ---- send side ----
  // Work requests the send queue can still take, counting this turn's post list.
  size_t send_room() const {
    const size_t used = inflight_.size() + chain.size();
    return used >= send_depth_ ? 0 : send_depth_ - used;
  }
  bool has_inflight() const { return !inflight_.empty(); }
  // Posts `chain` as one post list and clears it. Slots of work requests the device
  // refused go back to `free_slots` (counted in stats->send_errors); returns the
  // ibv_post_send error (0: all posted).
  int PostChain(const SendArena& arena, std::vector<uint32_t>* free_slots, EndpointStats* stats);
  // A signalled send completion of `slot`: every slot posted up to it is free again.
  void Completed(uint32_t slot, std::vector<uint32_t>* free_slots);
  // Every slot this queue pair holds (posted, chained, backlogged) back to `free_slots`.
  void ReleaseSlots(std::vector<uint32_t>* free_slots);

  std::vector<SendWr> chain;   // the post list built this turn
  std::deque<SendWr> backlog;  // PollTransmit's output while the send queue was full
  bool blocked = false;        // the endpoint was told (Endpoint::SetBlocked)

  // ---- listener ----
  std::unique_ptr<LocatorSocket> locator;  // a listener's UDP socket; null for clients
  ForeignDatagramHandler on_foreign;

 private:
  UdQueuePair() = default;
  uint32_t id_ = 0;
  ibv_qp* qp_ = nullptr;
  uint32_t qpn_ = 0;
  uint32_t max_inline_ = 0;
  uint32_t slot_size_ = 0;
  uint32_t recv_depth_ = 0;
  uint32_t send_depth_ = 0;
  std::vector<uint8_t> recv_mem_;
  ibv_mr* recv_mr_ = nullptr;
  std::vector<uint32_t> refill_;   // receive slots to post again
  std::deque<uint32_t> inflight_;  // posted send slots, in order
  uint32_t unsignaled_run_ = 0;
  // Scratch for post lists.
  std::vector<ibv_recv_wr> recv_wrs_;
  std::vector<ibv_sge> recv_sges_;
  std::vector<ibv_send_wr> send_wrs_;
  std::vector<ibv_sge> send_sges_;
};

}  // namespace longhaul::verbs
