#include "tests/fuzz/wire_seeds.h"

#include <functional>
#include <string_view>

#include "transport/wire/packet.h"
#include "transport/wire/varint.h"

namespace longhaul::wire::fuzz {
namespace {

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

}  // namespace

std::vector<std::pair<std::string, std::vector<uint8_t>>> WireSeedPackets() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  const std::vector<uint8_t> payload = Pattern(1000, 1);
  const std::vector<uint8_t> small = Pattern(40, 2);

  out.emplace_back("ping.bin",
                   Build(PacketType::kOneRtt, 1, [](PacketWriter& w) { w.WritePing(); }));

  out.emplace_back("data_first.bin", Build(PacketType::kOneRtt, 2, [&](PacketWriter& w) {
                     DataFrame f;
                     f.message_id = 0;
                     f.message_length = 100000;
                     f.offset = 0;
                     f.stream_base = 0;
                     f.length = payload.size();
                     f.payload = payload.data();
                     w.WriteData(f);
                   }));

  out.emplace_back("data_last_two_messages.bin",
                   Build(PacketType::kOneRtt, 3, [&](PacketWriter& w) {
                     DataFrame f;
                     f.flags = kDataFlagLast;
                     f.message_id = 70;
                     f.message_length = 300;
                     f.offset = 260;
                     f.stream_base = 1ULL << 32;
                     f.length = small.size();
                     f.payload = small.data();
                     w.WriteData(f);
                     f.message_id = 71;
                     f.message_length = 0;
                     f.offset = 0;
                     f.length = 0;
                     f.stream_base += 300;
                     w.WriteData(f);
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
                     DataFrame f;
                     f.message_id = 9;
                     f.message_length = 5000;
                     f.offset = 2000;
                     f.stream_base = 123456;
                     f.length = small.size();
                     f.payload = small.data();
                     w.WriteData(f);
                   }));

  out.emplace_back("fec_repair.bin", Build(PacketType::kOneRtt, 8, [&](PacketWriter& w) {
                     FecRepairFrame r;
                     r.block_id = 42;
                     r.index = 2;
                     r.k = 32;
                     r.m = 8;
                     r.length = payload.size();
                     r.payload = payload.data();
                     w.WriteFecRepair(r);
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
                     DataFrame f;
                     f.flags = kDataFlagLast;
                     f.message_id = kMaxVarint;
                     f.message_length = 100;
                     f.offset = 0;
                     f.stream_base = kMaxVarint - 100;
                     f.length = 100;
                     f.payload = payload.data();
                     w.WriteData(f);
                     AckFrame a;
                     a.largest = 1ULL << 35;
                     const AckRange r[] = {{(1ULL << 35) - 5, 1ULL << 35}, {1000, 2000}};
                     w.WriteAck(a, r, 2);
                     w.WritePadding(3);
                     w.WritePing();
                     FecRepairFrame rep;
                     rep.block_id = 6;
                     rep.k = 4;
                     rep.m = 2;
                     rep.index = 1;
                     rep.length = small.size();
                     rep.payload = small.data();
                     w.WriteFecRepair(rep);
                     w.WriteLossReport(LossReportFrame{10, 1, 1});
                   }));
  return out;
}

}  // namespace longhaul::wire::fuzz
