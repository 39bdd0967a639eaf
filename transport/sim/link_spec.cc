#include "transport/sim/link_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"

namespace longhaul::sim {
namespace {

constexpr int kMaxNesting = 8;

// Shortest decimal form that parses back to the same double.
std::string FormatDouble(double v) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

std::string FormatRate(Bandwidth b) {
  std::string s = FormatBandwidth(b);
  absl::StatusOr<Bandwidth> back = ParseBandwidth(s);
  if (back.ok() && back->bps() == b.bps()) return s;
  return absl::StrCat(FormatDouble(b.bps()), "bit");
}

absl::Status BadValue(absl::string_view key, absl::string_view value,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("link spec: bad value '", value,
                                                 "' for key '", key, "': expected ", expected));
}

absl::StatusOr<QueueSize> ParseQueueSize(absl::string_view value) {
  absl::StatusOr<ByteCount> bytes = ParseByteCount(value);
  if (bytes.ok()) return QueueSize::Bytes(*bytes);
  absl::StatusOr<Duration> d = ParseDuration(value);
  if (d.ok()) return QueueSize::Time(*d);
  return absl::InvalidArgumentError("not a size or duration");
}

std::string JoinKeys(const std::vector<std::string>& keys) { return absl::StrJoin(keys, ", "); }

// Splits spec text into tokens: '#' starts a comment to the end of the line; commas and
// newlines separate tokens; whitespace around tokens is ignored.
std::vector<std::string> Tokenize(absl::string_view text) {
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(text, absl::ByAnyChar("\n\r"))) {
    size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    for (absl::string_view tok : absl::StrSplit(line, ',')) {
      tok = absl::StripAsciiWhitespace(tok);
      if (!tok.empty()) tokens.emplace_back(tok);
    }
  }
  return tokens;
}

absl::StatusOr<NamedLink> Resolve(const LinkResolver& resolve, const std::string& name) {
  if (resolve) return resolve(name);
  return absl::InvalidArgumentError(absl::StrCat(
      "link spec: unknown link '", name,
      "': no named links here; give keys: rate=10gbit,rtt=58ms,..."));
}

absl::Status ApplyTokens(LinkSpec* spec, absl::string_view text, const LinkResolver& resolve,
                         int depth) {
  if (depth > kMaxNesting) {
    return absl::InvalidArgumentError("link spec: named links nested too deeply");
  }
  std::vector<std::string> tokens = Tokenize(text);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    size_t eq = tok.find('=');
    if (eq == std::string::npos) {
      if (i != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "link spec: '", tok,
            "' is not key=value (a named link may only come first); accepted keys: ",
            JoinKeys(LinkSpecKeys())));
      }
      LH_ASSIGN_OR_RETURN(NamedLink named, Resolve(resolve, tok));
      absl::Status s = ApplyTokens(spec, named.text, resolve, depth + 1);
      if (!s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(s.message(), " (in ", named.origin, ")"));
      }
      continue;
    }
    std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(tok.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(tok.substr(eq + 1)));
    LH_RETURN_IF_ERROR(ApplyLinkSetting(spec, key, value));
  }
  return absl::OkStatus();
}

absl::Status Validate(const LinkSpec& spec) {
  if (spec.rate.IsZero()) {
    return absl::InvalidArgumentError(
        "link spec: missing key 'rate' (give a rate like rate=10gbit, or a named link)");
  }
  if (spec.burst > 1 && spec.loss > 0 && spec.loss < 1 &&
      spec.loss > spec.burst / (spec.burst + 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "link spec: loss=", FormatDouble(spec.loss), " with burst=", FormatDouble(spec.burst),
        " is unreachable: the Gilbert model needs loss <= burst/(burst+1)"));
  }
  if (spec.mtu <= spec.overhead) {
    return absl::InvalidArgumentError(absl::StrCat("link spec: mtu=", spec.mtu,
                                                   " must exceed overhead=", spec.overhead));
  }
  return absl::OkStatus();
}

}  // namespace

std::string QueueSize::ToString() const {
  return is_time ? FormatDuration(time) : FormatByteCount(bytes);
}

ByteCount LinkSpec::QueueLimitBytes() const {
  if (queue.has_value()) return queue->Resolve(rate);
  return std::max<ByteCount>(BdpBytes(), kMinQueue);
}

ByteCount LinkSpec::EcnThresholdBytes() const {
  return ecn.has_value() ? ecn->Resolve(rate) : 0;
}

const std::vector<std::string>& LinkSpecKeys() {
  static const auto* keys = new std::vector<std::string>{
      "rate", "rtt",   "jitter", "loss", "burst",    "reorder", "reorder_delay",
      "dup",  "corrupt", "queue", "ecn",  "mtu",     "overhead", "seed"};
  return *keys;
}

const std::vector<std::string>& LinkScheduleKeys() {
  static const auto* keys = new std::vector<std::string>{
      "rate", "rtt", "jitter", "loss", "burst", "reorder", "reorder_delay",
      "dup",  "corrupt", "queue", "ecn",  "mtu"};
  return *keys;
}

absl::Status ApplyLinkSetting(LinkSpec* spec, absl::string_view key, absl::string_view value) {
  constexpr absl::string_view kRate = "a rate like 800mbit, 10gbit, 100gbit";
  constexpr absl::string_view kDur = "a duration like 300us, 58ms, 1s";
  constexpr absl::string_view kProb = "a probability in [0, 1] like 1e-3, 0.01 or 0.1%";
  constexpr absl::string_view kQueue = "a size like 7MB, 64KiB or a time at the rate like 58ms";
  if (key == "rate") {
    absl::StatusOr<Bandwidth> v = ParseBandwidth(value);
    if (!v.ok() || v->IsZero() || v->bps() > 100e12) return BadValue(key, value, kRate);
    spec->rate = *v;
  } else if (key == "rtt" || key == "jitter" || key == "reorder_delay") {
    absl::StatusOr<Duration> v = ParseDuration(value);
    if (!v.ok() || *v > Duration::Seconds(3600)) return BadValue(key, value, kDur);
    (key == "rtt" ? spec->rtt : key == "jitter" ? spec->jitter : spec->reorder_delay) = *v;
  } else if (key == "loss" || key == "reorder" || key == "dup" || key == "corrupt") {
    absl::StatusOr<double> v = ParseFraction(value);
    if (!v.ok()) return BadValue(key, value, kProb);
    (key == "loss"      ? spec->loss
     : key == "reorder" ? spec->reorder
     : key == "dup"     ? spec->dup
                        : spec->corrupt) = *v;
  } else if (key == "burst") {
    double v;
    std::string text(absl::StripAsciiWhitespace(value));
    char* end = nullptr;
    v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 1 ||
        v > 1e6) {
      return BadValue(key, value, "a mean burst length in packets >= 1, like 1 or 4.5");
    }
    spec->burst = v;
  } else if (key == "queue" || key == "ecn") {
    absl::StatusOr<QueueSize> v = ParseQueueSize(value);
    if (!v.ok()) return BadValue(key, value, kQueue);
    if (key == "queue") {
      if (v->IsZero()) return BadValue(key, value, "a queue limit > 0 (like 7MB or 58ms)");
      spec->queue = *v;
    } else if (v->IsZero()) {
      spec->ecn.reset();
    } else {
      spec->ecn = *v;
    }
  } else if (key == "mtu") {
    absl::StatusOr<ByteCount> v = ParseByteCount(value);
    if (!v.ok() || *v < 68 || *v > 65535) {
      return BadValue(key, value, "an IP MTU in bytes in [68, 65535], like 1500 or 9000");
    }
    spec->mtu = *v;
  } else if (key == "overhead") {
    absl::StatusOr<ByteCount> v = ParseByteCount(value);
    if (!v.ok() || *v > 1024) {
      return BadValue(key, value, "bytes per datagram in [0, 1024], like 28 (IPv4+UDP)");
    }
    spec->overhead = *v;
  } else if (key == "seed") {
    absl::StatusOr<int64_t> v = ParseInteger(value);
    if (!v.ok() || *v < 0) return BadValue(key, value, "a non-negative integer like 42");
    spec->seed = static_cast<uint64_t>(*v);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("link spec: unknown key '", key,
                                                   "'; accepted keys: ",
                                                   JoinKeys(LinkSpecKeys())));
  }
  return absl::OkStatus();
}

absl::StatusOr<LinkSpec> ParseLinkSpec(absl::string_view text, const LinkResolver& resolve) {
  LinkSpec spec;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(
        "link spec: empty; give a named link or keys like rate=10gbit,rtt=58ms");
  }
  LH_RETURN_IF_ERROR(ApplyTokens(&spec, text, resolve, 0));
  LH_RETURN_IF_ERROR(Validate(spec));
  return spec;
}

std::string LinkSpec::ToString() const {
  std::vector<std::string> parts;
  parts.push_back(absl::StrCat("rate=", FormatRate(rate)));
  parts.push_back(absl::StrCat("rtt=", FormatDuration(rtt)));
  if (jitter > Duration::Zero()) parts.push_back(absl::StrCat("jitter=", FormatDuration(jitter)));
  if (loss > 0) parts.push_back(absl::StrCat("loss=", FormatDouble(loss)));
  if (burst != 1) parts.push_back(absl::StrCat("burst=", FormatDouble(burst)));
  if (reorder > 0) parts.push_back(absl::StrCat("reorder=", FormatDouble(reorder)));
  if (reorder_delay != Duration::Milliseconds(1)) {
    parts.push_back(absl::StrCat("reorder_delay=", FormatDuration(reorder_delay)));
  }
  if (dup > 0) parts.push_back(absl::StrCat("dup=", FormatDouble(dup)));
  if (corrupt > 0) parts.push_back(absl::StrCat("corrupt=", FormatDouble(corrupt)));
  if (queue.has_value()) parts.push_back(absl::StrCat("queue=", queue->ToString()));
  if (ecn.has_value()) parts.push_back(absl::StrCat("ecn=", ecn->ToString()));
  if (mtu != kDefaultMtu) parts.push_back(absl::StrCat("mtu=", mtu));
  if (overhead != kDefaultOverhead) parts.push_back(absl::StrCat("overhead=", overhead));
  if (seed.has_value()) parts.push_back(absl::StrCat("seed=", *seed));
  return absl::StrJoin(parts, ",");
}

std::string LinkSpec::ToJson() const {
  std::string out = absl::StrFormat(
      "{\"spec\":\"%s\",\"rate_bps\":%s,\"rtt_ns\":%d,\"one_way_delay_ns\":%d,"
      "\"jitter_ns\":%d,\"loss\":%s,\"burst\":%s,\"reorder\":%s,\"reorder_delay_ns\":%d,"
      "\"dup\":%s,\"corrupt\":%s,\"queue_bytes\":%d,\"queue\":\"%s\",\"bdp_bytes\":%d,"
      "\"ecn_threshold_bytes\":%d,\"mtu\":%d,\"overhead\":%d",
      ToString(), FormatDouble(rate.bps()), rtt.ns(), OneWayDelay().ns(), jitter.ns(),
      FormatDouble(loss), FormatDouble(burst), FormatDouble(reorder), reorder_delay.ns(),
      FormatDouble(dup), FormatDouble(corrupt), QueueLimitBytes(),
      queue.has_value() ? queue->ToString() : std::string("default (1 BDP, min 64KiB)"),
      BdpBytes(), EcnThresholdBytes(), mtu, overhead);
  if (seed.has_value()) absl::StrAppend(&out, ",\"seed\":", *seed);
  absl::StrAppend(&out, "}");
  return out;
}

std::string LinkSchedule::ToString() const {
  std::vector<std::string> parts;
  for (const LinkScheduleStep& step : steps) {
    for (size_t i = 0; i < step.settings.size(); ++i) {
      const auto& [k, v] = step.settings[i];
      parts.push_back(i == 0 ? absl::StrCat(FormatDuration(step.at), ":", k, "=", v)
                             : absl::StrCat(k, "=", v));
    }
  }
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<LinkSchedule> ParseLinkSchedule(absl::string_view text) {
  LinkSchedule schedule;
  LinkSpec probe;
  probe.rate = Bandwidth::Gbps(1);
  for (absl::string_view raw : absl::StrSplit(text, absl::ByAnyChar(",;"))) {
    absl::string_view tok = absl::StripAsciiWhitespace(raw);
    if (tok.empty()) continue;
    size_t eq = tok.find('=');
    size_t colon = tok.find(':');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "link schedule: '", tok, "' is not TIME:key=value or key=value (e.g. 2s:rate=5gbit)"));
    }
    if (colon != absl::string_view::npos && colon < eq) {
      absl::string_view at_text = tok.substr(0, colon);
      absl::StatusOr<Duration> at = ParseDuration(at_text);
      if (!at.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("link schedule: bad time '", at_text,
                                                       "': expected a duration like 2s or 500ms"));
      }
      if (!schedule.steps.empty() && *at <= schedule.steps.back().at) {
        return absl::InvalidArgumentError(absl::StrCat(
            "link schedule: step times must increase ('", at_text, "' is not after ",
            FormatDuration(schedule.steps.back().at), ")"));
      }
      schedule.steps.push_back(LinkScheduleStep{*at, {}});
      tok = tok.substr(colon + 1);
      eq = tok.find('=');
    } else if (schedule.steps.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "link schedule: '", tok, "' has no time; start a step with TIME:, e.g. 2s:rate=5gbit"));
    }
    std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(tok.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(tok.substr(eq + 1)));
    const auto& keys = LinkScheduleKeys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return absl::InvalidArgumentError(absl::StrCat("link schedule: key '", key,
                                                     "' cannot change during a run; accepted: ",
                                                     JoinKeys(keys)));
    }
    absl::Status s = ApplyLinkSetting(&probe, key, value);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("link schedule: ", s.message()));
    schedule.steps.back().settings.emplace_back(key, value);
  }
  return schedule;
}

absl::StatusOr<LinkOverrides> ParseLinkOverrides(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) return LinkOverrides{};
  absl::StatusOr<LinkSchedule> one = ParseLinkSchedule(absl::StrCat("0s:", text));
  if (!one.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "link overrides '", text, "': ",
        absl::StripPrefix(one.status().message(), "link schedule: ")));
  }
  return std::move(one->steps.front().settings);
}

absl::StatusOr<LinkSpec> ApplyLinkOverrides(LinkSpec spec, const LinkOverrides& overrides) {
  for (const auto& [k, v] : overrides) LH_RETURN_IF_ERROR(ApplyLinkSetting(&spec, k, v));
  LH_RETURN_IF_ERROR(Validate(spec));
  return spec;
}

absl::StatusOr<std::vector<LinkSpec>> ResolveLinkSchedule(const LinkSpec& base,
                                                          const LinkSchedule& schedule) {
  std::vector<LinkSpec> out;
  LinkSpec spec = base;
  for (const LinkScheduleStep& step : schedule.steps) {
    for (const auto& [k, v] : step.settings) LH_RETURN_IF_ERROR(ApplyLinkSetting(&spec, k, v));
    absl::Status s = Validate(spec);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("link schedule at ", FormatDuration(step.at), ": ", s.message()));
    }
    out.push_back(spec);
  }
  return out;
}

}  // namespace longhaul::sim
