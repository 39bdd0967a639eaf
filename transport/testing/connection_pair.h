// Test-only harness: two Connections joined by a simple virtual-time pipe.
//
// Each direction delivers datagrams after a fixed one-way delay, serialised at a rate
// (zero: infinite), in order, except where a test's filter drops, delays or reorders
// them. The pair advances virtual time event by event, so tests are deterministic and
// need no sleeps. For realistic links use the simulator (transport/sim); this harness is
// for precise protocol unit tests (drop exactly packet 17, reorder two packets, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "transport/core/connection.h"

namespace longhaul::testing {

struct PipeOptions {
  Duration one_way_delay = Duration::Milliseconds(10);
  Bandwidth rate;  // zero: no serialisation delay
};

// Verdict for one datagram: drop it, or add extra delay (reordering).
struct FilterVerdict {
  bool drop = false;
  Duration extra_delay;
  bool corrupt = false;  // flip one bit
  bool duplicate = false;
};

// Called for every datagram: direction 0 is a->b, 1 is b->a; index counts datagrams in
// that direction from 0.
using PipeFilter = std::function<FilterVerdict(int direction, uint64_t index,
                                               const std::vector<uint8_t>& datagram)>;

class ConnectionPair {
 public:
  ConnectionPair(const TransportConfig& a_config, const TransportConfig& b_config,
                 PipeOptions pipe = {}, uint64_t seed = 1);

  Connection& a() { return *a_; }
  Connection& b() { return *b_; }
  Time now() const { return now_; }
  void set_filter(PipeFilter f) { filter_ = std::move(f); }

  // Runs until `done()` holds or virtual time passes `limit` or `max_steps` events ran.
  // Returns true if done() held.
  bool RunUntil(const std::function<bool()>& done, Duration limit,
                uint64_t max_steps = 50'000'000);

  // Events collected from each side (PollEvent is drained after every step).
  std::vector<Event>& a_events() { return a_events_; }
  std::vector<Event>& b_events() { return b_events_; }
  uint64_t datagrams(int direction) const { return sent_[direction]; }

 private:
  struct InFlight {
    std::vector<uint8_t> bytes;
    Ecn ecn;
  };
  void Pump(int side);
  void Enqueue(int direction, std::vector<uint8_t> d, Ecn ecn);

  std::unique_ptr<Connection> a_, b_;
  PipeOptions pipe_;
  PipeFilter filter_;
  Time now_;
  std::multimap<std::pair<int64_t, uint64_t>, std::pair<int, InFlight>> queue_;
  uint64_t seq_ = 0;
  uint64_t sent_[2] = {0, 0};
  Time busy_until_[2];
  std::vector<Event> a_events_, b_events_;
  std::vector<uint8_t> buf_;
};

}  // namespace longhaul::testing
