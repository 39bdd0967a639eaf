// uc_probe: one UC lane (uc_lane_io.h) streaming chunks between the two guests, one end
// per guest, run by rdma_test.py under the netem each case sets (docs/rdma.md section 7).
// The client writes CHUNKS chunks of up to 64 KiB, paced at RATE_MBIT, where the lane
// places them (a ring of 64 slots in 8 windows at the server) as the server's window grants
// allow, the last chunk of every lap shorter to check completion byte counts; with
// REPLAY_EVERY > 0 it also replays,
// every REPLAY_EVERY chunks, the chunk one lap and one slot back (the slot the previous
// chunk has just reused) with its old key, immediate and bytes: a late duplicate. The
// server checks every chunk it is handed, byte by byte, that none comes twice and that
// it delivered at least MIN_PERCENT % of what was sent, rebinding windows as the lane
// decides, and going idle after 200 ms (over 3 round trips) without a chunk. Loss (netem's, or a replay
// refused) only costs chunks. A small TCP exchange carries the set-up, the grants and the
// final count. Exit status 0 when everything held, 1 with the
// reason otherwise, 2 for bad arguments. Every wait is bounded.
//
//   uc_probe server BIND_IP PORT CHUNK_BYTES MIN_PERCENT
//   uc_probe client SERVER_IP PORT CHUNK_BYTES BIND_IP CHUNKS RATE_MBIT REPLAY_EVERY
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
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
#include "transport/drivers/verbs/uc_lane_io.h"
#include "transport/drivers/verbs/verbs_device.h"

namespace longhaul::verbs {

// The ring: 64 slots in 8 windows, each slot one chunk of CHUNK_BYTES (set from the
// command line: 65536 is 16 packets at MTU 4096, 4096 a single-packet write).
UcRingGeometry kGeometry{.slots = 64, .windows = 8, .slot_bytes = 65536};

namespace {
constexpr uint32_t kSendBuffers = 32;
constexpr auto kWait = std::chrono::seconds(20);
constexpr auto kRunLimit = std::chrono::seconds(150);

uint8_t Byte(uint64_t chunk, uint32_t offset) {
  return static_cast<uint8_t>(chunk * 131 + offset * 7 + (offset >> 12) + 5);
}

uint32_t ChunkLength(uint64_t chunk) {
  const uint32_t slot = static_cast<uint32_t>(chunk % kGeometry.slots);
  return slot == kGeometry.slots - 1
             ? 1000 + static_cast<uint32_t>(chunk / kGeometry.slots % (kGeometry.slot_bytes / 2))
             : kGeometry.slot_bytes;
}

void Fill(uint8_t* p, uint64_t chunk) {
  for (uint32_t i = 0; i < ChunkLength(chunk); ++i) p[i] = Byte(chunk, i);
}

struct Hello {
  uint8_t gid[16];
  uint32_t qpn;
  uint32_t psn;
};
struct Advert {
  uint8_t gid[16];
  uint32_t qpn;
  uint32_t psn;
  uint64_t ring;
  uint32_t keys[8];
};
struct Done {
  uint64_t chunks;
  uint64_t replays;
};
struct Grants {  // server -> client, whenever a window was rebound
  uint64_t laps[8];
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

struct Device {
  std::unique_ptr<VerbsDevice> dev;
  ibv_comp_channel* channel = nullptr;  // the receive CQ's events: the server sleeps on it
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  uint32_t unacked_events = 0;
  ~Device() {
    if (recv_cq && unacked_events) Ibverbs().ack_cq_events(recv_cq, unacked_events);
    if (send_cq) Ibverbs().destroy_cq(send_cq);
    if (recv_cq) Ibverbs().destroy_cq(recv_cq);
    if (channel) Ibverbs().destroy_comp_channel(channel);
  }
};

absl::Status Open(const std::string& ip, Device* d) {
  LH_RETURN_IF_ERROR(LoadIbverbs().status());
  in_addr a{};
  inet_pton(AF_INET, ip.c_str(), &a);
  LH_ASSIGN_OR_RETURN(d->dev, VerbsDevice::Open(VerbsOptions{}, a.s_addr));
  d->channel = Ibverbs().create_comp_channel(d->dev->context());
  if (!d->channel) return VerbsError(errno, "ibv_create_comp_channel");
  d->send_cq = Ibverbs().create_cq(d->dev->context(), 1024, nullptr, nullptr, 0);
  d->recv_cq = Ibverbs().create_cq(d->dev->context(), 1024, nullptr, d->channel, 0);
  if (!d->send_cq || !d->recv_cq) return VerbsError(errno, "ibv_create_cq");
  return absl::OkStatus();
}

// Sleeps until the receive CQ raises an event or `fd` has data, at most 10 ms (the
// server's loop also keeps time for its idle retirement). A completion that arrived
// between the caller's last poll and the arming raises no event: it waits for the 10 ms
// (the driver polls once more after arming; this probe accepts the delay).
void SleepForWork(Device& d, int fd) {
  if (ibv_req_notify_cq(d.recv_cq, 0) != 0) return;
  pollfd p[2] = {{d.channel->fd, POLLIN, 0}, {fd, POLLIN, 0}};
  if (poll(p, 2, 10) > 0 && (p[0].revents & POLLIN)) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (Ibverbs().get_cq_event(d.channel, &cq, &ctx) == 0 && ++d.unacked_events >= 64) {
      Ibverbs().ack_cq_events(d.recv_cq, d.unacked_events);
      d.unacked_events = 0;
    }
  }
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

absl::Status Server(const std::string& ip, uint16_t port, double min_percent) {
  Device d;
  LH_RETURN_IF_ERROR(Open(ip, &d));
  LH_ASSIGN_OR_RETURN(std::unique_ptr<UcReceiveLane> lane,
                      UcReceiveLane::Create(*d.dev, d.send_cq, d.recv_cq, kGeometry));
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Address(ip, port);
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(ls, 1) != 0) {
    return absl::UnavailableError(absl::StrCat("control listen: ", strerror(errno)));
  }
  std::printf("uc_probe: listening, %s\n", d.dev->Describe().c_str());
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
  LH_RETURN_IF_ERROR(lane->Connect(*d.dev, peer));
  LH_RETURN_IF_ERROR(PollFor(d.send_cq, kGeometry.windows, "binding lap 0",
                             [&](const ibv_wc& wc) {
                               lane->OnSendCompletion(wc);
                               return absl::OkStatus();
                             }));
  const UcAdvert ad = lane->advert(*d.dev);
  Advert out{};
  std::memcpy(out.gid, ad.gid.data(), 16);
  out.qpn = ad.qpn;
  out.psn = ad.psn;
  out.ring = ad.ring;
  for (uint32_t w = 0; w < kGeometry.windows; ++w) out.keys[w] = ad.keys[w];
  LH_RETURN_IF_ERROR(SendAll(fd, &out, sizeof(out)));

  std::vector<bool> seen;
  uint64_t delivered = 0, bytes = 0;
  Done done{};
  bool have_done = false;
  const auto start = std::chrono::steady_clock::now();
  auto last_completion = start;
  auto last_idle = start;
  uint64_t granted = lane->grant_version();
  ibv_wc wc[32];
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start > kRunLimit) return absl::DeadlineExceededError("the run took too long");
    if (!have_done && Readable(fd)) {
      LH_RETURN_IF_ERROR(RecvAll(fd, &done, sizeof(done)));
      have_done = true;
    }
    // Done once the client has finished and nothing arrived for half a second.
    if (have_done && now - last_completion > std::chrono::milliseconds(500)) break;
    const int n = ibv_poll_cq(d.recv_cq, 32, wc);
    if (n < 0) return absl::InternalError("ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      uint64_t chunk = 0;
      const std::optional<std::span<const uint8_t>> got = lane->OnReceive(wc[i], &chunk);
      if (!got) continue;
      if (got->size() != ChunkLength(chunk)) {
        return absl::DataLossError(absl::StrCat("chunk ", chunk, ": ", got->size(),
                                                " bytes, written ", ChunkLength(chunk)));
      }
      for (uint32_t b = 0; b < got->size(); ++b) {
        if ((*got)[b] != Byte(chunk, b)) {
          return absl::DataLossError(absl::StrCat("chunk ", chunk, " byte ", b, " differs"));
        }
      }
      if (chunk >= seen.size()) seen.resize(chunk + 1, false);
      if (seen[chunk]) return absl::DataLossError(absl::StrCat("chunk ", chunk, " handed twice"));
      seen[chunk] = true;
      ++delivered;
      bytes += got->size();
    }
    if (n > 0) {
      last_completion = now;
    } else if (now - last_completion > std::chrono::milliseconds(200) &&
               now - last_idle > std::chrono::milliseconds(200)) {
      lane->OnIdle();  // after the queue was polled empty
      last_idle = now;
    }
    LH_RETURN_IF_ERROR(lane->Maintain());
    if (lane->grant_version() != granted) {
      granted = lane->grant_version();
      Grants g{};
      const std::vector<uint64_t> laps = lane->Grants();
      for (uint32_t w = 0; w < kGeometry.windows; ++w) g.laps[w] = laps[w];
      LH_RETURN_IF_ERROR(SendAll(fd, &g, sizeof(g)));
    }
    const int m = ibv_poll_cq(d.send_cq, 32, wc);
    for (int i = 0; i < m; ++i) lane->OnSendCompletion(wc[i]);
    if (n == 0 && m == 0) SleepForWork(d, fd);
  }
  const UcReceiveLane::Stats st = lane->stats();
  const double secs =
      std::chrono::duration<double>(last_completion - start).count();
  std::printf(
      "uc_probe: server: %llu of %llu chunks delivered intact (%.2f %%), none twice; given up "
      "%llu, completions ignored %llu, rebinds %llu, bind errors %llu; %llu replays sent; "
      "%.1f Mbit/s\n",
      static_cast<unsigned long long>(delivered), static_cast<unsigned long long>(done.chunks),
      done.chunks ? 100.0 * delivered / done.chunks : 0.0,
      static_cast<unsigned long long>(st.lane.given_up),
      static_cast<unsigned long long>(st.lane.stale_completions),
      static_cast<unsigned long long>(st.lane.rebinds),
      static_cast<unsigned long long>(st.bind_errors),
      static_cast<unsigned long long>(done.replays), secs > 0 ? bytes * 8 / secs / 1e6 : 0.0);
  close(fd);
  if (st.bind_errors != 0) return absl::InternalError("a window failed to rebind");
  if (delivered > done.chunks) return absl::DataLossError("more chunks delivered than sent");
  if (100.0 * delivered < min_percent * done.chunks) {
    return absl::DataLossError(absl::StrCat("only ", delivered, " of ", done.chunks,
                                            " chunks delivered, below ", min_percent, " %"));
  }
  std::printf("uc_probe: server ok\n");
  return absl::OkStatus();
}

absl::Status Client(const std::string& server, uint16_t port, const std::string& ip,
                    uint64_t chunks, double rate_mbit, uint64_t replay_every) {
  Device d;
  LH_RETURN_IF_ERROR(Open(ip, &d));
  LH_ASSIGN_OR_RETURN(std::unique_ptr<UcSendLane> lane,
                      UcSendLane::Create(*d.dev, d.send_cq, d.recv_cq, kSendBuffers,
                                         kGeometry.slot_bytes));
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
  std::memcpy(h.gid, d.dev->gid().data(), 16);
  h.qpn = lane->qpn();
  h.psn = lane->psn();
  LH_RETURN_IF_ERROR(SendAll(fd, &h, sizeof(h)));
  Advert in{};
  LH_RETURN_IF_ERROR(RecvAll(fd, &in, sizeof(in)));
  UcAdvert ad;
  std::memcpy(ad.gid.data(), in.gid, 16);
  ad.qpn = in.qpn;
  ad.psn = in.psn;
  ad.ring = in.ring;
  ad.geometry = kGeometry;
  ad.keys.assign(in.keys, in.keys + kGeometry.windows);
  LH_RETURN_IF_ERROR(lane->Connect(*d.dev, ad));
  // The placements used, to replay one of them later.
  std::vector<UcLaneSender::Write> placed;
  std::vector<uint8_t> old(kGeometry.slot_bytes);
  // Grants arrive on the control connection, whole or in pieces.
  std::vector<uint8_t> pending;
  auto read_grants = [&]() {
    uint8_t buf[4096];
    while (true) {
      const ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (k <= 0) break;
      pending.insert(pending.end(), buf, buf + k);
    }
    while (pending.size() >= sizeof(Grants)) {
      Grants g;
      std::memcpy(&g, pending.data(), sizeof(g));
      pending.erase(pending.begin(), pending.begin() + sizeof(g));
      lane->Grant(std::vector<uint64_t>(g.laps, g.laps + kGeometry.windows));
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const double chunk_s = kGeometry.slot_bytes * 8.0 / (rate_mbit * 1e6);
  ibv_wc wc[32];
  for (uint64_t c = 0; c < chunks; ++c) {
    // Pacing: chunk c leaves no earlier than c chunk times after the start.
    std::this_thread::sleep_until(start + std::chrono::duration<double>(c * chunk_s));
    const auto give_up = std::chrono::steady_clock::now() + kWait;
    while (lane->Buffer() == nullptr) {
      const int n = ibv_poll_cq(d.send_cq, 32, wc);
      for (int i = 0; i < n; ++i) lane->OnSendCompletion(wc[i]);
      if (n == 0 && std::chrono::steady_clock::now() > give_up) {
        return absl::DeadlineExceededError("no send buffer came back within 20 s");
      }
    }
    // The chunk's number (and so its bytes) is known once a grant allows it.
    std::optional<uint64_t> number;
    while (!(number = lane->NextChunk())) {
      read_grants();
      if (std::chrono::steady_clock::now() > give_up) {
        return absl::DeadlineExceededError("no window grant came within 20 s");
      }
      std::this_thread::yield();
    }
    Fill(lane->Buffer(), *number);
    LH_ASSIGN_OR_RETURN(const UcLaneSender::Write w, lane->Post(ChunkLength(*number)));
    placed.push_back(w);
    read_grants();
    // A late duplicate: the chunk written one lap and one slot before this one.
    const size_t back = kGeometry.slots + 1;
    if (replay_every > 0 && c % replay_every == 0 && placed.size() > back &&
        !lane->replay_in_flight()) {
      const UcLaneSender::Write& old_w = placed[placed.size() - 1 - back];
      Fill(old.data(), old_w.chunk);
      LH_RETURN_IF_ERROR(lane->Replay(old_w, {old.data(), ChunkLength(old_w.chunk)}));
    }
    const int n = ibv_poll_cq(d.send_cq, 32, wc);
    for (int i = 0; i < n; ++i) lane->OnSendCompletion(wc[i]);
  }
  Done done{lane->stats().chunks, lane->stats().replays};
  LH_RETURN_IF_ERROR(SendAll(fd, &done, sizeof(done)));
  std::printf("uc_probe: client ok: %llu chunks and %llu replays sent, send errors %llu\n",
              static_cast<unsigned long long>(done.chunks),
              static_cast<unsigned long long>(done.replays),
              static_cast<unsigned long long>(lane->stats().send_errors));
  timeval tv{180, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c[4096];
  while (recv(fd, c, sizeof(c), 0) > 0) {
  }  // grants, until the server closes when it has counted (bounded: 180 s)
  close(fd);
  return absl::OkStatus();
}

}  // namespace
}  // namespace longhaul::verbs

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  absl::Status st;
  const uint32_t chunk_bytes = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : 0;
  if (chunk_bytes < 2048 || chunk_bytes > 65536) {
    std::fprintf(stderr, "uc_probe: CHUNK_BYTES must be 2048..65536\n");
    return 2;
  }
  longhaul::verbs::kGeometry.slot_bytes = chunk_bytes;
  if (role == "server" && argc == 6) {
    st = longhaul::verbs::Server(argv[2], static_cast<uint16_t>(std::atoi(argv[3])),
                                 std::atof(argv[5]));
  } else if (role == "client" && argc == 9) {
    st = longhaul::verbs::Client(argv[2], static_cast<uint16_t>(std::atoi(argv[3])), argv[5],
                                 std::strtoull(argv[6], nullptr, 10), std::atof(argv[7]),
                                 std::strtoull(argv[8], nullptr, 10));
  } else {
    std::fprintf(stderr,
                 "usage: uc_probe server BIND_IP PORT CHUNK_BYTES MIN_PERCENT\n"
                 "       uc_probe client SERVER_IP PORT CHUNK_BYTES BIND_IP CHUNKS RATE_MBIT "
                 "REPLAY_EVERY\n");
    return 2;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "uc_probe %s: %s\n", role.c_str(), st.ToString().c_str());
    return 1;
  }
  return 0;
}
