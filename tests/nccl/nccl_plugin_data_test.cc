// The plugin's data path driven as NCCL's proxy threads drive it: connect/accept retried,
// comms multiplexed on one connection, a message matrix (copied and in-place sends),
// data before its receive, credit back-pressure, grouped receives, 32 requests in
// flight, NCCL's proxy step pattern, several threads at once. nccl_plugin_fixture.h has
// the harness.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/nccl/nccl_plugin_fixture.h"

namespace longhaul::nccl::plugin_test {

// Sends up to NCCL_LONGHAUL_COPY_MAX (1 MiB) are copied and complete at once; larger
// ones go in place and complete when acknowledged: the matrix covers both.
void PluginTest::MessageMatrix() {
  void* ctx = Init();
  Comms c = Connect(ctx);
  const size_t kSizes[] = {0, 1, 7, 4096, 8191, 65537, 1 << 20, (16 << 20) + 3, 64 << 20};
  const size_t kSlack[] = {0, 1, 4096};
  uint32_t seed = 10;
  for (size_t send_size : kSizes) {
    for (size_t slack : kSlack) {
      const size_t recv_size = std::min<size_t>(send_size + slack, size_t{64} << 20);
      if (recv_size < send_size) continue;
      std::vector<uint8_t> out(send_size), in(recv_size + 1, 0xee);
      Fill(&out, ++seed);
      void* r = Recv(c.recv, in.data(), recv_size, 3);
      void* s = Send(c.send, out.data(), send_size, 3);
      int ssize = -1, rsize = -1;
      ASSERT_EQ(WaitDone(net_, s, &ssize), ncclSuccess);
      ASSERT_EQ(WaitDone(net_, r, &rsize), ncclSuccess) << send_size << " into " << recv_size;
      EXPECT_EQ(ssize, static_cast<int>(send_size));
      EXPECT_EQ(rsize, static_cast<int>(send_size)) << "receive sizes are maxima";
      if (send_size > 0) {
        ASSERT_EQ(memcmp(in.data(), out.data(), send_size), 0) << send_size;
      }
      // Nothing written past the message.
      for (size_t i = send_size; i < in.size(); ++i) ASSERT_EQ(in[i], 0xee) << i;
    }
  }
  CloseAndFinalize(ctx, &c);
}

namespace {

// ---- semantics ----

TEST_F(PluginTest, ConnectAndAcceptAreRetriedUntilReady) {
  void* ctx = Init();
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  // Nobody connected yet: accept says "not yet".
  void* recv = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(net_->accept(listen, &recv, nullptr), ncclSuccess);
  EXPECT_EQ(recv, nullptr);
  // The first connect starts the handshake and returns NULL.
  void* send = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(net_->connect(ctx, 0, handle, &send, nullptr), ncclSuccess);
  EXPECT_EQ(send, nullptr);
  Comms c;
  c.listen = listen;
  ASSERT_NO_FATAL_FAILURE(ConnectTo(ctx, handle, listen, &c));
  // A second comm on the same listen comm (a listen comm may accept more than once),
  // multiplexed on the same connection.
  Comms c2;
  ASSERT_NO_FATAL_FAILURE(ConnectTo(ctx, handle, listen, &c2));
  // Messages of each comm reach that comm's receiver.
  uint32_t a = 0xaaaa, b = 0xbbbb, ga = 0, gb = 0;
  void* rb = Recv(c2.recv, &gb, 4, 0);
  void* ra = Recv(c.recv, &ga, 4, 0);
  Send(c.send, &a, 4, 0);
  Send(c2.send, &b, 4, 0);
  EXPECT_EQ(WaitDone(net_, ra, nullptr), ncclSuccess);
  EXPECT_EQ(WaitDone(net_, rb, nullptr), ncclSuccess);
  EXPECT_EQ(ga, 0xaaaau);
  EXPECT_EQ(gb, 0xbbbbu);
  Close(ctx, &c2);
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, MessageMatrixZeroTo64MiB) { MessageMatrix(); }

TEST_F(PluginTest, MessageMatrixEverySendInPlace) {
  setenv("NCCL_LONGHAUL_COPY_MAX", "0", 1);
  MessageMatrix();
}

TEST_F(PluginTest, MessageMatrixEverySendCopied) {
  setenv("NCCL_LONGHAUL_COPY_MAX", "1GiB", 1);
  MessageMatrix();
}

TEST_F(PluginTest, DataArrivingBeforeItsReceiveIsBuffered) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  // Sends first (eager, no receive posted), receives later.
  std::vector<std::vector<uint8_t>> out(8, std::vector<uint8_t>(100000));
  std::vector<void*> sends;
  for (int i = 0; i < 8; ++i) {
    Fill(&out[i], 100 + i);
    sends.push_back(Send(c.send, out[i].data(), out[i].size(), 0));
  }
  for (void* s : sends) EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  for (int i = 0; i < 8; ++i) {
    std::vector<uint8_t> in(200000);
    int size = 0;
    void* r = Recv(c.recv, in.data(), in.size(), 0);
    ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess);
    EXPECT_EQ(size, 100000);
    EXPECT_EQ(memcmp(in.data(), out[i].data(), out[i].size()), 0) << i;
  }
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, CreditBoundsUnreceivedDataWithNullRequests) {
  setenv("NCCL_LONGHAUL_CREDIT", "1MiB", 1);
  void* ctx = Init();
  Comms c = Connect(ctx);
  std::vector<uint8_t> chunk(256 << 10);
  Fill(&chunk, 5);
  // Without receives, at most 1 MiB (the credit) is accepted; then isend says "not now".
  int accepted = 0;
  void* req = nullptr;
  std::vector<void*> done_reqs;
  for (int i = 0; i < 16; ++i) {
    req = nullptr;
    ASSERT_EQ(net_->isend(c.send, chunk.data(), chunk.size(), 0, nullptr, nullptr, &req),
              ncclSuccess);
    if (req == nullptr) break;
    ++accepted;
    ASSERT_EQ(WaitDone(net_, req, nullptr), ncclSuccess);
  }
  EXPECT_GE(accepted, 3);
  EXPECT_LE(accepted, 4);
  EXPECT_EQ(req, nullptr);
  // Receiving returns the credit: every message arrives and sending resumes.
  std::vector<uint8_t> in(chunk.size());
  for (int i = 0; i < accepted + 4; ++i) {
    void* r = Recv(c.recv, in.data(), in.size(), 0);
    if (i >= accepted) {
      void* s = Send(c.send, chunk.data(), chunk.size(), 0);
      ASSERT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
    }
    int size = 0;
    ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess) << i;
    EXPECT_EQ(size, static_cast<int>(chunk.size()));
    EXPECT_EQ(memcmp(in.data(), chunk.data(), chunk.size()), 0);
  }
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, GroupedReceiveMatchesByTagAndReportsEachSize) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  constexpr int kN = 4;
  std::vector<std::vector<uint8_t>> in(kN, std::vector<uint8_t>(4096, 0));
  void* data[kN];
  size_t sizes[kN];
  int tags[kN];
  for (int i = 0; i < kN; ++i) {
    data[i] = in[i].data();
    sizes[i] = in[i].size();
    tags[i] = 10 + i;
  }
  void* r = nullptr;
  ASSERT_EQ(net_->irecv(c.recv, kN, data, sizes, tags, nullptr, nullptr, &r), ncclSuccess);
  ASSERT_NE(r, nullptr);
  // Sends in another tag order with distinct sizes.
  const int order[kN] = {2, 0, 3, 1};
  std::vector<std::vector<uint8_t>> out(kN);
  for (int k = 0; k < kN; ++k) {
    const int i = order[k];
    out[i].resize(100 * (i + 1));
    Fill(&out[i], 50 + i);
    void* s = Send(c.send, out[i].data(), out[i].size(), 10 + i);
    EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  }
  int got[64] = {};
  ASSERT_EQ(WaitDone(net_, r, got), ncclSuccess);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got[i], 100 * (i + 1)) << i;
    EXPECT_EQ(memcmp(in[i].data(), out[i].data(), out[i].size()), 0) << i;
  }
  CloseAndFinalize(ctx, &c);
}

TEST_F(PluginTest, ThirtyTwoInFlightTestedInAnyOrder) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  constexpr int kN = LH_NCCL_NET_MAX_REQUESTS;
  std::vector<std::vector<uint8_t>> in(kN, std::vector<uint8_t>(5200)),
      out(kN, std::vector<uint8_t>(5000));
  std::vector<void*> rreq(kN), sreq(kN);
  for (int i = 0; i < kN; ++i) rreq[i] = Recv(c.recv, in[i].data(), 5200, 1);
  for (int i = 0; i < kN; ++i) {
    Fill(&out[i], 200 + i);
    sreq[i] = Send(c.send, out[i].data(), 5000, 1);
  }
  // Newest first.
  for (int i = kN - 1; i >= 0; --i) {
    int size = 0;
    ASSERT_EQ(WaitDone(net_, rreq[i], &size), ncclSuccess);
    EXPECT_EQ(size, 5000);
    ASSERT_EQ(WaitDone(net_, sreq[i], &size), ncclSuccess);
    EXPECT_EQ(size, 5000);
  }
  for (int i = 0; i < kN; ++i) EXPECT_EQ(memcmp(in[i].data(), out[i].data(), 5000), 0) << i;
  CloseAndFinalize(ctx, &c);
}

// The pattern of NCCL's net proxy (src/transport/net.cc, sendProxyProgress and
// recvProxyProgress, NCCL 2.27-2.30): buffers registered as NCCL_PTR_HOST and passed as
// mhandles; NCCL_STEPS (8) steps in flight per connection; each receive posted ahead for
// a whole step (the size is a maximum) with the peer's rank as tag, for LL/LL128 with
// *request preset to NCCL_NET_OPTIONAL_RECV_COMPLETION (a hint the plugin may ignore);
// each send of the step's actual size (0 for LL's empty steps) with the sender's rank as
// tag, retried while the request is NULL; only the oldest request of each side tested,
// in order. Every step's bytes are checked.
TEST_F(PluginTest, NcclProxyStepPatternEightStepsOldestFirst) {
  void* ctx = Init();
  Comms c = Connect(ctx);
  constexpr int kSteps = 8;                 // NCCL_STEPS
  constexpr size_t kStepBytes = 512 << 10;  // NCCL_BUFFSIZE (4 MiB) / NCCL_STEPS
  constexpr int kTotal = 96;                // steps of the whole operation
  constexpr int kSenderRank = 3;            // tag of the isends: the sender's rank
  std::vector<uint8_t> send_buf(kSteps * kStepBytes), recv_buf(kSteps * kStepBytes, 0);
  void* send_mh = nullptr;
  void* recv_mh = nullptr;
  ASSERT_EQ(net_->regMr(c.send, send_buf.data(), send_buf.size(), LH_NCCL_PTR_HOST, &send_mh),
            ncclSuccess);
  ASSERT_EQ(net_->regMr(c.recv, recv_buf.data(), recv_buf.size(), LH_NCCL_PTR_HOST, &recv_mh),
            ncclSuccess);
  // Step sizes: whole steps, partial ones and LL-style empty ones.
  auto step_size = [](int step) -> size_t {
    switch (step % 5) {
      case 0:
        return kStepBytes;
      case 1:
        return 0;
      case 2:
        return 4096 + step;
      case 3:
        return kStepBytes - 8;
      default:
        return 1 + step * 1000;
    }
  };
  auto fill = [](uint8_t* p, size_t n, int step) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(step * 131 + i * 7);
  };
  void* send_req[kSteps] = {};
  void* recv_req[kSteps] = {};
  int posted = 0, received = 0, transmitted = 0, sent_done = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((received < kTotal || sent_done < kTotal) && Clock::now() < deadline) {
    // Receiver: post up to kSteps ahead.
    if (posted < kTotal && posted < received + kSteps) {
      const int slot = posted % kSteps;
      void* data[1] = {recv_buf.data() + slot * kStepBytes};
      size_t sizes[1] = {kStepBytes};
      int tags[1] = {kSenderRank};
      void* mh[1] = {recv_mh};
      void* req = (posted % 2 == 1) ? reinterpret_cast<void*>(LH_NCCL_NET_OPTIONAL_RECV_COMPLETION)
                                    : nullptr;
      ASSERT_EQ(net_->irecv(c.recv, 1, data, sizes, tags, mh, nullptr, &req), ncclSuccess);
      ASSERT_NE(req, nullptr);
      ASSERT_NE(req, reinterpret_cast<void*>(LH_NCCL_NET_OPTIONAL_RECV_COMPLETION))
          << "the hint must be replaced by a request";
      recv_req[slot] = req;
      ++posted;
    }
    // Sender: the GPU fills the next step when the receiver's GPU has consumed the step
    // NCCL_STEPS before it (NCCL's own credit), whether or not its irecv is posted yet.
    if (transmitted < kTotal && transmitted < sent_done + kSteps &&
        transmitted < received + kSteps) {
      const int slot = transmitted % kSteps;
      uint8_t* buf = send_buf.data() + slot * kStepBytes;
      fill(buf, step_size(transmitted), transmitted);
      void* req = nullptr;
      ASSERT_EQ(
          net_->isend(c.send, buf, step_size(transmitted), kSenderRank, send_mh, nullptr, &req),
          ncclSuccess);
      if (req != nullptr) {
        send_req[slot] = req;
        ++transmitted;
      }
    }
    // Sender: test the oldest send only.
    if (sent_done < transmitted) {
      int done = 0, size = -1;
      ASSERT_EQ(net_->test(send_req[sent_done % kSteps], &done, &size), ncclSuccess);
      if (done) {
        EXPECT_EQ(size, static_cast<int>(step_size(sent_done)));
        ++sent_done;
      }
    }
    // Receiver: test the oldest receive only, then check the step's bytes.
    if (received < posted) {
      const int slot = received % kSteps;
      int done = 0;
      int sizes[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
      ASSERT_EQ(net_->test(recv_req[slot], &done, sizes), ncclSuccess);
      if (done) {
        const size_t n = step_size(received);
        ASSERT_EQ(sizes[0], static_cast<int>(n)) << "step " << received;
        std::vector<uint8_t> expect(n);
        fill(expect.data(), n, received);
        // An empty step has no bytes to check (and expect.data() is null then: memcmp's
        // arguments must not be, even for zero bytes).
        if (n > 0) {
          ASSERT_EQ(memcmp(recv_buf.data() + slot * kStepBytes, expect.data(), n), 0)
              << "step " << received;
        }
        ++received;
      }
    }
  }
  EXPECT_EQ(received, kTotal);
  EXPECT_EQ(sent_done, kTotal);
  EXPECT_EQ(net_->deregMr(c.send, send_mh), ncclSuccess);
  EXPECT_EQ(net_->deregMr(c.recv, recv_mh), ncclSuccess);
  CloseAndFinalize(ctx, &c);
}

// NCCL's threads at once: four comms on one connection, each driven by its own thread
// (sends and receives of varied sizes, up to 8 in flight, verified), while another thread
// calls getProperties and regMr/deregMr as NCCL's service thread does.
TEST_F(PluginTest, CommsDrivenFromSeveralThreadsShareOneConnection) {
  void* ctx = Init();
  constexpr int kComms = 4;
  std::vector<Comms> comms(kComms);
  for (Comms& c : comms) Connect(ctx, &c);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread service([&] {
    for (int i = 0; i < 100000 && !stop.load(); ++i) {
      ncclNetProperties_v12_t props;
      if (net_->getProperties(0, &props) != ncclSuccess) ++failures;
      void* mh = nullptr;
      char b[16];
      if (net_->regMr(comms[i % kComms].recv, b, sizeof(b), LH_NCCL_PTR_HOST, &mh) != ncclSuccess ||
          net_->deregMr(comms[i % kComms].recv, mh) != ncclSuccess) {
        ++failures;
      }
    }
  });
  auto drive = [&](int k) {
    constexpr int kMessages = 200;
    std::vector<std::vector<uint8_t>> out(8), in(8);
    void* sreq[8] = {};
    void* rreq[8] = {};
    size_t sizes[8] = {};
    int sent = 0, received = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (received < kMessages && Clock::now() < deadline) {
      // Keep up to 8 receives and 8 sends posted; slot i holds message (m % 8).
      for (int i = 0; i < 8; ++i) {
        if (rreq[i] == nullptr && sent < kMessages && sreq[i] == nullptr && sent % 8 == i) {
          sizes[i] = (static_cast<size_t>(sent) * 7919 + k * 104729) % (256 << 10);
          out[i].resize(sizes[i]);
          Fill(&out[i], 1000 * k + sent);
          in[i].assign((256 << 10) + 1, 0);
          void* d[1] = {in[i].data()};
          size_t cap[1] = {in[i].size()};
          int t[1] = {k};
          if (net_->irecv(comms[k].recv, 1, d, cap, t, nullptr, nullptr, &rreq[i]) != ncclSuccess) {
            ++failures;
            return;
          }
          while (sreq[i] == nullptr && Clock::now() < deadline) {
            if (net_->isend(comms[k].send, out[i].data(), sizes[i], k, nullptr, nullptr,
                            &sreq[i]) != ncclSuccess) {
              ++failures;
              return;
            }
          }
          ++sent;
        }
      }
      for (int i = 0; i < 8; ++i) {
        int done = 0, size = 0;
        if (sreq[i] != nullptr) {
          if (net_->test(sreq[i], &done, &size) != ncclSuccess) ++failures;
          if (done) sreq[i] = nullptr;
        }
        if (rreq[i] != nullptr && sreq[i] == nullptr) {
          done = 0;
          if (net_->test(rreq[i], &done, &size) != ncclSuccess) ++failures;
          if (done) {
            if (static_cast<size_t>(size) != sizes[i] ||
                (sizes[i] > 0 && memcmp(in[i].data(), out[i].data(), sizes[i]) != 0)) {
              ++failures;
            }
            rreq[i] = nullptr;
            ++received;
          }
        }
      }
    }
    if (received != kMessages) ++failures;
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < kComms; ++k) threads.emplace_back(drive, k);
  for (std::thread& t : threads) t.join();
  stop.store(true);
  service.join();
  EXPECT_EQ(failures.load(), 0);
  for (Comms& c : comms) Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
