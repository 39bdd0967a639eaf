// EmuDirection: one direction of the emulated link in real time. It couples the
// simulator's link model (sim::LinkDirection: loss, queue, rate, delay, jitter, reorder,
// duplication, corruption, ECN; no clock) with the datagrams held until their modelled
// delivery time (ReleaseQueue) and their buffers (PacketPool), and counts what the
// emulator itself drops apart from what the model drops.
//
// The I/O layer (UDP relay, TUN bridge, a test) receives a datagram into a pool slot and
// calls Ingest(now, ...): the model decides; a dropped datagram's slot goes back to the
// pool; a delivered one is marked (corrupt bit flipped, CE set), duplicated if asked and
// queued. The I/O layer then calls PopDue(now) at each wake and sends everything due, in
// delivery-time order, and returns the slots. Timing accuracy therefore rests on the
// caller waking at NextDeadline() and releasing everything due at each wake: the model's
// serialisation is exact, so late wakes add latency but never drift from the rate.
//
// Payload kinds:
//   kUdpPayload  datagrams are UDP payloads (the relay): the model adds the spec's
//                overhead (IP + UDP headers) on the wire; ECN travels in `tos`.
//   kIpPacket    datagrams are whole IP packets (TUN mode): they already carry the IP
//                and transport headers, so only the part of the spec's overhead beyond
//                IP + UDP (28 bytes, e.g. Ethernet framing if overhead=66) is added, and
//                the MTU check applies to the IP packet length. ECN is read from and CE
//                written into the IP header (checksum fixed).
//
// Times: `now` is integer nanoseconds since the emulator's start on a monotonic clock,
// non-decreasing across calls. Thread-safety: none; one thread drives a direction (it
// shares the pool with the other direction of the same loop).
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "transport/base/units.h"
#include "transport/emu/packet_pool.h"
#include "transport/emu/release_queue.h"
#include "transport/sim/link_model.h"
#include "transport/sim/link_spec.h"

namespace longhaul::emu {

enum class PayloadKind : uint8_t { kUdpPayload, kIpPacket };

// What the emulator itself did and dropped (never modelled loss).
struct EmuCounters {
  uint64_t received = 0;  // datagrams read from the input
  uint64_t received_bytes = 0;
  uint64_t released = 0;  // datagrams sent to the output successfully
  uint64_t released_bytes = 0;
  // Own drops:
  uint64_t buffer_full = 0;  // no buffer when read (not offered to the model)
  uint64_t dup_lost = 0;     // no buffer for a modelled duplicate copy
  uint64_t truncated = 0;    // longer than a buffer yet accepted by the model
  uint64_t send_errors = 0;  // the output refused it (socket/TUN write error)
  uint64_t rx_overflow = 0;  // dropped by the kernel before the emulator read them
  uint64_t evicted = 0;      // queued for a client evicted from the client map
  uint64_t no_flow = 0;      // no upstream socket could be made for a new client
  uint64_t OwnDrops() const {
    return buffer_full + dup_lost + truncated + send_errors + rx_overflow + evicted + no_flow;
  }
};

class EmuDirection {
 public:
  // `pool` must outlive this. `seed` is used unless spec.seed is set.
  EmuDirection(const sim::LinkSpec& spec, uint64_t seed, PayloadKind kind, PacketPool* pool);
  EmuDirection(const EmuDirection&) = delete;
  EmuDirection& operator=(const EmuDirection&) = delete;

  // Offers the datagram held in `slot` (`bytes` long; may exceed the slot size when the
  // input reported a truncated datagram) to the model at `now_ns` (raised to the
  // previous Ingest time if earlier, so arrival timestamps that step back are safe). Takes
  // ownership of the slot (queued or returned to the pool). `flow`, `flow_gen` and `tos` travel
  // with the datagram. Returns the model's verdict.
  sim::Verdict Ingest(int64_t now_ns, uint32_t slot, uint32_t bytes, uint32_t flow = 0,
                      uint32_t flow_gen = 0, uint8_t tos = 0);

  // Applies a schedule step at `now_ns` (sim::LinkDirection::Reconfigure: datagrams
  // already queued keep their times; later ones serialise at the new rate after them).
  void Reconfigure(const sim::LinkSpec& spec, int64_t now_ns);

  // Earliest pending delivery time, or ReleaseQueue::kNever.
  int64_t NextDeadline() const { return queue_.NextDeadline(); }

  // Moves the next datagram due at `now_ns` into *out; the caller sends it, reports
  // OnSent/OnSendError, and returns out->slot to the pool.
  bool PopDue(int64_t now_ns, PendingDatagram* out) { return queue_.PopDue(now_ns, out); }

  void OnReceived(uint64_t bytes) {
    ++counters_.received;
    counters_.received_bytes += bytes;
  }
  void OnSent(uint64_t bytes) {
    ++counters_.released;
    counters_.released_bytes += bytes;
  }
  EmuCounters& counters() { return counters_; }
  const EmuCounters& counters() const { return counters_; }

  // Model counters with the time-weighted queue integrated up to `now_ns`.
  sim::LinkCounters ModelCounters(int64_t now_ns) const {
    return link_.Finish(Time::FromNanoseconds(now_ns));
  }
  const sim::LinkDirection& model() const { return link_; }
  size_t pending() const { return queue_.size(); }
  PayloadKind kind() const { return kind_; }
  PacketPool* pool() const { return pool_; }

  // Returns every queued datagram's slot to the pool (shutdown); returns how many.
  size_t DropPending();

  // The spec the model runs with for `kind` (kIpPacket: overhead and mtu adjusted as
  // described above).
  static sim::LinkSpec ModelSpec(const sim::LinkSpec& spec, PayloadKind kind);

 private:
  sim::LinkDirection link_;
  ReleaseQueue queue_;
  PacketPool* pool_;
  PayloadKind kind_;
  EmuCounters counters_;
  int64_t last_ns_ = 0;
};

// Seeds of the two directions from a run's seed, as the simulator derives them (so a
// spec and seed mean the same link in both); a spec's own seed key also differs between
// directions. Returns {forward spec, reverse spec, forward seed, reverse seed}.
struct DirectionSeeds {
  sim::LinkSpec forward_spec, reverse_spec;
  uint64_t forward_seed = 0, reverse_seed = 0;
};
DirectionSeeds DeriveDirectionSeeds(const sim::LinkSpec& spec, uint64_t seed);

// A run's link schedule (--link_schedule): specs that take effect at times after the run
// starts, applied to both directions at once, as in the simulator.
class LinkSchedule {
 public:
  LinkSchedule(std::vector<Duration> times, std::vector<sim::LinkSpec> specs, uint64_t seed)
      : times_(std::move(times)), specs_(std::move(specs)), seed_(seed) {}
  // The run starts at `start_ns` (loop clock): the first step is next.
  void Start(int64_t start_ns) {
    start_ns_ = start_ns;
    next_ = 0;
  }
  // When the next step is due; INT64_MAX when none is left.
  int64_t next_at() const;
  // Applies every step due at `now_ns` to both directions.
  void ApplyDue(int64_t now_ns, EmuDirection* forward, EmuDirection* reverse);

 private:
  std::vector<Duration> times_;
  std::vector<sim::LinkSpec> specs_;
  uint64_t seed_;
  int64_t start_ns_ = 0;
  size_t next_ = 0;
};

}  // namespace longhaul::emu
