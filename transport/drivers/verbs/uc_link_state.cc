#include "transport/drivers/verbs/uc_link_state.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace longhaul::verbs {
namespace {

constexpr uint8_t kStateVersion = 1;
constexpr uint8_t kFlagRing = 0x01;
constexpr uint8_t kFlagWaiting = 0x02;

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

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "UcLinkState is encoded little endian");

}  // namespace

std::vector<uint8_t> UcLinkState::Encode() const {
  Writer w;
  w.U8(kStateVersion);
  w.U8((has_ring ? kFlagRing : 0) | (waiting ? kFlagWaiting : 0));
  w.Bytes(gid.data(), gid.size());
  w.U32(mtu);
  w.U32(sender.qpn);
  w.U32(sender.psn);
  w.U32(receiver.qpn);
  w.U32(receiver.psn);
  if (has_ring) {
    w.U64(ring);
    w.U32(geometry.slots);
    w.U32(geometry.windows);
    w.U32(geometry.slot_bytes);
    for (uint32_t k : keys) w.U32(k);
    for (uint64_t g : grants) w.U64(g);
  }
  if (waiting) w.U64(*waiting);
  return w.Take();
}

absl::StatusOr<UcLinkState> UcLinkState::Decode(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  UcLinkState s;
  uint8_t version = 0, flags = 0;
  auto bad = [](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("UC link state: ", what));
  };
  if (!r.U8(&version) || version != kStateVersion) return bad("unknown version");
  if (!r.U8(&flags) || !r.Bytes(s.gid.data(), s.gid.size()) || !r.U32(&s.mtu) ||
      !r.U32(&s.sender.qpn) || !r.U32(&s.sender.psn) || !r.U32(&s.receiver.qpn) ||
      !r.U32(&s.receiver.psn)) {
    return bad("truncated");
  }
  if (s.mtu < 256 || s.mtu > 65536) return bad("MTU outside [256, 65536]");
  s.has_ring = flags & kFlagRing;
  if (s.has_ring) {
    if (!r.U64(&s.ring) || !r.U32(&s.geometry.slots) || !r.U32(&s.geometry.windows) ||
        !r.U32(&s.geometry.slot_bytes)) {
      return bad("truncated ring");
    }
    if (!s.geometry.Validate().ok() || s.geometry.windows > kMaxWindows) {
      return bad("ring geometry out of bounds");
    }
    s.keys.resize(s.geometry.windows);
    s.grants.resize(s.geometry.windows);
    for (uint32_t& k : s.keys) {
      if (!r.U32(&k)) return bad("truncated keys");
    }
    for (uint64_t& g : s.grants) {
      if (!r.U64(&g)) return bad("truncated grants");
    }
  }
  if (flags & kFlagWaiting) {
    uint64_t n = 0;
    if (!r.U64(&n)) return bad("truncated");
    s.waiting = n;
  }
  if (!r.done()) return bad("trailing bytes");
  return s;
}

}  // namespace longhaul::verbs
