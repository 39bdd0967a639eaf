#include "tools/nccl_bench/parent.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tools/nccl_bench/plugin_loader.h"
#include "tools/nccl_bench/process.h"
#include "tools/nccl_bench/report.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"
#include "transport/crypto/key_files.h"
#include "transport/nccl/settings.h"
#include "transport/sim/link_files.h"

extern char** environ;

namespace longhaul::nccl::bench {
namespace {

// The variable of one of the plugin's own settings: NCCL_LONGHAUL_<key> for a key of
// transport/nccl/settings.cc's table (PluginSettingSpecs(): IFNAME, PROFILE, CREDIT,
// SPIN, KEY, PEER_KEY, PSK_FILE, INSECURE here).
std::string PluginVariable(absl::string_view key) { return absl::StrCat(kSettingPrefix, key); }

// The variable that sets the profile key `key` (ProfileKeys()): NCCL_LONGHAUL_<KEY>,
// the key upper-cased, as ReadSettings reads it.
std::string KeyVariable(absl::string_view key) {
  const std::vector<std::string> keys = ProfileKeys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    fprintf(stderr, "longhaul-nccl-bench: '%s' is not a profile key\n", std::string(key).c_str());
    abort();
  }
  return absl::StrCat(kSettingPrefix, absl::AsciiStrToUpper(key));
}

// setenv / getenv by name.
void SetVariable(const std::string& name, const std::string& value, bool overwrite) {
  setenv(name.c_str(), value.c_str(), overwrite ? 1 : 0);
}
const char* GetVariable(const std::string& name) { return getenv(name.c_str()); }

// Environment of the ranks: loopback only; without a profile, transport settings for
// the link (`spec`, when given) or for loopback. Variables already set are kept.
void SetRankEnvironment(const sim::LinkSpec* spec, ByteCount slice) {
  SetVariable(PluginVariable("IFNAME"), "lo", false);
  const bool has_profile = GetVariable(PluginVariable("PROFILE")) != nullptr;
  if (has_profile) return;
  if (spec != nullptr) {
    SetVariable(KeyVariable("rate"), spec->rate.ToString(), false);
    SetVariable(KeyVariable("initial_rtt"), FormatDuration(spec->rtt), false);
    if (!GetVariable(KeyVariable("segment"))) {
      SetVariable(KeyVariable("mtu"), absl::StrCat(spec->mtu), false);
    }
    SetVariable(KeyVariable("pacing_burst"), "1ms", false);
    // Window and receive window as longhaul-tune sizes them for a lossy path (1.5 and 3
    // BDPs): a window far above the BDP would keep FEC auto from ever seeing the sender
    // backlogged (it then sends parity all the time). Credit: two BDPs plus 8 slices
    // (credit returns a whole message at a time).
    const double bdp = spec->rate.BytesPerSecond() * spec->rtt.seconds();
    const uint64_t mib = uint64_t{1} << 20;
    auto mib_up = [&](double b) { return (static_cast<uint64_t>(b) + mib - 1) / mib; };
    SetVariable(KeyVariable("window"),
                absl::StrCat(std::max<uint64_t>(4, mib_up(1.5 * bdp)), "MiB"), false);
    SetVariable(KeyVariable("recv_window"),
                absl::StrCat(std::max<uint64_t>(8, mib_up(3 * bdp)), "MiB"), false);
    SetVariable(PluginVariable("CREDIT"),
                absl::StrCat(std::max<uint64_t>(16, mib_up(2 * bdp + 8.0 * slice)), "MiB"),
                false);
  } else {
    // Loopback: no link to pace for; BBR capped at 40 Gbit/s, datagrams that fill the
    // loopback MTU (65536), and the driver sleeps instead of spinning for pacing
    // deadlines (the cores are shared with the ranks).
    SetVariable(KeyVariable("cc"), "bbr", false);
    SetVariable(KeyVariable("rate"), "40gbit", false);
    if (!GetVariable(KeyVariable("segment"))) SetVariable(KeyVariable("mtu"), "65000", false);
    SetVariable(PluginVariable("SPIN"), "0", false);
  }
}

}  // namespace

int Parent::Fail(const std::string& text) {
  if (o_.json) {
    nlohmann::json j;
    j["error"] = text;
    printf("%s\n", j.dump(2).c_str());
  } else {
    fprintf(stderr, "longhaul-nccl-bench: %s\n", text.c_str());
  }
  Cleanup();
  return 1;
}

void Parent::Cleanup() {
  for (Child& c : children_) {
    if (c.fd >= 0) close(c.fd);
    c.fd = -1;
  }
  for (Child& c : children_) Reap(&c.pid);
  for (Emulator& e : emus_) {
    if (e.pid > 0) kill(e.pid, SIGTERM);
  }
  for (Emulator& e : emus_) {
    Reap(&e.pid);
    if (e.out_fd >= 0) close(e.out_fd);
    e.out_fd = -1;
    if (!e.err_path.empty()) unlink(e.err_path.c_str());
  }
  for (Child& c : children_) {
    if (!c.stderr_path.empty()) unlink(c.stderr_path.c_str());
  }
  if (!keys_dir_.empty()) {
    // Only the files this run wrote (PrepareSecurity), then the directory.
    for (const char* f : {"psk", "ranks.pub"}) unlink(absl::StrCat(keys_dir_, "/", f).c_str());
    for (int r = 0; r < o_.ranks; ++r) {
      unlink(absl::StrCat(keys_dir_, "/rank-", r, ".key").c_str());
      unlink(absl::StrCat(keys_dir_, "/rank-", r, ".pub").c_str());
    }
    rmdir(keys_dir_.c_str());
    keys_dir_.clear();
  }
}

std::string Parent::PrepareSecurity() {
  std::string given;
  for (const char* key : {"KEY", "PEER_KEY", "PSK_FILE", "INSECURE"}) {
    const std::string v = PluginVariable(key);
    const char* val = GetVariable(v);
    if (val != nullptr && *val != 0) given = v;
  }
  if (o_.security.empty()) {
    bool in_profile = false;
    if (const char* p = GetVariable(PluginVariable("PROFILE")); p != nullptr && *p != 0) {
      absl::StatusOr<LoadedProfile> lp = LoadProfileFile(p, TransportConfig());
      in_profile = lp.ok() && lp->security.any();  // a bad profile: the ranks report it
    }
    if (given.empty() && !in_profile) {
      return "no keys: give --security=psk, --security=keys (generated for this run) or "
             "--security=insecure (plaintext), or set NCCL_LONGHAUL_KEY and "
             "NCCL_LONGHAUL_PEER_KEY, NCCL_LONGHAUL_PSK_FILE or NCCL_LONGHAUL_INSECURE=1";
    }
    security_ = "as the environment sets it";
    return "";
  }
  if (o_.security != "psk" && o_.security != "keys" && o_.security != "insecure") {
    return absl::StrCat("--security: unknown '", o_.security, "' (psk, keys, insecure)");
  }
  if (!given.empty()) {
    return absl::StrCat("--security=", o_.security, " and ", given, " are both given: choose one");
  }
  if (o_.security == "insecure") {
    SetVariable(PluginVariable("INSECURE"), "1", true);
    security_ = "insecure (plaintext)";
    return "";
  }
  char tmpl[] = "/tmp/lh-nccl-bench-keys-XXXXXX";
  if (mkdtemp(tmpl) == nullptr)
    return absl::StrCat("cannot create a key directory: ", strerror(errno));
  keys_dir_ = tmpl;
  if (o_.security == "psk") {
    absl::StatusOr<crypto::Key32> psk = crypto::GeneratePsk();
    if (!psk.ok()) return std::string(psk.status().message());
    const std::string path = keys_dir_ + "/psk";
    if (absl::Status s = crypto::WriteKeyFile(path, crypto::KeyFileText(*psk),
                                              crypto::KeyFileMode::kSecret, false);
        !s.ok()) {
      return std::string(s.message());
    }
    SetVariable(PluginVariable("PSK_FILE"), path, true);
    security_ = "pre-shared key (Noise NNpsk0), generated for this run";
    return "";
  }
  std::string allowed = "# the ranks of this longhaul-nccl-bench run\n";
  for (int r = 0; r < o_.ranks; ++r) {
    absl::StatusOr<crypto::KeyPair> pair = crypto::GenerateKeyPair();
    if (!pair.ok()) return std::string(pair.status().message());
    const std::string key = absl::StrCat(keys_dir_, "/rank-", r, ".key");
    absl::Status s = crypto::WriteKeyFile(key, crypto::KeyFileText(pair->private_key),
                                          crypto::KeyFileMode::kSecret, false);
    crypto::Wipe(pair->private_key);
    if (!s.ok()) return std::string(s.message());
    rank_keys_.push_back(key);
    absl::StrAppend(&allowed, crypto::ToHex(pair->public_key), " rank-", r, "\n");
  }
  const std::string peers = keys_dir_ + "/ranks.pub";
  if (absl::Status s = crypto::WriteKeyFile(peers, allowed, crypto::KeyFileMode::kPublic, false);
      !s.ok()) {
    return std::string(s.message());
  }
  SetVariable(PluginVariable("PEER_KEY"), peers, true);
  security_ = absl::StrCat("static keys (Noise IK), one key pair per rank, generated for this run");
  return "";
}

void Parent::Reap(pid_t* pid) {
  if (*pid <= 0) return;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (waitpid(*pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(*pid, SIGKILL);
      waitpid(*pid, &status, 0);
      break;
    }
    timespec ts{0, 5 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  *pid = -1;
}

std::string Parent::ChildStderr(int rank) {
  std::ifstream f(children_[rank].stderr_path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (s.size() > 2000) s = s.substr(s.size() - 2000);
  return s;
}

absl::StatusOr<uint16_t> Parent::StartEmulator(const PluginHandle& target, int edge_from,
                                               int edge_to) {
  Emulator e;
  e.edge = absl::StrCat(edge_from, "->", edge_to);
  char tmpl[] = "/tmp/lh-nccl-bench-emu-XXXXXX";
  int tfd = mkstemp(tmpl);
  if (tfd >= 0) close(tfd);
  e.err_path = tmpl;
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline_ - Clock::now());
  std::vector<std::string> args = {emu_,
                                   absl::StrCat("--link=", o_.link),
                                   "--listen=127.0.0.1:0",
                                   absl::StrCat("--forward=", target.address, ":", target.port),
                                   "--json",
                                   absl::StrCat("--max_time=", left.count() + 30, "s"),
                                   absl::StrCat("--seed=", edge_from + 1)};
  LH_ASSIGN_OR_RETURN(e.pid, Spawn(args, &e.out_fd, e.err_path));
  emus_.push_back(e);
  Emulator& me = emus_.back();
  // Read JSON lines until "ready".
  std::string buf;
  const auto ready_deadline = std::min(deadline_, Clock::now() + std::chrono::seconds(20));
  while (Clock::now() < ready_deadline) {
    pollfd p{me.out_fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char tmp[4096];
    ssize_t n = read(me.out_fd, tmp, sizeof(tmp));
    if (n <= 0) break;
    buf.append(tmp, n);
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("event", "") == "ready") {
        me.port = static_cast<uint16_t>(j.value("listen_port", 0));
        if (me.port != 0) return me.port;
      }
    }
  }
  std::ifstream f(me.err_path);
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return absl::UnavailableError(
      absl::StrCat("longhaul-emu for edge ", me.edge, " did not become ready: ", err));
}

std::string Parent::ParseOptions() {
  const int n = o_.ranks;
  if (n < 2 || n > 16) return "--ranks must be in [2, 16]";
  absl::StatusOr<ByteCount> min_b = ParseByteCount(o_.min_bytes);
  absl::StatusOr<ByteCount> max_b = ParseByteCount(o_.max_bytes);
  absl::StatusOr<ByteCount> slice = ParseByteCount(o_.slice_bytes);
  absl::StatusOr<Duration> timeout = ParseDuration(o_.timeout);
  if (!min_b.ok()) return absl::StrCat("--min_bytes: ", min_b.status().message());
  if (!max_b.ok()) return absl::StrCat("--max_bytes: ", max_b.status().message());
  if (!slice.ok() || *slice < 4 || *slice > (ByteCount{1} << 30)) {
    return "--slice_bytes must be a size in [4B, 1GiB]";
  }
  if (!timeout.ok() || timeout->ns() <= 0) return "--timeout must be a positive duration";
  if (*min_b > *max_b || *max_b > (ByteCount{8} << 30) || *min_b < 4) {
    return "need 4 <= --min_bytes <= --max_bytes <= 8GiB";
  }
  if (o_.step_factor < 2) return "--step_factor must be >= 2";
  if (o_.iters < 1 || o_.iters > kMaxIters) return "--iters must be in [1, 1000]";
  if (o_.warmup_iters < 0 || o_.warmup_iters > 100) return "--warmup_iters must be in [0, 100]";
  if (o_.recv_ahead < 1 || o_.recv_ahead > 32) return "--recv_ahead must be in [1, 32]";
  min_bytes_ = *min_b;
  max_bytes_ = *max_b;
  slice_bytes_ = *slice;
  deadline_ = Clock::now() + std::chrono::nanoseconds(timeout->ns());
  return "";
}

std::string Parent::ResolvePlugin() {
  std::string plugin = o_.plugin;
  if (plugin.empty() && getenv("NCCL_NET_PLUGIN")) plugin = getenv("NCCL_NET_PLUGIN");
  if (plugin.empty()) {
    // A build tree's (build/lib), else the name, which the dynamic loader finds where the
    // package installed it (the library path: /usr/lib/<multiarch>).
    plugin = SelfDir() + "/../lib/libnccl-net-longhaul.so";
    if (access(plugin.c_str(), F_OK) != 0) plugin = "libnccl-net-longhaul.so";
  }
  absl::StatusOr<LoadedPlugin> p = LoadNetPlugin(plugin);
  if (!p.ok()) return absl::StrCat("plugin not usable: ", p.status().message());
  plugin = p->path;
  UnloadNetPlugin(&*p);
  if (plugin.find('/') != std::string::npos) {
    char real[PATH_MAX];
    if (realpath(plugin.c_str(), real) != nullptr) plugin = real;
  }
  plugin_ = plugin;
  return "";
}

std::string Parent::ResolveLink() {
  if (o_.link.empty()) return "";
  absl::StatusOr<sim::LinkSpec> s = sim::LoadLinkSpec(o_.link);
  if (!s.ok()) return absl::StrCat("--link: ", s.status().message());
  spec_ = *s;
  emu_ = o_.emu.empty() ? SelfDir() + "/longhaul-emu" : o_.emu;
  if (access(emu_.c_str(), X_OK) != 0) {
    return absl::StrCat("longhaul-emu not found at ", emu_,
                        " (build the longhaul-emu target or pass --emu=PATH)");
  }
  return "";
}

std::string Parent::SpawnRanks(const char* argv0) {
  const int n = o_.ranks;
  const std::string self =
      SelfDir() + "/" + std::string(strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0);
  std::string self_exe;
  {
    char buf[4096];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    self_exe = k > 0 ? std::string(buf, k) : self;
  }
  children_.resize(n);
  for (int r = 0; r < n; ++r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return "socketpair failed";
    }
    char tmpl[] = "/tmp/lh-nccl-bench-rank-XXXXXX";
    int tfd = mkstemp(tmpl);
    if (tfd >= 0) close(tfd);
    children_[r].stderr_path = tmpl;
    // The child's end must survive exec: dup it without CLOEXEC.
    int child_fd = dup(sv[1]);
    close(sv[1]);
    if (!rank_keys_.empty()) SetVariable(PluginVariable("KEY"), rank_keys_[r], true);
    std::vector<std::string> args = {self_exe,
                                     absl::StrCat("--rank=", r),
                                     absl::StrCat("--ctrl_fd=", child_fd),
                                     absl::StrCat("--ranks=", n),
                                     absl::StrCat("--plugin=", plugin_),
                                     absl::StrCat("--max_bytes=", max_bytes_),
                                     absl::StrCat("--slice_bytes=", slice_bytes_),
                                     absl::StrCat("--recv_ahead=", o_.recv_ahead),
                                     absl::StrCat("--idle_nap_us=", o_.idle_nap_us),
                                     absl::StrCat("--check=", o_.check ? "true" : "false"),
                                     absl::StrCat("--timeout=", o_.timeout)};
    absl::StatusOr<pid_t> pid = Spawn(args, nullptr, children_[r].stderr_path);
    close(child_fd);
    if (!pid.ok()) {
      close(sv[0]);
      return std::string(pid.status().message());
    }
    children_[r].pid = *pid;
    children_[r].fd = sv[0];
  }
  return "";
}

std::string Parent::RankError(int r, ssize_t got, const void* buf) {
  std::string text;
  if (got > 0 && *static_cast<const uint32_t*>(buf) == kError) {
    text = static_cast<const ErrorMsg*>(buf)->text;
  } else {
    text = absl::StrCat("rank ", r, got == 0 ? " exited" : " did not answer in time");
  }
  for (int k = 0; k < o_.ranks; ++k) {
    std::string err = ChildStderr(k);
    if (!err.empty()) absl::StrAppend(&text, "\n--- stderr of rank ", k, ":\n", err);
  }
  return text;
}

std::string Parent::Gather(std::vector<std::unique_ptr<ResultMsg>>* out, size_t expect,
                           uint32_t type) {
  const int n = o_.ranks;
  out->clear();
  out->resize(n);
  std::vector<bool> have(n, false);
  int left = n;
  while (left > 0) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (!have[r]) {
        fds.push_back({children_[r].fd, POLLIN, 0});
        who.push_back(r);
      }
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (ms.count() <= 0) return RankError(who[0], -1, nullptr);
    int rc = poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms.count(), 1000)));
    if (rc < 0 && errno != EINTR) return "poll failed";
    for (size_t i = 0; rc > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int r = who[i];
      (*out)[r] = std::make_unique<ResultMsg>();
      ssize_t got = recv(children_[r].fd, (*out)[r].get(), sizeof(ResultMsg), 0);
      if (got != static_cast<ssize_t>(expect) || (*out)[r]->type != type) {
        return RankError(r, got, (*out)[r].get());
      }
      have[r] = true;
      --left;
    }
  }
  return "";
}

std::string Parent::ExchangeHandles() {
  const int n = o_.ranks;
  hellos_.assign(n, HelloMsg{});
  {
    std::vector<std::unique_ptr<ResultMsg>> got;
    if (std::string e = Gather(&got, sizeof(HelloMsg), kHello); !e.empty()) return e;
    for (int r = 0; r < n; ++r) {
      memcpy(static_cast<void*>(&hellos_[r]), got[r].get(), sizeof(HelloMsg));
    }
  }
  const int half = n / 2;
  auto dc = [&](int r) { return r < half ? 0 : 1; };
  for (int r = 0; r < n; ++r) {
    const int next = (r + 1) % n;
    PeerMsg peer;
    memcpy(peer.handle, hellos_[next].handle, sizeof(peer.handle));
    if (!o_.link.empty() && dc(r) != dc(next)) {
      absl::StatusOr<PluginHandle> h = DecodeHandle(peer.handle);
      if (!h.ok()) return absl::StrCat("rank ", next, "'s handle: ", h.status().message());
      absl::StatusOr<uint16_t> port = StartEmulator(*h, r, next);
      if (!port.ok()) return std::string(port.status().message());
      if (absl::Status s = RedirectHandle(peer.handle, "127.0.0.1", *port); !s.ok()) {
        return std::string(s.message());
      }
      crossing_.push_back(absl::StrCat(r, "->", next));
    }
    if (!SendMsg(children_[r].fd, &peer, sizeof(peer))) return RankError(r, 0, nullptr);
  }
  std::vector<std::unique_ptr<ResultMsg>> got;
  return Gather(&got, sizeof(uint32_t), kReady);
}

int Parent::Run(const char* argv0) {
  const int n = o_.ranks;
  if (std::string e = ParseOptions(); !e.empty()) return Fail(e);
  if (std::string e = ResolvePlugin(); !e.empty()) return Fail(e);
  if (std::string e = ResolveLink(); !e.empty()) return Fail(e);
  SetRankEnvironment(o_.link.empty() ? nullptr : &spec_, slice_bytes_);
  if (std::string e = PrepareSecurity(); !e.empty()) return Fail(e);
  for (char** e = environ; *e; ++e) {
    if (absl::StartsWith(*e, kSettingPrefix)) env_shown_.push_back(*e);
  }
  if (!rank_keys_.empty()) {
    env_shown_.push_back(absl::StrCat(PluginVariable("KEY"), "=", keys_dir_, "/rank-N.key"));
  }
  std::sort(env_shown_.begin(), env_shown_.end());
  if (std::string e = SpawnRanks(argv0); !e.empty()) return Fail(e);
  if (std::string e = ExchangeHandles(); !e.empty()) return Fail(e);

  const int half = n / 2;
  const std::string load_before = LoadAverage();
  if (!o_.json) {
    TableHeader h;
    h.ranks = n;
    h.link = o_.link.empty() ? "" : spec_.ToString();
    h.crossing = crossing_;
    h.plugin = plugin_;
    h.plugin_version = hellos_[0].version;
    h.device = hellos_[0].device;
    h.speed_mbps = hellos_[0].speed_mbps;
    h.latency_us = hellos_[0].latency_us;
    h.env = env_shown_;
    h.security = security_;
    h.slice = FormatByteCount(slice_bytes_);
    h.recv_ahead = o_.recv_ahead;
    h.warmup_iters = o_.warmup_iters;
    h.iters = o_.iters;
    h.load_average = load_before;
    PrintTableHeader(h);
  }
  nlohmann::json results = nlohmann::json::array();
  double bw_sum = 0;
  int bw_count = 0;
  int64_t wrong_total = 0;
  for (ByteCount bytes = min_bytes_; bytes <= max_bytes_; bytes *= o_.step_factor) {
    const size_t count = bytes / sizeof(float);
    RunMsg run;
    run.bytes = count * sizeof(float);
    run.iters = o_.iters;
    run.warmup = o_.warmup_iters;
    for (int r = 0; r < n; ++r) {
      if (!SendMsg(children_[r].fd, &run, sizeof(run))) return Fail(RankError(r, 0, nullptr));
    }
    std::vector<std::unique_ptr<ResultMsg>> res;
    if (std::string e = Gather(&res, sizeof(ResultMsg), kResult); !e.empty()) return Fail(e);
    const SizeResult row = Summarize(run.bytes, o_.iters, res);
    wrong_total += row.wrong;
    bw_sum += row.busbw_gbps;
    ++bw_count;
    if (!o_.json) PrintTableRow(row);
    results.push_back(SizeResultJson(row));
    if (bytes > max_bytes_ / o_.step_factor) break;
  }
  for (int r = 0; r < n; ++r) {
    uint32_t ex = kExit;
    SendMsg(children_[r].fd, &ex, sizeof(ex));
  }
  const double avg = bw_count ? bw_sum / bw_count : 0;
  const std::string load_after = LoadAverage();
  if (o_.json) {
    nlohmann::json j;
    j["ranks"] = n;
    j["data_centres"] = {{"a", {0, half - 1}}, {"b", {half, n - 1}}};
    j["link"] = o_.link.empty() ? nlohmann::json(nullptr)
                                : nlohmann::json::parse(spec_.ToJson(), nullptr, false);
    j["emulated_edges"] = crossing_;
    j["plugin"] = plugin_;
    j["plugin_version"] = hellos_[0].version;
    j["device"] = hellos_[0].device;
    j["env"] = env_shown_;
    j["security"] = security_;
    j["slice_bytes"] = slice_bytes_;
    j["iters"] = o_.iters;
    j["warmup_iters"] = o_.warmup_iters;
    j["results"] = results;
    j["out_of_bounds"] = wrong_total;
    j["avg_busbw_GBps"] = avg;
    j["load_average_before"] = load_before;
    j["load_average_after"] = load_after;
    printf("%s\n", j.dump(2).c_str());
  } else {
    PrintTableFooter(wrong_total, avg, load_after);
  }
  Cleanup();
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace longhaul::nccl::bench
