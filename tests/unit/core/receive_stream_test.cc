// ReceiveStream: out-of-order pieces and duplicates, violations, posted buffers
// and in-place placement.
#include "transport/core/recv/receive_stream.h"

#include <cstring>
#include <vector>

#include "tests/support/wire_packets.h"
#include "gtest/gtest.h"

namespace longhaul {
namespace {

using testing::DataPiece;

TEST(ReceiveStreamTest, OutOfOrderPiecesAndDuplicates) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[100];
  for (int i = 0; i < 100; ++i)
    src[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(*r.OnData(DataPiece(0, 100, 50, 50, 0, src + 50)), 50u);
  EXPECT_EQ(*r.OnData(DataPiece(0, 100, 40, 30, 0, src + 40)), 10u); // overlaps
  Event e;
  EXPECT_FALSE(r.PopDelivered(&e));
  EXPECT_EQ(*r.OnData(DataPiece(0, 100, 0, 40, 0, src)), 40u);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.size, 100u);
  EXPECT_EQ(0, memcmp(e.data, src, 100));
  EXPECT_EQ(*r.OnData(DataPiece(0, 100, 0, 40, 0, src)), 0u); // late duplicate
  EXPECT_EQ(r.max_stream(), 100u + (1 << 20));
}

TEST(ReceiveStreamTest, RejectsViolations) {
  ReceiveStream r(1000, 4);
  uint8_t src[2000] = {};
  EXPECT_EQ(r.OnData(DataPiece(0, 2000, 995, 10, 0, src)).status().code(),
            absl::StatusCode::kFailedPrecondition); // beyond credit
  EXPECT_TRUE(r.OnData(DataPiece(1, 5000, 0, 10, 2000, src)).ok() ==
              false); // starts beyond
  EXPECT_EQ(r.OnData(DataPiece(9, 10, 0, 10, 0, src)).status().code(),
            absl::StatusCode::kFailedPrecondition); // too many messages ahead
  ASSERT_TRUE(r.OnData(DataPiece(0, 10, 0, 5, 0, src)).ok());
  EXPECT_EQ(r.OnData(DataPiece(0, 12, 5, 5, 0, src)).status().code(),
            absl::StatusCode::kInvalidArgument); // size changed
}

TEST(ReceiveStreamTest, PostAfterArrivalCopiesIntoThePostedBuffer) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[64];
  for (int i = 0; i < 64; ++i)
    src[i] = static_cast<uint8_t>(3 * i);
  ASSERT_TRUE(r.OnData(DataPiece(0, 64, 0, 32, 0, src)).ok());
  uint8_t dst[64] = {};
  ASSERT_TRUE(r.Post(dst, sizeof(dst), 42).ok());
  ASSERT_TRUE(r.OnData(DataPiece(0, 64, 32, 32, 0, src + 32)).ok());
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, dst);
  EXPECT_EQ(e.tag, 42u);
  EXPECT_EQ(0, memcmp(dst, src, 64));
}

// Place: where a frame's payload would land, only when all of it is new and its
// memory exists; OnData then finds it in place and counts it without a copy.
TEST(ReceiveStreamTest, PlaceNamesOnlyNewBytesInExistingMemory) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[4096];
  for (int i = 0; i < 4096; ++i)
    src[i] = static_cast<uint8_t>(i * 13);
  // Message 0 not started, nothing posted: no memory yet (none is made for a
  // frame that has not authenticated).
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 1024, 1024, 0, src + 1024)), nullptr);
  ASSERT_TRUE(r.OnData(DataPiece(0, 4096, 0, 1024, 0, src)).ok());
  uint8_t *at = r.Place(DataPiece(0, 4096, 2048, 1024, 0, src + 2048));
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 512, 1024, 0, src + 512)),
            nullptr); // overlaps received
  EXPECT_EQ(r.Place(DataPiece(0, 4000, 2048, 1024, 0, src)),
            nullptr); // other size
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 2048, 1024, 7, src)),
            nullptr); // other position
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 3584, 1024, 0, src)),
            nullptr); // past the end
  // The opener decrypts into `at`; OnData finds the payload in place.
  std::memcpy(at, src + 2048, 1024);
  EXPECT_EQ(*r.OnData(DataPiece(0, 4096, 2048, 1024, 0, at)), 1024u);
  // Out of order now: a range between the two received ones is new, one
  // touching either is not.
  EXPECT_NE(r.Place(DataPiece(0, 4096, 1024, 1024, 0, src)), nullptr);
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 1500, 1024, 0, src)), nullptr);
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 3000, 1000, 0, src)), nullptr);
  ASSERT_TRUE(r.OnData(DataPiece(0, 4096, 1024, 1024, 0, src + 1024)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(0, 4096, 3072, 1024, 0, src + 3072)).ok());
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 3072, 1024, 0, src)),
            nullptr); // complete
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(0, memcmp(e.data, src, 4096));
  EXPECT_EQ(r.Place(DataPiece(0, 4096, 0, 1024, 0, src)), nullptr); // delivered
  // A posted buffer takes a message's first piece.
  uint8_t dst[2048] = {};
  ASSERT_TRUE(r.Post(dst, sizeof(dst), 5).ok());
  EXPECT_EQ(r.Place(DataPiece(1, 2048, 1024, 1024, 4096, src)), dst + 1024);
  EXPECT_EQ(r.Place(DataPiece(1, 4096, 0, 1024, 4096, src)),
            nullptr); // does not fit it
  // Beyond the receive credit: nothing.
  ReceiveStream small(1000, 4);
  uint8_t buf[4096];
  ASSERT_TRUE(small.Post(buf, sizeof(buf), 1).ok());
  EXPECT_NE(small.Place(DataPiece(0, 4096, 0, 900, 0, src)), nullptr);
  EXPECT_EQ(small.Place(DataPiece(0, 4096, 500, 900, 0, src)), nullptr);
}

} // namespace
} // namespace longhaul

namespace longhaul {
namespace {

// Held delivery (receive-side placement): a held message that completes is reported
// once and delivered only after Release; messages behind it wait (in order), an
// unordered one does not; hold needs a posted buffer of an undelivered message.
TEST(ReceiveStreamTest, HeldMessagesWaitForRelease) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[64];
  for (int i = 0; i < 64; ++i) src[i] = static_cast<uint8_t>(7 * i);
  uint8_t a[64] = {}, b[64] = {};
  EXPECT_EQ(r.Hold(0).code(), absl::StatusCode::kFailedPrecondition) << "nothing posted";
  ASSERT_TRUE(r.Post(a, sizeof(a), 1).ok());
  ASSERT_TRUE(r.Post(b, sizeof(b), 2).ok());
  EXPECT_EQ(r.next_posted_id(), 2u);
  uint8_t* data = nullptr;
  ByteCount capacity = 0;
  ASSERT_TRUE(r.PostedFor(1, &data, &capacity));
  EXPECT_EQ(data, b);
  EXPECT_EQ(capacity, 64u);
  EXPECT_FALSE(r.PostedFor(2, &data, &capacity));
  ASSERT_TRUE(r.Hold(0).ok());
  uint64_t id = 99;
  EXPECT_FALSE(r.TakeHeldComplete(&id));
  ASSERT_TRUE(r.OnData(DataPiece(0, 64, 0, 64, 0, src)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(1, 64, 0, 64, 64, src)).ok());
  Event e;
  EXPECT_FALSE(r.PopDelivered(&e)) << "message 0 is held, message 1 behind it";
  ASSERT_TRUE(r.TakeHeldComplete(&id));
  EXPECT_EQ(id, 0u);
  EXPECT_FALSE(r.TakeHeldComplete(&id)) << "reported once";
  r.Release(0);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, a);
  EXPECT_EQ(0, memcmp(a, src, 64));
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, b);
  EXPECT_EQ(r.Hold(0).code(), absl::StatusCode::kFailedPrecondition) << "delivered";
  // Held when already complete: reported at once.
  uint8_t c[64] = {};
  ASSERT_TRUE(r.OnData(DataPiece(2, 64, 0, 64, 128, src)).ok());
  ASSERT_TRUE(r.Post(c, sizeof(c), 3).ok());
  ASSERT_TRUE(r.Hold(2).ok());
  ASSERT_TRUE(r.TakeHeldComplete(&id));
  EXPECT_EQ(id, 2u);
  EXPECT_FALSE(r.PopDelivered(&e));
  r.Release(2);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, c);
  EXPECT_EQ(0, memcmp(c, src, 64));
}

TEST(ReceiveStreamTest, HeldUnorderedMessageDoesNotBlockOthers) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[32] = {1, 2, 3};
  uint8_t a[32] = {}, b[32] = {};
  ASSERT_TRUE(r.Post(a, sizeof(a), 1).ok());
  ASSERT_TRUE(r.Post(b, sizeof(b), 2).ok());
  ASSERT_TRUE(r.Hold(0).ok());
  ASSERT_TRUE(r.OnData(DataPiece(0, 32, 0, 32, 0, src, /*unordered=*/true)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(1, 32, 0, 32, 32, src, /*unordered=*/true)).ok());
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 1u) << "the held one waits, the other goes";
  EXPECT_FALSE(r.PopDelivered(&e));
  r.Release(0);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 0u);
  EXPECT_EQ(e.data, a);
}

// Offered buffers (placement by key): adoption makes an offer the held, posted buffer of
// one message (in order or ahead, started or not, never too small, never twice, never a
// delivered one); in-order posts skip an adopted id; withdrawal answers at once unless
// advertised, then after OfferRevoked; the close hands back what is left, cancelled.
TEST(ReceiveStreamTest, OfferedBuffersAreAdoptedOrWithdrawn) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[64];
  for (int i = 0; i < 64; ++i) src[i] = static_cast<uint8_t>(5 * i + 1);
  uint8_t a[64] = {}, b[64] = {}, small[16] = {}, p[64] = {}, d[64] = {};
  EXPECT_EQ(r.AddOffer(0, a, sizeof(a)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddOffer(uint64_t{1} << 63, a, sizeof(a)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddOffer(7, nullptr, 64).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.AddOffer(7, a, sizeof(a)).ok());
  EXPECT_EQ(r.AddOffer(7, b, sizeof(b)).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(r.AddOffer(8, b, sizeof(b)).ok());
  ASSERT_TRUE(r.AddOffer(9, small, sizeof(small)).ok());
  ASSERT_TRUE(r.AddOffer(10, d, sizeof(d)).ok());
  EXPECT_EQ(r.offers().size(), 4u);
  // Message 1 (ahead of message 0) adopts offer 8; message 0 has begun in owned memory.
  ASSERT_TRUE(r.OnData(DataPiece(0, 64, 0, 32, 0, src)).ok());
  EXPECT_EQ(r.Adopt(9, 1, 64).code(), absl::StatusCode::kOutOfRange) << "too small";
  EXPECT_EQ(r.Adopt(42, 1, 64).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.Adopt(7, 0, 48).code(), absl::StatusCode::kFailedPrecondition)
      << "message 0 began with 64 bytes";
  ASSERT_TRUE(r.Adopt(8, 1, 64).ok());
  EXPECT_EQ(r.Adopt(7, 1, 64).code(), absl::StatusCode::kFailedPrecondition) << "has a buffer";
  EXPECT_EQ(r.Adopt(8, 2, 64).code(), absl::StatusCode::kNotFound) << "adopted once";
  EXPECT_EQ(r.offers().size(), 3u);
  // An in-order post is for message 0, then skips the adopted message 1.
  ASSERT_TRUE(r.Post(p, sizeof(p), 50).ok());
  EXPECT_EQ(r.next_posted_id(), 1u);
  uint8_t q[64] = {};
  ASSERT_TRUE(r.Post(q, sizeof(q), 51).ok());
  uint8_t* data = nullptr;
  ByteCount capacity = 0;
  ASSERT_TRUE(r.PostedFor(2, &data, &capacity));
  EXPECT_EQ(data, q);
  // Adopted means held: message 1 completes but waits for Release; message 0 goes.
  ASSERT_TRUE(r.OnData(DataPiece(1, 64, 0, 64, 64, src)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(0, 64, 32, 32, 0, src + 32)).ok());
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, p);
  EXPECT_EQ(0, memcmp(p, src, 64));
  EXPECT_FALSE(r.PopDelivered(&e)) << "message 1 is held";
  uint64_t id = 0;
  ASSERT_TRUE(r.TakeHeldComplete(&id));
  EXPECT_EQ(id, 1u);
  r.Release(1);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, b);
  EXPECT_EQ(e.tag, 8u) << "the offer's key";
  EXPECT_EQ(0, memcmp(b, src, 64));
  EXPECT_EQ(r.Adopt(7, 1, 64).code(), absl::StatusCode::kFailedPrecondition) << "delivered";
  // Withdrawal: offer 7 was never advertised (at once); offer 10 was (after the revoke).
  r.NotePlacement(10, true);
  r.Withdraw(7);
  r.Withdraw(10);
  ASSERT_TRUE(r.PopWithdrawn(absl::OkStatus(), &e));
  EXPECT_EQ(e.type, Event::Type::kOfferWithdrawn);
  EXPECT_EQ(e.tag, 7u);
  EXPECT_EQ(e.data, a);
  EXPECT_TRUE(e.status.ok());
  EXPECT_FALSE(r.PopWithdrawn(absl::OkStatus(), &e)) << "offer 10 may still be written";
  EXPECT_EQ(r.Adopt(10, 3, 64).code(), absl::StatusCode::kNotFound) << "being withdrawn";
  r.OfferRevoked(10);
  ASSERT_TRUE(r.PopWithdrawn(absl::OkStatus(), &e));
  EXPECT_EQ(e.tag, 10u);
  EXPECT_EQ(e.data, d);
  // The close: what is left comes back cancelled.
  EXPECT_FALSE(r.PopWithdrawn(absl::OkStatus(), &e));
  ASSERT_TRUE(r.PopWithdrawn(absl::CancelledError("closed"), &e));
  EXPECT_EQ(e.tag, 9u);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(r.PopWithdrawn(absl::CancelledError("closed"), &e));
  EXPECT_TRUE(r.offers().empty());
}

}  // namespace
}  // namespace longhaul
