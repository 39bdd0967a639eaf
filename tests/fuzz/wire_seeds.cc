#include "tests/fuzz/wire_seeds.h"

#include <functional>
#include <string_view>

#include "tests/support/wire_packets.h"
#include "transport/wire/packet.h"
#include "transport/wire/varint.h"

namespace longhaul::wire::fuzz {
namespace {

using ::longhaul::testing::DataPiece;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 13);
  return b;
}

std::vector<uint8_t> Build(PacketType type, PacketNumber pn,
                           const std::function<void(PacketWriter&)>& frames,
                           size_t capacity = 1500) {
  std::vector<uint8_t> buf(capacity);
  PacketWriter w(buf.data(), buf.size());
  PacketHeader h;
  h.type = type;
  h.flow = 3;
  h.connection_id = 0x1122334455667788ULL;
  h.packet_number = pn;
  w.WriteHeader(h);
  frames(w);
  buf.resize(w.Finish());
  return buf;
}

// A FEC repair frame of block `block_id` (k + m), repair `index`, carrying `payload`.
FecRepairFrame Repair(uint64_t block_id, uint8_t index, uint8_t k, uint8_t m,
                      const std::vector<uint8_t>& payload) {
  FecRepairFrame r;
  r.block_id = block_id;
  r.index = index;
  r.k = k;
  r.m = m;
  r.length = payload.size();
  r.payload = payload.data();
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<uint8_t>>> WireSeedPackets() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  const std::vector<uint8_t> payload = Pattern(1000, 1);
  const std::vector<uint8_t> small = Pattern(40, 2);

  out.emplace_back("ping.bin",
                   Build(PacketType::kOneRtt, 1, [](PacketWriter& w) { w.WritePing(); }));

  out.emplace_back("data_first.bin", Build(PacketType::kOneRtt, 2, [&](PacketWriter& w) {
                     w.WriteData(DataPiece(0, 100000, 0, payload.size(), 0, payload.data()));
                   }));

  out.emplace_back("data_last_two_messages.bin",
                   Build(PacketType::kOneRtt, 3, [&](PacketWriter& w) {
                     const uint64_t base = 1ULL << 32;
                     // Each the last piece of its message.
                     w.WriteData(DataPiece(70, 300, 260, small.size(), base, small.data()));
                     w.WriteData(DataPiece(71, 0, 0, 0, base + 300, small.data()));
                   }));

  out.emplace_back("ack_single_range.bin", Build(PacketType::kOneRtt, 4, [](PacketWriter& w) {
                     AckFrame a;
                     a.largest = 1000;
                     a.ack_delay_us = 300;
                     a.max_stream = 1ULL << 31;
                     const AckRange r[] = {{900, 1000}};
                     w.WriteAck(a, r, 128);
                   }));

  out.emplace_back("ack_many_ranges.bin", Build(PacketType::kOneRtt, 5, [](PacketWriter& w) {
                     AckFrame a;
                     a.largest = 5000000;
                     a.ack_delay_us = 1000;
                     a.max_stream = 1ULL << 40;
                     a.ecn_ect0 = 12345;
                     a.ecn_ce = 17;
                     std::vector<AckRange> ranges;
                     PacketNumber high = a.largest;
                     for (int i = 0; i < 60; ++i) {
                       const uint64_t len = static_cast<uint64_t>(i * 7 % 23);
                       ranges.push_back({high - len, high});
                       high = high - len - 2 - static_cast<uint64_t>(i * 37 % 101);
                     }
                     ranges.push_back({0, 3});  // down to packet 0
                     w.WriteAck(a, ranges, 128);
                   }));

  out.emplace_back("close.bin", Build(PacketType::kOneRtt, 6,
                                      [](PacketWriter& w) { w.WriteClose(7, "idle timeout"); }));

  out.emplace_back("fec_source_data.bin", Build(PacketType::kOneRtt, 7, [&](PacketWriter& w) {
                     w.WriteFecSource(FecSourceFrame{42, 5, 32, 8});
                     w.WriteData(DataPiece(9, 5000, 2000, small.size(), 123456, small.data()));
                   }));

  out.emplace_back("fec_repair.bin", Build(PacketType::kOneRtt, 8, [&](PacketWriter& w) {
                     w.WriteFecRepair(Repair(42, 2, 32, 8, payload));
                   }));

  out.emplace_back("loss_report_ack.bin", Build(PacketType::kOneRtt, 9, [](PacketWriter& w) {
                     w.WriteLossReport(LossReportFrame{1000000, 1200, 40});
                     AckFrame a;
                     a.largest = 77;
                     const AckRange r[] = {{70, 77}, {10, 60}};
                     w.WriteAck(a, r, 128);
                   }));

  out.emplace_back(
      "initial_handshake.bin",
      Build(
          PacketType::kInitial, 0,
          [&](PacketWriter& w) {
            w.WriteHandshake(small);
            w.WritePadding(w.remaining());  // initial packets are padded to probe the path MTU
          },
          1200));

  out.emplace_back("retry.bin", Build(PacketType::kRetry, 0,
                                      [&](PacketWriter& w) { w.WriteHandshake(Pattern(16, 3)); }));

  out.emplace_back("handshake_close.bin", Build(PacketType::kHandshake, 1, [&](PacketWriter& w) {
                     w.WriteHandshake(Pattern(24, 4));
                     w.WriteClose(1, "version negotiation failed");
                   }));

  out.emplace_back("mixed.bin", Build(PacketType::kOneRtt, 1ULL << 40, [&](PacketWriter& w) {
                     w.WriteFecSource(FecSourceFrame{7, 0, 4, 2});
                     w.WriteData(DataPiece(kMaxVarint, 100, 0, 100, kMaxVarint - 100,
                                           payload.data()));  // the last piece
                     AckFrame a;
                     a.largest = 1ULL << 35;
                     const AckRange r[] = {{(1ULL << 35) - 5, 1ULL << 35}, {1000, 2000}};
                     w.WriteAck(a, r, 2);
                     w.WritePadding(3);
                     w.WritePing();
                     w.WriteFecRepair(Repair(6, 1, 4, 2, small));
                     w.WriteLossReport(LossReportFrame{10, 1, 1});
                   }));
  return out;
}

}  // namespace longhaul::wire::fuzz
