// Packet protection end to end, as a user runs it: longhaul-perf server and client
// processes on 127.0.0.1 with keys from the key-file library (what longhaul-keygen
// writes).
//
//  - protected transfers (static keys, static keys with a pre-shared key, a pre-shared
//    key) through longhaul-emu with loss, reordering and corruption arrive intact, and
//    both sides say which protection they used (start lines, JSON);
//  - a wrong server key, an unknown client key, a wrong pre-shared key and a mode
//    mismatch are refused with the server's reason (exit 1), and the server logs the
//    refusal and keeps serving; missing, open, truncated and non-hex key files and no
//    choice at all are usage errors (exit 2) naming the flag and the file;
//  - what a path observer captures (a UDP relay in the test copies every datagram of
//    the client's direction): a protected transfer's datagrams hold none of longhaul-
//    perf's payload (tools/perf/perf_pattern.h) and do not compress; a plaintext one's do.
//
// Every wait is bounded; processes are killed and reaped by their handles' destructors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/emu/emu_process.h"
#include "tests/e2e/perf/perf_process.h"
#include "tests/support/key_files.h"
#include "tests/support/pattern.h"
#include "tests/support/temp_dir.h"
#include "tools/perf/perf_pattern.h"
#include "transport/crypto/key_files.h"

#include <zlib.h>

namespace longhaul {
namespace {

using emu::testing::RunResult;
using emu::testing::RunToCompletion;
using Json = nlohmann::json;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kStart(10000);

// ---- keys ----

class Keys {
 public:
  // NAME.key and NAME.pub, as longhaul-keygen --out=NAME writes them.
  std::string Pair(const std::string& name) {
    return crypto::ToHex(testing::WriteKeyPair(Path(name)).public_key);
  }
  std::string Psk(const std::string& name) {
    testing::WritePsk(Path(name));
    return Path(name);
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    return dir_.Write(name, text, mode);
  }
  std::string Path(const std::string& name) const { return dir_.Path(name); }

 private:
  testing::TempDir dir_{"lh-security-e2e"};
};

// ---- processes ----

using Server = perf_testing::PerfServer;
using ClientRun = perf_testing::PerfRun;

Server StartServer(const std::vector<std::string>& keys) {
  return perf_testing::StartPerfServer(LONGHAUL_PERF_BIN, keys);
}

void StopServer(Server& s) { perf_testing::StopPerfServer(s); }

ClientRun RunClient(int port, std::vector<std::string> args, bool json = true) {
  return perf_testing::RunPerfClient(LONGHAUL_PERF_BIN, port, std::move(args), json);
}

void ExpectIntact(const ClientRun& c, uint64_t bytes) {
  ASSERT_EQ(c.status, 0) << c.out << "\nstderr: " << c.err;
  ASSERT_TRUE(c.json.is_object()) << c.out;
  const Json& end = c.json["end"];
  EXPECT_EQ(end["sum_received"]["bytes"].get<uint64_t>(), bytes);
  EXPECT_EQ(end["sum_received"]["bytes"], end["sum_sent"]["bytes"]);
  EXPECT_TRUE(end["longhaul"]["integrity"]["intact"].get<bool>());
}

using Emu = perf_testing::EmuRelay;

Emu StartEmu(const std::string& link, int forward_port) {
  return perf_testing::StartEmuRelay(LONGHAUL_EMU_BIN, link, forward_port);
}

// ---- protected transfers through the emulator ----

struct ModeCase {
  const char* name;
  const char* mode;  // SecurityModeName
  bool static_keys;
  bool psk;
};

class ProtectedThroughEmu : public ::testing::TestWithParam<ModeCase> {};

TEST_P(ProtectedThroughEmu, IntactAndSaysWhichProtection) {
  const ModeCase& m = GetParam();
  Keys k;
  const std::string server_pub = k.Pair("server");
  const std::string client_pub = k.Pair("client");
  const std::string psk = k.Psk("link.psk");
  // The server allows two clients, labelled.
  const std::string allowed = k.Write(
      "allowed", absl::StrCat("# clients\n", k.Pair("other"), " other\n", client_pub, " tokyo-1\n"),
      0644);
  std::vector<std::string> server_keys, client_keys;
  if (m.static_keys) {
    server_keys = {"--key=" + k.Path("server.key"), "--peer_key=" + allowed};
    client_keys = {"--key=" + k.Path("client.key"), "--peer_key=" + k.Path("server.pub")};
  }
  if (m.psk) {
    server_keys.push_back("--psk_file=" + psk);
    client_keys.push_back("--psk_file=" + psk);
  }
  Server s = StartServer(server_keys);
  ASSERT_GT(s.port, 0);
  EXPECT_EQ(s.listening["security"]["mode"], m.mode) << s.listening.dump();
  EXPECT_TRUE(s.listening["security"]["protected"].get<bool>());
  Emu e = StartEmu("rate=200mbit,rtt=10ms,loss=0.01,reorder=0.01,corrupt=0.002", s.port);
  ASSERT_GT(e.port, 0);
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    std::vector<std::string> args = client_keys;
    args.insert(args.end(), {"--bytes=8MiB", "--rate=200mbit", "--mtu=9000",
                             "--message_size=256KiB", "--initial_rtt=20ms"});
    if (reverse) args.push_back("--reverse");
    ClientRun c = RunClient(e.port, args);
    ExpectIntact(c, uint64_t{8} << 20);
    if (!c.json.is_object()) continue;
    const Json& sec = c.json["start"]["longhaul"]["security"];
    EXPECT_EQ(sec["mode"], m.mode) << sec.dump();
    EXPECT_TRUE(sec["protected"].get<bool>());
    EXPECT_THAT(sec["cipher"].get<std::string>(),
                ::testing::AnyOf("aes-256-gcm", "chacha20-poly1305"));
    if (m.static_keys) {
      EXPECT_EQ(sec["peer_key"], server_pub);
    } else {
      EXPECT_TRUE(sec["peer_key"].is_null());
    }
    if (reverse) {
      // The client received the data: corrupted datagrams failed authentication here,
      // and the core never saw a bad checksum.
      const Json& lh = c.json["end"]["longhaul"];
      EXPECT_GT(lh["protection"]["packets_unauthenticated"].get<uint64_t>(), 0u) << lh.dump();
      EXPECT_EQ(lh["receiver_stats"]["checksum_failures"].get<uint64_t>(), 0u);
    }
    absl::StatusOr<Json> acc = s.proc->WaitEvent("accepted", kStart);
    ASSERT_TRUE(acc.ok()) << acc.status();
    EXPECT_EQ((*acc)["security"]["mode"], m.mode);
    if (m.static_keys) {
      EXPECT_EQ((*acc)["security"]["peer_key"], client_pub);
      EXPECT_EQ((*acc)["security"]["peer_key_label"], "tokyo-1");
    }
  }
  // The text start lines say it too.
  ClientRun text = RunClient(
      e.port,
      [&] {
        std::vector<std::string> a = client_keys;
        a.insert(a.end(), {"--bytes=1MiB", "--rate=200mbit"});
        return a;
      }(),
      /*json=*/false);
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(absl::StrCat("security: ", m.mode, ", ")));
  e.proc->Signal(SIGTERM);
  EXPECT_TRUE(e.proc->Wait(milliseconds(20000)).ok());
  StopServer(s);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ProtectedThroughEmu,
    ::testing::Values(ModeCase{"StaticKeys", "Noise IK (static keys)", true, false},
                      ModeCase{"StaticKeysAndPsk",
                               "Noise IKpsk1 (static keys and a pre-shared key)", true, true},
                      ModeCase{"Psk", "Noise NNpsk0 (pre-shared key)", false, true}),
    [](const ::testing::TestParamInfo<ModeCase>& i) { return std::string(i.param.name); });

// ---- refusals: the server's reason, and it keeps serving ----

TEST(SecurityE2E, WrongKeysAreRefusedWithTheServersReasonAndTheServerGoesOn) {
  Keys k;
  k.Pair("server");
  k.Pair("client");
  k.Pair("stranger");
  k.Pair("impostor");
  const std::string psk = k.Psk("link.psk"), other_psk = k.Psk("other.psk");
  Server s = StartServer({"--key=" + k.Path("server.key"), "--peer_key=" + k.Path("client.pub")});
  ASSERT_GT(s.port, 0);
  struct Case {
    const char* what;
    std::vector<std::string> keys;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"the client expects another server key",
       {"--key=" + k.Path("client.key"), "--peer_key=" + k.Path("impostor.pub")},
       "the server refused the client's keys (this client holds another server key"},
      {"a client key the server does not allow",
       {"--key=" + k.Path("stranger.key"), "--peer_key=" + k.Path("server.pub")},
       "the server refused the client's keys (this client holds another server key"},
      {"a pre-shared key against static keys",
       {"--psk_file=" + psk},
       "this server authenticates with Noise IK (static keys); the client offered Noise NNpsk0"},
      {"plaintext against a protected server",
       {"--insecure"},
       "this server requires packet protection"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::string> args = c.keys;
    args.insert(args.end(), {"--time=1", "--rate=100mbit"});
    ClientRun r = RunClient(s.port, args, /*json=*/false);
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("unable to connect to server 127.0.0.1:", s.port,
                                              ": server 127.0.0.1:", s.port,
                                              " rejected the connection: ", c.reason)));
  }
  // The server said so (its log and a "refused" event) and serves a right client.
  absl::StatusOr<Json> refused = s.proc->WaitEvent("refused", milliseconds(5000));
  ASSERT_TRUE(refused.ok()) << refused.status();
  ClientRun good =
      RunClient(s.port, {"--key=" + k.Path("client.key"), "--peer_key=" + k.Path("server.pub"),
                         "--bytes=2MiB", "--rate=200mbit"});
  ExpectIntact(good, uint64_t{2} << 20);
  EXPECT_THAT(s.proc->Stderr(), HasSubstr("refused client 127.0.0.1:"));
  StopServer(s);

  // Pre-shared keys that differ.
  Server p = StartServer({"--psk_file=" + psk});
  ASSERT_GT(p.port, 0);
  ClientRun wrong = RunClient(p.port, {"--psk_file=" + other_psk, "--time=1", "--rate=100mbit"},
                              /*json=*/false);
  EXPECT_EQ(wrong.status, 1);
  EXPECT_THAT(wrong.err, HasSubstr("the server refused the client's keys"));
  EXPECT_THAT(wrong.err, HasSubstr("a pre-shared key that differs"));
  StopServer(p);
}

// ---- key files and choices: usage errors (exit 2) naming the flag and the file ----

TEST(SecurityE2E, BadKeyFilesAndNoChoiceAreUsageErrors) {
  Keys k;
  k.Pair("a");
  std::ifstream in(k.Path("a.key"));
  const std::string open =
      k.Write("open.key", std::string((std::istreambuf_iterator<char>(in)), {}), 0644);
  const std::string truncated =
      k.Write("short.key", "0123456789abcdef0123456789abcdef01234567\n", 0600);
  const std::string nonhex =
      k.Write("x.psk", "0123456789abcdef0123456789abcdefXX23456789abcdef0123456789abcdef\n", 0600);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "no keys: give --key and --peer_key, or --psk_file, or --insecure for plaintext"},
      {{"--key=" + k.Path("missing.key"), "--peer_key=" + k.Path("a.pub")},
       "--key: " + k.Path("missing.key") + ": no such file"},
      {{"--key=" + open, "--peer_key=" + k.Path("a.pub")},
       "--key: " + open + " is readable by others (mode 0644): chmod 600 " + open},
      {{"--key=" + truncated, "--peer_key=" + k.Path("a.pub")},
       "--key: " + truncated + ":1: 40 hex digits, expected 64 (truncated?)"},
      {{"--psk_file=" + nonhex},
       "--psk_file: " + nonhex + ":1: column 33: a character is not a hex digit"},
      {{"--key=" + k.Path("a.key")}, "--key was given without --peer_key"},
      {{"--insecure", "--psk_file=" + k.Psk("p")},
       "--insecure (plaintext) was chosen together with keys (--psk_file): choose one"},
      {{"--peer_key=" + k.Path("a.pub")}, "--peer_key was given without --key"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    for (bool server : {false, true}) {
      std::vector<std::string> args = c.args;
      if (server) {
        args.insert(args.begin(), {"--server", "--bind=127.0.0.1", "--port=0", "--one_off"});
      } else {
        args.insert(args.begin(), {"--client=127.0.0.1", "--port=9", "--time=1"});
      }
      absl::StatusOr<RunResult> r = RunToCompletion(LONGHAUL_PERF_BIN, args, milliseconds(30000));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->status, 2) << r->stderr_text;
      EXPECT_THAT(r->stderr_text, HasSubstr("longhaul-perf: " + c.message)) << r->stderr_text;
    }
  }
  // A client's --peer_key names the one server: a list of several is refused.
  const std::string two = k.Write("two", absl::StrCat(k.Pair("b"), "\n", k.Pair("c"), "\n"), 0644);
  absl::StatusOr<RunResult> r = RunToCompletion(
      LONGHAUL_PERF_BIN,
      {"--client=127.0.0.1", "--port=9", "--key=" + k.Path("a.key"), "--peer_key=" + two},
      milliseconds(30000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_THAT(r->stderr_text, HasSubstr("lists 2 keys; a client takes the server's public key"));
}

TEST(SecurityE2E, ProfilesCarryTheKeysAndFlagsOverrideThem) {
  Keys k;
  k.Pair("server");
  k.Pair("client");
  // Relative paths resolve against the profile's directory.
  const std::string server_profile =
      k.Write("server.profile", "key=server.key\npeer_key=client.pub\n", 0644);
  const std::string client_profile =
      k.Write("client.profile", "rate=200mbit\nkey=client.key\npeer_key=server.pub\n", 0644);
  Server s = StartServer({"--profile=" + server_profile});
  ASSERT_GT(s.port, 0);
  EXPECT_EQ(s.listening["security"]["mode"], "Noise IK (static keys)");
  ClientRun c = RunClient(s.port, {"--profile=" + client_profile, "--bytes=2MiB"});
  ExpectIntact(c, uint64_t{2} << 20);
  // --insecure on the command line overrides the profile's keys (and the server refuses).
  ClientRun plain = RunClient(s.port, {"--profile=" + client_profile, "--insecure", "--time=1"},
                              /*json=*/false);
  EXPECT_EQ(plain.status, 1);
  EXPECT_THAT(plain.err, HasSubstr("requires packet protection"));
  StopServer(s);
  // A profile's missing file is named with the profile's line.
  const std::string broken =
      k.Write("broken.profile", "key=nothing.key\npeer_key=server.pub\n", 0644);
  absl::StatusOr<RunResult> r =
      RunToCompletion(LONGHAUL_PERF_BIN, {"--client=127.0.0.1", "--port=9", "--profile=" + broken},
                      milliseconds(30000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_THAT(r->stderr_text,
              HasSubstr("key (" + broken + ":1): " + k.Path("nothing.key") + ": no such file"));
}

// ---- what a path observer captures ----

// A UDP relay on loopback that copies every datagram from the client to the server:
// datagrams to its port go to `target` from its own socket; answers go back to the last
// client. The thread polls in 20 ms steps and stops with the object.
class CaptureRelay {
 public:
  explicit CaptureRelay(int target_port) {
    front_ = emu::testing::BoundUdpSocket();
    back_ = emu::testing::BoundUdpSocket();
    target_.sin_family = AF_INET;
    target_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    target_.sin_port = htons(static_cast<uint16_t>(target_port));
    thread_ = std::thread([this] { Run(); });
  }
  ~CaptureRelay() {
    stop_ = true;
    thread_.join();
    close(front_);
    close(back_);
  }
  int port() const { return emu::testing::LocalPort(front_); }
  // The client's datagrams so far, in order.
  std::vector<std::vector<uint8_t>> Captured() {
    std::lock_guard<std::mutex> l(mu_);
    return captured_;
  }

 private:
  void Run() {
    std::vector<uint8_t> buf(65536);
    sockaddr_in client{};
    bool have_client = false;
    while (!stop_) {
      pollfd fds[2] = {{front_, POLLIN, 0}, {back_, POLLIN, 0}};
      if (poll(fds, 2, 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        socklen_t len = sizeof(client);
        const ssize_t n =
            recvfrom(front_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&client), &len);
        if (n > 0) {
          have_client = true;
          {
            std::lock_guard<std::mutex> l(mu_);
            captured_.emplace_back(buf.begin(), buf.begin() + n);
          }
          sendto(back_, buf.data(), n, 0, reinterpret_cast<const sockaddr*>(&target_),
                 sizeof(target_));
        }
      }
      if (fds[1].revents & POLLIN) {
        const ssize_t n = recv(back_, buf.data(), buf.size(), 0);
        if (n > 0 && have_client) {
          sendto(front_, buf.data(), n, 0, reinterpret_cast<const sockaddr*>(&client),
                 sizeof(client));
        }
      }
    }
  }

  int front_ = -1, back_ = -1;
  sockaddr_in target_{};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::vector<uint8_t>> captured_;
  std::thread thread_;
};

// The fraction of 16-byte blocks (at 16-byte steps) that repeat a 16-byte sequence seen
// in the preceding 64 KiB at any offset: what an LZ77 compressor could take away.
double RepeatedFraction(const std::vector<uint8_t>& b) {
  constexpr size_t kBlock = 16, kWindow = 64 << 10;
  if (b.size() < 2 * kBlock) return 0;
  auto hash = [&](size_t i) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < kBlock; ++k) h = (h ^ b[i + k]) * 1099511628211ULL;
    return h;
  };
  absl::flat_hash_map<uint64_t, size_t> last;  // hash -> last position
  size_t blocks = 0, repeated = 0, indexed = 0;
  for (size_t i = 0; i + kBlock <= b.size(); i += kBlock) {
    // Index every offset up to i (so repeats at any alignment are found).
    for (; indexed + kBlock <= i; ++indexed) last[hash(indexed)] = indexed;
    auto it = last.find(hash(i));
    if (it != last.end() && i - it->second <= kWindow &&
        std::equal(b.begin() + i, b.begin() + i + kBlock, b.begin() + it->second)) {
      ++repeated;
    }
    ++blocks;
  }
  return static_cast<double>(repeated) / blocks;
}

// zlib's compressed size over the original size (level 9).
double ZlibRatio(const std::vector<uint8_t>& b) {
  uLongf out_len = compressBound(b.size());
  std::vector<uint8_t> out(out_len);
  EXPECT_EQ(compress2(out.data(), &out_len, b.data(), b.size(), 9), Z_OK);
  return static_cast<double>(out_len) / b.size();
}

// How many of `probes` (32-byte pieces of longhaul-perf's payload) occur in `capture`.
size_t PatternHits(const std::vector<uint8_t>& capture,
                   const std::vector<std::vector<uint8_t>>& probes) {
  size_t hits = 0;
  for (const std::vector<uint8_t>& p : probes) {
    if (std::search(capture.begin(), capture.end(), p.begin(), p.end()) != capture.end()) ++hits;
  }
  return hits;
}

struct Capture {
  std::vector<uint8_t> bytes;  // the client's datagrams, concatenated
  size_t datagrams = 0;
};

// One forward transfer of 16 KiB messages through a capturing relay. Small messages make
// the plaintext stream repeat itself within a compressor's window: consecutive messages
// start 4099 bytes apart in longhaul-perf's pattern, so each repeats most of the previous.
Capture CaptureTransfer(const std::vector<std::string>& server_keys,
                        const std::vector<std::string>& client_keys) {
  Capture cap;
  Server s = StartServer(server_keys);
  EXPECT_GT(s.port, 0);
  if (s.port == 0) return cap;
  CaptureRelay relay(s.port);
  std::vector<std::string> args = client_keys;
  args.insert(args.end(), {"--bytes=4MiB", "--rate=500mbit", "--message_size=16KiB"});
  ClientRun c = RunClient(relay.port(), args);
  ExpectIntact(c, uint64_t{4} << 20);
  for (const std::vector<uint8_t>& d : relay.Captured()) {
    cap.bytes.insert(cap.bytes.end(), d.begin(), d.end());
    ++cap.datagrams;
  }
  StopServer(s);
  return cap;
}

TEST(SecurityE2E, CapturedDatagramsOfAProtectedTransferHideThePayload) {
  Keys k;
  k.Pair("server");
  k.Pair("client");
  // 200 pieces of the payload: 32 bytes at spread offsets of the pattern the messages
  // are cut from (every message of the transfer starts somewhere in its first ~1.1 MB).
  const perf::Pattern pattern(16 << 10);
  const uint8_t* p = pattern.For(0, 0);
  std::vector<std::vector<uint8_t>> probes;
  for (size_t i = 0; i < 200; ++i) {
    const size_t at = 8192 + i * 5003;  // inside the messages' bytes, away from the start
    probes.emplace_back(p + at, p + at + 32);
  }

  const Capture plain = CaptureTransfer({"--insecure"}, {"--insecure"});
  const Capture sealed =
      CaptureTransfer({"--key=" + k.Path("server.key"), "--peer_key=" + k.Path("client.pub")},
                      {"--key=" + k.Path("client.key"), "--peer_key=" + k.Path("server.pub")});
  ASSERT_GT(plain.bytes.size(), uint64_t{4} << 20);
  ASSERT_GT(sealed.bytes.size(), uint64_t{4} << 20);
  const size_t plain_hits = PatternHits(plain.bytes, probes);
  const size_t sealed_hits = PatternHits(sealed.bytes, probes);
  const double plain_repeat = RepeatedFraction(plain.bytes);
  const double sealed_repeat = RepeatedFraction(sealed.bytes);
  const double sealed_entropy = testing::Entropy(sealed.bytes);
  std::printf(
      "plaintext: %zu datagrams, %zu of %zu payload pieces seen, %.1f %% repeated blocks, "
      "entropy %.4f bits/byte\n"
      "protected: %zu datagrams, %zu of %zu payload pieces seen, %.1f %% repeated blocks, "
      "entropy %.4f bits/byte\n",
      plain.datagrams, plain_hits, probes.size(), 100 * plain_repeat,
      testing::Entropy(plain.bytes), sealed.datagrams, sealed_hits, probes.size(),
      100 * sealed_repeat, sealed_entropy);
  // The plaintext transfer carries the payload readably and repeats itself.
  EXPECT_GT(plain_hits, probes.size() / 2);
  EXPECT_GT(plain_repeat, 0.3);
  // The protected one shows none of it and looks like random bytes.
  EXPECT_EQ(sealed_hits, 0u);
  EXPECT_LT(sealed_repeat, 0.01);  // the handshake's zero padding is the only repetition
  EXPECT_GT(sealed_entropy, 7.9);
  const double plain_z = ZlibRatio(plain.bytes), sealed_z = ZlibRatio(sealed.bytes);
  std::printf("zlib -9: plaintext to %.1f %%, protected to %.1f %% of its size\n", 100 * plain_z,
              100 * sealed_z);
  EXPECT_LT(plain_z, 0.7);
  EXPECT_GT(sealed_z, 0.99);
}

}  // namespace
}  // namespace longhaul
