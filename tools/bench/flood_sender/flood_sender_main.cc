// longhaul-flood-sender: floods a longhaul server with datagrams from spoofed IPv4 sources,
// for tools/bench/flood (docs/flood-soak.md). Root only (a raw socket with IP_HDRINCL).
//
//   --mode=initial   valid client Initials (a Hello without a cookie, padded to 1200
//                    bytes), as a client's first datagram: made by the sans-IO endpoint's
//                    own Connect(), one per client connection id (--initials distinct
//                    ones, sent round robin)
//   --mode=garbage   random bytes of random sizes (--min_size..--max_size)
//
// Every datagram gets a source address drawn from --src_net (default 198.18.128.0/17) and
// a random source port, so the server sees a new peer for nearly every datagram. The
// target and the sources must lie in 198.18.0.0/15 (the benchmarking range; the tool
// refuses anything else). Bounded by --duration and --max_packets; --pps limits the rate
// (0: as fast as it can); --cpu pins it to one CPU. At the end it prints one JSON line:
// packets and bytes (IP) sent, send errors, elapsed seconds, packets/s and bytes/s (and
// for garbage how many started with longhaul's version byte or the probe magic 0xB7).
// Exit status: 0 done, 1 runtime error (no raw socket: not root), 2 bad flags.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "nlohmann/json.hpp"
#include "tools/common/tool_flags.h"
#include "transport/base/status.h"
#include "transport/crypto/primitives.h"
#include "transport/endpoint/sans_io_endpoint.h"

DEFINE_string(mode, "initial", "initial (spoofed client Initials) or garbage (random bytes)");
DEFINE_string(target, "198.18.1.1:5201", "server IPv4 address and UDP port (198.18.0.0/15)");
DEFINE_string(src_net, "198.18.128.0/17", "spoofed source addresses (within 198.18.0.0/15)");
DEFINE_double(pps, 0, "datagrams per second; 0: as fast as possible");
DEFINE_double(duration, 5, "seconds to send for (at most 600)");
DEFINE_int64(max_packets, 100000000, "stop after this many datagrams");
DEFINE_int32(cpu, -1, "pin to this CPU (-1: no pinning)");
DEFINE_int32(initials, 4096, "initial: distinct Initials (client ids) to cycle through");
DEFINE_int32(min_size, 1, "garbage: smallest UDP payload");
DEFINE_int32(max_size, 1472, "garbage: largest UDP payload");
DEFINE_string(psk_file, "", "initial: a pre-shared key (the Hellos of a psk client)");
DEFINE_uint64(seed, 1, "seed of the sources, ports, sizes and bytes");

namespace longhaul {
namespace {

constexpr uint32_t kBenchNet = 0xC6120000;  // 198.18.0.0/15
constexpr uint32_t kBenchMask = 0xFFFE0000;

int Usage(const std::string& msg) {
  std::cerr << "longhaul-flood-sender: " << msg << std::endl;
  return 2;
}

uint64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1'000'000'000ull + t.tv_nsec;
}

struct Rng {  // xorshift64*: cheap enough for a packet each
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
};

bool ParseIpv4(const std::string& text, uint32_t* host_order) {
  in_addr a;
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
  *host_order = ntohl(a.s_addr);
  return true;
}

uint16_t Fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint32_t SumBytes(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t(p[i]) << 8) | p[i + 1];
  if (n & 1) sum += uint32_t(p[n - 1]) << 8;
  return sum;
}

// Client Initials made by the endpoint itself: one Connect() per client id, its first
// PollTransmit datagram. They name no address, so any source may carry them.
absl::StatusOr<std::vector<std::vector<uint8_t>>> MakeInitials(int n, uint32_t target_ip,
                                                               uint16_t target_port) {
  endpoint::EndpointConfig cfg;
  cfg.seed = FLAGS_seed;
  cfg.security = endpoint::SecurityConfig::Insecure();
  if (!FLAGS_psk_file.empty()) {
    std::ifstream f(FLAGS_psk_file);
    std::string hex;
    f >> hex;
    LH_ASSIGN_OR_RETURN(const crypto::Key32 k, crypto::Key32FromHex(hex));
    cfg.security = endpoint::SecurityConfig{};
    cfg.security.psk = k;
  }
  endpoint::SansIoEndpoint ep(cfg);
  uint8_t addr[6] = {uint8_t(target_ip >> 24), uint8_t(target_ip >> 16),  uint8_t(target_ip >> 8),
                     uint8_t(target_ip),       uint8_t(target_port >> 8), uint8_t(target_port)};
  const endpoint::PeerAddress server{std::span<const uint8_t>(addr, 6)};
  std::vector<std::vector<uint8_t>> out;
  std::vector<uint8_t> buf(65536);
  const Time now = Time::FromNanoseconds(1'000'000'000);
  for (int i = 0; i < n; ++i) {
    endpoint::ConnectConfig cc;
    LH_RETURN_IF_ERROR(
        ep.Connect(now, server, {static_cast<endpoint::LocalId>(i + 1)}, cc).status());
    endpoint::Transmit tx;
    while (size_t len = ep.PollTransmit(now, buf.data(), buf.size(), &tx)) {
      out.emplace_back(buf.begin(), buf.begin() + len);
    }
  }
  if (out.empty()) return absl::InternalError("the endpoint produced no Initial");
  return out;
}

// The flags, checked: where to send and which sources to forge.
struct FloodPlan {
  uint32_t target_ip = 0;
  uint16_t target_port = 0;
  uint32_t src_base = 0;  // the source network, host bits cleared
  uint32_t src_mask = 0;  // its host bits
  bool garbage = false;
};

// Checks the flags into *plan; 0, or the exit status of a usage error (printed).
int ParseFlags(FloodPlan* plan) {
  {
    std::vector<std::string> hp = absl::StrSplit(FLAGS_target, ':');
    uint32_t port = 0;
    if (hp.size() != 2 || !ParseIpv4(hp[0], &plan->target_ip) ||
        !absl::SimpleAtoi(hp[1], &port) || port == 0 || port > 65535) {
      return Usage("--target=" + FLAGS_target + ": expected A.B.C.D:PORT");
    }
    plan->target_port = static_cast<uint16_t>(port);
  }
  int prefix = 0;
  {
    std::vector<std::string> np = absl::StrSplit(FLAGS_src_net, '/');
    if (np.size() != 2 || !ParseIpv4(np[0], &plan->src_base) ||
        !absl::SimpleAtoi(np[1], &prefix) || prefix < 15 || prefix > 32) {
      return Usage("--src_net=" + FLAGS_src_net + ": expected A.B.C.D/LEN, LEN in [15, 32]");
    }
  }
  if ((plan->target_ip & kBenchMask) != kBenchNet || (plan->src_base & kBenchMask) != kBenchNet) {
    return Usage("--target and --src_net must lie in 198.18.0.0/15 (the benchmarking range)");
  }
  const uint32_t host_bits = 32 - prefix;
  plan->src_mask = host_bits == 32 ? 0xFFFFFFFF : ((1u << host_bits) - 1);
  plan->src_base &= ~plan->src_mask;
  if (FLAGS_duration <= 0 || FLAGS_duration > 600) return Usage("--duration must be in (0, 600]");
  if (FLAGS_pps < 0) return Usage("--pps must be >= 0");
  if (FLAGS_min_size < 1 || FLAGS_max_size > 1472 || FLAGS_min_size > FLAGS_max_size) {
    return Usage("--min_size..--max_size must lie within [1, 1472]");
  }
  plan->garbage = FLAGS_mode == "garbage";
  if (!plan->garbage && FLAGS_mode != "initial") return Usage("--mode: initial or garbage");
  if (FLAGS_initials < 1 || FLAGS_initials > 1'000'000) return Usage("--initials: 1..1000000");
  return 0;
}

// Pins the process to --cpu (if given); false (printed) when that fails.
bool PinToCpu() {
  if (FLAGS_cpu < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(FLAGS_cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    std::cerr << "longhaul-flood-sender: cannot pin to CPU " << FLAGS_cpu << ": "
              << strerror(errno) << std::endl;
    return false;
  }
  return true;
}

// A raw IPv4 socket that sends whole IP datagrams; -1 (printed) when there is none.
int OpenRawSocket() {
  const int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);  // IPPROTO_RAW implies IP_HDRINCL
  if (fd < 0) {
    std::cerr << "longhaul-flood-sender: raw socket: " << strerror(errno)
              << " (needs root or CAP_NET_RAW)" << std::endl;
    return -1;
  }
  int sndbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf));
  return fd;
}

// What the flood sent (and, for garbage, built).
struct FloodCounts {
  uint64_t sent = 0, bytes = 0, errors = 0, next_initial = 0;
  uint64_t first_version = 0, first_probe_magic = 0;  // garbage: built (not all sent)
};

// Writes the next UDP payload at p and returns its size: random bytes of a random size
// (garbage) or the next Initial in turn.
size_t WritePayload(uint8_t* p, const FloodPlan& plan, const std::vector<uint8_t>& noise,
                    const std::vector<std::vector<uint8_t>>& initials, Rng* rng,
                    FloodCounts* counts) {
  size_t payload;
  if (plan.garbage) {
    const uint64_t r = rng->Next();
    payload = FLAGS_min_size + r % uint64_t(FLAGS_max_size - FLAGS_min_size + 1);
    const size_t off = (r >> 20) % (noise.size() - payload);
    std::memcpy(p, noise.data() + off, payload);
    p[0] ^= static_cast<uint8_t>(r >> 40);         // a first byte of every value
    if (p[0] == 0x01) ++counts->first_version;      // longhaul's version byte
    if (p[0] == 0xB7) ++counts->first_probe_magic;  // the tuner's probe magic
  } else {
    const std::vector<uint8_t>& d = initials[counts->next_initial++ % initials.size()];
    payload = d.size();
    std::memcpy(p, d.data(), payload);
  }
  return payload;
}

// Writes the IPv4 and UDP headers in front of the payload at f + 28, from a forged
// source drawn from r; returns the datagram's size.
size_t WriteHeaders(uint8_t* f, size_t payload, uint64_t r, const FloodPlan& plan) {
  const uint32_t src = plan.src_base | (uint32_t(r) & plan.src_mask);
  const uint16_t sport = static_cast<uint16_t>(1024 + (r >> 32) % 64512);
  const size_t total = 28 + payload;
  // IPv4 header (the kernel fills in the checksum; we set the rest).
  f[0] = 0x45;
  f[1] = 0;
  f[2] = uint8_t(total >> 8);
  f[3] = uint8_t(total);
  f[4] = uint8_t(r >> 48);
  f[5] = uint8_t(r >> 56);
  f[6] = 0x40;  // DF
  f[7] = 0;
  f[8] = 64;
  f[9] = IPPROTO_UDP;
  f[10] = f[11] = 0;
  for (int k = 0; k < 4; ++k) f[12 + k] = uint8_t(src >> (24 - 8 * k));
  for (int k = 0; k < 4; ++k) f[16 + k] = uint8_t(plan.target_ip >> (24 - 8 * k));
  // UDP header with its checksum over the pseudo-header.
  const size_t ulen = 8 + payload;
  f[20] = uint8_t(sport >> 8);
  f[21] = uint8_t(sport);
  f[22] = uint8_t(plan.target_port >> 8);
  f[23] = uint8_t(plan.target_port);
  f[24] = uint8_t(ulen >> 8);
  f[25] = uint8_t(ulen);
  f[26] = f[27] = 0;
  uint32_t sum = SumBytes(f + 12, 8) + IPPROTO_UDP + uint32_t(ulen);
  sum = SumBytes(f + 20, ulen, sum);
  uint16_t c = Fold(sum);
  if (c == 0) c = 0xFFFF;
  f[26] = uint8_t(c >> 8);
  f[27] = uint8_t(c);
  return total;
}

// kBatch frames of kFrame bytes, each its own message to the target.
class FrameBatch {
 public:
  static constexpr int kBatch = 64;
  static constexpr size_t kFrame = 1500;

  explicit FrameBatch(uint32_t target_ip) : frames_(kBatch * kFrame) {
    dst_.sin_family = AF_INET;
    dst_.sin_addr.s_addr = htonl(target_ip);
    for (int i = 0; i < kBatch; ++i) {
      std::memset(&msgs_[i], 0, sizeof(msgs_[i]));
      iov_[i].iov_base = frames_.data() + i * kFrame;
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_name = &dst_;
      msgs_[i].msg_hdr.msg_namelen = sizeof(dst_);
    }
  }
  FrameBatch(const FrameBatch&) = delete;
  FrameBatch& operator=(const FrameBatch&) = delete;

  uint8_t* frame(int i) { return frames_.data() + i * kFrame; }
  void set_length(int i, size_t len) { iov_[i].iov_len = len; }

  // Sends frames [0, n); a frame the kernel refuses counts as an error and is skipped.
  void Send(int fd, int n, FloodCounts* counts) {
    int done = 0;
    while (done < n) {
      const int k = sendmmsg(fd, msgs_ + done, n - done, 0);
      if (k <= 0) {
        if (errno == EINTR) continue;
        ++counts->errors;  // ENOBUFS and the like: this datagram is lost, go on
        ++done;
        continue;
      }
      for (int i = done; i < done + k; ++i) counts->bytes += iov_[i].iov_len;
      counts->sent += k;
      done += k;
    }
  }

 private:
  std::vector<uint8_t> frames_;
  mmsghdr msgs_[kBatch];
  iovec iov_[kBatch];
  sockaddr_in dst_{};
};

// With --pps, sleeps until the time the datagrams sent so far are due (if before end);
// returns the time now.
uint64_t Pace(uint64_t t0, uint64_t end, uint64_t sent, uint64_t now) {
  if (FLAGS_pps > 0) {
    const uint64_t due = t0 + uint64_t(double(sent) / FLAGS_pps * 1e9);
    if (due > now && due < end) {
      timespec ts{time_t(due / 1'000'000'000ull), long(due % 1'000'000'000ull)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
      now = NowNs();
    }
  }
  return now;
}

// Sends until --duration or --max_packets; returns the start time (NowNs).
uint64_t Flood(int fd, const FloodPlan& plan, const std::vector<std::vector<uint8_t>>& initials,
               Rng* rng, FloodCounts* counts) {
  std::vector<uint8_t> noise(1 << 20);
  for (auto& b : noise) b = static_cast<uint8_t>(rng->Next() >> 56);

  FrameBatch frames(plan.target_ip);
  // Batches of at most 1 ms of the rate, so pacing stays smooth.
  int batch = FrameBatch::kBatch;
  if (FLAGS_pps > 0) batch = std::max(1, std::min(FrameBatch::kBatch, int(FLAGS_pps / 1000)));

  const uint64_t t0 = NowNs();
  const uint64_t end = t0 + uint64_t(FLAGS_duration * 1e9);
  uint64_t now = t0;
  while (now < end && int64_t(counts->sent) < FLAGS_max_packets) {
    const int n = int(std::min<int64_t>(batch, FLAGS_max_packets - int64_t(counts->sent)));
    for (int i = 0; i < n; ++i) {
      uint8_t* f = frames.frame(i);
      const size_t payload = WritePayload(f + 28, plan, noise, initials, rng, counts);
      frames.set_length(i, WriteHeaders(f, payload, rng->Next(), plan));
    }
    frames.Send(fd, n, counts);
    now = Pace(t0, end, counts->sent, NowNs());
  }
  return t0;
}

void PrintSummary(const FloodCounts& counts, double secs, bool garbage,
                  const std::vector<std::vector<uint8_t>>& initials) {
  const uint64_t sent = counts.sent, bytes = counts.bytes;
  nlohmann::json j = {{"mode", FLAGS_mode},
                      {"target", FLAGS_target},
                      {"src_net", FLAGS_src_net},
                      {"packets", sent},
                      {"ip_bytes", bytes},
                      {"send_errors", counts.errors},
                      {"seconds", secs},
                      {"pps", secs > 0 ? sent / secs : 0.0},
                      {"ip_bytes_per_s", secs > 0 ? bytes / secs : 0.0},
                      {"distinct_initials", initials.size()},
                      {"pps_limit", FLAGS_pps},
                      {"cpu", FLAGS_cpu}};
  if (!initials.empty()) j["initial_size"] = initials[0].size();
  if (garbage) {
    j["first_byte_version"] = counts.first_version;
    j["first_byte_probe_magic"] = counts.first_probe_magic;
  }
  std::cout << j.dump() << std::endl;
}

int Run() {
  FloodPlan plan;
  if (int rc = ParseFlags(&plan); rc != 0) return rc;

  std::vector<std::vector<uint8_t>> initials;
  if (!plan.garbage) {
    absl::StatusOr<std::vector<std::vector<uint8_t>>> made =
        MakeInitials(FLAGS_initials, plan.target_ip, plan.target_port);
    if (!made.ok()) {
      std::cerr << "longhaul-flood-sender: " << made.status() << std::endl;
      return 1;
    }
    initials = std::move(*made);
  }
  if (!PinToCpu()) return 1;
  const int fd = OpenRawSocket();
  if (fd < 0) return 1;

  Rng rng{FLAGS_seed * 0x9E3779B97F4A7C15ull + 1};
  FloodCounts counts;
  const uint64_t t0 = Flood(fd, plan, initials, &rng, &counts);
  close(fd);
  const double secs = (NowNs() - t0) * 1e-9;
  PrintSummary(counts, secs, plan.garbage, initials);
  return 0;
}

}  // namespace
}  // namespace longhaul

int main(int argc, char** argv) {
  longhaul::InitTool(&argc, &argv, "spoofed Initial or garbage floods for tools/bench/flood");
  if (argc > 1) return longhaul::Usage(std::string("unexpected argument ") + argv[1]);
  return longhaul::Run();
}
