#include "transport/nccl/settings.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/datapath/options.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"

extern char** environ;

namespace longhaul::nccl {
namespace {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMs = 1000 * 1000;
constexpr int64_t kSec = 1000 * kMs;
constexpr int64_t kMaxCpu = 1023;  // CPU_SETSIZE - 1: what sched_setaffinity's cpu_set_t holds

// The table. Order: as docs/nccl.md lists them (and the order they are parsed in).
constexpr SettingSpec kSpecs[] = {
    {"IFNAME", SettingType::kInterfaceList, 0, 0, "",
     "`NCCL_SOCKET_IFNAME`, else the first interface that is up and not loopback, else `lo`",
     "devices: one per matching interface. NCCL's syntax: `eth,ib` prefixes, `=eth0` exact "
     "names, `^docker` excludes",
     &Settings::ifname},
    {"PROFILE", SettingType::kPath, 0, 0, "",
     "none (TransportConfig defaults: fixed-rate pacing at 1 Gbit/s; the plugin warns once "
     "when neither a profile nor `NCCL_LONGHAUL_RATE` is given)",
     "a longhaul profile (`LoadProfileFile`), e.g. written by `longhaul-tune`; may also "
     "hold `key`, `peer_key`, `psk_file`, `insecure` (docs/tuning.md), which the variables "
     "below override",
     &Settings::profile_path},
    {"CREDIT", SettingType::kSize, 64 * kKiB, 64 * kGiB, "",
     "2 x rate x RTT of the profile, in [16 MiB, 1 GiB]",
     "bytes of unmatched data a receiver buffers per comm (section 3)", &Settings::credit},
    {"COPY_MAX", SettingType::kSize, 0, kGiB, "1MiB", "",
     "sends up to this size are copied and complete at once; larger ones are sent in place "
     "and complete when acknowledged",
     &Settings::copy_max},
    {"LINGER", SettingType::kDuration, 0, 600 * kSec, "5s", "",
     "the last `finalize` (and `closeSend` with in-place data) waits this long for data in "
     "flight to be acknowledged",
     &Settings::linger},
    {"CONNECT_TIMEOUT", SettingType::kDuration, 100 * kMs, 600 * kSec, "20s", "",
     "handshake limit of one connection", &Settings::connect_timeout},
    {"PORT", SettingType::kPort, 0, 65535, "0", "",
     "UDP port each device listens on (0: any free port)", &Settings::port},
    {"SPIN", SettingType::kDuration, 0, 10 * kMs, "20us", "",
     "the driver thread polls instead of sleeping when a pacing deadline is this close (0: "
     "always sleep)",
     &Settings::spin},
    {"SEND_QUANTUM", SettingType::kSize, 0, kMiB, "128KiB", "",
     "paced sends are batched: the driver sleeps until this much is due at the pacing rate "
     "and sends it at once (0: it wakes for every datagram)",
     &Settings::send_quantum},
    {"ADVERTISE", SettingType::kAddressPort, 1, 65535, "",
     "none: the device's own address and port",
     "the `address:port` that `listen` writes into its handles instead of the device's own, "
     "for a relay or port forward in front of the listener (every device; with a fixed "
     "`NCCL_LONGHAUL_PORT`); `tools/nccl/check-real-nccl --link` puts longhaul-emu there",
     &Settings::advertise},
    {"KEY", SettingType::kPath, 0, 0, "", "none",
     "this rank's private key file (`longhaul-keygen --out=PREFIX` writes `PREFIX.key`, mode "
     "0600), for static keys (Noise IK) with `NCCL_LONGHAUL_PEER_KEY`; its public key goes "
     "into the rank's handles (section 5)",
     &Settings::key_path},
    {"PEER_KEY", SettingType::kPath, 0, 0, "", "none",
     "the public keys of the ranks this rank may connect to and accept, one per line (`#` "
     "comments, a label after the key); the same file on every rank is the simple choice",
     &Settings::peer_key_path},
    {"PSK_FILE", SettingType::kPath, 0, 0, "", "none",
     "a pre-shared key file (64 hex digits: `longhaul-keygen --psk=FILE`, `openssl rand -hex "
     "32`, mode 0600), the same on every rank: Noise NNpsk0 alone, IKpsk1 with static keys",
     &Settings::psk_path},
    {"INSECURE", SettingType::kSwitch, 0, 1, "",
     "none: one of the key settings above or `NCCL_LONGHAUL_INSECURE=1` is required",
     "1: plaintext packets with a CRC32C, readable and forgeable on the path, chosen "
     "explicitly",
     &Settings::insecure},
    {"DATAPATH", SettingType::kDatapath, 0, 0, "udp", "",
     "`udp` (sockets) or `verbs` (UD queue pairs on RoCE v2 through rdma-core: the RDMA "
     "device holding each interface's address; docs/rdma.md)",
     &Settings::datapath},
    {"QP_TYPE", SettingType::kQpType, 0, 0, "ud", "",
     "with `verbs`: `ud` (every datagram a UD message) or `uc` (after each connection's "
     "handshake both ranks offer a UC lane; datagrams larger than the MTU are then written "
     "as 64 KiB chunks into the peer's registered ring by RDMA WRITE; docs/rdma.md section "
     "7). `uc` needs `verbs`",
     &Settings::qp_type},
    {"ENGINES", SettingType::kCount, 0, kMaxEngines, "1", "",
     "engines (driver threads, `lh-engine-<i>`) of the process's endpoint; 0: one per CPU "
     "the process may run on, at most 8 (1 with `verbs`). More than 1 needs `udp`: each peer "
     "then gets one connection per engine, its comms spread over them and the rate split "
     "among them (section 3, Engines)",
     &Settings::engines},
    {"ENGINE_CPUS", SettingType::kCpuList, 0, kMaxCpu, "", "none: not pinned",
     "CPUs to pin the engines to, `2,3` or `0-3`: engine i runs on the (i mod count)-th",
     &Settings::engine_cpus},
};

// getenv's rule on `envp`: the first NAME= entry counts; an empty value is unset.
std::optional<std::string> Lookup(const char* const* envp, absl::string_view name) {
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (kv.size() > name.size() && kv[name.size()] == '=' && absl::StartsWith(kv, name)) {
      absl::string_view v = kv.substr(name.size() + 1);
      if (v.empty()) return std::nullopt;
      return std::string(v);
    }
  }
  return std::nullopt;
}

std::string BoundText(const SettingSpec& spec, int64_t v) {
  if (v == 0) return "0";
  switch (spec.type) {
    case SettingType::kSize:
      return FormatByteCount(static_cast<ByteCount>(v));
    case SettingType::kDuration:
      return FormatDuration(Duration::Nanoseconds(v));
    default:
      return absl::StrCat(v);
  }
}

absl::Status BadValue(const SettingSpec& spec, absl::string_view value,
                      const absl::Status& parse_error) {
  return absl::FailedPreconditionError(
      absl::StrCat(kSettingPrefix, spec.key, "=", value, ": expected a ", SettingTypeText(spec),
                   parse_error.ok() ? "" : absl::StrCat(" (", parse_error.message(), ")")));
}

template <typename T>
absl::Status Store(const SettingSpec& spec, T value, Settings* settings) {
  T Settings::*const* field = std::get_if<T Settings::*>(&spec.field);
  if (field == nullptr) {
    return absl::InternalError(
        absl::StrCat(kSettingPrefix, spec.key, ": the table's field does not match its type"));
  }
  settings->*(*field) = std::move(value);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const SettingSpec> PluginSettingSpecs() { return kSpecs; }

const SettingSpec* FindPluginSetting(absl::string_view key) {
  for (const SettingSpec& s : kSpecs) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

std::string SettingTypeText(const SettingSpec& spec) {
  const std::string range =
      absl::StrCat(" in [", BoundText(spec, spec.min), ", ", BoundText(spec, spec.max), "]");
  switch (spec.type) {
    case SettingType::kInterfaceList:
      return "interface list";
    case SettingType::kPath:
      return "path";
    case SettingType::kSize:
      return absl::StrCat("size", range);
    case SettingType::kDuration:
      return absl::StrCat("duration", range);
    case SettingType::kPort:
      return absl::StrCat("port", range);
    case SettingType::kAddressPort:
      return "numeric address:port";
    case SettingType::kSwitch:
      return "0 or 1";
    case SettingType::kDatapath:
      return "datapath (udp, verbs)";
    case SettingType::kQpType:
      return "queue pair type (ud, uc)";
    case SettingType::kCount:
      return absl::StrCat("count", range);
    case SettingType::kCpuList:
      return absl::StrCat("CPU list (numbers", range, ")");
  }
  return "?";
}

absl::Status ApplySetting(const SettingSpec& spec, absl::string_view value, Settings* settings) {
  switch (spec.type) {
    case SettingType::kInterfaceList:
    case SettingType::kPath:
      return Store(spec, std::string(value), settings);
    case SettingType::kSize: {
      absl::StatusOr<ByteCount> b = ParseByteCount(value);
      if (!b.ok()) return BadValue(spec, value, b.status());
      if (*b < static_cast<ByteCount>(spec.min) || *b > static_cast<ByteCount>(spec.max)) {
        return BadValue(spec, value, absl::OkStatus());
      }
      return Store(spec, uint64_t{*b}, settings);
    }
    case SettingType::kDuration: {
      absl::StatusOr<Duration> d = ParseDuration(value);
      if (!d.ok()) return BadValue(spec, value, d.status());
      if (d->ns() < spec.min || d->ns() > spec.max) return BadValue(spec, value, absl::OkStatus());
      return Store(spec, *d, settings);
    }
    case SettingType::kPort: {
      int port = 0;
      if (!absl::SimpleAtoi(value, &port) || port < spec.min || port > spec.max) {
        return BadValue(spec, value, absl::OkStatus());
      }
      return Store(spec, static_cast<uint16_t>(port), settings);
    }
    case SettingType::kAddressPort: {
      absl::StatusOr<AddressPort> a = ParseAddressPort(value);
      if (!a.ok()) return BadValue(spec, value, a.status());
      if (a->port < spec.min || a->port > spec.max) {
        return BadValue(spec, value, absl::OkStatus());
      }
      return Store(spec, std::string(value), settings);
    }
    case SettingType::kSwitch: {
      if (value != "0" && value != "1") return BadValue(spec, value, absl::OkStatus());
      return Store(spec, std::optional<bool>(value == "1"), settings);
    }
    case SettingType::kDatapath: {
      absl::StatusOr<Datapath> d = ParseDatapath(std::string(value));
      if (!d.ok()) return BadValue(spec, value, d.status());
      return Store(spec, std::string(value), settings);
    }
    case SettingType::kQpType: {
      absl::StatusOr<QpType> q = ParseQpType(std::string(value));
      if (!q.ok()) return BadValue(spec, value, q.status());
      return Store(spec, std::string(value), settings);
    }
    case SettingType::kCount: {
      int64_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < spec.min || n > spec.max) {
        return BadValue(spec, value, absl::OkStatus());
      }
      return Store(spec, static_cast<uint32_t>(n), settings);
    }
    case SettingType::kCpuList: {
      absl::StatusOr<std::vector<int>> cpus = ParseCpuList(value);  // "0,2,4-7"
      if (!cpus.ok()) return BadValue(spec, value, cpus.status());
      for (int cpu : *cpus) {
        if (cpu < spec.min || cpu > spec.max) return BadValue(spec, value, absl::OkStatus());
      }
      return Store(spec, *std::move(cpus), settings);
    }
  }
  return absl::InternalError(absl::StrCat(kSettingPrefix, spec.key, ": unknown setting type"));
}

absl::StatusOr<AddressPort> ParseAddressPort(absl::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("no port in '", text, "'"));
  }
  absl::string_view host = text.substr(0, colon);
  const absl::string_view port_text = text.substr(colon + 1);
  const bool bracketed = absl::StartsWith(host, "[") && absl::EndsWith(host, "]");
  if (bracketed) host = host.substr(1, host.size() - 2);
  AddressPort out;
  out.address = std::string(host);
  unsigned char buf[sizeof(in6_addr)];
  const bool v4 = !bracketed && inet_pton(AF_INET, out.address.c_str(), buf) == 1;
  const bool v6 = bracketed && inet_pton(AF_INET6, out.address.c_str(), buf) == 1;
  if (!v4 && !v6) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", host, "' is not a numeric IPv4 address or a bracketed IPv6 address"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port '", port_text, "' is not in [1, 65535]"));
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

uint64_t DefaultCredit(const TransportConfig& config) {
  // Twice the path's bandwidth-delay product: a round trip of data plus a repair round.
  const double bdp = config.rate.BytesPerSecond() * config.initial_rtt.seconds();
  return std::clamp<uint64_t>(static_cast<uint64_t>(2 * bdp), uint64_t{16} << 20,
                              uint64_t{1} << 30);
}

absl::StatusOr<Settings> ReadSettings(const char* const* envp) {
  Settings s;
  bool credit_given = false;
  for (const SettingSpec& spec : kSpecs) {
    std::optional<std::string> v = Lookup(envp, absl::StrCat(kSettingPrefix, spec.key));
    if (!v.has_value() && spec.default_value.empty()) continue;
    const std::string value = v.has_value() ? *v : std::string(spec.default_value);
    LH_RETURN_IF_ERROR(ApplySetting(spec, value, &s));
    if (spec.key == "CREDIT") credit_given = v.has_value();
  }
  if (!s.profile_path.empty()) {
    absl::StatusOr<LoadedProfile> c = LoadProfileFile(s.profile_path, s.config);
    if (!c.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(kSettingPrefix, "PROFILE: ", c.status().message()));
    }
    s.config = c->config;
    s.profile_security = c->security;
    s.rate_given = true;
    s.rtt_given = s.config.initial_rtt != TransportConfig{}.initial_rtt;
  }
  // NCCL_LONGHAUL_<KEY>=value overrides one profile key, in environment order.
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (!absl::StartsWith(kv, kSettingPrefix)) continue;
    const size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    const std::string key(kv.substr(kSettingPrefix.size(), eq - kSettingPrefix.size()));
    const std::string value(kv.substr(eq + 1));
    if (FindPluginSetting(key) != nullptr) continue;
    const std::string lower = absl::AsciiStrToLower(key);
    if (absl::Status st = ApplyProfileKey(&s.config, lower, value); !st.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(kSettingPrefix, key, "=", value, ": ", st.message()));
    }
    if (lower == "rate") s.rate_given = true;
    if (lower == "initial_rtt") s.rtt_given = true;
  }
  if (absl::Status st = s.config.Validate(); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("longhaul configuration from the environment: ", st.message()));
  }
  if (s.engines > 1 && s.datapath != "udp") {
    return absl::FailedPreconditionError(absl::StrCat(
        kSettingPrefix, "ENGINES=", s.engines, ": more than one engine needs ", kSettingPrefix,
        "DATAPATH=udp (the ", s.datapath, " datapath runs one engine)"));
  }
  if (s.qp_type == "uc" && s.datapath != "verbs") {
    return absl::FailedPreconditionError(absl::StrCat(
        kSettingPrefix, "QP_TYPE=uc needs ", kSettingPrefix, "DATAPATH=verbs"));
  }
  if (!credit_given) s.credit = DefaultCredit(s.config);
  if (!s.ifname.empty()) {
    s.ifname_variable = absl::StrCat(kSettingPrefix, "IFNAME");
  } else if (std::optional<std::string> v = Lookup(envp, "NCCL_SOCKET_IFNAME")) {
    s.ifname = *v;
    s.ifname_variable = "NCCL_SOCKET_IFNAME";
  }
  return s;
}

absl::StatusOr<Settings> ReadSettingsFromEnvironment() { return ReadSettings(environ); }

absl::StatusOr<crypto::LoadedKeys> LoadPluginKeys(const Settings& settings) {
  auto var = [](absl::string_view key) { return absl::StrCat(kSettingPrefix, key); };
  auto from_profile = [](const ProfileSetting& p, const char* key) -> crypto::KeyFileSetting {
    if (!p.set()) return {};
    return {p.value, absl::StrCat(key, " (", p.where, ", NCCL_LONGHAUL_PROFILE)")};
  };
  const ProfileSecurity& ps = settings.profile_security;
  crypto::KeyChoice profile;
  profile.key = from_profile(ps.key, "key");
  profile.peer_key = from_profile(ps.peer_key, "peer_key");
  profile.psk_file = from_profile(ps.psk_file, "psk_file");
  profile.insecure = ps.insecure;
  if (ps.insecure.has_value()) {
    profile.insecure_source =
        absl::StrCat("insecure (", ps.insecure_where, ", NCCL_LONGHAUL_PROFILE)");
  }
  crypto::KeyChoice env;
  if (!settings.key_path.empty()) env.key = {settings.key_path, var("KEY")};
  if (!settings.peer_key_path.empty()) env.peer_key = {settings.peer_key_path, var("PEER_KEY")};
  if (!settings.psk_path.empty()) env.psk_file = {settings.psk_path, var("PSK_FILE")};
  if (settings.insecure.has_value()) {
    env.insecure = settings.insecure;
    env.insecure_source = absl::StrCat(var("INSECURE"), "=", *settings.insecure ? "1" : "0");
  }
  crypto::KeyChoiceNames names;
  names.key = var("KEY");
  names.peer_key = var("PEER_KEY");
  names.psk_file = var("PSK_FILE");
  names.insecure = absl::StrCat(var("INSECURE"), "=1");
  absl::StatusOr<crypto::LoadedKeys> keys =
      crypto::LoadKeys(crypto::OverrideKeyChoice(profile, env), names);
  if (!keys.ok()) return absl::FailedPreconditionError(keys.status().message());
  return keys;
}

std::string PluginSettingsMarkdown() {
  std::string out = "| variable | type | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const SettingSpec& s : kSpecs) {
    const std::string def = !s.default_doc.empty() ? std::string(s.default_doc)
                                                   : absl::StrCat("`", s.default_value, "`");
    absl::StrAppend(&out, "| `", kSettingPrefix, s.key, "` | ", SettingTypeText(s), " | ", def,
                    " | ", s.doc, " |\n");
  }
  return out;
}

}  // namespace longhaul::nccl
