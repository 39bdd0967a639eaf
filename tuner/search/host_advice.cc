#include "tuner/search/host_advice.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace longhaul::tuner {
namespace {

constexpr ByteCount kIpUdpHeaders = 28;
constexpr ByteCount kKernelIntMax = 2147483647;  // sysctl values are C ints

ByteCount ReadProcValue(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char buf[64] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  uint64_t v = 0;
  absl::string_view text(buf, n);
  text = absl::StripAsciiWhitespace(text);
  if (!absl::SimpleAtoi(text, &v)) return 0;
  return v;
}

}  // namespace

HostSettings ReadHostSettings() {
  HostSettings s;
  s.rmem_max = ReadProcValue("/proc/sys/net/core/rmem_max");
  s.wmem_max = ReadProcValue("/proc/sys/net/core/wmem_max");
  return s;
}

HostAdvice AdviseHost(const TransportConfig& config, const HostSettings& current) {
  HostAdvice a;
  a.current = current;
  a.rmem_max_needed = std::min(std::max(config.window, config.recv_window), kKernelIntMax);
  a.wmem_max_needed = std::min(config.window, kKernelIntMax);
  a.mtu_needed = config.MaxDatagramSize() + kIpUdpHeaders;
  a.rmem_ok = current.rmem_max >= a.rmem_max_needed;
  a.wmem_ok = current.wmem_max >= a.wmem_max_needed;
  auto line = [](const char* name, ByteCount need, ByteCount have, bool ok) {
    return absl::StrFormat("%s: need >= %d, have %s%s", name, need,
                           have ? absl::StrCat(have) : "unknown",
                           ok ? " (ok)" : " (raise it, or sockets are capped below the window)");
  };
  a.lines.push_back(line("net.core.rmem_max", a.rmem_max_needed, current.rmem_max, a.rmem_ok));
  a.lines.push_back(line("net.core.wmem_max", a.wmem_max_needed, current.wmem_max, a.wmem_ok));
  a.lines.push_back(absl::StrFormat(
      "MTU: the %d-byte segment makes %d-byte datagrams: IP MTU >= %d on both hosts and the path",
      config.segment, config.MaxDatagramSize(), a.mtu_needed));
  if (!a.rmem_ok) {
    a.commands.push_back(absl::StrFormat("sysctl -w net.core.rmem_max=%d", a.rmem_max_needed));
  }
  if (!a.wmem_ok) {
    a.commands.push_back(absl::StrFormat("sysctl -w net.core.wmem_max=%d", a.wmem_max_needed));
  }
  if (a.mtu_needed > 1500) {
    a.commands.push_back(absl::StrFormat("ip link set dev <interface> mtu %d   # on both hosts",
                                         a.mtu_needed));
  }
  return a;
}

}  // namespace longhaul::tuner
