// The UC lane's bookkeeping (transport/drivers/verbs/uc_lane.h) against a model of the
// receiving NIC: a write lands only when its rkey's variant matches the lap its window is
// bound for now; a chunk may be lost, cut short after its first packet (placed, no
// immediate), duplicated (a late first packet, or a whole single-packet write with its
// immediate) up to several laps later, or reordered by a few slots; completions wait in a
// completion queue that is polled in batches, and binds execute only after a poll. The
// property: every slot processed holds exactly the chunk its completion names, whole, and
// no chunk is processed twice.
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "transport/drivers/verbs/uc_lane.h"
#include "transport/drivers/verbs/uc_link_state.h"

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
    const UcLaneSender::Write w = s.Place(n);
    ASSERT_EQ(w.chunk, n);
    EXPECT_EQ(w.slot, n % 8);
    EXPECT_EQ(w.offset, (n % 8) * 1000);
    const uint32_t keys[] = {0x1100, 0x2233, 0x33ff, 0x4401};
    const uint32_t k = keys[(n % 8) / 2];
    EXPECT_EQ(w.rkey, (k & ~0xffu) | ((k + n / 8) & 0xff)) << n;
    EXPECT_EQ(ImmediateSlot(w.immediate), n % 8);
    EXPECT_EQ(ImmediateLap(w.immediate), (n / 8) & 0xff);
  }
  EXPECT_EQ(EncodeImmediate(0x1ff, 0x3cdef), 0xff03cdefu);
  EXPECT_EQ(EncodeImmediate(0x1ff, 0x3cdef, 16), 0xfff3cdefu);
  EXPECT_EQ(EncodeImmediate(0x1ff, 0xbcdef), 0xff03cdefu) << "the direct bit is not the slot's";
  EXPECT_FALSE(ImmediateDirect(EncodeImmediate(0x1ff, 0x7ffff, 16)));
  EXPECT_TRUE(ImmediateDirect(EncodeImmediate(3, 5, 7) | kImmediateDirect));
  EXPECT_EQ(ImmediateSlot(EncodeImmediate(3, 5, 7) | kImmediateDirect), 5u);
  EXPECT_EQ(ImmediatePieces(EncodeImmediate(3, 5, 7) | kImmediateDirect), 7u);
  EXPECT_EQ(ImmediatePieces(EncodeImmediate(3, 5, 7)), 7u);
  EXPECT_EQ(ImmediateSlot(EncodeImmediate(3, 5, 7)), 5u);
  EXPECT_EQ(ImmediateLap(EncodeImmediate(3, 5, 7)), 3u);
  EXPECT_EQ(ImmediatePieces(WithPieces(EncodeImmediate(3, 5, 7), 2)), 2u);
}

TEST(UcLaneSender, WritesOnlyIntoGrantedWindowsAndSkipsRetiredOnes) {
  UcRingGeometry g{.slots = 8, .windows = 4, .slot_bytes = 1000};
  UcLaneSender s(g, {0x100, 0x200, 0x300, 0x400});
  for (uint64_t n = 0; n < 8; ++n) ASSERT_EQ(s.Next()->chunk, n);  // lap 0 is granted
  EXPECT_FALSE(s.Next().has_value());  // lap 1 is not
  EXPECT_FALSE(s.Peek().has_value());
  s.Grant({1, 1, 0, 0});
  EXPECT_EQ(s.Next()->chunk, 8u);
  EXPECT_EQ(s.Peek()->chunk, 9u);
  EXPECT_EQ(s.Next()->chunk, 9u);
  EXPECT_EQ(s.Next()->chunk, 10u);
  EXPECT_EQ(s.Next()->rkey, 0x201u);  // window 1, lap 1
  EXPECT_FALSE(s.Next().has_value());  // window 2 is still lap 0's
  s.Grant({0, 0, 0, 0});                // older grants change nothing
  EXPECT_FALSE(s.Next().has_value());
  // The receiver retired window 2 for lap 2 and window 3 for lap 1 while this sender
  // waited: window 2's slots of lap 1 are skipped.
  s.Grant({1, 1, 2, 1});
  EXPECT_EQ(s.Next()->chunk, 14u);
  EXPECT_EQ(s.skipped(), 2u);
  EXPECT_EQ(s.chunks(), 13u);
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

  // The lane went quiet: the driver drains its completion queue, then the receiver
  // retires its oldest window (and rebinds it).
  void Idle() {
    Poll();
    rx_.OnIdle();
    Poll();
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

// The sender's next chunk; when no grant allows one, the receiver polls and its grants
// reach the sender at once, and it tries again.
std::optional<UcLaneSender::Write> NextGranted(Model& m, UcLaneSender& tx) {
  std::optional<UcLaneSender::Write> w = tx.Next();
  if (!w) {
    m.Poll();
    tx.Grant(m.rx().Grants());
    w = tx.Next();
  }
  return w;
}

TEST(UcLaneReceiver, InOrderChunksAreAllDeliveredAndWindowsCycle) {
  const UcRingGeometry g{.slots = 64, .windows = 8, .slot_bytes = 4096};
  const std::vector<uint32_t> keys(8, 0x5500);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  constexpr uint64_t kChunks = 64 * 1000;  // 1000 laps: the key variant wraps 3 times
  for (uint64_t n = 0; n < kChunks; ++n) {
    const std::optional<UcLaneSender::Write> w = NextGranted(m, tx);
    ASSERT_TRUE(w.has_value()) << "chunk " << n << " never granted";
    ASSERT_EQ(w->chunk, n);
    m.Land(ArrivalOf(*w, true, true));
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
  uint32_t max_dup_delay = 0;  // in steps
  uint32_t delay = 8;          // steps from a write to its arrival (and from a grant to the sender)
  uint32_t jitter = 0;         // more delay, up to this
  uint32_t max_poll_gap = 1;   // steps between polls, at most
  double grant_loss = 0;       // a grant message lost
  uint32_t idle = 200;         // quiet steps before the receiver's OnIdle (and between them)
  bool single_packet = false;  // a duplicate brings its immediate again
};

struct RunResult {
  uint64_t whole = 0;   // chunks whose write arrived whole
  uint64_t steps = 0;
};

// The sender writes at most one chunk per step, as the grants allow, through the faults;
// grants travel back with the same delay; the receiver polls every few steps and goes
// idle after `idle` quiet steps. Ends when `chunks` chunks were written and everything in
// flight has landed.
RunResult SendThroughFaults(Model& m, UcLaneSender& tx, uint64_t chunks, const Faults& f,
                            uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::multimap<uint64_t, Model::Arrival> future;             // arrival step -> arrival
  std::multimap<uint64_t, std::vector<uint64_t>> grants;      // arrival step -> grants
  RunResult res;
  uint64_t next_poll = 1 + rng() % f.max_poll_gap, version = 0, quiet = 0;
  uint64_t processed = 0;
  const uint64_t limit = chunks * 40 + 100000;
  for (uint64_t t = 0; tx.chunks() < chunks || !future.empty(); ++t) {
    if (t > limit) {
      ADD_FAILURE() << "the lane stalled: " << tx.chunks() << " of " << chunks << " written";
      break;
    }
    if (tx.chunks() < chunks) {
      if (const std::optional<UcLaneSender::Write> w = tx.Next()) {
        const double r = u(rng);
        const uint64_t at = t + f.delay + (f.jitter ? rng() % (f.jitter + 1) : 0);
        if (r < f.loss) {
          // nothing arrives
        } else if (r < f.loss + f.cut) {
          future.emplace(at, ArrivalOf(*w, false, false));
        } else {
          future.emplace(at, ArrivalOf(*w, true, true));
          ++res.whole;
        }
        if (u(rng) < f.duplicate) {
          future.emplace(at + 1 + rng() % (f.max_dup_delay + 1),
                         ArrivalOf(*w, f.single_packet, f.single_packet));
        }
      }
    }
    while (!future.empty() && future.begin()->first <= t) {
      m.Land(future.begin()->second);
      future.erase(future.begin());
    }
    if (--next_poll == 0) {
      m.Poll();
      if (::testing::Test::HasFatalFailure()) return res;
      next_poll = 1 + rng() % f.max_poll_gap;
    }
    if (m.processed().size() > processed) {
      processed = m.processed().size();
      quiet = 0;
    } else if (++quiet >= f.idle) {
      m.Idle();
      quiet = 0;
    }
    if (m.rx().grant_version() != version) {
      version = m.rx().grant_version();
      if (u(rng) >= f.grant_loss) grants.emplace(t + f.delay, m.rx().Grants());
    }
    while (!grants.empty() && grants.begin()->first <= t) {
      tx.Grant(grants.begin()->second);
      grants.erase(grants.begin());
    }
    res.steps = t;
  }
  m.Poll();
  return res;
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
               .delay = 8, .jitter = 3, .max_poll_gap = 24, .grant_loss = 0.05,
               .single_packet = single};
      constexpr uint64_t kChunks = 64 * 1500;
      const RunResult r = SendThroughFaults(m, tx, kChunks, f, seed * 7919);
      if (HasFatalFailure()) return;
      // Liveness: every chunk written is written within the step limit (checked above),
      // and nearly every chunk that arrived whole is processed: those lost besides are
      // the ones whose window the receiver retired when the lane went quiet.
      EXPECT_GE(m.processed().size(), r.whole * 99 / 100);
      if (!single) {
        EXPECT_LE(m.processed().size(), r.whole);
      }
      EXPECT_GT(m.rejected(), 0u);  // late copies refused by key
      if (single) {
        EXPECT_GT(m.rx().stats().stale_completions, 0u);  // or ignored
      }
      EXPECT_GE(m.rx().stats().given_up, kChunks - r.whole - 8 * 8);
    }
  }
}

// A sender can no longer outrun the receiver (docs/rdma.md 7.11): with a receiver that
// polls rarely, the sender waits for grants instead of writing into windows bound for a lap
// it has left.
TEST(UcLaneReceiver, ASlowReceiverSlowsTheSenderInsteadOfStallingTheLane) {
  const UcRingGeometry g{.slots = 32, .windows = 8, .slot_bytes = 4096};
  const std::vector<uint32_t> keys(8, 0x300);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  // A poll every up to 200 chunk times; the lane is never quiet for long enough to idle.
  Faults f{.delay = 20, .max_poll_gap = 200, .idle = 5000};
  constexpr uint64_t kChunks = 32 * 200;
  const RunResult r = SendThroughFaults(m, tx, kChunks, f, 5);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.whole, kChunks);
  EXPECT_EQ(m.processed().size(), kChunks);
  EXPECT_EQ(m.rejected(), 0u);
  EXPECT_EQ(tx.skipped(), 0u);
}

// An outage that swallows everything in flight, grants included: the sender waits on an
// ungranted window; the quiet receiver retires its oldest windows one idle period at a
// time until the sender is granted again (skipping what was retired under it), and the
// lane goes on, misdelivering nothing.
TEST(UcLaneReceiver, AnOutageIsRecoveredByIdleRetirementAndGrants) {
  const UcRingGeometry g{.slots = 32, .windows = 4, .slot_bytes = 65536};
  const std::vector<uint32_t> keys(4, 0x100);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  for (int i = 0; i < 40; ++i) {
    const std::optional<UcLaneSender::Write> w = NextGranted(m, tx);
    ASSERT_TRUE(w.has_value());
    m.Land(ArrivalOf(*w, true, true));
    m.Poll();
  }
  tx.Grant(m.rx().Grants());
  // The outage: whatever the grants allow is written and lost.
  int lost = 0;
  while (tx.Next().has_value()) ++lost;
  EXPECT_GT(lost, 0);
  // Quiet: the receiver goes idle until its grants let the sender write again.
  int idles = 0;
  while (!tx.Peek().has_value() && idles < 16) {
    m.Idle();
    tx.Grant(m.rx().Grants());
    ++idles;
  }
  ASSERT_TRUE(tx.Peek().has_value()) << "never granted again";
  EXPECT_LE(idles, 4);
  for (int i = 0; i < 64; ++i) {
    const std::optional<UcLaneSender::Write> w = NextGranted(m, tx);
    ASSERT_TRUE(w.has_value()) << "after the outage, chunk " << i;
    m.Land(ArrivalOf(*w, true, true));
    m.Poll();
  }
  EXPECT_EQ(m.processed().size(), 40u + 64u);
  EXPECT_EQ(m.rejected(), 0u);
}

TEST(UcLaneReceiver, ReorderBeyondTwoWindowsIsGivenUpNotMisdelivered) {
  const UcRingGeometry g{.slots = 32, .windows = 4, .slot_bytes = 65536};
  const std::vector<uint32_t> keys(4, 0x1f0);
  UcLaneSender tx(g, keys);
  Model m(g, keys);
  // Chunk 0 arrives after windows 1 and 2 have completed: window 0 was retired (chunk 0
  // given up) and rebound for lap 1, so chunk 0's key no longer matches.
  std::vector<UcLaneSender::Write> w;
  for (int i = 0; i < 24; ++i) w.push_back(tx.Place(i));
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


// Zero copy (docs/rdma.md 7.14): a chunk gathered from its slot's bytes around payloads
// in the application's memory, cut into single-packet pieces: every byte lands in its
// piece in order, and no piece is longer than the piece size.
TEST(SplitGather, PiecesCoverTheAreasInOrder) {
  // Slot bytes 100, a payload of 5000, slot bytes 30, a payload of 3000, slot bytes 4.
  const GatherPart areas[] = {{1000, 100, 1}, {50000, 5000, 2}, {1100, 30, 1},
                              {90000, 3000, 3}, {1130, 4, 1}};
  const uint32_t len = 100 + 5000 + 30 + 3000 + 4;
  GatherPart parts[kMaxPieces + 5];
  std::array<uint32_t, kMaxPieces> per{};
  const uint32_t n = SplitGather(areas, len, 4096, parts, per);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(per[0], 2u);  // 100 slot bytes + 3996 of the first payload
  EXPECT_EQ(per[1], 4u);  // its last 1004 + 30 + 3000 + 4
  uint64_t total = 0;
  size_t k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t piece = 0;
    for (uint32_t j = 0; j < per[i]; ++j, ++k) piece += parts[k].length;
    EXPECT_EQ(piece, i + 1 < n ? 4096u : len - 4096u);
    total += piece;
  }
  EXPECT_EQ(total, len);
  EXPECT_EQ(parts[1].addr, 50000u);
  EXPECT_EQ(parts[1].length, 3996u);
  EXPECT_EQ(parts[1].key, 2u);
  EXPECT_EQ(parts[2].addr, 50000u + 3996);  // the split area goes on in the next piece
  EXPECT_EQ(parts[2].length, 1004u);
  EXPECT_EQ(parts[5].addr, 1130u);
  EXPECT_EQ(parts[5].key, 1u);
}

TEST(SplitGather, ShortAreasTooManyPiecesAndEmptyChunks) {
  const GatherPart one[] = {{0, 5000, 1}};
  GatherPart parts[kMaxPieces + 4];
  std::array<uint32_t, kMaxPieces> per{};
  EXPECT_EQ(SplitGather(one, 6000, 4096, parts, per), 0u) << "areas shorter than the chunk";
  const GatherPart big[] = {{0, 17 * 4096, 1}};
  EXPECT_EQ(SplitGather(big, 17 * 4096, 4096, parts, per), 0u) << "more than kMaxPieces";
  EXPECT_EQ(SplitGather(big, 16 * 4096, 4096, parts, per), 16u);
  EXPECT_EQ(SplitGather(std::span<const GatherPart>(), 0, 4096, parts, per), 1u);
  EXPECT_EQ(per[0], 0u) << "a zero-length chunk is one piece of no part";
  const GatherPart with_empty[] = {{0, 0, 1}, {10, 4096, 2}, {0, 0, 1}};
  ASSERT_EQ(SplitGather(with_empty, 4096, 4096, parts, per), 1u);
  EXPECT_EQ(per[0], 1u);
  EXPECT_EQ(parts[0].key, 2u);
  GatherPart few[1];
  const GatherPart two[] = {{0, 10, 1}, {100, 10, 2}};
  EXPECT_EQ(SplitGather(two, 20, 4096, few, per), 0u) << "more parts than room";
}

}  // namespace
}  // namespace longhaul::verbs

namespace longhaul::verbs {
namespace {

TEST(UcDirectDescriptorTest, RoundTripsAndRefusesWhatDoesNotFitItsSlot) {
  UcDirectDescriptor d;
  d.length = 65000;
  d.hole_offset = 61;
  d.hole_length = 64000;
  d.key = kOfferAdKey | 99;
  d.message_id = (uint64_t{1} << 40) + 7;
  d.message_offset = (uint64_t{3} << 32) + 11;
  d.message_length = d.message_offset + 64000 + 5;
  uint8_t b[UcDirectDescriptor::kBytes];
  d.Encode(b);
  const uint32_t tail = 65000 - 64000 + UcDirectDescriptor::kBytes;
  EXPECT_EQ(d.tail_bytes(), tail);
  absl::StatusOr<UcDirectDescriptor> e = UcDirectDescriptor::Decode(b, tail, 65536);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->length, d.length);
  EXPECT_EQ(e->hole_offset, d.hole_offset);
  EXPECT_EQ(e->hole_length, d.hole_length);
  EXPECT_EQ(e->key, d.key);
  EXPECT_EQ(e->message_id, d.message_id);
  EXPECT_EQ(e->message_offset, d.message_offset);
  EXPECT_EQ(e->message_length, d.message_length);
  EXPECT_FALSE(UcDirectDescriptor::Decode(b, tail, 64999).ok()) << "longer than its slot";
  EXPECT_FALSE(UcDirectDescriptor::Decode(b, tail + 1, 65536).ok()) << "not its tail";
  EXPECT_FALSE(UcDirectDescriptor::Decode(b, tail - 4096, 65536).ok()) << "a lost piece";
  auto refused = [&](UcDirectDescriptor bad) {
    bad.Encode(b);
    return !UcDirectDescriptor::Decode(b, bad.tail_bytes(), 65536).ok();
  };
  UcDirectDescriptor bad = d;
  bad.hole_length = d.length - d.hole_offset + 1;
  EXPECT_TRUE(refused(bad)) << "payload past the datagram";
  bad = d;
  bad.hole_length = 16;
  EXPECT_TRUE(refused(bad)) << "payload shorter than a descriptor";
  bad = d;
  bad.message_offset = ~uint64_t{0} - 10;
  EXPECT_TRUE(refused(bad)) << "offset overflow";
  bad = d;
  bad.message_length = d.message_offset + d.hole_length - 1;
  EXPECT_TRUE(refused(bad)) << "payload past its message";
  d.Encode(b);
  b[0] ^= 1;
  EXPECT_FALSE(UcDirectDescriptor::Decode(b, tail, 65536).ok()) << "stale bytes, no magic";
}

}  // namespace
}  // namespace longhaul::verbs

namespace longhaul::verbs {
namespace {

// Receive-side placement cuts a chunk's gather list at its payload: the slices cover
// exactly the asked bytes, across area boundaries, and refuse what the areas do not hold.
TEST(SliceGatherTest, SlicesCoverExactlyTheRange) {
  const GatherPart areas[] = {{1000, 100, 1}, {5000, 300, 2}, {9000, 50, 3}};
  GatherPart out[4];
  // Inside one area.
  ASSERT_EQ(SliceGather(areas, 10, 60, out), 1);
  EXPECT_EQ(out[0].addr, 1010u);
  EXPECT_EQ(out[0].length, 50u);
  EXPECT_EQ(out[0].key, 1u);
  // Across all three: the tail of the first, the whole second, the head of the third.
  ASSERT_EQ(SliceGather(areas, 90, 420, out), 3);
  EXPECT_EQ(out[0].addr, 1090u);
  EXPECT_EQ(out[0].length, 10u);
  EXPECT_EQ(out[1].addr, 5000u);
  EXPECT_EQ(out[1].length, 300u);
  EXPECT_EQ(out[2].addr, 9000u);
  EXPECT_EQ(out[2].length, 20u);
  EXPECT_EQ(out[2].key, 3u);
  // Exactly an area's bounds; an empty range; the very end.
  ASSERT_EQ(SliceGather(areas, 100, 400, out), 1);
  EXPECT_EQ(out[0].addr, 5000u);
  EXPECT_EQ(out[0].length, 300u);
  EXPECT_EQ(SliceGather(areas, 50, 50, out), 0);
  ASSERT_EQ(SliceGather(areas, 400, 450, out), 1);
  EXPECT_EQ(out[0].addr, 9000u);
  // Past the areas, a reversed range, too little room.
  EXPECT_EQ(SliceGather(areas, 400, 451, out), -1);
  EXPECT_EQ(SliceGather(areas, 60, 10, out), -1);
  EXPECT_EQ(SliceGather(areas, 0, 450, std::span<GatherPart>(out, 2)), -1);
}

}  // namespace
}  // namespace longhaul::verbs
