// Shared by the sim-tier tests: scenario options for a link spec with what longhaul-sim
// does by default (the fixed controller paces at the link rate, segments fill the link
// MTU), both ends alike, bounded by 60 s of virtual and 300 s of wall time.
#pragma once

#include <string>

#include "gtest/gtest.h"
#include "transport/base/clock.h"
#include "transport/sim/scenario.h"

namespace longhaul::sim {

inline ScenarioOptions LinkDefaults(const std::string& link) {
  ScenarioOptions o;
  absl::StatusOr<LinkSpec> spec = ParseLinkSpec(link, {});
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (spec.ok()) o.link = *spec;
  o.sender_config.rate = o.link.rate;
  o.sender_config.segment = TransportConfig::SegmentForMtu(o.link.mtu);
  o.receiver_config = o.sender_config;
  o.max_virtual_time = Duration::Seconds(60);
  o.max_wall_time = Duration::Seconds(300);
  o.wall_seconds = MonotonicSeconds;  // the wall-time bound
  return o;
}

// RunScenario(o), its failure or error a test failure.
inline ScenarioResult RunScenarioOk(const ScenarioOptions& o) {
  absl::StatusOr<ScenarioResult> r = RunScenario(o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return ScenarioResult{};
  EXPECT_EQ(r->error, "");
  return *r;
}

}  // namespace longhaul::sim
