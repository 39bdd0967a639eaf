// Where a UC chunk lands and when a receive window may be reused (docs/rdma.md 7.4): the
// bookkeeping of one lane of the UC datapath, without a device, so that its safety
// property can be tested against every order of arrival.
//
// A lane is one UC queue pair at each end and, at the receiver, a ring of `slots` slots of
// `slot_bytes` bytes split into `windows` windows, each a type-1 memory window (docs/rdma.md
// 7.4). The sender numbers its chunks n = 0, 1, ...; chunk n goes to slot n % slots in lap
// n / slots, with the rkey of its window for that lap: the window's lap-0 key with its low
// byte (the key variant) advanced by the lap, mod 256 (what rebinding a memory window does
// to its key).
// The receiver rebinds window w from lap L to lap L + 1 only once every slot of w in lap L
// is settled (processed, or given up because a completion arrived two windows further
// on): so a write of another lap can never land in a slot between its completion and its
// processing.
//
// Liveness: the receiver grants windows (docs/rdma.md 7.11). Its grants are every window's
// bound lap; the sender writes chunk n only when its window is granted for n's lap, skips
// to the next window when the window is granted for a later lap (the receiver retired it
// while the sender idled), and waits otherwise. A window is retired two windows behind the
// latest completion, when all its slots are settled, or, when the lane is idle (the caller
// calls OnIdle after a quiet spell, e.g. a few round trips, backing off while it stays
// quiet), the oldest window: so a sender waiting on a window whose last chunks were lost
// is granted it again.
//
// Not thread-safe: one engine thread owns a lane.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace longhaul::verbs {

struct UcRingGeometry {
  uint32_t slots = 128;              // R: at most kMaxSlots
  uint32_t windows = 8;              // W: at least 3, divides R
  uint32_t slot_bytes = 64 * 1024;   // C: one chunk (a core datagram) at most
  static constexpr uint32_t kMaxSlots = 1u << 19;  // the immediate's slot field

  // InvalidArgument naming the field.
  absl::Status Validate() const;
  uint32_t slots_per_window() const { return slots / windows; }
  uint64_t ring_bytes() const { return uint64_t{slots} * slot_bytes; }
};

// The 32-bit immediate of a chunk's write: lap % 256 in the top byte, then 4 bits of
// pieces - 1 (a chunk written as several single-packet writes, the last with the
// immediate: docs/rdma.md 7.5), one bit that says the chunk is direct (its payload was
// written into the receiver's advertised buffer and a UcDirectDescriptor ends its slot:
// docs/rdma.md 7.15), then the slot in the low 19 bits.
inline constexpr uint32_t kMaxPieces = 16;
inline constexpr uint32_t kImmediateDirect = 1u << 19;
uint32_t EncodeImmediate(uint64_t lap, uint32_t slot, uint32_t pieces = 1);
inline uint32_t ImmediateSlot(uint32_t imm) { return imm & 0x7ffffu; }
inline bool ImmediateDirect(uint32_t imm) { return (imm & kImmediateDirect) != 0; }
inline uint8_t ImmediateLap(uint32_t imm) { return static_cast<uint8_t>(imm >> 24); }
inline uint32_t ImmediatePieces(uint32_t imm) { return ((imm >> 20) & 0xfu) + 1; }
// `imm` with its pieces field set (1..kMaxPieces).
inline uint32_t WithPieces(uint32_t imm, uint32_t pieces) {
  return (imm & ~(0xfu << 20)) | (((pieces - 1) & 0xfu) << 20);
}

// Zero copy (docs/rdma.md 7.14): a chunk of `len` bytes gathered from memory areas in
// order (its arena slot's bytes around payloads in the application's memory), cut into
// single-packet pieces of `piece` bytes. Writes, piece after piece, the parts of the
// areas each piece covers into `parts` and each piece's part count into `per_piece`;
// returns the number of pieces (a zero-length chunk: one piece of no part), or 0 when the
// areas hold fewer than `len` bytes, the pieces would be more than kMaxPieces, or the
// parts more than `parts` holds. (A piece boundary splits at most one area: pieces +
// areas - 1 parts at most.)
struct GatherPart {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t key = 0;
};
uint32_t SplitGather(std::span<const GatherPart> areas, uint32_t len, uint32_t piece,
                     std::span<GatherPart> parts, std::span<uint32_t, kMaxPieces> per_piece);
// The areas that hold bytes [from, to) of the concatenation of `areas` (receive-side
// placement cuts a chunk into the part before its payload, the payload and the part
// after it), written into `out`; returns how many, or -1 when the areas hold fewer than
// `to` bytes or `out` is too short. An empty range gives 0 areas.
int SliceGather(std::span<const GatherPart> areas, uint64_t from, uint64_t to,
                std::span<GatherPart> out);

// A direct chunk (docs/rdma.md 7.15): the datagram's one DATA payload went to the buffer
// the receiver advertised for its message, and the rest of it, the bytes before the
// payload then those after it, followed by this descriptor, to the ring slot as one tail
// written last with the immediate (its direct bit set; its pieces field counts the tail's
// pieces). The receiver moves the bytes after the payload to their place (behind a hole
// where the payload belongs). Decode checks the descriptor against the tail it ended and
// the slot: InvalidArgument naming what does not hold.
struct UcDirectDescriptor {
  static constexpr uint32_t kBytes = 48;
  uint32_t length = 0;        // the datagram's
  uint32_t hole_offset = 0;   // where the payload belongs in it
  uint32_t hole_length = 0;   // the payload's bytes
  uint64_t key = 0;           // the advertisement whose buffer holds them (UcPlacementAd)
  uint64_t message_id = 0;    // their message
  uint64_t message_offset = 0;  // and where in it (from the message's first byte)
  uint64_t message_length = 0;  // the message's bytes

  void Encode(uint8_t out[kBytes]) const;
  // The tail's length: the datagram less its payload, and the descriptor.
  uint32_t tail_bytes() const { return length - hole_length + kBytes; }
  // `tail`: the bytes the tail write placed (the descriptor is its last kBytes);
  // `slot_bytes`: the ring slot's size.
  static absl::StatusOr<UcDirectDescriptor> Decode(const uint8_t in[kBytes], uint32_t tail,
                                                   uint32_t slot_bytes);
};

// The rkey of a window for `lap`, from its key for lap 0: each rebinding advances the key
// variant (the low byte) by one, mod 256 (ibv_inc_rkey).
inline uint32_t KeyForLap(uint32_t lap0_key, uint64_t lap) {
  return (lap0_key & ~0xffu) | static_cast<uint32_t>((lap0_key + lap) & 0xff);
}

// Where the sender writes each chunk.
class UcLaneSender {
 public:
  struct Write {
    uint64_t chunk = 0;    // n
    uint32_t slot = 0;
    uint64_t offset = 0;   // from the ring's base address
    uint32_t rkey = 0;
    uint32_t immediate = 0;
  };

  // `window_keys`: the receiver's keys for lap 0, one per window, as it advertised them.
  // Every window starts granted for lap 0.
  UcLaneSender(UcRingGeometry g, std::vector<uint32_t> window_keys);

  // Where chunk `n` goes (whatever the grants).
  Write Place(uint64_t n) const;
  // The placement of the next chunk the grants allow (advances past it), or nullopt while
  // its window is not granted for its lap yet.
  std::optional<Write> Next();
  // What Next would return, without taking it (it does skip windows retired under it).
  std::optional<Write> Peek();
  // The receiver's grants (one lap per window); older ones than what is known are ignored
  // (grants may arrive out of order or not at all; each carries the whole state).
  void Grant(const std::vector<uint64_t>& laps);
  // The number the next chunk will have (chunks skipped count).
  uint64_t next_chunk() const { return next_; }
  uint64_t chunks() const { return sent_; }
  uint64_t skipped() const { return skipped_; }

 private:
  UcRingGeometry g_;
  std::vector<uint32_t> keys_;
  std::vector<uint64_t> granted_;
  uint64_t next_ = 0;
  uint64_t sent_ = 0;
  uint64_t skipped_ = 0;
};

// The receiver's windows: which lap each is bound for, which of its slots are settled, and
// which windows need rebinding.
class UcLaneReceiver {
 public:
  struct Stats {
    uint64_t delivered = 0;           // completions handed on for processing
    uint64_t stale_completions = 0;   // wrong lap, settled slot, retiring window, bad slot
    uint64_t given_up = 0;            // slots retired without a completion (lost chunks)
    uint64_t rebinds = 0;
  };
  struct Completion {
    bool deliver = false;   // process the slot now; false: ignore the completion
    uint32_t slot = 0;
    uint64_t offset = 0;    // of the slot, from the ring's base address
    uint64_t chunk = 0;     // the sender's chunk number (deliver only)
  };
  struct Rebind {
    uint32_t window = 0;
    uint64_t lap = 0;       // rebind it once: its key becomes KeyForLap(lap-0 key, lap)
  };

  // Every window starts bound for lap 0 (the driver binds them before advertising their
  // keys).
  explicit UcLaneReceiver(UcRingGeometry g);

  // A receive completion with immediate `imm`. When `deliver`, the caller processes the
  // slot before its next call; the slot is then settled.
  Completion OnCompletion(uint32_t imm);

  // Windows retired since the last call: the driver posts a bind for each (the old key
  // stops working when it executes) and calls Rebound once it has.
  std::vector<Rebind> TakeRebinds();
  // The bind of `r` executed: the window accepts (and delivers) lap r.lap from now on.
  void Rebound(const Rebind& r);

  // The lane has been quiet for a while: retire the oldest window (see above).
  void OnIdle();

  // Every window's bound lap, what the sender may write (send after a Rebound).
  std::vector<uint64_t> Grants() const;
  // Increments on every Rebound: the grants changed.
  uint64_t grant_version() const { return stats_.rebinds; }

  // The lap `window` is bound for (what its key accepts now).
  uint64_t bound_lap(uint32_t window) const { return windows_[window].lap; }
  const Stats& stats() const { return stats_; }

 private:
  struct Window {
    uint64_t lap = 0;
    uint32_t settled = 0;
    bool retiring = false;
  };
  // Global sequence of window `w` in its bound lap.
  int64_t Sequence(uint32_t w) const {
    return static_cast<int64_t>(windows_[w].lap) * g_.windows + w;
  }
  void Retire(uint32_t w);

  UcRingGeometry g_;
  std::vector<Window> windows_;
  std::vector<bool> settled_;   // per slot, for the window's bound lap
  std::vector<Rebind> pending_;
  int64_t latest_ = -1;         // highest window sequence with a delivered completion
  Stats stats_;
};

}  // namespace longhaul::verbs
