#include "transport/drivers/verbs/uc_lane.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace longhaul::verbs {

absl::Status UcRingGeometry::Validate() const {
  if (slots == 0 || slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("UC ring slots=", slots, ": must be 1..", kMaxSlots));
  }
  if (windows < 3 || slots % windows != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UC ring windows=", windows, ": must be at least 3 and divide slots=", slots));
  }
  if (slot_bytes == 0) return absl::InvalidArgumentError("UC ring slot_bytes=0");
  return absl::OkStatus();
}

uint32_t EncodeImmediate(uint64_t lap, uint32_t slot, uint32_t pieces) {
  return WithPieces(static_cast<uint32_t>((lap & 0xff) << 24) | (slot & 0x7ffffu), pieces);
}

namespace {
constexpr uint32_t kDescriptorMagic = 0x4c484443;  // "LHDC"
}  // namespace

void UcDirectDescriptor::Encode(uint8_t out[kBytes]) const {
  const uint32_t w[4] = {kDescriptorMagic, length, hole_offset, hole_length};
  std::memcpy(out, w, sizeof(w));
  std::memcpy(out + 16, &key, 8);
  std::memcpy(out + 24, &message_id, 8);
  std::memcpy(out + 32, &message_offset, 8);
  std::memcpy(out + 40, &message_length, 8);
}

absl::StatusOr<UcDirectDescriptor> UcDirectDescriptor::Decode(const uint8_t in[kBytes],
                                                              uint32_t tail,
                                                              uint32_t slot_bytes) {
  uint32_t w[4];
  std::memcpy(w, in, sizeof(w));
  UcDirectDescriptor d;
  d.length = w[1];
  d.hole_offset = w[2];
  d.hole_length = w[3];
  std::memcpy(&d.key, in + 16, 8);
  std::memcpy(&d.message_id, in + 24, 8);
  std::memcpy(&d.message_offset, in + 32, 8);
  std::memcpy(&d.message_length, in + 40, 8);
  if (w[0] != kDescriptorMagic) return absl::InvalidArgumentError("direct chunk: no descriptor");
  if (d.length > slot_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("direct chunk: length ", d.length,
                                                   " beyond its ", slot_bytes, "-byte slot"));
  }
  if (d.hole_length < kBytes || d.hole_offset > d.length ||
      d.hole_length > d.length - d.hole_offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("direct chunk: payload [", d.hole_offset, ", +", d.hole_length,
                     ") outside its ", d.length, "-byte datagram (or shorter than ", kBytes,
                     ")"));
  }
  if (tail != d.tail_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("direct chunk: a tail of ", tail,
                                                   " bytes where its descriptor says ",
                                                   d.tail_bytes()));
  }
  if (d.message_offset > d.message_length || d.hole_length > d.message_length - d.message_offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "direct chunk: payload [", d.message_offset, ", +", d.hole_length, ") outside its ",
        d.message_length, "-byte message"));
  }
  return d;
}

UcLaneSender::UcLaneSender(UcRingGeometry g, std::vector<uint32_t> window_keys)
    : g_(g), keys_(std::move(window_keys)), granted_(g.windows, 0) {
  keys_.resize(g_.windows, 0);
}

UcLaneSender::Write UcLaneSender::Place(uint64_t n) const {
  Write w;
  w.chunk = n;
  const uint64_t lap = n / g_.slots;
  w.slot = static_cast<uint32_t>(n % g_.slots);
  w.offset = uint64_t{w.slot} * g_.slot_bytes;
  w.rkey = KeyForLap(keys_[w.slot / g_.slots_per_window()], lap);
  w.immediate = EncodeImmediate(lap, w.slot);
  return w;
}

std::optional<UcLaneSender::Write> UcLaneSender::Next() {
  std::optional<Write> w = Peek();
  if (w) {
    ++sent_;
    ++next_;
  }
  return w;
}

std::optional<UcLaneSender::Write> UcLaneSender::Peek() {
  const uint32_t per = g_.slots_per_window();
  while (true) {
    const uint64_t lap = next_ / g_.slots;
    const uint32_t window = static_cast<uint32_t>(next_ % g_.slots) / per;
    if (granted_[window] == lap) break;
    if (granted_[window] < lap) return std::nullopt;  // not granted yet: wait
    // Retired while this sender idled: its remaining slots are gone; the next window.
    const uint64_t next_window = (next_ / per + 1) * per;
    skipped_ += next_window - next_;
    next_ = next_window;
  }
  return Place(next_);
}

void UcLaneSender::Grant(const std::vector<uint64_t>& laps) {
  for (size_t w = 0; w < laps.size() && w < granted_.size(); ++w) {
    if (laps[w] > granted_[w]) granted_[w] = laps[w];
  }
}

UcLaneReceiver::UcLaneReceiver(UcRingGeometry g)
    : g_(g), windows_(g.windows), settled_(g.slots, false) {}

UcLaneReceiver::Completion UcLaneReceiver::OnCompletion(uint32_t imm) {
  Completion c;
  c.slot = ImmediateSlot(imm);
  if (c.slot >= g_.slots) {
    ++stats_.stale_completions;
    return c;
  }
  c.offset = uint64_t{c.slot} * g_.slot_bytes;
  const uint32_t w = c.slot / g_.slots_per_window();
  Window& win = windows_[w];
  // A window being rebound accepts nothing more of its old lap; a completion of another
  // lap (a late duplicate's immediate) or a second one for a settled slot is not a chunk.
  if (win.retiring || (win.lap & 0xff) != ImmediateLap(imm) || settled_[c.slot]) {
    ++stats_.stale_completions;
    return c;
  }
  settled_[c.slot] = true;
  ++win.settled;
  ++stats_.delivered;
  c.deliver = true;
  c.chunk = win.lap * g_.slots + c.slot;
  const int64_t seq = Sequence(w);
  if (seq > latest_) latest_ = seq;
  // Every window two or more behind the latest completion is settled: what it still misses
  // is lost (or reordered by more than a window; the core resends it in a new chunk).
  for (uint32_t x = 0; x < g_.windows; ++x) {
    if (!windows_[x].retiring && Sequence(x) <= latest_ - 2) Retire(x);
  }
  if (!win.retiring && win.settled == g_.slots_per_window()) Retire(w);
  return c;
}

void UcLaneReceiver::Retire(uint32_t w) {
  Window& win = windows_[w];
  stats_.given_up += g_.slots_per_window() - win.settled;
  win.retiring = true;
  pending_.push_back({w, win.lap + 1});
}

void UcLaneReceiver::OnIdle() {
  uint32_t oldest = g_.windows;
  for (uint32_t x = 0; x < g_.windows; ++x) {
    if (windows_[x].retiring) continue;
    if (oldest == g_.windows || Sequence(x) < Sequence(oldest)) oldest = x;
  }
  if (oldest < g_.windows) Retire(oldest);
}

std::vector<uint64_t> UcLaneReceiver::Grants() const {
  std::vector<uint64_t> out;
  for (const Window& w : windows_) out.push_back(w.lap);
  return out;
}

std::vector<UcLaneReceiver::Rebind> UcLaneReceiver::TakeRebinds() {
  std::vector<Rebind> out;
  out.swap(pending_);
  return out;
}

void UcLaneReceiver::Rebound(const Rebind& r) {
  Window& win = windows_[r.window];
  win.lap = r.lap;
  win.settled = 0;
  win.retiring = false;
  const uint32_t first = r.window * g_.slots_per_window();
  for (uint32_t s = first; s < first + g_.slots_per_window(); ++s) settled_[s] = false;
  ++stats_.rebinds;
}

uint32_t SplitGather(std::span<const GatherPart> areas, uint32_t len, uint32_t piece,
                     std::span<GatherPart> parts, std::span<uint32_t, kMaxPieces> per_piece) {
  const uint32_t n = len == 0 || piece == 0 ? 1 : (len + piece - 1) / piece;
  if (n > kMaxPieces) return 0;
  size_t a = 0;       // area
  uint32_t used = 0;  // of it, bytes in earlier pieces
  size_t out = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t left = i + 1 < n ? piece : len - i * piece;
    per_piece[i] = 0;
    while (left > 0) {
      while (a < areas.size() && used == areas[a].length) {  // skip empty areas
        ++a;
        used = 0;
      }
      if (a == areas.size() || out == parts.size()) return 0;
      const uint32_t take = std::min(left, areas[a].length - used);
      parts[out++] = GatherPart{areas[a].addr + used, take, areas[a].key};
      ++per_piece[i];
      used += take;
      left -= take;
    }
  }
  return n;
}

int SliceGather(std::span<const GatherPart> areas, uint64_t from, uint64_t to,
                std::span<GatherPart> out) {
  if (to < from) return -1;
  size_t n = 0;
  uint64_t pos = 0;  // of the current area's first byte
  for (const GatherPart& a : areas) {
    const uint64_t end = pos + a.length;
    const uint64_t lo = std::max(pos, from), hi = std::min(end, to);
    if (lo < hi) {
      if (n == out.size()) return -1;
      out[n++] = GatherPart{a.addr + (lo - pos), static_cast<uint32_t>(hi - lo), a.key};
    }
    pos = end;
    if (pos >= to) break;
  }
  return pos >= to ? static_cast<int>(n) : -1;
}

}  // namespace longhaul::verbs
