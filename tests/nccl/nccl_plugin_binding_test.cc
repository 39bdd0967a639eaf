// Who may open a listen comm, and what a receiver accepts from the comm it accepted
// (docs/nccl.md, section 5, "Who can open a listen comm"): listen ids are 64 random bits,
// never sequential; OPENs for ids that do not exist are refused and counted, and those
// beyond kMaxPendingOpens (16) waiting for accept on one listen comm too; a third rank
// with its own allowed key cannot open another rank's listen comm with a guessed id or
// from another communicator, nor once the rank it was made for opened it, and the real
// listener's accept is unaffected; a sender that goes beyond the credit the receiver
// granted has its comm ended with an error while the other comms go on.
// nccl_plugin_fixture.h has the harness.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/nccl/nccl_plugin_fixture.h"
#include "tests/support/pattern.h"
#include "transport/crypto/key_files.h"
#include "transport/nccl/plugin_handle.h"

namespace longhaul::nccl::plugin_test {
namespace {

using ::testing::HasSubstr;

constexpr int kMaxPending = 16;  // kMaxPendingOpens (transport/nccl/link.h)

// connect retried until it gives a comm, fails, or 20 s passed; NULL unless a comm.
void* ConnectUntilComm(const ncclNet_v12_t* net, void* ctx, const void* handle) {
  void* send = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (send == nullptr && Clock::now() < deadline) {
    if (net->connect(ctx, 0, const_cast<void*>(handle), &send, nullptr) != ncclSuccess) {
      return nullptr;
    }
  }
  return send;
}

// One-byte isends on `send` (each tested to completion) until one fails or 15 s passed:
// the failure's result, or ncclSuccess if the comm was never refused.
ncclResult_t WaitRefused(const ncclNet_v12_t* net, void* send) {
  static char byte = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline) {
    void* req = nullptr;
    const ncclResult_t r = net->isend(send, &byte, 1, 0, nullptr, nullptr, &req);
    if (r != ncclSuccess) return r;
    if (req != nullptr && WaitDone(net, req, nullptr) != ncclSuccess) return ncclInternalError;
  }
  return ncclSuccess;
}

// `handle` with another listen id.
std::vector<char> WithListenId(const char* handle, uint64_t id) {
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  EXPECT_TRUE(h.ok()) << h.status();
  h->listen_id = id;
  std::vector<char> out(kHandleBytes);
  EXPECT_TRUE(EncodeHandle(*h, out.data()).ok());
  return out;
}

using ::longhaul::testing::Pattern;

TEST_F(PluginTest, ListenIdsAreRandomSixtyFourBitsAndNeverSequential) {
  void* ctx = Init();
  std::vector<uint64_t> ids;
  std::vector<void*> listens;
  uint64_t instance = 0;
  for (int i = 0; i < 32; ++i) {
    char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
    listens.push_back(listen);
    absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
    ASSERT_TRUE(h.ok()) << h.status();
    ids.push_back(h->listen_id);
    if (i == 0) instance = h->instance;
    EXPECT_EQ(h->instance, instance);
  }
  EXPECT_NE(instance, 0u);
  std::sort(ids.begin(), ids.end());
  uint64_t any_bits = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_NE(ids[k], 0u);
    any_bits |= ids[k];
    if (k > 0) {
      EXPECT_NE(ids[k], ids[k - 1]) << "a listen id repeated";
      EXPECT_NE(ids[k] - ids[k - 1], 1u) << "consecutive listen ids";
    }
  }
  // 32 draws of 64 random bits set every bit somewhere (all but certainly: a given bit
  // stays clear with probability 2^-32); sequential ids from 1 would set only the low 6.
  EXPECT_EQ(any_bits, ~uint64_t{0});
  for (void* l : listens) EXPECT_EQ(net_->closeListen(l), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTest, OpensBeyondTheBoundAndForUnknownIdsAreRefusedAndCounted) {
  void* ctx = Init();
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  // kMaxPending + 4 comms open to the listen comm before any accept: the last 4 are
  // refused (their isends fail once the REJECT is back).
  std::vector<void*> sends;
  for (int i = 0; i < kMaxPending + 4; ++i) {
    void* s = ConnectUntilComm(net_, ctx, handle);
    ASSERT_NE(s, nullptr) << i;
    sends.push_back(s);
  }
  for (int i = kMaxPending; i < kMaxPending + 4; ++i) {
    EXPECT_EQ(WaitRefused(net_, sends[i]), ncclRemoteError) << i;
  }
  EXPECT_TRUE(WarnedAbout("the listen comm has too many OPENs waiting for accept (16 wait"));
  EXPECT_TRUE(WarnedAbout("4 OPENs refused since init (over the pending bound 4)"));
  EXPECT_TRUE(
      WarnedAbout("isend: the receiver refused or ended this comm: the listen comm "
                  "has too many OPENs waiting for accept"));
  // OPENs for listen ids that do not exist keep no state: refused and counted.
  absl::StatusOr<PluginHandle> real = DecodeHandle(handle);
  ASSERT_TRUE(real.ok());
  for (int k = 0; k < 5; ++k) {
    const std::vector<char> guess =
        WithListenId(handle, real->listen_id ^ (uint64_t{1} << (k * 13)));
    void* s = ConnectUntilComm(net_, ctx, guess.data());
    ASSERT_NE(s, nullptr) << k;
    EXPECT_EQ(WaitRefused(net_, s), ncclRemoteError) << k;
    EXPECT_EQ(net_->closeSend(s), ncclSuccess);
  }
  EXPECT_TRUE(
      WarnedAbout("9 OPENs refused since init (no such listen comm 5, over the pending bound 4)"));
  EXPECT_TRUE(
      WarnedAbout("isend: the receiver refused or ended this comm: the listen comm "
                  "does not exist"));
  // The first kMaxPending wait for accept, in the order they opened; no more.
  std::vector<void*> recvs;
  for (int i = 0; i < kMaxPending; ++i) {
    void* r = nullptr;
    ASSERT_EQ(net_->accept(listen, &r, nullptr), ncclSuccess);
    ASSERT_NE(r, nullptr) << i;
    recvs.push_back(r);
  }
  void* none = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(net_->accept(listen, &none, nullptr), ncclSuccess);
  EXPECT_EQ(none, nullptr);
  for (int i : {0, kMaxPending - 1}) {
    std::vector<uint8_t> out = Pattern(3000, i), in(3000);
    void* r = Recv(recvs[i], in.data(), in.size(), 0);
    void* s = Send(sends[i], out.data(), out.size(), 0);
    int size = 0;
    EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
    ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess) << i;
    EXPECT_EQ(size, 3000);
    EXPECT_EQ(in, out) << i;
  }
  for (void* s : sends) EXPECT_EQ(net_->closeSend(s), ncclSuccess);
  for (void* r : recvs) EXPECT_EQ(net_->closeRecv(r), ncclSuccess);
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// A comm whose sender believes it has more credit than the receiver granted (its handle
// was rewritten, as on a bootstrap network someone controls): the receiver ends that comm
// once the sender goes beyond the grant; the sender's isends then fail; another comm on
// the same connection goes on.
TEST_F(PluginTest, ASenderBeyondItsCreditEndsTheCommWithAnError) {
  setenv("NCCL_LONGHAUL_CREDIT", "64KiB", 1);
  void* ctx = Init();
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  Comms c;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &c.listen), ncclSuccess);
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->credit, 64u << 10);
  h->credit = 64u << 20;
  ASSERT_TRUE(EncodeHandle(*h, handle).ok());
  c.send = ConnectUntilComm(net_, ctx, handle);
  ASSERT_NE(c.send, nullptr);
  ASSERT_EQ(net_->accept(c.listen, &c.recv, nullptr), ncclSuccess);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (c.recv == nullptr && Clock::now() < deadline) {
    ASSERT_EQ(net_->accept(c.listen, &c.recv, nullptr), ncclSuccess);
  }
  ASSERT_NE(c.recv, nullptr);
  Comms other;
  Connect(ctx, &other);  // the same connection, the credit as granted
  // Three messages of 30000 bytes and no receive: the second waits within the 64 KiB
  // granted (2 x (30000 + 64) bytes), the third would take the waiting bytes past it.
  std::vector<uint8_t> big = Pattern(30000, 3);
  for (int i = 0; i < 3; ++i) {
    void* s = Send(c.send, big.data(), big.size(), 0);
    ASSERT_EQ(WaitDone(net_, s, nullptr), ncclSuccess) << i;
  }
  EXPECT_EQ(WaitRefused(net_, c.send), ncclRemoteError);
  EXPECT_TRUE(
      WarnedAbout("isend: the receiver refused or ended this comm: the sender "
                  "exceeded the receive credit it was granted"));
  EXPECT_TRUE(WarnedAbout("ended: the sender exceeded its receive credit ("));
  EXPECT_TRUE(
      WarnedAbout("(60128 bytes waiting for irecv + a message of 30000 bytes + 64 > "
                  "the 65536 bytes granted)"));
  EXPECT_TRUE(WarnedAbout("1 comms ended for exceeding their credit since init"));
  // The receiver's comm is ended: a receive fails at once, naming the cause.
  std::vector<uint8_t> in(30000);
  void* d[1] = {in.data()};
  size_t sz[1] = {in.size()};
  int tg[1] = {0};
  void* req = nullptr;
  EXPECT_EQ(net_->irecv(c.recv, 1, d, sz, tg, nullptr, nullptr, &req), ncclRemoteError);
  EXPECT_EQ(req, nullptr);
  EXPECT_THAT(LastWarning(), HasSubstr("irecv: comm "));
  EXPECT_THAT(LastWarning(), HasSubstr("exceeded its receive credit"));
  // The other comm on the same connection is untouched.
  std::vector<uint8_t> out = Pattern(5000, 9), got(5000);
  void* r = Recv(other.recv, got.data(), got.size(), 0);
  void* s = Send(other.send, out.data(), out.size(), 0);
  int size = 0;
  EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
  ASSERT_EQ(WaitDone(net_, r, &size), ncclSuccess);
  EXPECT_EQ(size, 5000);
  EXPECT_EQ(got, out);
  Close(ctx, &other);
  CloseAndFinalize(ctx, &c);
}

// ---- a third rank ----

// Three ranks with their own keys (KeyedPluginTest writes them).
class BindingTest : public KeyedPluginTest {};

// What the test asks a rank process to do (one SOCK_SEQPACKET message each way).
struct Command {
  char op = 0;       // 'O' open and expect a refusal, 'S' open and send, 'Q' quit
  uint8_t comm = 0;  // 0: the job's communicator (comm id 9), 1: another one (77)
  char handle[kHandleBytes] = {};
};
struct Answer {
  char text[1024] = {};
};

// A rank in its own process with its own key, driven by Commands over `fd`:
//   'O': connect with the handle and send one-byte messages until the listener refuses
//        the comm; answers the warning that says why ("not refused" if it never does);
//   'S': connect and send 70000 bytes of Pattern(seed); answers "sent";
//   'Q': closes everything, finalizes and answers "bye".
// Returns 0 after 'Q', else a code naming the failed step.
int RankAgent(const ncclNet_v12_t* net, int fd, int seed) {
  void* ctx[2] = {nullptr, nullptr};
  ncclNetCommConfig_v12_t config{-1};
  if (net->init(&ctx[0], 9, &config, TestLogger, nullptr) != ncclSuccess) return 10;
  if (net->init(&ctx[1], 77, &config, TestLogger, nullptr) != ncclSuccess) return 11;
  std::vector<void*> kept;
  const std::vector<uint8_t> data = Pattern(70000, seed);
  for (int round = 0; round < 64; ++round) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 120000) != 1) return 12;
    Command cmd;
    if (read(fd, &cmd, sizeof(cmd)) != sizeof(cmd)) return 13;
    Answer a;
    std::string text;
    if (cmd.op == 'Q') {
      for (void* s : kept) net->closeSend(s);
      net->finalize(ctx[1]);
      text = net->finalize(ctx[0]) == ncclSuccess ? "bye" : "finalize failed";
    } else {
      void* send = ConnectUntilComm(net, ctx[cmd.comm & 1], cmd.handle);
      if (send == nullptr) {
        text = "connect failed: " + LastWarning();
      } else if (cmd.op == 'O') {
        text = WaitRefused(net, send) == ncclRemoteError ? LastWarning() : "not refused";
        net->closeSend(send);
      } else {
        void* req = nullptr;
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (req == nullptr && Clock::now() < deadline) {
          if (net->isend(send, const_cast<uint8_t*>(data.data()), data.size(), 2, nullptr, nullptr,
                         &req) != ncclSuccess) {
            break;
          }
        }
        text = req != nullptr && WaitDone(net, req, nullptr) == ncclSuccess
                   ? "sent"
                   : "send failed: " + LastWarning();
        kept.push_back(send);
      }
    }
    std::strncpy(a.text, text.c_str(), sizeof(a.text) - 1);
    if (write(fd, &a, sizeof(a)) != sizeof(a)) return 14;
    if (cmd.op == 'Q') return 0;
  }
  return 15;
}

// Sends `op` to the rank on `fd` and returns its answer ("no answer" after 60 s).
std::string Ask(int fd, char op, int comm, const char* handle) {
  Command cmd;
  cmd.op = op;
  cmd.comm = static_cast<uint8_t>(comm);
  if (handle != nullptr) std::memcpy(cmd.handle, handle, kHandleBytes);
  if (write(fd, &cmd, sizeof(cmd)) != sizeof(cmd)) return "no command";
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 60000) != 1) return "no answer";
  Answer a;
  if (read(fd, &a, sizeof(a)) != sizeof(a)) return "no answer";
  return a.text;
}

// Forks a RankAgent with key DIR/NAME.key; returns its pid and the test's end of its
// socket.
std::pair<pid_t, int> StartRank(const ncclNet_v12_t* net, const std::string& key, int seed) {
  int fd = -1;
  const pid_t pid = ForkChild(
      [&](int child_fd) {
        setenv("NCCL_LONGHAUL_KEY", key.c_str(), 1);
        return RankAgent(net, child_fd, seed);
      },
      &fd);
  return {pid, fd};
}

// The exit status of `pid` (killed after 30 s).
int WaitRank(pid_t pid) {
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  pid_t w = 0;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    pollfd none{-1, 0, 0};
    poll(&none, 0, 10);
  }
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Accepts on `listen` until a comm comes (20 s); receives one message of up to 70000
// bytes on it and returns the bytes (empty on failure). The comm is closed.
std::vector<uint8_t> AcceptAndReceive(const ncclNet_v12_t* net, void* listen) {
  void* recv = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (recv == nullptr && Clock::now() < deadline) {
    if (net->accept(listen, &recv, nullptr) != ncclSuccess) return {};
  }
  if (recv == nullptr) return {};
  std::vector<uint8_t> in(70000);
  void* d[1] = {in.data()};
  size_t s[1] = {in.size()};
  int t[1] = {2};
  void* req = nullptr;
  int size = 0;
  if (net->irecv(recv, 1, d, s, t, nullptr, nullptr, &req) != ncclSuccess ||
      WaitDone(net, req, &size) != ncclSuccess) {
    in.clear();
  }
  in.resize(std::min<size_t>(in.size(), size));
  net->closeRecv(recv);
  return in;
}

bool NothingToAccept(const ncclNet_v12_t* net, void* listen) {
  void* recv = nullptr;
  return net->accept(listen, &recv, nullptr) == ncclSuccess && recv == nullptr;
}

// The listener (this process, key r0) and two other ranks in their own processes: r1,
// for which the listen comm is made, and r2, an intruder whose key the listener allows
// (another rank of the job, or someone holding its key).
TEST_F(BindingTest, AThirdRankCannotOpenAnotherRanksListenComm) {
  const crypto::Key32 k0 = NewKey("r0"), k1 = NewKey("r1"), k2 = NewKey("r2");
  std::string allowed;
  for (const crypto::Key32& k : {k0, k1, k2}) absl::StrAppend(&allowed, crypto::ToHex(k), "\n");
  std::ofstream(Path("ranks.pub")) << allowed;
  setenv("NCCL_LONGHAUL_PEER_KEY", Path("ranks.pub").c_str(), 1);
  setenv("NCCL_LONGHAUL_CONNECT_TIMEOUT", "5s", 1);
  const auto [rank_pid, rank_fd] = StartRank(net_, Path("r1.key"), 1);
  const auto [intruder_pid, intruder_fd] = StartRank(net_, Path("r2.key"), 2);
  ASSERT_GT(rank_pid, 0);
  ASSERT_GT(intruder_pid, 0);
  setenv("NCCL_LONGHAUL_KEY", Path("r0.key").c_str(), 1);
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{-1};
  ASSERT_EQ(net_->init(&ctx, 9, &config, TestLogger, nullptr), ncclSuccess);
  char handle[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle, &listen), ncclSuccess);
  absl::StatusOr<PluginHandle> h = DecodeHandle(handle);
  ASSERT_TRUE(h.ok());
  const uint64_t id = h->listen_id;

  // 1. Guessed listen ids (the neighbours a sequential id would have, and others): refused.
  for (uint64_t guess :
       {id + 1, id - 1, id ^ (uint64_t{1} << 63), id ^ uint64_t{0x00ff00ff00ff00ff}, ~id}) {
    const std::vector<char> forged = WithListenId(handle, guess);
    EXPECT_THAT(Ask(intruder_fd, 'O', 0, forged.data()),
                HasSubstr("the listen comm does not exist"));
  }
  // 2. The right id from another communicator: refused.
  EXPECT_THAT(Ask(intruder_fd, 'O', 1, handle),
              HasSubstr("the listen comm belongs to another NCCL communicator"));
  EXPECT_TRUE(NothingToAccept(net_, listen));
  EXPECT_TRUE(
      WarnedAbout("6 OPENs refused since init (no such listen comm 5, other communicator 1)"));

  // 3. The rank the handle was made for opens it; the listener accepts it (waiting for its
  // OPEN) and gets its data.
  EXPECT_EQ(Ask(rank_fd, 'S', 0, handle), "sent");
  EXPECT_EQ(AcceptAndReceive(net_, listen), Pattern(70000, 1));

  // 4. The intruder with the real handle and the job's comm id (what reading the bootstrap
  // gives) comes too late: the listen comm is bound to the rank that opened it first.
  EXPECT_THAT(Ask(intruder_fd, 'O', 0, handle),
              HasSubstr("the listen comm is bound to another peer"));
  EXPECT_TRUE(NothingToAccept(net_, listen));
  EXPECT_EQ(net_->closeListen(listen), ncclSuccess);
  EXPECT_THAT(Ask(intruder_fd, 'O', 0, handle), HasSubstr("the listen comm does not exist"));

  // 5. The race such an intruder can win (docs/nccl.md): its OPEN reaches a fresh listen
  // comm first (the accept, which waits for it, says when), so the listener's accept gives
  // the intruder's comm; the rank the listen comm was made for is then refused, loudly.
  char handle2[LH_NCCL_NET_HANDLE_MAXSIZE];
  void* listen2 = nullptr;
  ASSERT_EQ(net_->listen(ctx, 0, handle2, &listen2), ncclSuccess);
  EXPECT_EQ(Ask(intruder_fd, 'S', 0, handle2), "sent");
  EXPECT_EQ(AcceptAndReceive(net_, listen2), Pattern(70000, 2));
  EXPECT_THAT(Ask(rank_fd, 'O', 0, handle2), HasSubstr("the listen comm is bound to another peer"));
  EXPECT_EQ(net_->closeListen(listen2), ncclSuccess);
  EXPECT_TRUE(
      WarnedAbout("OPENs refused since init (no such listen comm 6, other communicator 1, "
                  "bound to another peer 2)"));

  EXPECT_EQ(Ask(rank_fd, 'Q', 0, nullptr), "bye");
  EXPECT_EQ(Ask(intruder_fd, 'Q', 0, nullptr), "bye");
  close(rank_fd);
  close(intruder_fd);
  EXPECT_EQ(WaitRank(rank_pid), 0);
  EXPECT_EQ(WaitRank(intruder_pid), 0);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
