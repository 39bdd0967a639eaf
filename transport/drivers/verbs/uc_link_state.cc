#include "transport/drivers/verbs/uc_link_state.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace longhaul::verbs {
namespace {

// 2: per-lane received counts. 3: placement advertisements. A peer of another version
// refuses the state (and this side its): the connection stays on UD.
constexpr uint8_t kStateVersion = 3;
constexpr uint8_t kFlagRing = 0x01;
constexpr uint8_t kFlagWaiting = 0x02;
constexpr uint8_t kFlagFailed = 0x04;

class Writer {
 public:
  void U8(uint8_t v) { b_.push_back(v); }
  void U32(uint32_t v) { Put(&v, 4); }
  void U64(uint64_t v) { Put(&v, 8); }
  void Bytes(const uint8_t* p, size_t n) { b_.insert(b_.end(), p, p + n); }
  std::vector<uint8_t> Take() { return std::move(b_); }

 private:
  void Put(const void* v, size_t n) {  // little endian (the hosts' order is checked below)
    const auto* p = static_cast<const uint8_t*>(v);
    b_.insert(b_.end(), p, p + n);
  }
  std::vector<uint8_t> b_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool U8(uint8_t* v) { return Get(v, 1); }
  bool U32(uint32_t* v) { return Get(v, 4); }
  bool U64(uint64_t* v) { return Get(v, 8); }
  bool Bytes(uint8_t* p, size_t n) { return Get(p, n); }
  bool done() const { return pos_ == b_.size(); }

 private:
  bool Get(void* v, size_t n) {
    if (b_.size() - pos_ < n) return false;
    std::memcpy(v, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "UcLinkState is encoded little endian");

}  // namespace

std::vector<uint8_t> UcLinkState::Encode() const {
  Writer w;
  w.U8(kStateVersion);
  w.Bytes(gid.data(), gid.size());
  w.U32(mtu);
  w.U8(static_cast<uint8_t>(lanes.size()));
  for (const UcLaneState& l : lanes) {
    w.U8((l.has_ring ? kFlagRing : 0) | (l.waiting ? kFlagWaiting : 0) |
         (l.failed ? kFlagFailed : 0));
    w.U32(l.generation);
    w.U32(l.sender.qpn);
    w.U32(l.sender.psn);
    w.U32(l.receiver.qpn);
    w.U32(l.receiver.psn);
    w.U32(l.received);
    if (l.has_ring) {
      w.U64(l.ring);
      w.U32(l.geometry.slots);
      w.U32(l.geometry.windows);
      w.U32(l.geometry.slot_bytes);
      for (uint32_t k : l.keys) w.U32(k);
      for (uint64_t g : l.grants) w.U64(g);
    }
    if (l.waiting) w.U64(*l.waiting);
  }
  const size_t n = EncodedPlacements();
  w.U8(static_cast<uint8_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const UcPlacementAd& a = placements[i];
    w.U64(a.key);
    w.U64(a.address);
    w.U32(a.length);
    for (size_t k = 0; k < lanes.size(); ++k) w.U32(k < a.keys.size() ? a.keys[k] : 0);
  }
  return w.Take();
}

size_t UcLinkState::EncodedPlacements() const {
  size_t base = 1 + gid.size() + 4 + 1 + 1;  // version, gid, mtu, lane count, placements
  for (const UcLaneState& l : lanes) {
    base += 1 + 6 * 4;
    if (l.has_ring) base += 8 + 3 * 4 + l.keys.size() * 4 + l.grants.size() * 8;
    if (l.waiting) base += 8;
  }
  const size_t each = 8 + 8 + 4 + 4 * lanes.size();
  if (base >= kMaxBytes) return 0;
  return std::min<size_t>({placements.size(), kMaxPlacements,
                           (kMaxBytes - base) / each});
}

namespace {

absl::Status Bad(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("UC link state: ", what));
}

absl::Status DecodeLane(Reader& r, UcLaneState* l) {
  uint8_t flags = 0;
  if (!r.U8(&flags) || !r.U32(&l->generation) || !r.U32(&l->sender.qpn) || !r.U32(&l->sender.psn) ||
      !r.U32(&l->receiver.qpn) || !r.U32(&l->receiver.psn) || !r.U32(&l->received)) {
    return Bad("truncated lane");
  }
  l->has_ring = flags & kFlagRing;
  l->failed = flags & kFlagFailed;
  if (l->has_ring) {
    if (!r.U64(&l->ring) || !r.U32(&l->geometry.slots) || !r.U32(&l->geometry.windows) ||
        !r.U32(&l->geometry.slot_bytes)) {
      return Bad("truncated ring");
    }
    if (!l->geometry.Validate().ok() || l->geometry.windows > UcLinkState::kMaxWindows) {
      return Bad("ring geometry out of bounds");
    }
    l->keys.resize(l->geometry.windows);
    l->grants.resize(l->geometry.windows);
    for (uint32_t& k : l->keys) {
      if (!r.U32(&k)) return Bad("truncated keys");
    }
    for (uint64_t& g : l->grants) {
      if (!r.U64(&g)) return Bad("truncated grants");
    }
  }
  if (flags & kFlagWaiting) {
    uint64_t n = 0;
    if (!r.U64(&n)) return Bad("truncated lane");
    l->waiting = n;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UcLinkState> UcLinkState::Decode(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  UcLinkState s;
  uint8_t version = 0, lanes = 0;
  if (!r.U8(&version) || version != kStateVersion) return Bad("unknown version");
  if (!r.Bytes(s.gid.data(), s.gid.size()) || !r.U32(&s.mtu) || !r.U8(&lanes)) {
    return Bad("truncated");
  }
  if (s.mtu < 256 || s.mtu > 65536) return Bad("MTU outside [256, 65536]");
  if (lanes == 0 || lanes > kMaxLanes) return Bad("lane count outside [1, 4]");
  s.lanes.resize(lanes);
  for (UcLaneState& l : s.lanes) {
    if (absl::Status st = DecodeLane(r, &l); !st.ok()) return st;
  }
  uint8_t placements = 0;
  if (!r.U8(&placements)) return Bad("truncated placements");
  if (placements > kMaxPlacements) return Bad("more than 32 placements");
  s.placements.resize(placements);
  for (UcPlacementAd& a : s.placements) {
    a.keys.resize(lanes);
    if (!r.U64(&a.key) || !r.U64(&a.address) || !r.U32(&a.length)) {
      return Bad("truncated placement");
    }
    for (uint32_t& k : a.keys) {
      if (!r.U32(&k)) return Bad("truncated placement keys");
    }
    if (a.length == 0 || a.address > ~uint64_t{0} - a.length) return Bad("placement out of bounds");
  }
  if (!r.done()) return Bad("trailing bytes");
  return s;
}

}  // namespace longhaul::verbs
