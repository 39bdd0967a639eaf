// The plugin's settings: one table (PluginSettingSpecs) of its own NCCL_LONGHAUL_*
// variables, with type, bounds, default and a line of documentation each, from which
// they are parsed and validated and docs/nccl.md's list is rendered
// (PluginSettingsMarkdown; a unit test keeps the two equal). The model is aws-ofi-nccl's
// one table of environment parameters (nccl_ofi_param.h).
//
// Every other NCCL_LONGHAUL_<KEY> variable is a longhaul profile key (ApplyProfileKey,
// key lower-cased), applied in environment order after NCCL_LONGHAUL_PROFILE. Plugin keys
// are matched exactly (upper case): NCCL_LONGHAUL_credit is an (unknown) profile key.
//
// Errors: FailedPrecondition (the plugin maps it to ncclInvalidUsage) naming the
// variable and its value: "NCCL_LONGHAUL_CREDIT=1k: expected a size in [64KiB, 64GiB]",
// "NCCL_LONGHAUL_FEC=bogus: bad value 'bogus' for 'fec': ...", "NCCL_LONGHAUL_FOO=1:
// unknown key 'foo' (known keys: ...)", "NCCL_LONGHAUL_PROFILE: <why the file is bad>",
// "longhaul configuration from the environment: <Validate()'s message>".
//
// Packet protection (docs/security.md): NCCL_LONGHAUL_KEY and NCCL_LONGHAUL_PEER_KEY
// (static keys: this rank's private key and the public keys of the ranks it may talk
// to), NCCL_LONGHAUL_PSK_FILE (a pre-shared key), or NCCL_LONGHAUL_INSECURE=1
// (plaintext), over the profile's key, peer_key, psk_file and insecure settings.
// ReadSettings only parses them; LoadPluginKeys reads the files and refuses a missing or
// contradictory choice ("no keys: give NCCL_LONGHAUL_KEY and NCCL_LONGHAUL_PEER_KEY, or
// NCCL_LONGHAUL_PSK_FILE, or NCCL_LONGHAUL_INSECURE=1 for plaintext").
//
// Units: sizes in bytes, durations as Duration (ns), ports as numbers.
// Thread-safety: pure functions of their arguments (ReadSettingsFromEnvironment reads
// `environ`, which must not change meanwhile); the table is immutable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/crypto/key_files.h"
#include "transport/profile/profile_file.h"

namespace longhaul::nccl {

inline constexpr absl::string_view kSettingPrefix = "NCCL_LONGHAUL_";

// What the plugin runs with: the transport configuration and its own settings. The
// defaults are the table's (ReadSettings applies them); a value-initialised Settings is
// not a usable configuration.
struct Settings {
  TransportConfig config;       // TransportConfig defaults, the profile, then the keys
  std::string profile_path;     // NCCL_LONGHAUL_PROFILE; empty: none
  std::string ifname;           // interface list (NCCL syntax); empty: the default choice
  std::string ifname_variable;  // the variable `ifname` came from; empty when none
  uint64_t credit = 0;          // bytes per comm
  uint64_t copy_max = 0;        // sends up to this many bytes are copied
  Duration linger;              // the last finalize waits this long for data in flight
  Duration connect_timeout;     // handshake limit of one connection
  Duration spin;                // the driver polls when a deadline is this close
  uint64_t send_quantum = 0;    // paced sends batched into this many bytes
  uint16_t port = 0;            // UDP port of each device; 0: any
  std::string advertise;        // "address:port" listen writes into handles; empty: the
                                // device's own (validated by ReadSettings)
  std::string datapath;         // "udp" or "verbs" (validated by ReadSettings)
  std::string qp_type;          // "ud" or "uc" (validated by ReadSettings)
  uint32_t engines = 1;         // driver threads of the endpoint; 0: auto (EndpointOptions)
  std::vector<int> engine_cpus;  // engine i pinned to engine_cpus[i % size]; empty: none
  bool rate_given = false;      // a profile or NCCL_LONGHAUL_RATE set the rate
  bool rtt_given = false;       // the profile or NCCL_LONGHAUL_INITIAL_RTT set the RTT
  // Packet protection as given (paths unchecked; LoadPluginKeys reads them).
  std::string key_path;              // NCCL_LONGHAUL_KEY
  std::string peer_key_path;         // NCCL_LONGHAUL_PEER_KEY
  std::string psk_path;              // NCCL_LONGHAUL_PSK_FILE
  std::optional<bool> insecure;      // NCCL_LONGHAUL_INSECURE (0 or 1); unset: not given
  ProfileSecurity profile_security;  // the profile's key, peer_key, psk_file, insecure
};

enum class SettingType {
  kInterfaceList,
  kPath,
  kSize,
  kDuration,
  kPort,
  kAddressPort,
  kSwitch,  // 0 or 1
  kDatapath,
  kQpType,   // ud or uc (VerbsOptions::qp_type)
  kCount,    // a whole number in [min, max]
  kCpuList,  // comma-separated CPU numbers, each in [min, max]
};

// One NCCL_LONGHAUL_<key> variable of the plugin.
struct SettingSpec {
  absl::string_view key;  // "CREDIT": the variable is NCCL_LONGHAUL_CREDIT
  SettingType type;
  // Inclusive bounds of sizes (bytes), durations (ns), ports (also the port of an
  // address:port), counts and each CPU of a CPU list; unused for other strings.
  int64_t min = 0;
  int64_t max = 0;
  // The value used when the variable is unset or empty, parsed like a set value; empty:
  // none, or computed (default_doc says how).
  absl::string_view default_value;
  // The docs' default column when it is more than `default_value` (markdown).
  absl::string_view default_doc;
  absl::string_view doc;  // one line of markdown
  std::variant<std::string Settings::*, uint64_t Settings::*, Duration Settings::*,
               uint16_t Settings::*, std::optional<bool> Settings::*, uint32_t Settings::*,
               std::vector<int> Settings::*>
      field;
};

// The plugin's settings, in the docs' order.
absl::Span<const SettingSpec> PluginSettingSpecs();
// The spec of NCCL_LONGHAUL_<key> (exact match), or NULL when `key` is not the plugin's.
const SettingSpec* FindPluginSetting(absl::string_view key);

// Parses `value` as `spec`'s variable and stores it in `*settings`. FailedPrecondition
// "NCCL_LONGHAUL_<KEY>=<value>: expected a <type> in [<min>, <max>]" (with the parser's
// reason when the text did not parse).
absl::Status ApplySetting(const SettingSpec& spec, absl::string_view value, Settings* settings);

// Reads the settings from `envp` (NAME=VALUE strings, NULL-terminated, as `environ`): the
// plugin's variables (the first of a name counts; an empty value is unset), the profile,
// the profile keys in order, Validate(), the engines' fit with the datapath (more than
// one needs udp: "NCCL_LONGHAUL_ENGINES=2: more than one engine needs
// NCCL_LONGHAUL_DATAPATH=udp ..."), then the credit's default (2 x rate x RTT within
// [16 MiB, 1 GiB]) and the interface list's fallback to NCCL_SOCKET_IFNAME.
absl::StatusOr<Settings> ReadSettings(const char* const* envp);
// ReadSettings(environ).
absl::StatusOr<Settings> ReadSettingsFromEnvironment();

// The packet protection `settings` choose: the profile's key, peer_key, psk_file and
// insecure, then the NCCL_LONGHAUL_* variables (crypto::OverrideKeyChoice), each file
// read and checked (crypto::LoadKeys). FailedPrecondition naming the variable (or the
// profile's line) and the file: "no keys: give NCCL_LONGHAUL_KEY and
// NCCL_LONGHAUL_PEER_KEY, or NCCL_LONGHAUL_PSK_FILE, or NCCL_LONGHAUL_INSECURE=1 for
// plaintext", "NCCL_LONGHAUL_KEY: r0.key is readable by others (mode 0644): chmod 600
// r0.key".
absl::StatusOr<crypto::LoadedKeys> LoadPluginKeys(const Settings& settings);

// A numeric address and a port: "198.18.0.1:5000" or "[::1]:5000".
struct AddressPort {
  std::string address;  // numeric, without brackets
  uint16_t port = 0;
};
// Parses "IPv4:port" or "[IPv6]:port" (numeric addresses only; port in [1, 65535]).
// InvalidArgument naming what is wrong.
absl::StatusOr<AddressPort> ParseAddressPort(absl::string_view text);

// The credit a comm gets by default for `config`: 2 x rate x initial_rtt, within
// [16 MiB, 1 GiB].
uint64_t DefaultCredit(const TransportConfig& config);

// "size in [64KiB, 64GiB]", "duration in [0, 600s]", "port in [0, 65535]", "path",
// "numeric address:port", "count in [0, 64]", "CPU list (numbers in [0, 1023])", ...
std::string SettingTypeText(const SettingSpec& spec);

// docs/nccl.md's settings table (markdown, one row per spec, ending in a newline).
std::string PluginSettingsMarkdown();

}  // namespace longhaul::nccl
