#include "transport/emu/emu_direction.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "transport/emu/ip_packet.h"

namespace longhaul::emu {

sim::LinkSpec EmuDirection::ModelSpec(const sim::LinkSpec& spec, PayloadKind kind) {
  if (kind == PayloadKind::kUdpPayload) return spec;
  // A TUN packet already holds the IP (and transport) headers that `overhead` stands for
  // in UDP mode: only bytes beyond IP + UDP are added, and the MTU check must compare the
  // IP packet with the MTU: wire = len + extra > mtu + extra  <=>  len > mtu.
  sim::LinkSpec s = spec;
  const ByteCount extra = spec.overhead > sim::LinkSpec::kDefaultOverhead
                              ? spec.overhead - sim::LinkSpec::kDefaultOverhead
                              : 0;
  s.overhead = extra;
  s.mtu = spec.mtu + extra;
  return s;
}

EmuDirection::EmuDirection(const sim::LinkSpec& spec, uint64_t seed, PayloadKind kind,
                           PacketPool* pool)
    : link_(ModelSpec(spec, kind), seed), pool_(pool), kind_(kind) {}

sim::Verdict EmuDirection::Ingest(int64_t now_ns, uint32_t slot, uint32_t bytes, uint32_t flow,
                                  uint32_t flow_gen, uint8_t tos) {
  now_ns = std::max(now_ns, last_ns_);
  last_ns_ = now_ns;
  uint8_t* data = pool_->Data(slot);
  const bool fits = bytes <= pool_->slot_bytes();
  bool ect;
  if (kind_ == PayloadKind::kIpPacket) {
    ect = fits && IpPacketEcn(data, bytes) != kEcnNotEct;
  } else {
    ect = (tos & 0x03) != kEcnNotEct;
  }
  sim::Verdict v = link_.Offer(Time::FromNanoseconds(now_ns), bytes, ect);
  if (v.dropped()) {
    pool_->Release(slot);
    return v;
  }
  if (!fits) {
    // Only possible when the slot is smaller than the model's MTU allows (a caller bug or
    // a deliberately small pool); the bytes past the slot were never read.
    ++counters_.truncated;
    pool_->Release(slot);
    return v;
  }
  if (v.ce_mark) {
    if (kind_ == PayloadKind::kIpPacket) {
      SetIpPacketCe(data, bytes);
    } else {
      tos |= kEcnCe;
    }
  }
  PendingDatagram d;
  d.slot = slot;
  d.bytes = bytes;
  d.flow = flow;
  d.flow_gen = flow_gen;
  d.tos = tos;
  if (v.duplicate) {
    // The copy is taken before the corruption: the model corrupts the first copy only.
    const uint32_t copy = pool_->Acquire();
    if (copy == PacketPool::kNoSlot) {
      ++counters_.dup_lost;
    } else {
      std::memcpy(pool_->Data(copy), data, bytes);
      PendingDatagram dd = d;
      dd.slot = copy;
      dd.deliver_ns = v.duplicate_at.ns();
      queue_.Push(dd, /*in_order=*/false);
    }
  }
  if (v.corrupt_bit >= 0 && static_cast<uint64_t>(v.corrupt_bit) < uint64_t{bytes} * 8) {
    data[v.corrupt_bit / 8] ^= static_cast<uint8_t>(1u << (v.corrupt_bit % 8));
  }
  d.deliver_ns = v.deliver_at.ns();
  queue_.Push(d, /*in_order=*/!v.reordered);
  return v;
}

void EmuDirection::Reconfigure(const sim::LinkSpec& spec, int64_t now_ns) {
  now_ns = std::max(now_ns, last_ns_);
  last_ns_ = now_ns;
  link_.Reconfigure(ModelSpec(spec, kind_), Time::FromNanoseconds(now_ns));
}

size_t EmuDirection::DropPending() {
  std::vector<PendingDatagram> all;
  queue_.Drain(&all);
  for (const PendingDatagram& d : all) pool_->Release(d.slot);
  return all.size();
}

DirectionSeeds DeriveDirectionSeeds(const sim::LinkSpec& spec, uint64_t seed) {
  DirectionSeeds d;
  uint64_t s = seed;
  d.forward_seed = SplitMix64(s);
  d.reverse_seed = SplitMix64(s);
  d.forward_spec = spec;
  d.reverse_spec = spec;
  if (d.reverse_spec.seed.has_value()) *d.reverse_spec.seed ^= 0x5bd1e995u;
  return d;
}

int64_t LinkSchedule::next_at() const {
  return next_ < times_.size() ? start_ns_ + times_[next_].ns()
                               : std::numeric_limits<int64_t>::max();
}

void LinkSchedule::ApplyDue(int64_t now_ns, EmuDirection* forward, EmuDirection* reverse) {
  while (now_ns >= next_at()) {
    const DirectionSeeds seeds = DeriveDirectionSeeds(specs_[next_], seed_);
    forward->Reconfigure(seeds.forward_spec, now_ns);
    reverse->Reconfigure(seeds.reverse_spec, now_ns);
    ++next_;
  }
}

}  // namespace longhaul::emu
