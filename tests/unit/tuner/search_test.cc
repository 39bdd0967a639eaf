// The search (model only, and with the simulator check), tuned profiles (round trips,
// provenance, bad and truncated files) and the host-setting advice.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/base/parse.h"
#include "transport/profile/profile.h"
#include "transport/sim/link_spec.h"
#include "tuner/model/link_estimate.h"
#include "tuner/profile/tuned_profile.h"
#include "tuner/search/host_advice.h"
#include "tuner/search/search.h"

namespace longhaul::tuner {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

LinkEstimate Link(const char* spec) {
  absl::StatusOr<sim::LinkSpec> s = sim::ParseLinkSpec(spec, {});
  EXPECT_TRUE(s.ok()) << s.status();
  return LinkEstimate::FromLinkSpec(*s);
}

SearchOptions ModelOnly(Objective o = Objective::kGoodput) {
  SearchOptions opt;
  opt.top_k = 0;
  opt.workload.objective = o;
  return opt;
}

TEST(SearchTest, CleanLongLinkGetsTheBdpWindowFullSegmentsAndNoFec) {
  LinkEstimate link = Link("rate=10gbit,rtt=58ms");
  absl::StatusOr<TuneResult> r = Tune(link, ModelOnly());
  ASSERT_TRUE(r.ok()) << r.status();
  const TransportConfig& c = r->chosen.config;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.segment, TransportConfig::SegmentForMtu(9000));
  EXPECT_EQ(c.fec, FecMode::kOff);
  EXPECT_EQ(c.cc, CongestionControl::kFixed);
  EXPECT_DOUBLE_EQ(c.rate.bps(), 10e9);
  // The window holds the flight (72.5 MB) with margin, and not absurdly more.
  EXPECT_GE(c.window, static_cast<ByteCount>(1.4 * link.BdpBytes()));
  EXPECT_LE(c.window, 4 * link.BdpBytes());
  EXPECT_GE(c.recv_window, c.window / 2);
  EXPECT_EQ(c.initial_rtt, Duration::Milliseconds(58));
  EXPECT_EQ(r->chosen.prediction.limit, "pacing");
  EXPECT_GT(r->chosen.prediction.goodput_bps, 0.98 * 10e9 * 8894 / 8962);
  EXPECT_GT(r->candidates_evaluated, 5u);
  EXPECT_FALSE(r->check_skipped.empty());  // top_k = 0
  // Host advice follows the choice.
  EXPECT_EQ(r->host.mtu_needed, 9000u);
  EXPECT_EQ(r->host.wmem_max_needed, c.window);
}

TEST(SearchTest, MemoryBoundCapsTheWindowsAndTheModelSaysWindowLimited) {
  SearchOptions opt = ModelOnly();
  opt.max_memory = ByteCount{64} << 20;
  absl::StatusOr<TuneResult> r = Tune(Link("rate=100gbit,rtt=58ms,loss=1e-4"), opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(r->chosen.config.window, opt.max_memory);
  EXPECT_LE(r->chosen.config.recv_window, opt.max_memory);
  EXPECT_EQ(r->chosen.prediction.limit, "window");
  EXPECT_LT(r->chosen.prediction.goodput_bps, 10e9);
}

TEST(SearchTest, ReorderingRaisesTheLossDetectionThresholds) {
  absl::StatusOr<TuneResult> r =
      Tune(Link("rate=10gbit,rtt=20ms,reorder=1e-3,reorder_delay=2ms"), ModelOnly());
  ASSERT_TRUE(r.ok()) << r.status();
  // 2 ms at 10 Gbit/s of ~9 KB packets is ~280 packets; 1.5 x that.
  EXPECT_GE(r->chosen.config.reorder_packets, 400u);
  EXPECT_NEAR(r->chosen.config.reorder_rtt_fraction, 1.5 * 2 / 20.0, 1e-9);
}

TEST(SearchTest, LossyShortMessagesGetProtection) {
  // 64 KiB messages at 1 % loss: without protection ~7 % of messages wait a repair
  // round; the mct objective must pick FEC or tail protection and predict a p99 far
  // below one extra round trip.
  SearchOptions opt = ModelOnly(Objective::kMct);
  opt.workload.message_size = 64 * 1024;
  opt.workload.load = 0.3;
  absl::StatusOr<TuneResult> r = Tune(Link("rate=1gbit,rtt=20ms,loss=1e-2"), opt);
  ASSERT_TRUE(r.ok()) << r.status();
  const TransportConfig& c = r->chosen.config;
  EXPECT_TRUE(c.fec != FecMode::kOff || c.tail_protect);
  EXPECT_LT(r->chosen.prediction.mct_p99_s, r->chosen.prediction.mct_ideal_s + 0.010);
}

// A base of cc=bbr and fec=auto (what a profile for a shared, changing link wants): the
// profile gets the rate bounds around the measured rate and auto FEC starting from the
// code the search chose.
TEST(SearchTest, AdaptiveBaseGetsBoundsAndStartsAutoFecFromTheChosenCode) {
  SearchOptions opt = ModelOnly(Objective::kMct);
  opt.workload.message_size = 1 << 20;
  opt.workload.load = 0.5;
  absl::StatusOr<TuneResult> fixed = Tune(Link("rate=1gbit,rtt=58ms,loss=1e-2"), opt);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  ASSERT_EQ(fixed->chosen.config.fec, FecMode::kFixed);
  opt.base.cc = CongestionControl::kBbr;
  opt.base.rate = Bandwidth::Zero();
  opt.base.fec = FecMode::kAuto;
  absl::StatusOr<TuneResult> r = Tune(Link("rate=1gbit,rtt=58ms,loss=1e-2"), opt);
  ASSERT_TRUE(r.ok()) << r.status();
  const TransportConfig& c = r->chosen.config;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  EXPECT_EQ(c.cc, CongestionControl::kBbr);
  EXPECT_EQ(c.rate, Bandwidth::Mbps(1050));
  EXPECT_EQ(c.rate_min, Bandwidth::Mbps(500));
  EXPECT_EQ(c.fec, FecMode::kAuto);
  EXPECT_EQ(c.fec_k, fixed->chosen.config.fec_k);
  EXPECT_EQ(c.fec_m, fixed->chosen.config.fec_m);
  EXPECT_EQ(c.fec_interleave, fixed->chosen.config.fec_interleave);
  EXPECT_THAT(r->chosen.label, HasSubstr("fec=auto:"));
  // The model paces bbr at the bottleneck, not at its cap above it.
  EXPECT_LT(r->chosen.prediction.loss, 0.011);
  // A lossless link: the base code is the start (auto drops it at the first report).
  absl::StatusOr<TuneResult> clean = Tune(Link("rate=10gbit,rtt=58ms"), opt);
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ(clean->chosen.config.fec, FecMode::kAuto);
  EXPECT_EQ(clean->chosen.config.rate_min, Bandwidth::Gbps(5));
}

TEST(SearchTest, SimulatorCheckRunsTheBestCandidates) {
  SearchOptions opt;
  opt.top_k = 2;
  opt.check_bytes = ByteCount{48} << 20;
  opt.check_budget = Duration::Seconds(120);
  std::vector<std::string> lines;
  opt.progress = [&](const std::string& l) { lines.push_back(l); };
  absl::StatusOr<TuneResult> r = Tune(Link("rate=1gbit,rtt=20ms,loss=1e-3"), opt);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->checked.size(), 2u);
  for (const Candidate& c : r->checked) {
    EXPECT_TRUE(c.checked);
    EXPECT_TRUE(c.check_completed) << c.check_note;
    EXPECT_GT(c.sim_goodput_bps, 0.5e9);
    // The model and the simulator agree on these runs.
    EXPECT_NEAR(c.sim_goodput_bps, c.prediction.goodput_bps, 0.1 * c.sim_goodput_bps);
  }
  EXPECT_TRUE(r->chosen.checked);
  EXPECT_THAT(r->check_workload, HasSubstr("bulk 48MiB"));
  EXPECT_THAT(r->check_link, HasSubstr("rate=1gbit"));
  EXPECT_GE(lines.size(), 3u);
}

TEST(SearchTest, RejectsUnusableInput) {
  LinkEstimate none;
  EXPECT_TRUE(absl::IsInvalidArgument(Tune(none, ModelOnly()).status()));
  SearchOptions opt = ModelOnly(Objective::kMct);
  opt.workload.message_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Tune(Link("rate=1gbit,rtt=1ms"), opt).status()));
  opt = ModelOnly();
  opt.workload.load = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Tune(Link("rate=1gbit,rtt=1ms"), opt).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseObjective("speed").status()));
  EXPECT_EQ(*ParseObjective(" MCT "), Objective::kMct);
}

TEST(LinkEstimateTest, SpecRoundTripsThroughTheEstimate) {
  for (const char* s : {"rate=1gbit,rtt=58ms,loss=0.001", "rate=10gbit,rtt=150ms,jitter=1ms,loss=1e-05",
                        "rate=2gbit,rtt=5ms,loss=0.02,burst=10,reorder=0.001,reorder_delay=2ms,mtu=1500"}) {
    SCOPED_TRACE(s);
    absl::StatusOr<sim::LinkSpec> spec = sim::ParseLinkSpec(s, {});
    ASSERT_TRUE(spec.ok());
    sim::LinkSpec back = LinkEstimate::FromLinkSpec(*spec).ToLinkSpec(7);
    EXPECT_EQ(back.rate.bps(), spec->rate.bps());
    EXPECT_EQ(back.rtt, spec->rtt);
    EXPECT_NEAR(back.jitter.microseconds(), spec->jitter.microseconds(), 1.0);
    EXPECT_DOUBLE_EQ(back.loss, spec->loss);
    EXPECT_DOUBLE_EQ(back.burst, spec->burst);
    EXPECT_DOUBLE_EQ(back.reorder, spec->reorder);
    EXPECT_EQ(back.mtu, spec->mtu);
    EXPECT_EQ(*back.seed, 7u);
    EXPECT_TRUE(sim::ParseLinkSpec(back.ToString(), {}).ok()) << back.ToString();
  }
  // Measured values are rounded to what they are worth.
  LinkEstimate m;
  m.rate = Bandwidth::BitsPerSecond(943502565.9);
  m.rtt = m.rtt_p50 = m.rtt_p99 = Duration::Nanoseconds(58043660);
  m.loss = 0.000884999;
  m.mean_burst = 1.0123;
  EXPECT_EQ(m.ToLinkSpec().ToString(),
            "rate=943500kbit,rtt=58044us,loss=0.000885,burst=1.01,mtu=1500,seed=1");
}

// ---- tuned profiles ----

TransportConfig Tuned() {
  absl::StatusOr<TuneResult> r = Tune(Link("rate=10gbit,rtt=58ms,loss=1e-3"), ModelOnly());
  EXPECT_TRUE(r.ok());
  return r->chosen.config;
}

Provenance SampleProvenance() {
  Provenance p;
  p.Add("command", "longhaul-tune --link=ts-10g --out=x.profile");
  p.Add("version", "longhaul 0.1.0");
  p.Add("date", UtcTimestamp());
  p.Add("link", "rate=10gbit rtt=58ms\nsecond line folded");
  p.Add("predicted", "goodput 9.9 Gbit/s (model)");
  return p;
}

TEST(TunedProfileTest, RoundTripsWithProvenance) {
  const TransportConfig c = Tuned();
  const std::string text = FormatTunedProfile(c, SampleProvenance());
  absl::StatusOr<TransportConfig> back = ParseProfile(text, TransportConfig(), "t.profile");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ProfileKeyValues(*back), ProfileKeyValues(c));
  // Whatever the base: the profile sets every key.
  TransportConfig odd;
  odd.window = 12345678;
  odd.ack_every = 3;
  EXPECT_EQ(ProfileKeyValues(*ParseProfile(text, odd, "t.profile")), ProfileKeyValues(c));
  Provenance p = ParseProvenance(text);
  EXPECT_EQ(p.Get("command"), "longhaul-tune --link=ts-10g --out=x.profile");
  EXPECT_EQ(p.Get("link"), "rate=10gbit rtt=58ms second line folded");
  EXPECT_THAT(p.Get("date"), MatchesRegex("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T.*Z"));
  EXPECT_EQ(p.Get("absent"), "");
  EXPECT_TRUE(CheckTunedProfileComplete(text, "t.profile").ok());
  EXPECT_THAT(text, HasSubstr("# longhaul tuned profile\n"));
}

TEST(TunedProfileTest, BadProfilesNameTheLine) {
  const std::string text = FormatTunedProfile(Tuned(), SampleProvenance());
  const int header_lines = 6;  // title + 5 fields
  // Unknown key.
  std::string unknown = text;
  unknown.insert(unknown.find("window="), "speed=fast\n");
  absl::Status s = ParseProfile(unknown, TransportConfig(), "t.profile").status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("t.profile:", header_lines + 2, ": unknown key 'speed'")));
  // Bad value.
  std::string bad = text;
  const size_t w = bad.find("window=");
  bad.replace(w, bad.find('\n', w) - w, "window=12x");
  s = ParseProfile(bad, TransportConfig(), "t.profile").status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("t.profile:", header_lines + 2, ": bad value '12x' for 'window'")));
}

TEST(TunedProfileTest, EveryTruncationIsAnErrorNamingALine) {
  const std::string text = FormatTunedProfile(Tuned(), SampleProvenance());
  int lines = 0;
  for (char ch : text) lines += ch == '\n';
  for (size_t cut = 1; cut + 1 < text.size(); ++cut) {
    const std::string part = text.substr(0, cut);
    absl::Status s = ParseTunedProfile(part, TransportConfig(), "t.profile").status();
    ASSERT_FALSE(s.ok()) << "cut at " << cut << " accepted";
    EXPECT_THAT(std::string(s.message()), MatchesRegex("t\\.profile:[0-9]+: truncated .*")) << s;
  }
  // The whole text, with or without its final newline, is fine.
  EXPECT_TRUE(ParseTunedProfile(text, TransportConfig(), "t.profile").ok());
  EXPECT_TRUE(ParseTunedProfile(text.substr(0, text.size() - 1), TransportConfig(), "t.profile").ok());
  // The line named is the last one present.
  const std::string half = text.substr(0, text.find("fec_k="));
  int half_lines = 0;
  for (char ch : half) half_lines += ch == '\n';
  EXPECT_THAT(std::string(ParseTunedProfile(half, TransportConfig(), "t.profile").status().message()),
              HasSubstr(absl::StrCat("t.profile:", half_lines, ": truncated")));
  EXPECT_GT(lines, half_lines);
  // Hand-written profiles (no title) need no end line.
  EXPECT_TRUE(CheckTunedProfileComplete("window=1MiB\n", "h.profile").ok());
  // A count that does not match.
  std::string extra = text;
  extra.insert(extra.find("window="), "ecn=true\n");
  EXPECT_THAT(std::string(CheckTunedProfileComplete(extra, "t.profile").message()),
              HasSubstr("key lines but its end line says"));
}

TEST(TunedProfileTest, LoadTunedProfileReadsFiles) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/tuned_profile_test.profile";
  const std::string text = FormatTunedProfile(Tuned(), SampleProvenance());
  {
    std::ofstream f(path);
    f << text.substr(0, text.size() / 2 + 3);
  }
  absl::Status s = LoadTunedProfile(path, TransportConfig()).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path + ":"));
  {
    std::ofstream f(path);
    f << text;
  }
  EXPECT_TRUE(LoadTunedProfile(path, TransportConfig()).ok());
  std::filesystem::remove(path);
  EXPECT_TRUE(absl::IsNotFound(LoadTunedProfile(path, TransportConfig()).status()));
}

TEST(HostAdviceTest, SaysWhatToRaise) {
  TransportConfig c;
  c.window = ByteCount{1} << 30;
  c.recv_window = ByteCount{2} << 30;
  c.segment = TransportConfig::SegmentForMtu(9000);
  HostSettings have{4 << 20, 4 << 20};
  HostAdvice a = AdviseHost(c, have);
  EXPECT_EQ(a.rmem_max_needed, 2147483647u);  // the kernel's int limit
  EXPECT_EQ(a.wmem_max_needed, ByteCount{1} << 30);
  EXPECT_EQ(a.mtu_needed, 9000u);
  EXPECT_FALSE(a.rmem_ok);
  EXPECT_FALSE(a.wmem_ok);
  ASSERT_EQ(a.commands.size(), 3u);
  EXPECT_EQ(a.commands[0], "sysctl -w net.core.rmem_max=2147483647");
  EXPECT_EQ(a.commands[1], "sysctl -w net.core.wmem_max=1073741824");
  EXPECT_THAT(a.commands[2], HasSubstr("mtu 9000"));
  HostAdvice ok = AdviseHost(c, HostSettings{ByteCount{4} << 30, ByteCount{4} << 30});
  EXPECT_TRUE(ok.rmem_ok && ok.wmem_ok);
  EXPECT_EQ(ok.commands.size(), 1u);  // only the MTU reminder
  c.segment = TransportConfig::SegmentForMtu(1500);
  EXPECT_TRUE(AdviseHost(c, HostSettings{ByteCount{4} << 30, ByteCount{4} << 30}).commands.empty());
}

}  // namespace
}  // namespace longhaul::tuner
