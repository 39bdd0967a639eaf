// LinkSpec: the description of an emulated network path, written as a spec string that
// means the same thing in longhaul-sim, longhaul-emu, the tests and the tuner.
//
//   "rate=100gbit,rtt=58ms,loss=1e-4"             explicit keys
//   "tokyo-singapore"                             a named spec (profiles/links/NAME.link)
//   "tokyo-singapore,loss=1e-3,burst=4"           a named spec followed by overrides
//
// Parsing takes text only: what a name stands for is given in (a LinkResolver). Finding
// and reading profiles/links/NAME.link is the edge's (transport/sim/link_files.h).
//
// Keys (docs/simulator.md has the full semantics):
//   rate           bottleneck rate, bits/s ("100gbit", "800mbit"); required
//   rtt            round-trip propagation delay; each direction gets rtt/2 (default 0)
//   jitter         extra one-way delay, uniform in [0, jitter], order-preserving
//   loss           average packet-loss probability ("1e-3", "0.1%")
//   burst          mean loss-burst length in packets; 1 = Bernoulli, > 1 = Gilbert model
//   reorder        probability a packet is held back by reorder_delay (default 1ms)
//   dup            probability a packet is delivered twice
//   corrupt        probability one random bit of the datagram is flipped
//   queue          drop-tail queue limit, bytes ("7MB") or time at rate ("58ms");
//                  default one BDP (rate x rtt), at least 64 KiB
//   ecn            CE-marking threshold of the queue, bytes or time (absent/0: no marking)
//   mtu            IP MTU; larger packets are dropped as too big (default 9000)
//   overhead       per-datagram wire bytes for IP + UDP headers (default 28)
//   seed           seed of this link's randomness (default: derived from the simulator's)
//
// A LinkSchedule changes keys at given times: "2s:rate=5gbit,4s:rate=10gbit,loss=1e-3"
// (a token "TIME:key=value" starts a step; following "key=value" tokens belong to it).
//
// Errors are absl::InvalidArgumentError naming the key and the accepted form (and the
// origin of a named spec's text). Everything here is a value type or a pure function;
// thread-safe as values are.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/base/units.h"

namespace longhaul::sim {

// A queue size given either in bytes or as a time at the link rate.
struct QueueSize {
  ByteCount bytes = 0;
  Duration time;
  bool is_time = false;

  static QueueSize Bytes(ByteCount b) { return QueueSize{b, Duration::Zero(), false}; }
  static QueueSize Time(Duration d) { return QueueSize{0, d, true}; }
  // The size in bytes at `rate`.
  ByteCount Resolve(Bandwidth rate) const { return is_time ? rate.BytesIn(time) : bytes; }
  bool IsZero() const { return is_time ? time <= Duration::Zero() : bytes == 0; }
  std::string ToString() const;
  bool operator==(const QueueSize&) const = default;
};

struct LinkSpec {
  static constexpr ByteCount kDefaultMtu = 9000;
  static constexpr ByteCount kDefaultOverhead = 28;  // IPv4 (20) + UDP (8)
  static constexpr ByteCount kMinQueue = 64 * 1024;

  Bandwidth rate;                                   // bits/s, > 0
  Duration rtt;                                     // round-trip propagation delay
  Duration jitter;                                  // max extra one-way delay
  double loss = 0;                                  // average loss probability
  double burst = 1;                                 // mean loss-burst length, packets
  double reorder = 0;                               // probability of being held back
  Duration reorder_delay = Duration::Milliseconds(1);
  double dup = 0;                                   // duplication probability
  double corrupt = 0;                               // single-bit corruption probability
  std::optional<QueueSize> queue;                   // absent: default (one BDP)
  std::optional<QueueSize> ecn;                     // absent: no CE marking
  ByteCount mtu = kDefaultMtu;                      // IP MTU, bytes
  ByteCount overhead = kDefaultOverhead;            // wire bytes added per datagram
  std::optional<uint64_t> seed;                     // absent: from the simulator

  // rtt/2.
  Duration OneWayDelay() const { return rtt / 2; }
  // rate x rtt in bytes.
  ByteCount BdpBytes() const { return rate.BytesIn(rtt); }
  // Effective drop-tail limit in bytes (default max(BDP, 64 KiB)).
  ByteCount QueueLimitBytes() const;
  // Effective CE-marking threshold in bytes; 0 = no marking.
  ByteCount EcnThresholdBytes() const;

  // Canonical spec string (keys only); ParseLinkSpec(ToString(), {}) gives back an equal
  // spec.
  std::string ToString() const;
  // The spec as a JSON object (text), with units in the field names, e.g.
  // {"spec":"rate=...","rate_bps":1e11,"rtt_ns":58000000,...,"queue_bytes":725000000}.
  std::string ToJson() const;

  bool operator==(const LinkSpec&) const = default;
};

// Keys a spec accepts, in canonical order.
const std::vector<std::string>& LinkSpecKeys();

// Applies one key=value to `spec`. Errors name the key and the accepted form.
absl::Status ApplyLinkSetting(LinkSpec* spec, absl::string_view key, absl::string_view value);

// What a name in a spec stands for: spec text, and where it came from (a file's path),
// which parse errors of that text name.
struct NamedLink {
  std::string text;
  std::string origin;
};

// Looks up a name (a spec's leading token without '='). Returns the named link, or an
// error saying why the name is unknown, which ParseLinkSpec returns as it is.
using LinkResolver = std::function<absl::StatusOr<NamedLink>(absl::string_view name)>;

// Parses a spec. A leading token without '=' is a name, which `resolve` turns into spec
// text parsed the same way: '#' starts a comment to the end of a line, newlines separate
// like commas, and it may itself start with a name (nesting is bounded). Later tokens
// override the named spec's keys. With no resolver (`{}`) a name is an error: the spec
// must give its keys.
absl::StatusOr<LinkSpec> ParseLinkSpec(absl::string_view text, const LinkResolver& resolve);

// ---- schedules ----

struct LinkScheduleStep {
  Duration at;  // since the start of the run
  std::vector<std::pair<std::string, std::string>> settings;  // key, value
};

struct LinkSchedule {
  std::vector<LinkScheduleStep> steps;  // sorted by `at`, strictly increasing
  bool empty() const { return steps.empty(); }
  std::string ToString() const;
};

// Keys a schedule step may change.
const std::vector<std::string>& LinkScheduleKeys();

// Parses "2s:rate=5gbit,4s:rate=10gbit,loss=1e-3" (';' also separates steps). Values
// are checked against a spec; steps must be in increasing time order.
absl::StatusOr<LinkSchedule> ParseLinkSchedule(absl::string_view text);

// Settings one direction has on top of the spec (and of every schedule step), e.g. the
// reverse direction of an asymmetric link: "loss=0.05" loses 5 % of the ACK path only.
// Keys as in a schedule (LinkScheduleKeys); "" = none.
using LinkOverrides = std::vector<std::pair<std::string, std::string>>;
absl::StatusOr<LinkOverrides> ParseLinkOverrides(absl::string_view text);
// `spec` with the overrides applied; errors name the key.
absl::StatusOr<LinkSpec> ApplyLinkOverrides(LinkSpec spec, const LinkOverrides& overrides);

// The specs in force after each step: result[i] = base with steps 0..i applied.
absl::StatusOr<std::vector<LinkSpec>> ResolveLinkSchedule(const LinkSpec& base,
                                                          const LinkSchedule& schedule);

}  // namespace longhaul::sim
