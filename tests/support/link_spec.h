// A link spec for tests. Header-only: a test that includes it links longhaul_sim.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "transport/sim/link_spec.h"

namespace longhaul::testing {

// ParseLinkSpec without a catalogue of named links; a parse error is a test failure
// (and gives the default spec).
inline sim::LinkSpec ParseTestLinkSpec(const std::string& text) {
  absl::StatusOr<sim::LinkSpec> s = sim::ParseLinkSpec(text, {});
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : sim::LinkSpec{};
}

}  // namespace longhaul::testing
