#include "transport/nccl/frames.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::nccl {
namespace {

using ::testing::HasSubstr;

constexpr FrameKind kKinds[] = {FrameKind::kOpen,  FrameKind::kData,   FrameKind::kCredit,
                                FrameKind::kClose, FrameKind::kReject, FrameKind::kDataHead};

TEST(FramesTest, EveryKindRoundTrips) {
  for (FrameKind kind : kKinds) {
    const FrameHeader h = MakeFrameHeader(kind, 0x01020304, -7, 0x1122334455667788ull, 42);
    uint8_t buf[kFrameHeaderBytes];
    EncodeFrameHeader(h, buf);
    absl::StatusOr<FrameHeader> back = DecodeFrameHeader(buf, sizeof(buf));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->magic, kFrameMagic);
    EXPECT_EQ(back->kind, static_cast<uint8_t>(kind));
    EXPECT_EQ(back->version, kFrameVersion);
    EXPECT_EQ(back->reserved, 0);
    EXPECT_EQ(back->comm, 0x01020304u);
    EXPECT_EQ(back->tag, -7);
    EXPECT_EQ(back->value, 0x1122334455667788ull);
    EXPECT_EQ(back->instance, 42u);
    EXPECT_TRUE(IsKnownFrameKind(back->kind));
  }
}

// The layout of frames.h, byte by byte (host order: little-endian on the machines the
// plugin runs on).
TEST(FramesTest, LayoutIsTheDocumentedOne) {
  uint8_t buf[kFrameHeaderBytes];
  memset(buf, 0xee, sizeof(buf));
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kDataHead, 9, 3, 5000, 0), buf);
  uint32_t magic;
  memcpy(&magic, buf, 4);
  EXPECT_EQ(magic, 0x464e484cu);
  EXPECT_EQ(memcmp(buf, "LHNF", 4), 0);
  EXPECT_EQ(buf[4], 6);  // kind
  EXPECT_EQ(buf[5], 2);  // version
  EXPECT_EQ(buf[6], 0);  // reserved
  EXPECT_EQ(buf[7], 0);
  uint32_t comm;
  int32_t tag;
  uint64_t value, instance;
  memcpy(&comm, buf + 8, 4);
  memcpy(&tag, buf + 12, 4);
  memcpy(&value, buf + 16, 8);
  memcpy(&instance, buf + 24, 8);
  EXPECT_EQ(comm, 9u);
  EXPECT_EQ(tag, 3);
  EXPECT_EQ(value, 5000u);
  EXPECT_EQ(instance, 0u);
}

TEST(FramesTest, DecodesAtAnyAlignmentWithAPayloadBehind) {
  std::vector<uint8_t> msg(1 + kFrameHeaderBytes + 100, 0xab);
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kData, 1, 2, 100, 0), msg.data() + 1);
  absl::StatusOr<FrameHeader> h = DecodeFrameHeader(msg.data() + 1, msg.size() - 1);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->kind, static_cast<uint8_t>(FrameKind::kData));
  EXPECT_EQ(h->value, 100u);
  EXPECT_EQ(msg[1 + kFrameHeaderBytes], 0xab);  // the payload is not touched
}

TEST(FramesTest, ShortMessagesAreRejected) {
  uint8_t buf[kFrameHeaderBytes];
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kCredit, 1, 0, 7, 0), buf);
  for (size_t size : {size_t{0}, size_t{1}, size_t{16}, kFrameHeaderBytes - 1}) {
    absl::StatusOr<FrameHeader> h = DecodeFrameHeader(buf, size);
    ASSERT_FALSE(h.ok()) << size;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(h.status().message(), HasSubstr("shorter than a frame header (32 bytes)"));
  }
  absl::StatusOr<FrameHeader> h = DecodeFrameHeader(nullptr, 64);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("a message of 0 bytes"));
}

TEST(FramesTest, ForeignMagicAndOtherVersionsAreRejected) {
  uint8_t good[kFrameHeaderBytes];
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kOpen, 1, 0, 2, 3), good);
  for (int byte = 0; byte < 4; ++byte) {
    uint8_t bad[kFrameHeaderBytes];
    memcpy(bad, good, sizeof(bad));
    bad[byte] ^= 0x20;
    absl::StatusOr<FrameHeader> h = DecodeFrameHeader(bad, sizeof(bad));
    ASSERT_FALSE(h.ok()) << byte;
    EXPECT_THAT(h.status().message(), HasSubstr("is not the plugin's (0x464e484c)"));
  }
  for (uint8_t version : {0, 1, 3, 255}) {  // 1: before OPEN bodies and REJECT reasons
    uint8_t bad[kFrameHeaderBytes];
    memcpy(bad, good, sizeof(bad));
    bad[5] = version;
    absl::StatusOr<FrameHeader> h = DecodeFrameHeader(bad, sizeof(bad));
    ASSERT_FALSE(h.ok()) << static_cast<int>(version);
    EXPECT_THAT(h.status().message(), HasSubstr("frame version"));
  }
  // Zeros (an empty or truncated message padded by someone) are not a frame either.
  uint8_t zeros[kFrameHeaderBytes] = {};
  EXPECT_FALSE(DecodeFrameHeader(zeros, sizeof(zeros)).ok());
}

// An unknown kind decodes (the receiver drops it with a warning, so a later minor
// addition does not break the header check), and IsKnownFrameKind tells it apart.
TEST(FramesTest, UnknownKindsDecodeButAreNotKnown) {
  uint8_t buf[kFrameHeaderBytes];
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kOpen, 1, 0, 0, 0), buf);
  buf[4] = 99;
  absl::StatusOr<FrameHeader> h = DecodeFrameHeader(buf, sizeof(buf));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->kind, 99);
  EXPECT_FALSE(IsKnownFrameKind(h->kind));
  EXPECT_FALSE(IsKnownFrameKind(0));
  EXPECT_FALSE(IsKnownFrameKind(7));
  for (int k = 1; k <= 6; ++k) EXPECT_TRUE(IsKnownFrameKind(static_cast<uint8_t>(k))) << k;
}

// An OPEN's body: the connecting side's comm id (when the ABI gave one) and a flag, 16
// bytes right after the header; the whole message is 48 bytes.
TEST(FramesTest, OpenBodyRoundTripsWithAndWithoutACommId) {
  for (const OpenBody& b :
       {OpenBody{true, 0x0123456789abcdefull}, OpenBody{true, 0}, OpenBody{false, 0}}) {
    uint8_t msg[kOpenFrameBytes];
    EncodeFrameHeader(MakeFrameHeader(FrameKind::kOpen, 3, 0, 77, 5), msg);
    EncodeOpenBody(b, msg + kFrameHeaderBytes);
    absl::StatusOr<OpenBody> back = DecodeOpenBody(msg, sizeof(msg));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->has_comm_id, b.has_comm_id);
    EXPECT_EQ(back->comm_id, b.comm_id);
    uint64_t comm_id, flags;
    memcpy(&comm_id, msg + 32, 8);
    memcpy(&flags, msg + 40, 8);
    EXPECT_EQ(comm_id, b.comm_id);
    EXPECT_EQ(flags, b.has_comm_id ? 1u : 0u);
  }
  EXPECT_EQ(kOpenFrameBytes, 48u);
}

TEST(FramesTest, MalformedOpenBodiesAreRefusedNamingTheProblem) {
  uint8_t msg[kOpenFrameBytes + 1] = {};
  EncodeFrameHeader(MakeFrameHeader(FrameKind::kOpen, 3, 0, 77, 5), msg);
  EncodeOpenBody(OpenBody{true, 9}, msg + kFrameHeaderBytes);
  for (size_t size : {kFrameHeaderBytes, kOpenFrameBytes - 1, kOpenFrameBytes + 1}) {
    absl::StatusOr<OpenBody> b = DecodeOpenBody(msg, size);
    ASSERT_FALSE(b.ok()) << size;
    EXPECT_THAT(b.status().message(), HasSubstr("(expected 48)"));
  }
  EXPECT_FALSE(DecodeOpenBody(nullptr, kOpenFrameBytes).ok());
  uint8_t bad[kOpenFrameBytes];
  memcpy(bad, msg, sizeof(bad));
  bad[40] = 3;  // an unknown flag
  EXPECT_THAT(DecodeOpenBody(bad, sizeof(bad)).status().message(), HasSubstr("unknown flags"));
  memcpy(bad, msg, sizeof(bad));
  bad[40] = 0;  // a comm id without its flag
  EXPECT_THAT(DecodeOpenBody(bad, sizeof(bad)).status().message(), HasSubstr("without its flag"));
}

TEST(FramesTest, EveryRejectReasonHasItsOwnText) {
  std::vector<std::string> seen;
  for (int32_t r = 0; r <= 5; ++r) {
    const std::string text = RejectReasonText(r);
    EXPECT_THAT(text, ::testing::Not(HasSubstr("unknown"))) << r;
    for (const std::string& s : seen) EXPECT_NE(s, text);
    seen.push_back(text);
  }
  EXPECT_THAT(RejectReasonText(6), HasSubstr("unknown reason"));
  EXPECT_THAT(RejectReasonText(static_cast<int32_t>(RejectReason::kCreditExceeded)),
              HasSubstr("exceeded the receive credit"));
}

}  // namespace
}  // namespace longhaul::nccl
