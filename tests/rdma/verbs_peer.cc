// verbs_peer: both ends of the rdma tier's message test, run one per guest by
// rdma_test.py (tests/rdma). Over the verbs datapath, the client opens CONNECTIONS
// connections at once and sends on each the messages of kSizes up to MAX_BYTES (0 B to
// 64 MiB), every byte a function of (message, offset); the server accepts CONNECTIONS
// connections, receives into transport-owned memory and checks every message's size and
// bytes. Exit status 0 when everything arrived intact (server) or was acknowledged
// (client), 1 otherwise, 2 for bad arguments. PSK names a pre-shared key file
// (longhaul-keygen --psk) both ends hold, or is "insecure" for plaintext.
//
// QP_TYPE (optional, "ud" by default) is VerbsOptions::qp_type; each end then prints its
// UC lanes' counters ("uc: N chunks sent, N received, N lanes failed").
//
//   verbs_peer server PORT CONNECTIONS MAX_BYTES PSK [QP_TYPE]
//   verbs_peer client HOST PORT CONNECTIONS MAX_BYTES PSK [QP_TYPE]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "transport/api/endpoint.h"
#include "transport/crypto/key_files.h"

namespace longhaul {
namespace {

constexpr uint64_t kSizes[] = {0, 1, 63, 4017, 4018, 4019, 65536, 1 << 20, 8 << 20, 64 << 20};
constexpr Duration kWait = Duration::Seconds(120);

uint8_t Byte(uint64_t message, uint64_t offset) {
  return static_cast<uint8_t>(message * 131 + offset * 7 + (offset >> 12) + 11);
}

std::vector<uint64_t> Sizes(uint64_t max_bytes) {
  std::vector<uint64_t> out;
  for (uint64_t s : kSizes) {
    if (s <= max_bytes) out.push_back(s);
  }
  return out;
}

TransportConfig Config() {
  TransportConfig c;
  c.rate = Bandwidth::Mbps(20);
  c.initial_rtt = Duration::Milliseconds(60);
  c.idle_timeout = Duration::Seconds(20);
  return c;
}

// The endpoint options over verbs with the packet protection `psk` names.
std::string g_qp_type = "ud";

absl::StatusOr<EndpointOptions> Options(const std::string& psk) {
  crypto::KeyChoice choice;
  if (psk == "insecure") {
    choice.insecure = true;
  } else {
    choice.psk_file = {psk, "PSK"};
  }
  absl::StatusOr<crypto::LoadedKeys> keys = crypto::LoadKeys(choice);
  if (!keys.ok()) return keys.status();
  EndpointOptions o;
  o.datapath = Datapath::kVerbs;
  o.security = keys->security;
  absl::StatusOr<QpType> qp = ParseQpType(g_qp_type);
  if (!qp.ok()) return qp.status();
  o.verbs.qp_type = *qp;
  return o;
}

absl::StatusOr<std::unique_ptr<Endpoint>> Create(const std::string& psk) {
  absl::StatusOr<EndpointOptions> o = Options(psk);
  if (!o.ok()) return o.status();
  return Endpoint::Create(*o);
}

int Server(uint16_t port, int connections, uint64_t max_bytes, const std::string& psk) {
  auto ep = Create(psk);
  if (!ep.ok()) {
    std::fprintf(stderr, "server: %s\n", std::string(ep.status().message()).c_str());
    return 1;
  }
  ListenOptions lo;
  lo.config = Config();
  auto p = (*ep)->Listen("0.0.0.0", port, lo);
  if (!p.ok()) {
    std::fprintf(stderr, "server: %s\n", std::string(p.status().message()).c_str());
    return 1;
  }
  std::printf("server: listening on %u\n", *p);
  std::fflush(stdout);
  const std::vector<uint64_t> sizes = Sizes(max_bytes);
  std::vector<std::thread> threads;
  std::vector<int> ok(connections, 0);
  for (int i = 0; i < connections; ++i) {
    auto c = (*ep)->Accept(kWait);
    if (!c.ok()) {
      std::fprintf(stderr, "server: accept: %s\n", std::string(c.status().message()).c_str());
      break;
    }
    threads.emplace_back([&, i, h = *c] {
      size_t got = 0;
      bool bad = false;
      Event e;
      while (got < sizes.size() && h->Wait(&e, kWait)) {
        if (e.type == Event::Type::kClosed) break;
        if (e.type != Event::Type::kReceiveComplete) continue;
        const uint64_t want = sizes[got];
        if (!e.status.ok() || e.size != want) {
          std::fprintf(stderr, "server: conn %d message %zu: %llu bytes, expected %llu\n", i, got,
                       static_cast<unsigned long long>(e.size),
                       static_cast<unsigned long long>(want));
          bad = true;
        } else {
          for (uint64_t j = 0; j < e.size; ++j) {
            if (e.data[j] != Byte(got, j)) {
              std::fprintf(stderr, "server: conn %d message %zu: byte %llu differs\n", i, got,
                           static_cast<unsigned long long>(j));
              bad = true;
              break;
            }
          }
        }
        h->ReturnBuffer(std::move(e.owned));
        ++got;
      }
      std::printf("server: conn %d from %s: %zu of %zu messages, %s\n", i,
                  h->info().peer_address.c_str(), got, sizes.size(), bad ? "CORRUPT" : "intact");
      ok[i] = !bad && got == sizes.size();
      h->WaitClosed(Duration::Seconds(30));
    });
  }
  for (auto& t : threads) t.join();
  int good = 0;
  for (int v : ok) good += v;
  const EndpointStats st = (*ep)->stats();
  std::printf("uc: %llu chunks sent, %llu received, %llu lanes failed\n",
              static_cast<unsigned long long>(st.uc_chunks_sent),
              static_cast<unsigned long long>(st.uc_chunks_received),
              static_cast<unsigned long long>(st.uc_lane_errors));
  std::printf("server: %d of %d connections intact\n", good, connections);
  return good == connections ? 0 : 1;
}

int Client(const std::string& host, uint16_t port, int connections, uint64_t max_bytes,
           const std::string& psk) {
  auto ep = Create(psk);
  if (!ep.ok()) {
    std::fprintf(stderr, "client: %s\n", std::string(ep.status().message()).c_str());
    return 1;
  }
  const std::vector<uint64_t> sizes = Sizes(max_bytes);
  std::vector<std::vector<uint8_t>> data;
  for (size_t m = 0; m < sizes.size(); ++m) {
    data.emplace_back(sizes[m]);
    for (uint64_t j = 0; j < sizes[m]; ++j) data[m][j] = Byte(m, j);
  }
  std::vector<std::shared_ptr<ConnectionHandle>> conns;
  for (int i = 0; i < connections; ++i) {
    ConnectOptions co;
    co.config = Config();
    co.timeout = Duration::Seconds(10);
    auto c = (*ep)->Connect(host, port, co);
    if (!c.ok()) {
      std::fprintf(stderr, "client: connect: %s\n", std::string(c.status().message()).c_str());
      return 1;
    }
    conns.push_back(*c);
  }
  int good = 0;
  for (auto& h : conns) {
    for (size_t m = 0; m < sizes.size(); ++m) {
      auto id = h->Send({data[m].data(), data[m].size()}, m);
      if (!id.ok())
        std::fprintf(stderr, "client: send: %s\n", std::string(id.status().message()).c_str());
    }
  }
  for (size_t i = 0; i < conns.size(); ++i) {
    size_t done = 0;
    Event e;
    while (done < sizes.size() && conns[i]->Wait(&e, kWait)) {
      if (e.type == Event::Type::kClosed) break;
      if (e.type == Event::Type::kSendComplete && e.status.ok()) ++done;
    }
    std::printf("client: conn %d: %zu of %zu messages acknowledged\n", static_cast<int>(i), done,
                sizes.size());
    good += done == sizes.size();
    conns[i]->Close();
  }
  for (auto& h : conns) h->WaitClosed(Duration::Seconds(10));
  const EndpointStats st = (*ep)->stats();
  std::printf("uc: %llu chunks sent, %llu received, %llu lanes failed\n",
              static_cast<unsigned long long>(st.uc_chunks_sent),
              static_cast<unsigned long long>(st.uc_chunks_received),
              static_cast<unsigned long long>(st.uc_lane_errors));
  return good == connections ? 0 : 1;
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode == "server" && argc == 7) || (mode == "client" && argc == 8)) {
    longhaul::g_qp_type = argv[argc - 1];
    --argc;
  }
  if (mode == "server" && argc == 6) {
    return longhaul::Server(static_cast<uint16_t>(std::atoi(argv[2])), std::atoi(argv[3]),
                            std::strtoull(argv[4], nullptr, 10), argv[5]);
  }
  if (mode == "client" && argc == 7) {
    return longhaul::Client(argv[2], static_cast<uint16_t>(std::atoi(argv[3])), std::atoi(argv[4]),
                            std::strtoull(argv[5], nullptr, 10), argv[6]);
  }
  std::fprintf(stderr,
               "usage: verbs_peer server PORT CONNECTIONS MAX_BYTES PSK [QP_TYPE]\n"
               "       verbs_peer client HOST PORT CONNECTIONS MAX_BYTES PSK [QP_TYPE]\n"
               "PSK: a pre-shared key file (longhaul-keygen --psk=FILE) or 'insecure'\n");
  return 2;
}
