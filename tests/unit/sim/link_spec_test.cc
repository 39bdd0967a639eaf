// The link-spec parser (transport/sim/link_spec.h): text in, named links given in as
// data. Reading profiles/links/*.link is link_files_test's.
#include "transport/sim/link_spec.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace longhaul::sim {
namespace {

using ::testing::HasSubstr;

// Named links as data: what a catalog of link files would give the parser.
const std::map<std::string, std::string>& Catalog() {
  static const auto* catalog = new std::map<std::string, std::string>{
      {"tokyo-singapore", "# the reference link\nrate=100gbit\nrtt=58ms\nloss=1e-4\n"},
      {"ts-1g", "rate=1gbit,rtt=58ms,loss=1e-3"},
      {"base", "# a comment line\nrate=2gbit   # trailing comment\n\nrtt=10ms\n"},
      {"derived", "base\nloss=0.5%\n"},
      {"broken", "rate=2gbit\nrtt=soon\n"},
      {"loop", "loop,rtt=1ms"},
  };
  return *catalog;
}

absl::StatusOr<NamedLink> FromCatalog(absl::string_view name) {
  auto it = Catalog().find(std::string(name));
  if (it == Catalog().end()) {
    return absl::InvalidArgumentError(absl::StrCat("test catalog: no link '", name, "'"));
  }
  return NamedLink{it->second, absl::StrCat("catalog:", name)};
}

LinkSpec MustParse(const std::string& text) {
  absl::StatusOr<LinkSpec> s = ParseLinkSpec(text, FromCatalog);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : LinkSpec{};
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<LinkSpec> s = ParseLinkSpec(text, FromCatalog);
  EXPECT_FALSE(s.ok()) << text << " parsed as " << (s.ok() ? s->ToString() : "");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.status().message());
}

TEST(LinkSpecTest, ParsesEveryKey) {
  LinkSpec s = MustParse(
      "rate=800mbit,rtt=58ms,jitter=300us,loss=0.1%,burst=4,reorder=1e-3,reorder_delay=2ms,"
      "dup=1e-4,corrupt=1e-5,queue=7MB,ecn=1ms,mtu=1500,overhead=48,seed=42");
  EXPECT_EQ(s.rate.bps(), 800e6);
  EXPECT_EQ(s.rtt, Duration::Milliseconds(58));
  EXPECT_EQ(s.OneWayDelay(), Duration::Milliseconds(29));
  EXPECT_EQ(s.jitter, Duration::Microseconds(300));
  EXPECT_DOUBLE_EQ(s.loss, 1e-3);
  EXPECT_DOUBLE_EQ(s.burst, 4);
  EXPECT_DOUBLE_EQ(s.reorder, 1e-3);
  EXPECT_EQ(s.reorder_delay, Duration::Milliseconds(2));
  EXPECT_DOUBLE_EQ(s.dup, 1e-4);
  EXPECT_DOUBLE_EQ(s.corrupt, 1e-5);
  ASSERT_TRUE(s.queue.has_value());
  EXPECT_FALSE(s.queue->is_time);
  EXPECT_EQ(s.QueueLimitBytes(), 7000000u);
  ASSERT_TRUE(s.ecn.has_value());
  EXPECT_TRUE(s.ecn->is_time);
  EXPECT_EQ(s.EcnThresholdBytes(), 100000u);  // 1 ms at 800 Mbit/s
  EXPECT_EQ(s.mtu, 1500u);
  EXPECT_EQ(s.overhead, 48u);
  ASSERT_TRUE(s.seed.has_value());
  EXPECT_EQ(*s.seed, 42u);
}

TEST(LinkSpecTest, Defaults) {
  LinkSpec s = MustParse("rate=10gbit,rtt=58ms");
  EXPECT_EQ(s.jitter, Duration::Zero());
  EXPECT_EQ(s.loss, 0);
  EXPECT_EQ(s.burst, 1);
  EXPECT_EQ(s.reorder_delay, Duration::Milliseconds(1));
  EXPECT_EQ(s.mtu, 9000u);
  EXPECT_EQ(s.overhead, 28u);
  EXPECT_FALSE(s.seed.has_value());
  EXPECT_EQ(s.QueueLimitBytes(), 72500000u);  // one BDP: 10 Gbit/s x 58 ms
  EXPECT_EQ(s.EcnThresholdBytes(), 0u);
  // Tiny BDPs get the 64 KiB minimum.
  EXPECT_EQ(MustParse("rate=1mbit,rtt=1ms").QueueLimitBytes(), 65536u);
  // Queue as a time at the rate.
  EXPECT_EQ(MustParse("rate=1gbit,queue=8ms").QueueLimitBytes(), 1000000u);
  // ecn=0 means no marking.
  EXPECT_FALSE(MustParse("rate=1gbit,ecn=0").ecn.has_value());
}

TEST(LinkSpecTest, NamedSpecsAndOverrides) {
  LinkSpec ts = MustParse("tokyo-singapore");
  EXPECT_EQ(ts.rate.bps(), 100e9);
  EXPECT_EQ(ts.rtt, Duration::Milliseconds(58));
  EXPECT_DOUBLE_EQ(ts.loss, 1e-4);

  LinkSpec o = MustParse("tokyo-singapore,loss=1e-3,burst=3");
  EXPECT_EQ(o.rate.bps(), 100e9);
  EXPECT_DOUBLE_EQ(o.loss, 1e-3);
  EXPECT_DOUBLE_EQ(o.burst, 3);

  LinkSpec g = MustParse(" ts-1g ");
  EXPECT_EQ(g.rate.bps(), 1e9);
  EXPECT_DOUBLE_EQ(g.loss, 1e-3);
}

TEST(LinkSpecTest, NamedTextHasCommentsLinesAndNesting) {
  LinkSpec b = MustParse("base");
  EXPECT_EQ(b.rate.bps(), 2e9);
  EXPECT_EQ(b.rtt, Duration::Milliseconds(10));
  LinkSpec d = MustParse("derived,rtt=20ms");
  EXPECT_EQ(d.rate.bps(), 2e9);
  EXPECT_EQ(d.rtt, Duration::Milliseconds(20));
  EXPECT_DOUBLE_EQ(d.loss, 0.005);
}

TEST(LinkSpecTest, TheResolverIsAskedOnlyForNames) {
  std::vector<std::string> asked;
  auto resolve = [&](absl::string_view name) {
    asked.emplace_back(name);
    return FromCatalog(name);
  };
  ASSERT_TRUE(ParseLinkSpec("rate=1gbit,rtt=1ms", resolve).ok());
  EXPECT_TRUE(asked.empty());
  ASSERT_TRUE(ParseLinkSpec("derived,loss=0", resolve).ok());
  EXPECT_EQ(asked, (std::vector<std::string>{"derived", "base"}));
}

TEST(LinkSpecTest, NamedLinkErrors) {
  // The resolver's error, as it is.
  EXPECT_EQ(ParseError("no-such-link"), "test catalog: no link 'no-such-link'");
  // An error in a named link's text names where the text came from.
  EXPECT_EQ(ParseError("broken"),
            "link spec: bad value 'soon' for key 'rtt': expected a duration like 300us, 58ms, "
            "1s (in catalog:broken)");
  EXPECT_THAT(ParseError("loop"), HasSubstr("named links nested too deeply"));
  // Without a resolver a name cannot be known.
  absl::StatusOr<LinkSpec> none = ParseLinkSpec("tokyo-singapore,loss=0", {});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(none.status()));
  EXPECT_EQ(none.status().message(),
            "link spec: unknown link 'tokyo-singapore': no named links here; give keys: "
            "rate=10gbit,rtt=58ms,...");
  EXPECT_TRUE(ParseLinkSpec("rate=10gbit,rtt=58ms", {}).ok());
}

TEST(LinkSpecTest, ErrorsNameTheKeyAndForm) {
  EXPECT_EQ(ParseError("rate=fast"),
            "link spec: bad value 'fast' for key 'rate': expected a rate like 800mbit, 10gbit, "
            "100gbit");
  EXPECT_THAT(ParseError("rate=1gbit,rtt=soon"), HasSubstr("for key 'rtt': expected a duration"));
  EXPECT_THAT(ParseError("rate=1gbit,jitter=-1ms"), HasSubstr("key 'jitter'"));
  EXPECT_THAT(ParseError("rate=1gbit,loss=2"), HasSubstr("key 'loss': expected a probability"));
  EXPECT_THAT(ParseError("rate=1gbit,dup=x"), HasSubstr("key 'dup'"));
  EXPECT_THAT(ParseError("rate=1gbit,corrupt=5%%"), HasSubstr("key 'corrupt'"));
  EXPECT_THAT(ParseError("rate=1gbit,reorder=-0.1"), HasSubstr("key 'reorder'"));
  EXPECT_THAT(ParseError("rate=1gbit,burst=0.5"), HasSubstr("key 'burst': expected a mean burst"));
  EXPECT_THAT(ParseError("rate=1gbit,queue=lots"), HasSubstr("key 'queue': expected a size"));
  EXPECT_THAT(ParseError("rate=1gbit,queue=0"), HasSubstr("key 'queue'"));
  EXPECT_THAT(ParseError("rate=1gbit,ecn=?"), HasSubstr("key 'ecn'"));
  EXPECT_THAT(ParseError("rate=1gbit,mtu=10"), HasSubstr("key 'mtu': expected an IP MTU"));
  EXPECT_THAT(ParseError("rate=1gbit,overhead=1MB"), HasSubstr("key 'overhead'"));
  EXPECT_THAT(ParseError("rate=1gbit,seed=-3"), HasSubstr("key 'seed'"));
  EXPECT_THAT(ParseError("rate=0"), HasSubstr("key 'rate'"));
  EXPECT_THAT(ParseError("rtt=58ms"), HasSubstr("missing key 'rate'"));
  EXPECT_THAT(ParseError(""), HasSubstr("empty"));
  EXPECT_THAT(ParseError("rate=1gbit,loss=0.9,burst=2"), HasSubstr("unreachable"));
  std::string unknown = ParseError("rate=1gbit,bandwidth=3");
  EXPECT_THAT(unknown, HasSubstr("unknown key 'bandwidth'"));
  EXPECT_THAT(unknown, HasSubstr("rate, rtt, jitter, loss, burst, reorder, reorder_delay, dup, "
                                 "corrupt, queue, ecn, mtu, overhead, seed"));
  EXPECT_THAT(ParseError("rate=1gbit,tokyo-singapore"), HasSubstr("only come first"));
}

TEST(LinkSpecTest, ToStringRoundTrips) {
  for (const std::string text :
       {"rate=100gbit,rtt=58ms", "rate=1500mbit,rtt=300us,loss=0.0001,burst=2.5",
        "rate=12345bit,rtt=1ns,jitter=7us,reorder=0.25,reorder_delay=3ms,dup=0.01,corrupt=1e-06",
        "rate=10gbit,rtt=58ms,queue=7MB,ecn=2ms,mtu=1500,overhead=48,seed=9",
        "rate=10gbit,rtt=58ms,queue=58ms"}) {
    LinkSpec a = MustParse(text);
    LinkSpec b = MustParse(a.ToString());
    EXPECT_EQ(a, b) << text << " -> " << a.ToString();
  }
  EXPECT_EQ(MustParse("tokyo-singapore").ToString(), "rate=100gbit,rtt=58ms,loss=0.0001");
}

TEST(LinkSpecTest, JsonForm) {
  LinkSpec s = MustParse("tokyo-singapore,ecn=1MB,seed=3");
  nlohmann::json j = nlohmann::json::parse(s.ToJson());
  EXPECT_EQ(j["spec"], s.ToString());
  EXPECT_EQ(j["rate_bps"].get<double>(), 100e9);
  EXPECT_EQ(j["rtt_ns"].get<int64_t>(), 58000000);
  EXPECT_EQ(j["one_way_delay_ns"].get<int64_t>(), 29000000);
  EXPECT_EQ(j["queue_bytes"].get<uint64_t>(), 725000000u);
  EXPECT_EQ(j["ecn_threshold_bytes"].get<uint64_t>(), 1000000u);
  EXPECT_EQ(j["mtu"].get<int>(), 9000);
  EXPECT_EQ(j["seed"].get<int>(), 3);
  EXPECT_DOUBLE_EQ(j["loss"].get<double>(), 1e-4);
}

TEST(LinkScheduleTest, Parses) {
  absl::StatusOr<LinkSchedule> s = ParseLinkSchedule("2s:rate=5gbit,4s:rate=10gbit,loss=1e-3;6s:rtt=20ms");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->steps.size(), 3u);
  EXPECT_EQ(s->steps[0].at, Duration::Seconds(2));
  EXPECT_EQ(s->steps[1].settings.size(), 2u);
  EXPECT_EQ(s->steps[2].settings[0].first, "rtt");
  LinkSpec base = MustParse("rate=1gbit,rtt=58ms");
  absl::StatusOr<std::vector<LinkSpec>> specs = ResolveLinkSchedule(base, *s);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].rate.bps(), 5e9);
  EXPECT_EQ((*specs)[1].rate.bps(), 10e9);
  EXPECT_DOUBLE_EQ((*specs)[1].loss, 1e-3);
  EXPECT_EQ((*specs)[2].rate.bps(), 10e9);  // cumulative
  EXPECT_EQ((*specs)[2].rtt, Duration::Milliseconds(20));
  absl::StatusOr<LinkSchedule> again = ParseLinkSchedule(s->ToString());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ToString(), s->ToString());
}

TEST(LinkScheduleTest, Errors) {
  auto err = [](const char* t) { return std::string(ParseLinkSchedule(t).status().message()); };
  EXPECT_THAT(err("rate=5gbit"), HasSubstr("has no time"));
  EXPECT_THAT(err("2s:rate=fast"), HasSubstr("bad value 'fast' for key 'rate'"));
  EXPECT_THAT(err("2s:overhead=40"), HasSubstr("cannot change during a run"));
  EXPECT_THAT(err("2s:rate=5gbit,1s:rate=1gbit"), HasSubstr("must increase"));
  EXPECT_THAT(err("soon:rate=5gbit"), HasSubstr("bad time 'soon'"));
  EXPECT_THAT(err("2s"), HasSubstr("not TIME:key=value"));
}

}  // namespace
}  // namespace longhaul::sim
