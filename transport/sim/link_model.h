// LinkDirection: the model of one direction of an emulated link (a bottleneck with a
// drop-tail queue, followed by a propagation delay), shared by the discrete-event
// simulator (virtual time) and the real-time emulator (tools/emu).
//
// It owns no clock and no threads: the caller offers each datagram with the current time
// and gets a Verdict saying whether it is dropped and, if not, when it arrives (and
// whether it is duplicated, corrupted or CE-marked). The caller does the delivering.
// Offer() times must not decrease.
//
// Order of operations for each offered datagram (docs/simulator.md):
//   1. too big:   datagram + overhead > mtu               -> dropped (kTooBig)
//   2. loss:      Bernoulli(loss), or the Gilbert model when burst > 1 -> dropped (kLoss)
//   3. queue:     backlog = (busy_until - now) x rate; if the link is busy and
//                 backlog + size > queue limit            -> dropped (kQueueFull)
//                 ECN: CE-mark if ECT and backlog > ecn threshold
//   4. serialise: busy_until = max(now, busy_until) + size x 8 / rate
//                 (size = datagram + overhead; tracked in picoseconds, no drift)
//   5. delay:     deliver_at = busy_until + rtt/2 + J(busy_until), then raised to the
//                 previous in-order delivery time. J is the jitter process: values drawn
//                 uniformly in [0, jitter] at instants `jitter` apart, interpolated
//                 linearly between them, so it never falls faster than time passes and
//                 jitter never reorders packets, however dense (a per-packet draw
//                 clamped to the previous delivery would collapse to ~jitter at high
//                 packet rates)
//   6. reorder:   with probability `reorder` the packet is held back by reorder_delay
//                 (later packets may overtake it); dup: a second copy arrives one
//                 serialisation time after the first; corrupt: one random bit index of
//                 the datagram is reported for the caller to flip (first copy only)
//
// Randomness comes from the link's own seeded generator and is drawn in a fixed order,
// only for features that are enabled, so a (spec, seed, offer sequence) gives the same
// verdicts every time.
//
// Thread-safety: none; one thread drives a LinkDirection.
#pragma once

#include <cstdint>

#include "transport/base/rng.h"
#include "transport/base/units.h"
#include "transport/sim/link_spec.h"

namespace longhaul::sim {

enum class DropReason : uint8_t { kNone = 0, kLoss, kQueueFull, kTooBig };

struct Verdict {
  DropReason drop = DropReason::kNone;
  Time deliver_at;             // arrival of the (first) copy; valid when not dropped
  bool reordered = false;      // held back by reorder_delay: may arrive after later packets
  bool duplicate = false;      // a second copy arrives at duplicate_at
  Time duplicate_at;
  int64_t corrupt_bit = -1;    // >= 0: flip this bit (bit % 8 of byte bit / 8) of copy 1
  bool ce_mark = false;        // rewrite the ECN codepoint to CE
  bool dropped() const { return drop != DropReason::kNone; }
};

struct LinkCounters {
  uint64_t offered = 0;
  uint64_t offered_bytes = 0;    // datagram bytes (without overhead)
  uint64_t delivered = 0;        // datagrams accepted for delivery (first copies)
  uint64_t delivered_bytes = 0;
  uint64_t dropped_loss = 0;
  uint64_t dropped_queue = 0;
  uint64_t dropped_too_big = 0;
  uint64_t reordered = 0;
  uint64_t duplicated = 0;
  uint64_t corrupted = 0;
  uint64_t ce_marked = 0;
  uint64_t loss_bursts = 0;      // runs of consecutive random losses
  ByteCount max_queue_bytes = 0;   // largest backlog seen at an enqueue (wire bytes)
  double avg_queue_bytes = 0;      // time-weighted mean backlog (see Finish())
  Duration busy_time;              // time spent serialising
};

class LinkDirection {
 public:
  // `seed` is used unless spec.seed is set.
  LinkDirection(const LinkSpec& spec, uint64_t seed);

  // Decides the fate of a datagram of `bytes` (UDP payload) offered at `now`; `ect` says
  // whether it was sent ECN-capable.
  Verdict Offer(Time now, size_t bytes, bool ect);

  // Changes the link's parameters at `now` (a schedule step). Packets already queued keep
  // their departure times; later packets serialise at the new rate after them. The loss
  // model keeps its state; the RNG stream continues.
  void Reconfigure(const LinkSpec& spec, Time now);

  // Wire bytes queued or in serialisation at `now`.
  ByteCount BacklogBytes(Time now) const;

  // Integral of the backlog over time up to `now` (>= the last Offer time), in byte x
  // seconds: the difference between two instants over their distance is the mean queue.
  double QueueByteSeconds(Time now) const;
  // Counters, with avg_queue_bytes integrated up to `now` (>= the last Offer time).
  LinkCounters Finish(Time now) const;
  // Counters without bringing the time-weighted average up to date.
  const LinkCounters& counters() const { return counters_; }
  const LinkSpec& spec() const { return spec_; }

  // Gilbert model transition probabilities per packet (for tests and docs).
  double ge_p_good_to_bad() const { return p_gb_; }
  double ge_p_bad_to_good() const { return p_bg_; }

 private:
  void Configure(const LinkSpec& spec);
  bool DrawLoss();
  // The jitter process at departure time `t_ps`, in ns.
  int64_t JitterAt(int64_t t_ps);
  // Adds the integral of the backlog from last_change_ps_ to now_ps.
  void Integrate(int64_t now_ps);

  LinkSpec spec_;
  Rng rng_;
  // Derived parameters.
  double ps_per_byte_ = 0;      // serialisation time of one byte, picoseconds
  double bytes_per_ps_ = 0;
  int64_t delay_ps_ = 0;        // one-way propagation delay
  int64_t jitter_ns_ = 0;
  int64_t jitter_anchor_ps_ = -1;  // start of the current interpolation interval
  int64_t jitter_period_ps_ = 0;
  int64_t jitter_a_ns_ = 0;         // value at the anchor
  int64_t jitter_b_ns_ = 0;         // value one period later
  int64_t reorder_delay_ns_ = 0;
  ByteCount queue_limit_ = 0;
  ByteCount ecn_threshold_ = 0;
  double p_gb_ = 0;             // Gilbert: P(good -> bad) per packet
  double p_bg_ = 1;             // Gilbert: P(bad -> good) per packet
  bool gilbert_ = false;
  bool bad_state_ = false;
  bool last_lost_ = false;

  // State.
  int64_t busy_until_ps_ = 0;
  int64_t last_in_order_ns_ = 0;  // latest in-order delivery time handed out
  // Time-weighted backlog: integral of backlog bytes over picoseconds.
  double queue_integral_ = 0;
  int64_t first_offer_ps_ = -1;
  int64_t last_offer_ps_ = 0;
  LinkCounters counters_;
};

}  // namespace longhaul::sim
