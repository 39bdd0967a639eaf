// Test helper: runs a shell command bounded by `timeout -k 10 BOUND`, capturing
// its stdout (stderr goes to the test log). Header-only; for tests that drive
// scripts.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace longhaul::testing {

struct CommandOutput {
  int status =
      -1; // exit status; -1 if it did not exit normally (or could not start)
  std::string out;
};

inline CommandOutput RunCommand(const std::string &cmd, int bound_s) {
  CommandOutput o;
  FILE *p =
      popen(absl::StrCat("timeout -k 10 ", bound_s, " ", cmd).c_str(), "r");
  if (p == nullptr)
    return o;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
    o.out.append(buf, n);
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

} // namespace longhaul::testing
