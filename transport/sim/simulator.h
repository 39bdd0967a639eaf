// Simulator: a deterministic discrete-event simulator in virtual time that drives sans-IO
// endpoints (a Connection through scenario.cc's ConnectionNode, a whole endpoint through
// endpoint_node.h's EndpointNode, or test fakes) over a dumbbell: N endpoint pairs
// (left i <-> right i) share one bottleneck LinkDirection per direction (forward = left ->
// right, reverse = right -> left).
//
// Driver contract, per endpoint (the same one real drivers follow): at each wake the
// simulator delivers the due datagram (OnDatagram) or, when the endpoint's timer is due,
// calls OnTimeout; then it calls PollTransmit until it returns 0, offering each datagram
// to the link; then it re-arms the endpoint's single timer at NextTimeout().
//
// Determinism: no clock is read here (the optional wall-time bound reads the caller's
// clock, SimulatorOptions::wall_seconds, and only stops a run), no iteration over
// address-ordered containers. Events are ordered by time; ties
// are broken by a fixed order (schedule steps, forward in-order deliveries, reverse
// in-order deliveries, held-back/duplicate deliveries in (time, sequence) order, then
// timers in (time, sequence) order). Same seed and inputs give the same run; trace_hash()
// fingerprints it.
//
// Performance: datagram buffers come from a pool of fixed-size slots that grows to the
// largest number in flight and is then reused (no per-packet allocation); with a constant
// one-way delay each direction's deliveries are FIFO and live in a ring; only held-back
// and duplicated packets go through a heap; timers live in an indexed heap (one entry per
// endpoint). The pool's memory is kept for the next simulator in the process (see
// ReleaseCachedSimulatorMemory()).
//
// Ownership: the simulator does not own the nodes; they must outlive it.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/base/units.h"
#include "transport/core/connection.h"
#include "transport/sim/link_model.h"
#include "transport/sim/link_spec.h"

namespace longhaul::sim {

// One endpoint as the simulator sees it: the sans-IO driver surface of a Connection.
class SimNode {
 public:
  virtual ~SimNode() = default;
  virtual void OnDatagram(Time now, std::span<const uint8_t> datagram, Ecn ecn) = 0;
  virtual void OnTimeout(Time now) = 0;
  virtual size_t PollTransmit(Time now, uint8_t* buffer, size_t capacity,
                              TransmitInfo* info) = 0;
  virtual Time NextTimeout() const = 0;
};

struct SimulatorOptions {
  LinkSpec link;           // both directions of the bottleneck
  LinkSchedule schedule;   // optional changes over time (applied to both directions)
  LinkOverrides reverse;   // the reverse direction's differences (asymmetric links)
  uint64_t seed = 1;       // link randomness (unless link.seed is set)
  // Capacity of each datagram buffer handed to PollTransmit.
  size_t max_datagram = 65536;
  // Nonzero: datagrams of at most this many bytes are carried in slots of this size
  // (copied out of the transmit buffer), so that short datagrams (elided payload) keep
  // the in-flight memory small.
  size_t small_datagram = 0;
  // The caller's wall clock, in seconds from any origin (the tools pass a monotonic
  // clock: MonotonicSeconds() of transport/base/clock.h). Read only for Run()'s
  // wall_limit; empty: Run() has no wall-time bound.
  std::function<double()> wall_seconds;
};

struct SimulatorCounters {
  uint64_t events = 0;
  uint64_t datagrams_sent = 0;       // returned by PollTransmit
  uint64_t datagrams_delivered = 0;  // OnDatagram calls (copies included)
  uint64_t timeouts = 0;             // OnTimeout calls
  uint64_t stalls = 0;               // wakes deferred because a node kept asking for `now`
  uint64_t pool_buffers = 0;         // datagram buffers allocated (high-water mark)
};

// Frees the datagram memory finished simulators keep cached for the next simulator in
// the process (up to 4 GiB; reusing it avoids first-touch page faults). Thread-safe.
void ReleaseCachedSimulatorMemory();

enum class StopReason { kDone, kIdle, kTimeLimit, kWallLimit };
const char* StopReasonName(StopReason r);

class Simulator {
 public:
  // `options.link` must be valid (ParseLinkSpec output); the schedule must resolve
  // against it (ResolveLinkSchedule).
  explicit Simulator(const SimulatorOptions& options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Adds a pair; returns its index. Node ids are 2*pair (left) and 2*pair+1 (right).
  int AddPair(SimNode* left, SimNode* right);

  // Runs until `done()` returns true (checked after every event), no event is left, the
  // virtual time would pass `until`, or `wall_limit` of wall-clock time has passed on
  // SimulatorOptions::wall_seconds (checked every few thousand events; infinite, or no
  // clock given = no bound).
  StopReason Run(Time until, const std::function<bool()>& done,
                 Duration wall_limit = Duration::Infinite());

  Time now() const { return now_; }
  const LinkDirection& forward() const { return *links_[0]; }
  const LinkDirection& reverse() const { return *links_[1]; }
  const SimulatorCounters& counters() const { return counters_; }
  // Fingerprint of everything that happened (offers, verdicts, deliveries, wakes).
  uint64_t trace_hash() const { return trace_; }

 private:
  struct Packet;
  struct PacketHeap;
  class Ring;
  class TimerHeap;
  class BufferPool;

  static constexpr uint32_t kSmallBit = 0x80000000u;  // buffer id of a small slot
  uint8_t* Data(uint32_t buffer);
  void FreeBuffer(uint32_t buffer);
  uint32_t AllocFor(size_t len);
  void Deliver(const Packet& p);
  void Service(int node);
  void Offer(int node, uint32_t buffer, size_t len, const TransmitInfo& info);
  void ApplyScheduleStep();
  void Mix(uint64_t x) { trace_ = (trace_ ^ x) * 0x100000001b3ULL; }

  SimulatorOptions options_;
  std::vector<LinkSpec> schedule_specs_;
  std::vector<LinkSpec> reverse_specs_;  // schedule_specs_ with options_.reverse applied
  size_t next_step_ = 0;
  std::unique_ptr<LinkDirection> links_[2];
  std::vector<SimNode*> nodes_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<BufferPool> small_;  // SimulatorOptions::small_datagram
  std::unique_ptr<Ring> fifo_[2];
  std::unique_ptr<PacketHeap> held_;
  std::unique_ptr<TimerHeap> timers_;
  std::vector<int64_t> last_wake_ns_;     // per node: time of the last service
  std::vector<uint32_t> same_time_wakes_;  // per node: services at that same time
  uint32_t spare_ = 0xffffffffu;           // pool buffer reserved for the next PollTransmit
  Time now_;
  uint64_t seq_ = 0;
  uint64_t trace_ = 0xcbf29ce484222325ULL;
  SimulatorCounters counters_;
};

}  // namespace longhaul::sim
