// uc_probe: the UC datapath's verbs objects on a real device, one end per guest, run by
// rdma_test.py (docs/rdma.md section 7). The server creates a UC queue pair and a lane's
// ring (uc_queue_pair.h) and binds its type-2 memory windows for lap 0; the client writes
// LAPS laps of chunks with immediate where uc_lane.h's sender places them (the last chunk
// of every lap shorter, to check the completion's byte count); after each lap the server
// checks every chunk's bytes, lets UcLaneReceiver retire the windows and rebinds them for
// the next lap. Then the client replays a chunk of lap 0 with its old key into a slot that
// now holds a processed chunk of the last lap, followed by a fresh chunk on the same queue
// pair: the fresh one must arrive and the replay must have changed nothing (the receiving
// NIC refused the old key). A small TCP exchange between the ends carries the set-up and
// the lap boundaries. Exit status 0 when everything held, 1 with the reason otherwise,
// 2 for bad arguments. Every wait is bounded.
//
//   uc_probe server BIND_IP PORT LAPS
//   uc_probe client SERVER_IP PORT LAPS BIND_IP
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/drivers/verbs/ibverbs.h"
#include "transport/drivers/verbs/uc_lane.h"
#include "transport/drivers/verbs/uc_queue_pair.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {
namespace {

constexpr UcRingGeometry kGeometry{.slots = 64, .windows = 4, .slot_bytes = 65536};
constexpr auto kWait = std::chrono::seconds(20);

uint8_t Byte(uint64_t chunk, uint32_t offset) {
  return static_cast<uint8_t>(chunk * 131 + offset * 7 + (offset >> 12) + 5);
}

uint32_t ChunkLength(uint64_t chunk) {
  const uint32_t slot = static_cast<uint32_t>(chunk % kGeometry.slots);
  return slot == kGeometry.slots - 1 ? 1000 + static_cast<uint32_t>(chunk / kGeometry.slots)
                                     : kGeometry.slot_bytes;
}

struct Hello {
  uint8_t gid[16];
  uint32_t qpn;
  uint32_t psn;
};
struct Setup {
  uint8_t gid[16];
  uint32_t qpn;
  uint32_t psn;
  uint64_t ring;
  uint32_t keys[4];
};

absl::Status SendAll(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k <= 0) return absl::UnavailableError(absl::StrCat("control send: ", strerror(errno)));
    b += k;
    n -= static_cast<size_t>(k);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = recv(fd, b, n, 0);
    if (k <= 0) return absl::UnavailableError("control connection closed");
    b += k;
    n -= static_cast<size_t>(k);
  }
  return absl::OkStatus();
}

sockaddr_in Address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// Polls `cq` until `want` completions arrived (each passed to `fn`) or the wait ends.
template <typename Fn>
absl::Status PollFor(ibv_cq* cq, uint32_t want, const char* what, Fn fn) {
  const auto end = std::chrono::steady_clock::now() + kWait;
  uint32_t got = 0;
  ibv_wc wc[32];
  while (got < want) {
    const int n = ibv_poll_cq(cq, 32, wc);
    if (n < 0) return absl::InternalError("ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        return absl::InternalError(absl::StrCat(what, ": completion status ",
                                                Ibverbs().wc_status_str(wc[i].status)));
      }
      LH_RETURN_IF_ERROR(fn(wc[i]));
      ++got;
    }
    if (n == 0) {
      if (std::chrono::steady_clock::now() > end) {
        return absl::DeadlineExceededError(
            absl::StrCat(what, ": ", got, " of ", want, " completions within 20 s"));
      }
      std::this_thread::yield();
    }
  }
  return absl::OkStatus();
}

struct Verbs {
  std::unique_ptr<VerbsDevice> dev;
  std::unique_ptr<LanePd> pd;
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  std::unique_ptr<UcQueuePair> qp;
  ~Verbs() {
    qp.reset();
    if (send_cq) Ibverbs().destroy_cq(send_cq);
    if (recv_cq) Ibverbs().destroy_cq(recv_cq);
  }
};

absl::Status Open(const std::string& ip, Verbs* v) {
  LH_RETURN_IF_ERROR(LoadIbverbs().status());
  in_addr a{};
  inet_pton(AF_INET, ip.c_str(), &a);
  absl::StatusOr<std::unique_ptr<VerbsDevice>> dev = VerbsDevice::Open(VerbsOptions{}, a.s_addr);
  if (!dev.ok()) return dev.status();
  v->dev = std::move(*dev);
  absl::StatusOr<std::unique_ptr<LanePd>> pd = LanePd::Create(*v->dev);
  if (!pd.ok()) return pd.status();
  v->pd = std::move(*pd);
  v->send_cq = Ibverbs().create_cq(v->dev->context(), 1024, nullptr, nullptr, 0);
  v->recv_cq = Ibverbs().create_cq(v->dev->context(), 1024, nullptr, nullptr, 0);
  if (!v->send_cq || !v->recv_cq) return VerbsError(errno, "ibv_create_cq");
  absl::StatusOr<std::unique_ptr<UcQueuePair>> qp =
      UcQueuePair::Create(*v->dev, v->pd->pd(), v->send_cq, v->recv_cq, 256, 2 * kGeometry.slots);
  if (!qp.ok()) return qp.status();
  v->qp = std::move(*qp);
  return absl::OkStatus();
}

absl::Status Server(const std::string& ip, uint16_t port, uint32_t laps) {
  Verbs v;
  LH_RETURN_IF_ERROR(Open(ip, &v));
  absl::StatusOr<std::unique_ptr<UcRing>> ring = UcRing::Create(*v.dev, v.pd->pd(), kGeometry);
  if (!ring.ok()) return ring.status();
  LH_RETURN_IF_ERROR(v.qp->PostReceives(2 * kGeometry.slots, 0));
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Address(ip, port);
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(ls, 1) != 0) {
    return absl::UnavailableError(absl::StrCat("control listen: ", strerror(errno)));
  }
  std::printf("uc_probe: listening, %s\n", v.dev->Describe().c_str());
  std::fflush(stdout);
  const int fd = accept(ls, nullptr, nullptr);
  close(ls);
  if (fd < 0) return absl::UnavailableError("control accept");
  Hello h{};
  LH_RETURN_IF_ERROR(RecvAll(fd, &h, sizeof(h)));
  UcPeer peer;
  std::memcpy(peer.gid.data(), h.gid, 16);
  peer.qpn = h.qpn;
  peer.psn = h.psn;
  LH_RETURN_IF_ERROR(v.qp->Connect(*v.dev, peer));
  // Lap 0's bindings, on this queue pair (only it may write through them).
  for (uint32_t w = 0; w < kGeometry.windows; ++w) {
    LH_RETURN_IF_ERROR(v.qp->PostBind(**ring, w, 0, 1));
  }
  LH_RETURN_IF_ERROR(PollFor(v.send_cq, kGeometry.windows, "binding lap 0", [](const ibv_wc&) {
    return absl::OkStatus();
  }));
  Setup s{};
  std::memcpy(s.gid, v.dev->gid().data(), 16);
  s.qpn = v.qp->qpn();
  s.psn = v.qp->send_psn();
  s.ring = (*ring)->address();
  for (uint32_t w = 0; w < kGeometry.windows; ++w) s.keys[w] = (*ring)->lap0_key(w);
  LH_RETURN_IF_ERROR(SendAll(fd, &s, sizeof(s)));

  UcLaneReceiver rx(kGeometry);
  uint64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  auto check = [&](const ibv_wc& wc) -> absl::Status {
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
      return absl::InternalError(absl::StrCat("unexpected completion opcode ", wc.opcode));
    }
    const UcLaneReceiver::Completion c = rx.OnCompletion(be32toh(wc.imm_data));
    if (!c.deliver) {
      return absl::InternalError(absl::StrCat("completion for slot ", c.slot, " not a chunk"));
    }
    if (wc.byte_len != ChunkLength(c.chunk)) {
      return absl::InternalError(absl::StrCat("chunk ", c.chunk, ": byte_len ", wc.byte_len,
                                              ", written ", ChunkLength(c.chunk)));
    }
    const uint8_t* p = (*ring)->base() + c.offset;
    for (uint32_t i = 0; i < wc.byte_len; ++i) {
      if (p[i] != Byte(c.chunk, i)) {
        return absl::DataLossError(absl::StrCat("chunk ", c.chunk, " byte ", i, " differs"));
      }
    }
    bytes += wc.byte_len;
    return absl::OkStatus();
  };
  uint64_t rebinds = 0;
  for (uint32_t lap = 0; lap < laps; ++lap) {
    LH_RETURN_IF_ERROR(PollFor(v.recv_cq, kGeometry.slots, "lap's chunks", check));
    LH_RETURN_IF_ERROR(v.qp->PostReceives(kGeometry.slots, 0));
    const std::vector<UcLaneReceiver::Rebind> rb = rx.TakeRebinds();
    if (rb.size() != kGeometry.windows) {
      return absl::InternalError(absl::StrCat("lap ", lap, ": ", rb.size(), " windows retired"));
    }
    for (const UcLaneReceiver::Rebind& r : rb) {
      LH_RETURN_IF_ERROR(v.qp->PostBind(**ring, r.window, r.lap, 2));
    }
    LH_RETURN_IF_ERROR(PollFor(v.send_cq, static_cast<uint32_t>(rb.size()), "rebinding",
                               [](const ibv_wc&) { return absl::OkStatus(); }));
    for (const UcLaneReceiver::Rebind& r : rb) rx.Rebound(r);
    rebinds += rb.size();
    uint8_t ok = 1;
    LH_RETURN_IF_ERROR(SendAll(fd, &ok, 1));
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The replay: slot 1 now holds the last lap's chunk, processed; a write of lap 0 with
  // its old key comes first, a fresh chunk (lap `laps`, slot 0) after it on the same
  // queue pair.
  const uint64_t last = uint64_t{laps - 1} * kGeometry.slots + 1;
  LH_RETURN_IF_ERROR(PollFor(v.recv_cq, 1, "the fresh chunk after the replay", check));
  const uint8_t* slot1 = (*ring)->base() + kGeometry.slot_bytes;
  for (uint32_t i = 0; i < ChunkLength(last); ++i) {
    if (slot1[i] != Byte(last, i)) {
      return absl::DataLossError(absl::StrCat("the replayed lap-0 write changed slot 1 (chunk ",
                                              last, ") at byte ", i));
    }
  }
  ibv_wc extra;
  if (ibv_poll_cq(v.recv_cq, 1, &extra) != 0) {
    return absl::InternalError("the replayed write raised a completion");
  }
  std::printf(
      "uc_probe: server ok: %llu chunks over %u laps intact, byte_len exact, %llu rebinds, "
      "stale completions %llu; the replayed lap-0 write was refused and slot 1 unchanged; "
      "%.1f MB/s\n",
      static_cast<unsigned long long>(rx.stats().delivered), laps,
      static_cast<unsigned long long>(rebinds),
      static_cast<unsigned long long>(rx.stats().stale_completions), bytes / secs / 1e6);
  close(fd);
  return absl::OkStatus();
}

absl::Status Client(const std::string& server, uint16_t port, uint32_t laps,
                    const std::string& ip) {
  Verbs v;
  LH_RETURN_IF_ERROR(Open(ip, &v));
  const size_t arena_bytes = kGeometry.ring_bytes();
  std::unique_ptr<uint8_t[]> arena(new uint8_t[arena_bytes]);
  ibv_mr* mr = Ibverbs().reg_mr(v.pd->pd(), arena.get(), arena_bytes, IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) return VerbsError(errno, "ibv_reg_mr (send arena)");
  std::unique_ptr<ibv_mr, void (*)(ibv_mr*)> mr_guard(mr, [](ibv_mr* m) { Ibverbs().dereg_mr(m); });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Address(server, port);
  const auto end = std::chrono::steady_clock::now() + kWait;
  while (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (std::chrono::steady_clock::now() > end) {
      return absl::UnavailableError(absl::StrCat("control connect to ", server, ": ", strerror(errno)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a retry interval
  }
  Hello h{};
  std::memcpy(h.gid, v.dev->gid().data(), 16);
  h.qpn = v.qp->qpn();
  h.psn = v.qp->send_psn();
  LH_RETURN_IF_ERROR(SendAll(fd, &h, sizeof(h)));
  Setup s{};
  LH_RETURN_IF_ERROR(RecvAll(fd, &s, sizeof(s)));
  UcPeer peer;
  std::memcpy(peer.gid.data(), s.gid, 16);
  peer.qpn = s.qpn;
  peer.psn = s.psn;
  LH_RETURN_IF_ERROR(v.qp->Connect(*v.dev, peer));
  UcLaneSender tx(kGeometry, std::vector<uint32_t>(s.keys, s.keys + kGeometry.windows));
  auto write = [&](const UcLaneSender::Write& w, uint32_t len, bool signaled) {
    return v.qp->PostWrite(arena.get() + w.offset, len, mr->lkey, s.ring + w.offset, w.rkey,
                           w.immediate, w.chunk, signaled);
  };
  auto fill = [&](const UcLaneSender::Write& w, uint32_t len) {
    uint8_t* p = arena.get() + w.offset;
    for (uint32_t i = 0; i < len; ++i) p[i] = Byte(w.chunk, i);
  };
  auto sent = [](const ibv_wc&) { return absl::OkStatus(); };
  for (uint32_t lap = 0; lap < laps; ++lap) {
    uint32_t signaled = 0;
    for (uint32_t i = 0; i < kGeometry.slots; ++i) {
      const UcLaneSender::Write w = tx.Next();
      fill(w, ChunkLength(w.chunk));
      const bool sig = i % 16 == 15 || i + 1 == kGeometry.slots;
      signaled += sig;
      LH_RETURN_IF_ERROR(write(w, ChunkLength(w.chunk), sig));
    }
    LH_RETURN_IF_ERROR(PollFor(v.send_cq, signaled, "sending a lap", sent));
    uint8_t ok = 0;
    LH_RETURN_IF_ERROR(RecvAll(fd, &ok, 1));  // the server rebound every window
  }
  // The replay of chunk 1 (lap 0, its old key), then the next fresh chunk.
  UcLaneSender old(kGeometry, std::vector<uint32_t>(s.keys, s.keys + kGeometry.windows));
  old.Next();
  const UcLaneSender::Write stale = old.Next();
  const UcLaneSender::Write fresh = tx.Next();
  std::memset(arena.get() + 2 * kGeometry.slot_bytes, 0xEE, kGeometry.slot_bytes);
  LH_RETURN_IF_ERROR(v.qp->PostWrite(arena.get() + 2 * kGeometry.slot_bytes, kGeometry.slot_bytes,
                                     mr->lkey, s.ring + stale.offset, stale.rkey, stale.immediate,
                                     stale.chunk, false));
  fill(fresh, ChunkLength(fresh.chunk));
  LH_RETURN_IF_ERROR(write(fresh, ChunkLength(fresh.chunk), true));
  LH_RETURN_IF_ERROR(PollFor(v.send_cq, 1, "sending the replay", sent));
  std::printf("uc_probe: client ok: %llu chunks and one replay sent\n",
              static_cast<unsigned long long>(tx.chunks()));
  close(fd);
  return absl::OkStatus();
}

}  // namespace
}  // namespace longhaul::verbs

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  absl::Status st;
  if (role == "server" && argc == 5) {
    st = longhaul::verbs::Server(argv[2], static_cast<uint16_t>(std::atoi(argv[3])),
                                 static_cast<uint32_t>(std::atoi(argv[4])));
  } else if (role == "client" && argc == 6) {
    st = longhaul::verbs::Client(argv[2], static_cast<uint16_t>(std::atoi(argv[3])),
                                 static_cast<uint32_t>(std::atoi(argv[4])), argv[5]);
  } else {
    std::fprintf(stderr,
                 "usage: uc_probe server BIND_IP PORT LAPS | uc_probe client SERVER_IP PORT LAPS "
                 "BIND_IP\n");
    return 2;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "uc_probe %s: %s\n", role.c_str(), st.ToString().c_str());
    return 1;
  }
  return 0;
}
