// Sealing order: encrypt the frames with the unmasked header as AAD, write the tag, then
// mask the header from a sample of the ciphertext. Opening undoes it in reverse. The
// replay window is checked before decryption (cheap) and updated only after a packet
// authenticates, so forged packets cannot move it.

#include "transport/crypto/packet_protection.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "transport/base/status.h"

namespace longhaul::crypto {
namespace {

constexpr uint8_t kTypeOneRtt = 0;
constexpr uint8_t kTypeSealed = 4;
constexpr uint8_t kPhaseBit = 0x80;
constexpr size_t kPnOffset = 12;

uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

PacketProtector::PacketProtector(Cipher cipher, KeyUpdatePolicy policy)
    : cipher_(cipher), policy_(policy), window_(kReplayWindow / 64, 0) {}

PacketProtector::~PacketProtector() {
  Wipe(send_.secret);
  Wipe(recv_current_.secret);
  Wipe(recv_next_.secret);
  Wipe(recv_previous_.secret);
  Wipe(confirm_key_);
}

absl::Status PacketProtector::Derive(const Key32& secret, uint64_t generation, Keys* out) {
  out->generation = generation;
  out->secret = secret;
  Key32 key = HkdfExpandLabel(secret, "longhaul key");
  Key32 iv = HkdfExpandLabel(secret, "longhaul iv");
  std::memcpy(out->iv, iv.data(), kNonceSize);
  Wipe(iv);
  absl::StatusOr<std::unique_ptr<Aead>> aead = Aead::Create(cipher_, key);
  Wipe(key);
  if (!aead.ok()) return aead.status();
  out->aead = *std::move(aead);
  return absl::OkStatus();
}

absl::Status PacketProtector::Next(const Keys& from, Keys* out) {
  Key32 next = HkdfExpandLabel(from.secret, "longhaul ku");
  absl::Status s = Derive(next, from.generation + 1, out);
  Wipe(next);  // Derive keeps its own copy in `out`
  return s;
}

absl::StatusOr<std::unique_ptr<PacketProtector>> PacketProtector::Create(
    Cipher cipher, const NoiseSplit& split, bool initiator, KeyUpdatePolicy policy, Time now) {
  std::unique_ptr<PacketProtector> p(new PacketProtector(cipher, policy));
  const Key32& send0 = initiator ? split.initiator_to_responder : split.responder_to_initiator;
  const Key32& recv0 = initiator ? split.responder_to_initiator : split.initiator_to_responder;
  LH_RETURN_IF_ERROR(p->Derive(send0, 0, &p->send_));
  LH_RETURN_IF_ERROR(p->Derive(recv0, 0, &p->recv_current_));
  LH_RETURN_IF_ERROR(p->Next(p->recv_current_, &p->recv_next_));
  absl::StatusOr<std::unique_ptr<HeaderMask>> sm =
      HeaderMask::Create(cipher, HkdfExpandLabel(send0, "longhaul hp"));
  absl::StatusOr<std::unique_ptr<HeaderMask>> rm =
      HeaderMask::Create(cipher, HkdfExpandLabel(recv0, "longhaul hp"));
  if (!sm.ok()) return sm.status();
  if (!rm.ok()) return rm.status();
  p->send_mask_ = *std::move(sm);
  p->recv_mask_ = *std::move(rm);
  p->confirm_key_ = HkdfExpandLabel(split.initiator_to_responder, "longhaul confirm");
  p->handshake_hash_ = split.handshake_hash;
  p->send_since_ = now;
  return p;
}

void PacketProtector::Nonce(const uint8_t iv[kNonceSize], uint64_t pn, uint8_t out[kNonceSize]) {
  std::memcpy(out, iv, kNonceSize);
  for (int i = 0; i < 8; ++i) out[4 + i] ^= static_cast<uint8_t>(pn >> (8 * (7 - i)));
}

// ---- sending ----

void PacketProtector::Seal(Time now, std::span<uint8_t> packet, int64_t largest_acked,
                           std::span<const PlaintextPiece> elsewhere) {
  CHECK_GE(packet.size(), kMinSealedSize) << "a sealed packet needs at least one frame byte";
  CHECK_EQ(packet[1], kTypeOneRtt) << "only 1-RTT packets are sealed";
  const uint64_t pn = GetU64(packet.data() + kPnOffset);
  // A new generation when a budget is spent, once the peer has acknowledged a packet of
  // the current one (so it holds the keys it needs to follow).
  const bool budget_spent = send_packets_ >= policy_.max_packets ||
                            send_bytes_ >= policy_.max_bytes ||
                            now - send_since_ >= policy_.max_age;
  const bool peer_follows =
      send_first_pn_ < 0 || largest_acked >= send_first_pn_ || send_.generation == 0;
  if (budget_spent && peer_follows && send_first_pn_ >= 0) {
    Keys next;
    if (Next(send_, &next).ok()) {
      Wipe(send_.secret);
      send_ = std::move(next);
      send_packets_ = 0;
      send_bytes_ = 0;
      send_since_ = now;
      send_first_pn_ = -1;
      ++counters_.key_updates_sent;
    }
  }
  if (send_first_pn_ < 0) send_first_pn_ = static_cast<int64_t>(pn);
  packet[1] = kTypeSealed | ((send_.generation & 1) ? kPhaseBit : 0);
  const size_t body = packet.size() - kHeaderSize - kTagSize;
  uint8_t nonce[kNonceSize];
  Nonce(send_.iv, pn, nonce);
  // The pieces' offsets are the packet's; the AEAD's are the body's.
  PlaintextPiece pieces[8];
  CHECK_LE(elsewhere.size(), std::size(pieces)) << "too many plaintext pieces";
  for (size_t i = 0; i < elsewhere.size(); ++i) {
    CHECK_GE(elsewhere[i].offset, kHeaderSize) << "a plaintext piece inside the header";
    pieces[i] = elsewhere[i];
    pieces[i].offset -= kHeaderSize;
  }
  const bool ok = send_.aead->Seal(nonce, packet.first(kHeaderSize),
                                   packet.subspan(kHeaderSize, body),
                                   packet.data() + kHeaderSize + body,
                                   std::span<const PlaintextPiece>(pieces, elsewhere.size()));
  CHECK(ok) << "AEAD seal failed";
  uint8_t mask[16];
  CHECK(send_mask_->Compute(packet.data() + kSampleOffset, mask)) << "header mask failed";
  packet[1] ^= mask[0] & kPhaseBit;
  for (int i = 0; i < 8; ++i) packet[kPnOffset + i] ^= mask[1 + i];
  ++send_packets_;
  send_bytes_ += packet.size();
  ++counters_.packets_sealed;
}

// ---- receiving ----

bool PacketProtector::ReplaySeen(uint64_t pn) const {
  if (!any_received_ || pn > largest_) return false;
  const uint64_t bit = pn % kReplayWindow;
  return (window_[bit / 64] >> (bit % 64)) & 1;
}

void PacketProtector::ReplayMark(uint64_t pn) {
  if (!any_received_ || pn > largest_) {
    // Clear the bits of the numbers the window moves over.
    const uint64_t from = any_received_ ? largest_ + 1 : pn;
    const uint64_t gap = pn - from + 1;
    if (gap >= kReplayWindow) {
      std::fill(window_.begin(), window_.end(), 0);
    } else {
      for (uint64_t x = from; x <= pn; ++x) {
        const uint64_t bit = x % kReplayWindow;
        window_[bit / 64] &= ~(uint64_t{1} << (bit % 64));
      }
    }
    largest_ = pn;
    any_received_ = true;
  }
  const uint64_t bit = pn % kReplayWindow;
  window_[bit / 64] |= uint64_t{1} << (bit % 64);
}

PacketProtector::OpenResult PacketProtector::Open(Time now, std::span<uint8_t> d,
                                                  size_t* plaintext_size) {
  Opening o;
  if (OpenResult r = BeginOpen(now, d, &o); r != OpenResult::kOk) return r;
  uint8_t* body = d.data() + kHeaderSize;
  OpenPiece(&o, body, body, d.size() - kHeaderSize - kTagSize);
  return FinishOpen(now, &o, plaintext_size);
}

PacketProtector::OpenResult PacketProtector::BeginOpen(Time now, std::span<uint8_t> d,
                                                       Opening* o) {
  if (d.size() < kMinSealedSize || (d[1] & ~kPhaseBit) != kTypeSealed) {
    return OpenResult::kMalformed;
  }
  if (has_previous_ && now >= previous_until_) {
    Wipe(recv_previous_.secret);
    recv_previous_ = Keys{};
    has_previous_ = false;
  }
  uint8_t mask[16];
  if (!recv_mask_->Compute(d.data() + kSampleOffset, mask)) return OpenResult::kMalformed;
  // Unmask a copy of the header: a forged packet must leave the datagram as it was.
  o->datagram = d;
  std::memcpy(o->header, d.data(), kHeaderSize);
  o->header[1] ^= mask[0] & kPhaseBit;
  for (int i = 0; i < 8; ++i) o->header[kPnOffset + i] ^= mask[1 + i];
  const uint64_t pn = GetU64(o->header + kPnOffset);
  o->pn = pn;
  if (any_received_ && pn + kReplayWindow <= largest_) {
    ++counters_.too_old;
    return OpenResult::kTooOld;
  }
  if (ReplaySeen(pn)) {
    ++counters_.replays;
    return OpenResult::kReplayed;
  }
  const bool phase = (o->header[1] & kPhaseBit) != 0;
  const bool current_phase = (recv_current_.generation & 1) != 0;
  // The common case decrypts with the current key; a packet of the other phase is of
  // the next generation, or of the previous one while its packets may still arrive.
  enum { kCurrent, kPrevious, kNext } which = kCurrent;
  if (phase != current_phase) which = (has_previous_ && pn < current_min_pn_) ? kPrevious : kNext;
  o->which = which;
  o->keys = which == kCurrent ? &recv_current_ : which == kPrevious ? &recv_previous_ : &recv_next_;
  o->decrypted = 0;
  if (o->keys->aead == nullptr) {
    // No key of that generation (the next one could not be derived): it cannot open.
    ++counters_.auth_failures;
    return OpenResult::kAuthFailed;
  }
  uint8_t nonce[kNonceSize];
  Nonce(o->keys->iv, pn, nonce);
  if (!o->keys->aead->OpenBegin(nonce, std::span<const uint8_t>(o->header, kHeaderSize),
                                &o->aead)) {
    ++counters_.auth_failures;
    return OpenResult::kAuthFailed;
  }
  return OpenResult::kOk;
}

void PacketProtector::OpenPiece(Opening* o, uint8_t* out, const uint8_t* in, size_t n) {
  o->keys->aead->OpenUpdate(&o->aead, out, in, n);
  o->decrypted += n;
}

PacketProtector::OpenResult PacketProtector::FinishOpen(Time now, Opening* o,
                                                        size_t* plaintext_size) {
  std::span<uint8_t> d = o->datagram;
  const size_t body = d.size() - kHeaderSize - kTagSize;
  CHECK_EQ(o->decrypted, body) << "the body was not decrypted whole";
  if (!o->keys->aead->OpenFinish(&o->aead, d.data() + kHeaderSize + body)) {
    ++counters_.auth_failures;
    return OpenResult::kAuthFailed;
  }
  const uint64_t pn = o->pn;
  if (o->which == 2) {
    // The peer moved on: current becomes previous (for packets still in flight), next
    // becomes current, and the following generation is derived ahead.
    if (has_previous_) Wipe(recv_previous_.secret);
    recv_previous_ = std::move(recv_current_);
    has_previous_ = true;
    previous_until_ = now + policy_.old_key_lifetime;
    recv_current_ = std::move(recv_next_);
    recv_next_ = Keys{};
    if (!Next(recv_current_, &recv_next_).ok()) {
      // Without the next keys a later update cannot be followed; the packets of this
      // generation still open.
      recv_next_ = Keys{};
    }
    recv_generation_ = recv_current_.generation;
    current_min_pn_ = pn;
    ++counters_.key_updates_received;
  } else if (o->which == 1) {
    ++counters_.old_phase_opened;
  } else {
    current_min_pn_ = std::min(current_min_pn_, pn);
  }
  ReplayMark(pn);
  o->header[1] = kTypeOneRtt;
  std::memcpy(d.data(), o->header, kHeaderSize);
  *plaintext_size = kHeaderSize + body;
  ++counters_.packets_opened;
  return OpenResult::kOk;
}

// ---- key confirmation ----

std::array<uint8_t, 16> PacketProtector::ConfirmProof() const {
  const Key32 mac = HmacSha256(confirm_key_, handshake_hash_);
  std::array<uint8_t, 16> out;
  std::memcpy(out.data(), mac.data(), 16);
  return out;
}

bool PacketProtector::VerifyConfirmProof(std::span<const uint8_t> proof) const {
  if (proof.size() != 16) return false;
  const std::array<uint8_t, 16> want = ConfirmProof();
  return CRYPTO_memcmp(want.data(), proof.data(), 16) == 0;
}

}  // namespace longhaul::crypto
