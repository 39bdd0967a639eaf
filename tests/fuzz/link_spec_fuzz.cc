// Fuzz target for link specs and link schedules (transport/sim/link_spec.h):
// the text a user gives longhaul-sim, longhaul-emu and the tuner (--link,
// --schedule) and the profiles/links/NAME.link files they name.
//
// Input: parts separated by NUL bytes. Part 0 is a spec, part 1 a schedule, and
// each further part a named link, "NAME\nTEXT" (first line the name, the rest
// its text). The resolver returns the text of the part with that name, or for
// any other name the text of a part picked by a hash of the name, so
// fuzzer-chosen names still reach fuzzer-chosen text and nesting (up to the
// parser's bound, and past it) is exercised; with no named parts it returns
// NotFound. The resolver counts its calls to check that nesting is bounded.
//
// Invariants (each aborts when it fails):
//   - errors are non-empty; the resolver's own error comes back as it is;
//   - a parsed spec re-serialises (ToString) to text that parses, without a
//   resolver, to
//     an equal spec, and ToString is a fixed point; ToJson is well-formed JSON
//     whose "spec" is ToString and whose numbers agree with the spec's
//     accessors;
//   - a parsed schedule's steps are strictly increasing in time and non-empty,
//   and its
//     ToString parses back to the same steps; resolving it over the parsed spec
//     (or a plain one) gives one spec per step, each of which round-trips like
//     a spec.
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON (clang), and replayed as
// an ordinary test (link_spec_fuzz_replay_test) over
// tests/fuzz/corpus/link_spec.

#include "absl/strings/string_view.h"
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_check.h"
#include "transport/sim/link_spec.h"

namespace longhaul::sim {
namespace {

struct Named {
  std::string name;
  std::string text;
};

constexpr int kMaxResolverCalls =
    64; // the parser nests at most 8 deep, one name each

void CheckSpec(const LinkSpec &spec) {
  LH_FUZZ_CHECK(!spec.rate.IsZero());
  LH_FUZZ_CHECK(spec.mtu > spec.overhead);
  const std::string text = spec.ToString();
  absl::StatusOr<LinkSpec> again = ParseLinkSpec(text, {});
  if (!again.ok()) {
    std::fprintf(stderr, "'%s' does not parse: %s\n", text.c_str(),
                 std::string(again.status().message()).c_str());
  }
  LH_FUZZ_CHECK(again.ok());
  if (!(*again == spec))
    std::fprintf(stderr, "'%s' parses to '%s'\n", text.c_str(),
                 again->ToString().c_str());
  LH_FUZZ_CHECK(*again == spec);
  LH_FUZZ_CHECK(again->ToString() == text);
  // Derived sizes: computed without overflow traps (UBSan), and consistent.
  const ByteCount queue = spec.QueueLimitBytes();
  const ByteCount ecn = spec.EcnThresholdBytes();
  (void)spec.BdpBytes();
  const nlohmann::json j =
      nlohmann::json::parse(spec.ToJson(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    std::fprintf(stderr, "bad JSON: %s\n", spec.ToJson().c_str());
  LH_FUZZ_CHECK(!j.is_discarded() && j.is_object());
  LH_FUZZ_CHECK(j.value("spec", std::string()) == text);
  LH_FUZZ_CHECK(j.contains("queue_bytes") && j["queue_bytes"].is_number());
  LH_FUZZ_CHECK(j["queue_bytes"].get<int64_t>() == static_cast<int64_t>(queue));
  LH_FUZZ_CHECK(j["ecn_threshold_bytes"].get<int64_t>() ==
                static_cast<int64_t>(ecn));
  LH_FUZZ_CHECK(j["rtt_ns"].get<int64_t>() == spec.rtt.ns());
}

void CheckSchedule(const LinkSchedule &schedule, const LinkSpec *parsed) {
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    LH_FUZZ_CHECK(!schedule.steps[i].settings.empty());
    if (i > 0)
      LH_FUZZ_CHECK(schedule.steps[i - 1].at < schedule.steps[i].at);
  }
  const std::string text = schedule.ToString();
  absl::StatusOr<LinkSchedule> again = ParseLinkSchedule(text);
  if (!again.ok()) {
    std::fprintf(stderr, "'%s' does not parse: %s\n", text.c_str(),
                 std::string(again.status().message()).c_str());
  }
  LH_FUZZ_CHECK(again.ok());
  LH_FUZZ_CHECK(again->steps.size() == schedule.steps.size());
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    LH_FUZZ_CHECK(again->steps[i].at == schedule.steps[i].at);
    LH_FUZZ_CHECK(again->steps[i].settings == schedule.steps[i].settings);
  }
  LinkSpec plain;
  plain.rate = Bandwidth::Gbps(10);
  plain.rtt = Duration::Milliseconds(58);
  for (const LinkSpec *base : {parsed, static_cast<const LinkSpec *>(&plain)}) {
    if (base == nullptr)
      continue;
    absl::StatusOr<std::vector<LinkSpec>> specs =
        ResolveLinkSchedule(*base, schedule);
    if (!specs.ok()) {
      fuzz::CheckUserError(specs.status());
      continue;
    }
    LH_FUZZ_CHECK(specs->size() == schedule.steps.size());
    for (const LinkSpec &s : *specs)
      CheckSpec(s);
  }
}

} // namespace
} // namespace longhaul::sim

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace longhaul::sim;
  if (size > 16384)
    return 0; // specs are a line; files a few hundred bytes
  std::vector<absl::string_view> parts = absl::StrSplit(
      longhaul::fuzz::AsText(data, size), absl::string_view("\0", 1));
  if (parts.empty())
    parts.push_back(""); // StrSplit of a null view (size 0) gives none
  const absl::string_view spec_text = parts[0];
  const absl::string_view schedule_text =
      parts.size() > 1 ? parts[1] : absl::string_view();
  std::vector<Named> named;
  for (size_t i = 2; i < parts.size(); ++i) {
    const size_t nl = parts[i].find('\n');
    named.push_back(Named{std::string(parts[i].substr(0, nl)),
                          nl == absl::string_view::npos
                              ? std::string()
                              : std::string(parts[i].substr(nl + 1))});
  }
  int calls = 0;
  const LinkResolver resolve =
      [&](absl::string_view name) -> absl::StatusOr<NamedLink> {
    ++calls;
    LH_FUZZ_CHECK(!name.empty());
    if (named.empty())
      return absl::NotFoundError("fuzz resolver: no named links");
    for (const Named &n : named) {
      if (n.name == name)
        return NamedLink{n.text, "named:" + n.name};
    }
    size_t h = 0;
    for (char c : name)
      h = h * 131 + static_cast<unsigned char>(c);
    const Named &n = named[h % named.size()];
    return NamedLink{n.text, "hashed:" + n.name};
  };

  absl::StatusOr<LinkSpec> spec = ParseLinkSpec(spec_text, resolve);
  LH_FUZZ_CHECK(calls <= kMaxResolverCalls);
  if (!spec.ok()) {
    longhaul::fuzz::CheckUserError(spec.status());
    // The resolver's NotFound is returned as it is (the only
    // non-InvalidArgument error).
    if (spec.status().code() == absl::StatusCode::kNotFound) {
      LH_FUZZ_CHECK(named.empty() && calls == 1);
    } else {
      LH_FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    }
  } else {
    CheckSpec(*spec);
  }
  // Without a resolver: a name is an error, keys parse as they did.
  absl::StatusOr<LinkSpec> plain = ParseLinkSpec(spec_text, {});
  if (plain.ok()) {
    LH_FUZZ_CHECK(spec.ok() && *plain == *spec);
  } else {
    longhaul::fuzz::CheckUserError(plain.status());
  }

  absl::StatusOr<LinkSchedule> schedule = ParseLinkSchedule(schedule_text);
  if (!schedule.ok()) {
    longhaul::fuzz::CheckUserError(schedule.status(), "link schedule");
  } else {
    CheckSchedule(*schedule, spec.ok() ? &*spec : nullptr);
  }
  return 0;
}
