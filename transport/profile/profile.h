// Profile files: TransportConfig settings as text, written by the tuner and read by
// every tool and by the NCCL plugin.
//
// Format: one `key=value` per line; `#` starts a comment (whole line or after a value);
// blank lines and whitespace around keys and values are ignored. Keys are the
// TransportConfig field names; values use the human units of transport/base/parse.h:
//
//   segment, window, recv_window     sizes          8KiB, 1GiB, 725MB
//   mtu                              size           sets segment = SegmentForMtu(mtu)
//   max_inflight_messages, flows     integers
//   cc                               fixed | bbr
//   rate                             rate           10gbit, 800mbit (0: no cap, bbr only)
//   rate_min                         rate           bbr's least bandwidth (0: none)
//   initial_rate                     rate           bbr's first round trip (0: 10 packets)
//   ecn, cc_compete, cc_yield, tail_protect
//                                    bools          true/false, on/off, yes/no, 1/0
//   pacing_burst, initial_rtt, min_pto, max_pto, max_ack_delay, fec_flush,
//   idle_timeout, keepalive          durations      100us, 58ms, 10s
//   reorder_packets, ack_every, max_ack_ranges, fec_interleave, fec_k, fec_m
//                                    integers
//   reorder_rtt_fraction, cc_loss_threshold, fec_tail, fec_max_overhead
//                                    numbers        0.125 (or 12.5%), 0.999, 0.25
//   fec                              off | K,M | auto   (K,M sets fec_k and fec_m and
//                                                        mode fixed; "fixed" keeps them)
//
// Lines are applied in order, so a later line overrides an earlier one; setting both
// `mtu` and `segment` in one profile is rejected as ambiguous. The parsed result is
// Validate()d. Example (profiles/*.profile):
//
//   # tuned for tokyo<->frankfurt, 2024-05-01
//   window=1GiB
//   rate=9500mbit
//   fec=32,4
//
// Pure functions on text: no files (profile_file.h reads them), no global state,
// thread-safe. Errors are absl::InvalidArgumentError whose message names the source, the
// line and the key.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/core/config.h"

namespace longhaul {

// Sets one field of `config` from its text form. Does not Validate() the whole config
// (other keys may still follow). Errors: InvalidArgument naming the key and the
// accepted form, e.g. "bad value '12x' for 'window': bad size unit in '12x': use B, ..."
// or "unknown key 'foo' (known keys: segment, window, ...)".
[[nodiscard]] absl::Status ApplyProfileKey(TransportConfig* config, absl::string_view key,
                                           absl::string_view value);

// Applies every line of `text` to a copy of `base`, then Validate()s the result.
// `source_name` (usually the file name) prefixes every error, with the line number for
// line errors: "tokyo.profile:7: unknown key 'foo' (known keys: ...)",
// "tokyo.profile:3: bad value '12x' for 'window': ...",
// "tokyo.profile:5: expected key=value, got 'window 1GiB'",
// "tokyo.profile: invalid configuration: window=... is outside [...]".
[[nodiscard]] absl::StatusOr<TransportConfig> ParseProfile(absl::string_view text,
                                                           const TransportConfig& base,
                                                           absl::string_view source_name);

// Every key (in a fixed order) with its canonical value. Parsing these pairs on top of
// any base reproduces `config` exactly. `mtu` is not listed: it only derives `segment`.
std::vector<std::pair<std::string, std::string>> ProfileKeyValues(const TransportConfig& config);

// The profile text for `config`: each line of `header_comment` (if any) as a "# " line,
// then one key=value line per ProfileKeyValues() entry. ParseProfile reads it back.
std::string FormatProfile(const TransportConfig& config, absl::string_view header_comment);

// The keys ApplyProfileKey accepts, in ProfileKeyValues() order followed by "mtu".
std::vector<std::string> ProfileKeys();

// The form of a key's value: what its canonical text (ProfileKeyValues) parses as.
enum class ProfileValueKind {
  kSize,      // ParseByteCount: segment, window, recv_window, mtu
  kRate,      // ParseBandwidth: rate, rate_min, initial_rate
  kDuration,  // ParseDuration
  kInteger,   // a whole number from 0 to 4294967295
  kBool,      // true / false
  kNumber,    // a non-negative real number
  kChoice,    // words of its own: cc, fec
};

// The kind of `key`'s value; nullopt for a key ApplyProfileKey does not accept.
std::optional<ProfileValueKind> ProfileKeyKind(absl::string_view key);

}  // namespace longhaul
