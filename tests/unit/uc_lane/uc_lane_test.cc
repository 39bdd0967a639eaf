// The UC lane's bookkeeping (transport/drivers/verbs/uc_lane.h) against a model of the
// receiving NIC: a write lands only when its rkey's variant matches the lap its window is
// bound for now; a chunk may be lost, cut short after its first packet (placed, no
// immediate), duplicated (a late first packet, or a whole single-packet write with its
// immediate) up to several laps later, or reordered by a few slots; completions wait in a
// completion queue that is polled in batches, and binds execute only after a poll. The
// property: every slot processed holds exactly the chunk its completion names, whole, and
// no chunk is processed twice.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "transport/drivers/verbs/uc_lane.h"

namespace longhaul::verbs {
namespace {

TEST(UcRingGeometry, BadGeometriesAreRefusedByName) {
  EXPECT_TRUE(UcRingGeometry{}.Validate().ok());
  UcRingGeometry g;
  g.windows = 2;
  EXPECT_NE(g.Validate().message().find("windows=2"), std::string::npos) << g.Validate();
  g = UcRingGeometry{};
  g.windows = 7;  // does not divide 128
  EXPECT_NE(g.Validate().message().find("divide slots=128"), std::string::npos);
  g = UcRingGeometry{};
  g.slots = UcRingGeometry::kMaxSlots + 8;
  EXPECT_NE(g.Validate().message().find("slots="), std::string::npos);
  g = UcRingGeometry{};
  g.slot_bytes = 0;
  EXPECT_FALSE(g.Validate().ok());
}

TEST(UcLaneSender, ChunksFillTheRingInLapsWithTheLapsKey) {
  UcRingGeometry g{.slots = 8, .windows = 4, .slot_bytes = 1000};
  UcLaneSender s(g, {0x1100, 0x2233, 0x33ff, 0x4401});
  for (uint64_t n = 0; n < 8 * 300; ++n) {
    const UcLaneSender::Write w = s.Next();
    ASSERT_EQ(w.chunk, n);
    EXPECT_EQ(w.slot, n % 8);
    EXPECT_EQ(w.offset, (n % 8) * 1000);
    const uint32_t keys[] = {0x1100, 0x2233, 0x33ff, 0x4401};
    const uint32_t k = keys[(n % 8) / 2];
    EXPECT_EQ(w.rkey, (k & ~0xffu) | ((k + n / 8) & 0xff)) << n;
    EXPECT_EQ(ImmediateSlot(w.immediate), n % 8);
    EXPECT_EQ(ImmediateLap(w.immediate), (n / 8) & 0xff);
  }
  EXPECT_EQ(s.chunks(), 8u * 300);
  EXPECT_EQ(EncodeImmediate(0x1ff, 0xabcdef), 0xffabcdefu);
}

// The receiving NIC and the driver around a UcLaneReceiver.
class Model {
 public:
  // `keys`: each window's rkey for lap 0.
  Model(UcRingGeometry g, std::vector<uint32_t> keys)
      : g_(g), rx_(g), keys_(std::move(keys)), nic_lap_(g.windows, 0), slot_(g.slots, Slot{}) {}

  struct Arrival {
    uint64_t chunk;
    uint32_t slot;
    uint32_t rkey;
    uint32_t imm;
    bool whole;      // every packet (and the immediate) arrives
    bool with_imm;   // a completion is raised
  };

  // The NIC: the key check, placement, the completion.
  void Land(const Arrival& a) {
    const uint32_t w = a.slot / g_.slots_per_window();
    if (a.rkey != KeyForLap(keys_[w], nic_lap_[w])) {
      ++rejected_;
      return;
    }
    Slot& s = slot_[a.slot];
    if (s.chunk != a.chunk) s.whole = false;  // another chunk's bytes, or a mix
    s.chunk = a.chunk;
    if (a.whole) s.whole = true;
    if (a.with_imm) cq_.push_back(a.imm);
  }

  // The driver: poll every completion, process delivered slots, then post the binds
  // (which execute before anything that lands after this poll).
  void Poll() {
    while (!cq_.empty()) {
      const uint32_t imm = cq_.front();
      cq_.pop_front();
      const UcLaneReceiver::Completion c = rx_.OnCompletion(imm);
      if (!c.deliver) continue;
      const Slot& s = slot_[c.slot];
      ASSERT_EQ(c.offset, uint64_t{c.slot} * g_.slot_bytes);
      ASSERT_EQ(s.chunk, c.chunk) << "slot " << c.slot << " holds another chunk";
      ASSERT_TRUE(s.whole) << "chunk " << c.chunk << " processed incomplete";
      ASSERT_TRUE(processed_.insert(c.chunk).second) << "chunk " << c.chunk << " twice";
    }
    for (const UcLaneReceiver::Rebind& r : rx_.TakeRebinds()) {
      ASSERT_GT(r.lap, nic_lap_[r.window]);
      nic_lap_[r.window] = r.lap;
      rx_.Rebound(r);
    }
  }

  const UcLaneReceiver& rx() const { return rx_; }
  const std::set<uint64_t>& processed() const { return processed_; }
  uint64_t rejected() const { return rejected_; }

 private:
  struct Slot {
    uint64_t chunk = UINT64_MAX;
    bool whole = false;
  };
  UcRingGeometry g_;
  UcLaneReceiver rx_;
  std::vector<uint32_t> keys_;
  std::vector<uint64_t> nic_lap_;
  std::vector<Slot> slot_;
  std::deque<uint32_t> cq_;
  std::set<uint64_t> processed_;
  uint64_t rejected_ = 0;
};

Model::Arrival ArrivalOf(const UcLaneSender::Write& w, bool whole, bool with_imm) {
  return {w.chunk, w.slot, w.rkey, w.immediate, whole, with_imm};
}

TEST(UcLaneReceiver, InOrderChunksAreAllDeliveredAndWindowsCycle) {
  const UcRingGeometry g{.slots = 64, .windows = 8, .slot_bytes = 4096};
  const std::vector<uint32_t> keys(8, 0x5500);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  constexpr uint64_t kChunks = 64 * 1000;  // 1000 laps: the key variant wraps 3 times
  for (uint64_t n = 0; n < kChunks; ++n) {
    m.Land(ArrivalOf(tx.Next(), true, true));
    if (n % 5 == 4) m.Poll();
    if (::testing::Test::HasFatalFailure()) return;
  }
  m.Poll();
  EXPECT_EQ(m.processed().size(), kChunks);
  EXPECT_EQ(m.rx().stats().given_up, 0u);
  EXPECT_EQ(m.rx().stats().stale_completions, 0u);
  EXPECT_EQ(m.rejected(), 0u);
  EXPECT_GE(m.rx().stats().rebinds, kChunks / 8 - 8);
}

struct Faults {
  double loss = 0;       // the whole chunk
  double cut = 0;        // first packet placed, the rest and the immediate lost
  double duplicate = 0;  // a copy arrives later
  uint32_t max_dup_delay = 0;  // in chunks
  uint32_t jitter = 0;         // reorder within this many chunks
  uint32_t max_poll_gap = 1;   // chunks landing between polls, at most
  bool single_packet = false;  // a duplicate brings its immediate again
};

// Sends `chunks` through the faults; returns how many were sent whole (not lost, not cut).
uint64_t SendThroughFaults(Model& m, UcLaneSender& tx, uint64_t chunks, const Faults& f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::multimap<uint64_t, Model::Arrival> future;  // arrival time -> arrival
  uint64_t whole_sent = 0;
  uint64_t next_poll = 1 + rng() % f.max_poll_gap;
  for (uint64_t t = 0; t < chunks || !future.empty(); ++t) {
    if (t < chunks) {
      const UcLaneSender::Write w = tx.Next();
      const double r = u(rng);
      const uint64_t at = t + (f.jitter ? rng() % (f.jitter + 1) : 0);
      if (r < f.loss) {
        // nothing arrives
      } else if (r < f.loss + f.cut) {
        future.emplace(at, ArrivalOf(w, false, false));
      } else {
        future.emplace(at, ArrivalOf(w, true, true));
        ++whole_sent;
      }
      if (u(rng) < f.duplicate) {
        const uint64_t late = at + 1 + rng() % (f.max_dup_delay + 1);
        future.emplace(late, ArrivalOf(w, f.single_packet, f.single_packet));
      }
    }
    while (!future.empty() && future.begin()->first <= t) {
      m.Land(future.begin()->second);
      future.erase(future.begin());
      if (--next_poll == 0) {
        m.Poll();
        if (::testing::Test::HasFatalFailure()) return whole_sent;
        next_poll = 1 + rng() % f.max_poll_gap;
      }
    }
  }
  m.Poll();
  return whole_sent;
}

TEST(UcLaneReceiver, LateDuplicatesLossAndReorderNeverChangeAProcessedSlot) {
  for (const bool single : {false, true}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << (single ? " single" : " multi"));
      const UcRingGeometry g{.slots = 64, .windows = 8, .slot_bytes = 65536};
      const std::vector<uint32_t> keys = {0x7700, 0x78c3, 0x79ff, 0x7a01,
                                          0x7b80, 0x7c7f, 0x7d10, 0x7eee};
      UcLaneSender tx(g, keys);
      Model m(g, keys);
      Faults f{.loss = 0.01, .cut = 0.01, .duplicate = 0.05, .max_dup_delay = 64 * 5,
               .jitter = 3, .max_poll_gap = 24, .single_packet = single};
      constexpr uint64_t kChunks = 64 * 1500;
      const uint64_t whole = SendThroughFaults(m, tx, kChunks, f, seed * 7919);
      if (HasFatalFailure()) return;
      // Liveness: every chunk that arrived whole is processed (none is reordered behind
      // two windows at this jitter, none meets a window not yet rebound with eight
      // windows of slack); single-packet duplicates of lost chunks may add a few.
      EXPECT_GE(m.processed().size(), whole);
      if (!single) {
        EXPECT_EQ(m.processed().size(), whole);
      }
      // Late copies were refused by key or ignored, never processed.
      EXPECT_GT(m.rejected(), 0u);
      if (single) {
        EXPECT_GT(m.rx().stats().stale_completions, 0u);
      }
      EXPECT_GE(m.rx().stats().given_up, kChunks - whole - 8 * 8);
    }
  }
}

TEST(UcLaneReceiver, ReorderBeyondTwoWindowsIsGivenUpNotMisdelivered) {
  const UcRingGeometry g{.slots = 32, .windows = 4, .slot_bytes = 65536};
  const std::vector<uint32_t> keys(4, 0x1f0);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  // Chunk 0 arrives after windows 1 and 2 have completed: window 0 was retired (chunk 0
  // given up) and rebound for lap 1, so chunk 0's key no longer matches.
  std::vector<UcLaneSender::Write> w;
  for (int i = 0; i < 24; ++i) w.push_back(tx.Next());
  for (int i = 1; i < 24; ++i) m.Land(ArrivalOf(w[i], true, true));
  m.Poll();
  m.Land(ArrivalOf(w[0], true, true));
  m.Poll();
  EXPECT_EQ(m.processed().size(), 23u);
  EXPECT_EQ(m.processed().count(0), 0u);
  EXPECT_EQ(m.rejected(), 1u);
  EXPECT_EQ(m.rx().stats().given_up, 1u);
  EXPECT_EQ(m.rx().bound_lap(0), 1u);
}

TEST(UcLaneReceiver, ACompletionNamingAnotherLapOrABadSlotIsIgnored) {
  const UcRingGeometry g{.slots = 16, .windows = 4, .slot_bytes = 100};
  UcLaneReceiver rx(g);
  EXPECT_FALSE(rx.OnCompletion(EncodeImmediate(1, 3)).deliver);   // lap 1: window bound for 0
  EXPECT_FALSE(rx.OnCompletion(EncodeImmediate(0, 16)).deliver);  // no such slot
  const UcLaneReceiver::Completion c = rx.OnCompletion(EncodeImmediate(0, 3));
  EXPECT_TRUE(c.deliver);
  EXPECT_EQ(c.chunk, 3u);
  EXPECT_EQ(c.offset, 300u);
  EXPECT_FALSE(rx.OnCompletion(EncodeImmediate(0, 3)).deliver);   // settled already
  EXPECT_EQ(rx.stats().stale_completions, 3u);
  EXPECT_EQ(rx.stats().delivered, 1u);
}

// The limit the design states (docs/rdma.md 7.4): an outage that swallows more windows
// than the ring's slack leaves every window bound for a lap the sender has left; the lane
// then delivers nothing (the driver replaces it), and still misdelivers nothing.
TEST(UcLaneReceiver, AnOutageLongerThanTheRingStallsTheLaneWithoutMisdelivery) {
  const UcRingGeometry g{.slots = 32, .windows = 4, .slot_bytes = 65536};
  const std::vector<uint32_t> keys(4, 0x100);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  for (int i = 0; i < 40; ++i) {
    m.Land(ArrivalOf(tx.Next(), true, true));
    m.Poll();
  }
  for (int i = 0; i < 64; ++i) tx.Next();  // lost: two laps
  for (int i = 0; i < 64; ++i) {
    m.Land(ArrivalOf(tx.Next(), true, true));
    m.Poll();
  }
  EXPECT_EQ(m.processed().size(), 40u);
  EXPECT_EQ(m.rejected(), 64u);
}

}  // namespace
}  // namespace longhaul::verbs
