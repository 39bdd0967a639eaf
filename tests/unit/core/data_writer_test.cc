// The packetizer over a synthetic send stream: runs of units written as DATA frames and
// parsed back, small messages sharing a packet, repairs first, the credit, message-count
// flow control, FEC source packets within the shard budget, and tail copies.
#include "transport/core/send/data_writer.h"

#include <vector>

#include "gtest/gtest.h"
#include "transport/core/config.h"
#include "transport/core/send/fec_sender.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

const Time kNow = Time::Zero() + Duration::Seconds(1);

struct Written {
  std::vector<wire::DataFrame> data;
  bool fec_source_first = false;
  size_t bytes_after_tag = 0;  // the shard's frames (FEC source packets)
};

class Fixture {
 public:
  explicit Fixture(TransportConfig config = TransportConfig())
      : config_(config), fec_(config, config.MaxDatagramSize()), buffer_(config.MaxDatagramSize()) {
    limits_ = DataLimits{config.segment, config.MaxDatagramSize(), ~uint64_t{0},
                         config.max_inflight_messages};
  }

  void Push(size_t bytes) {
    payloads_.emplace_back(bytes, static_cast<uint8_t>(payloads_.size() + 1));
    stream_.Push(payloads_.back().data(), bytes, nullptr, 0);
  }

  // Builds one packet with WriteDataPacket (or WriteDataCopy when copy_units > 0) and
  // parses it back.
  bool Build(Written* out, uint64_t copy_start = 0, uint64_t copy_units = 0) {
    wire::PacketWriter w(buffer_.data(), buffer_.size());
    wire::PacketHeader h;
    h.packet_number = pn_;
    w.WriteHeader(h);
    record_ = SentPacket{};
    const bool wrote = copy_units > 0
                           ? WriteDataCopy(stream_, copy_start, copy_units, &w, &record_)
                           : WriteDataPacket(kNow, pn_, limits_, &stream_, &fec_, &w, &record_);
    ++pn_;
    if (!wrote) return false;
    const size_t n = w.Finish();
    absl::StatusOr<wire::PacketView> v = wire::ParsePacket({buffer_.data(), n});
    EXPECT_TRUE(v.ok()) << v.status();
    wire::FrameReader r(*v);
    wire::Frame f;
    bool first = true;
    while (true) {
      absl::StatusOr<bool> more = r.Next(&f);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      if (f.type == wire::FrameType::kFecSource) {
        out->fec_source_first = first;
        out->bytes_after_tag = static_cast<size_t>(v->frames_end - r.position());
      } else if (f.type == wire::FrameType::kData) {
        out->data.push_back(f.data);
      }
      first = false;
    }
    return true;
  }

  TransportConfig config_;
  SendStream stream_;
  FecSender fec_;
  DataLimits limits_;
  SentPacket record_;
  PacketNumber pn_ = 0;
  std::vector<uint8_t> buffer_;
  std::vector<std::vector<uint8_t>> payloads_;
};

TEST(DataWriterTest, SmallMessagesShareAPacket) {
  Fixture f;
  for (int i = 0; i < 3; ++i) f.Push(100);
  Written w;
  ASSERT_TRUE(f.Build(&w));
  ASSERT_EQ(w.data.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(w.data[i].message_id, i);
    EXPECT_EQ(w.data[i].stream_base, 100 * i);
    EXPECT_EQ(w.data[i].length, 100u);
    EXPECT_TRUE(w.data[i].last());
    EXPECT_EQ(w.data[i].payload[0], static_cast<uint8_t>(i + 1));
  }
  EXPECT_EQ(f.record_.stream_start, 0u);
  EXPECT_EQ(f.record_.stream_units, 300u);
  EXPECT_FALSE(f.record_.retransmission);
  EXPECT_FALSE(f.record_.fec_member);
  EXPECT_FALSE(f.Build(&w));  // nothing left
}

TEST(DataWriterTest, ARunIsAtMostOneSegment) {
  Fixture f;
  f.Push(3 * f.config_.segment + 10);
  Written w;
  ASSERT_TRUE(f.Build(&w));
  ASSERT_EQ(w.data.size(), 1u);
  EXPECT_EQ(w.data[0].length, f.config_.segment);
  EXPECT_FALSE(w.data[0].last());
  EXPECT_EQ(f.record_.stream_units, f.config_.segment);
}

TEST(DataWriterTest, RepairsComeFirstAndDoNotContinueIntoNewData) {
  Fixture f;
  for (int i = 0; i < 4; ++i) f.Push(100);
  Written first;
  ASSERT_TRUE(f.Build(&first));  // all 400 units
  f.Push(100);
  f.stream_.QueueRetransmission(100, 100);  // message 1 was lost
  Written repair;
  ASSERT_TRUE(f.Build(&repair));
  ASSERT_EQ(repair.data.size(), 1u);
  EXPECT_EQ(repair.data[0].message_id, 1u);
  EXPECT_TRUE(f.record_.retransmission);
  EXPECT_EQ(f.record_.stream_start, 100u);
  EXPECT_EQ(f.record_.stream_units, 100u);
  Written fresh;
  ASSERT_TRUE(f.Build(&fresh));
  ASSERT_EQ(fresh.data.size(), 1u);
  EXPECT_EQ(fresh.data[0].message_id, 4u);
}

TEST(DataWriterTest, TheCreditBoundsNewData) {
  Fixture f;
  f.Push(1000);
  f.limits_.credit = 250;
  Written w;
  ASSERT_TRUE(f.Build(&w));
  EXPECT_EQ(f.record_.stream_units, 250u);
  EXPECT_FALSE(f.Build(&w));
}

TEST(DataWriterTest, MessageCountFlowControlStopsAtTheLimit) {
  TransportConfig c;
  c.max_inflight_messages = 2;
  Fixture f(c);
  for (int i = 0; i < 3; ++i) f.Push(100);
  Written w;
  ASSERT_TRUE(f.Build(&w));
  EXPECT_EQ(w.data.size(), 2u);  // the third message may not start
  EXPECT_FALSE(f.stream_.NextUnsentMessageAllowed(c.max_inflight_messages));
  EXPECT_FALSE(f.Build(&w));
}

TEST(DataWriterTest, FecSourcePacketsCarryTheTagAndAShardThatFitsARepairPacket) {
  TransportConfig c;
  c.fec = FecMode::kFixed;
  c.fec_k = 4;
  c.fec_m = 2;
  c.fec_interleave = 1;
  Fixture f(c);
  f.Push(10 * c.segment);
  Written w;
  ASSERT_TRUE(f.Build(&w));
  EXPECT_TRUE(w.fec_source_first);
  EXPECT_TRUE(f.record_.fec_member);
  EXPECT_EQ(f.record_.fec_index, 0u);
  // The shard is the 8-byte packet number plus the frames after the tag; a repair frame
  // (at most 16 bytes of header) carrying it must fit a datagram of the same size.
  EXPECT_LE(w.bytes_after_tag + 8 + 16 + wire::kPacketOverhead, c.MaxDatagramSize());
  EXPECT_GT(f.record_.stream_units, c.segment - 128);
  EXPECT_LT(f.record_.stream_units, c.segment);
  // The next packets fill the block; closing it queues its parity.
  for (int i = 1; i < 4; ++i) {
    Written next;
    ASSERT_TRUE(f.Build(&next));
    EXPECT_EQ(f.record_.fec_index, i);
  }
  EXPECT_TRUE(f.fec_.has_repair());
}

TEST(DataWriterTest, ACopyIsCutToTheRoomLeft) {
  Fixture f;
  f.Push(f.config_.segment);
  Written original;
  ASSERT_TRUE(f.Build(&original));
  // Copying into a packet with less room (as if an ACK came first) keeps what fits.
  f.buffer_.resize(f.buffer_.size() - 1000);
  Written copy;
  ASSERT_TRUE(f.Build(&copy, 0, f.config_.segment));
  const uint64_t room = f.buffer_.size() - wire::kPacketOverhead - wire::kMaxDataFrameHeaderSize;
  ASSERT_LT(room, f.config_.segment);
  EXPECT_TRUE(f.record_.retransmission);
  EXPECT_EQ(f.record_.stream_start, 0u);
  EXPECT_EQ(f.record_.stream_units, room);
  ASSERT_EQ(copy.data.size(), 1u);
  EXPECT_EQ(copy.data[0].length, room);
}

TEST(DataWriterTest, ACopyOfManySmallMessagesIsCutPieceByPiece) {
  // One packet carries a run of small messages (a frame header each); its copy, with
  // less room in front, must stop at the last piece whose frame fits instead of
  // assuming one header for the whole run.
  Fixture f;
  for (int i = 0; i < 200; ++i) f.Push(100);  // more than one packet holds
  Written original;
  ASSERT_TRUE(f.Build(&original));
  const uint64_t run = f.record_.stream_units;
  ASSERT_GT(original.data.size(), 10u);
  f.buffer_.resize(f.buffer_.size() - 700);
  Written copy;
  ASSERT_TRUE(f.Build(&copy, 0, run));
  EXPECT_TRUE(f.record_.retransmission);
  EXPECT_EQ(f.record_.stream_start, 0u);
  ASSERT_FALSE(copy.data.empty());
  EXPECT_LT(copy.data.size(), original.data.size());
  uint64_t units = 0;
  for (size_t i = 0; i < copy.data.size(); ++i) {
    EXPECT_EQ(copy.data[i].message_id, original.data[i].message_id);
    EXPECT_EQ(copy.data[i].offset, 0u);
    units += copy.data[i].length;
  }
  EXPECT_EQ(f.record_.stream_units, units);
}

}  // namespace
}  // namespace longhaul
