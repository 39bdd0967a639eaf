#include "transport/nccl/devices.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "transport/base/status.h"

namespace longhaul::nccl {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

}  // namespace

std::vector<Interface> UpInterfaces() {
  std::vector<Interface> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  // IPv4 first; an interface with only IPv6 (not link-local) uses that.
  for (int pass = 0; pass < 2; ++pass) {
    for (ifaddrs* a = ifa; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || !(a->ifa_flags & IFF_UP)) continue;
      const int fam = a->ifa_addr->sa_family;
      if ((pass == 0 && fam != AF_INET) || (pass == 1 && fam != AF_INET6)) continue;
      bool seen = false;
      for (const Interface& i : out) seen |= i.name == a->ifa_name;
      if (seen) continue;
      char buf[INET6_ADDRSTRLEN] = {};
      if (fam == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf,
                  sizeof(buf));
      } else {
        const in6_addr& a6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
        if (IN6_IS_ADDR_LINKLOCAL(&a6)) continue;
        inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
      }
      out.push_back({a->ifa_name, buf, (a->ifa_flags & IFF_LOOPBACK) != 0});
    }
  }
  freeifaddrs(ifa);
  return out;
}

bool MatchesInterfaceList(const std::string& name, std::string spec) {
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool match = false;
  for (absl::string_view p : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    if (exact ? name == p : absl::StartsWith(name, p)) match = true;
  }
  return exclude ? !match : match;
}

absl::StatusOr<std::vector<Interface>> SelectInterfaces(const std::vector<Interface>& ifs,
                                                        const std::string& spec,
                                                        const std::string& variable) {
  std::vector<Interface> chosen;
  if (!spec.empty()) {
    for (const Interface& i : ifs) {
      if (MatchesInterfaceList(i.name, spec)) chosen.push_back(i);
    }
  } else {
    for (const Interface& i : ifs) {
      if (!i.loopback) {
        chosen.push_back(i);
        break;
      }
    }
    if (chosen.empty()) {
      for (const Interface& i : ifs) {
        if (i.loopback) {
          chosen.push_back(i);
          break;
        }
      }
    }
  }
  if (chosen.empty()) {
    std::vector<std::string> names;
    for (const Interface& i : ifs) names.push_back(absl::StrCat(i.name, " (", i.address, ")"));
    return absl::FailedPreconditionError(absl::StrCat(
        !spec.empty()
            ? absl::StrCat(variable, "=", spec, " matches no interface that is up with an address")
            : std::string("no interface is up with an address"),
        "; interfaces: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  return chosen;
}

absl::StatusOr<std::vector<DeviceProperties>> FindDevices(const Settings& s) {
  LH_ASSIGN_OR_RETURN(std::vector<Interface> chosen,
                      SelectInterfaces(UpInterfaces(), s.ifname, s.ifname_variable));
  std::vector<DeviceProperties> out;
  for (size_t d = 0; d < chosen.size(); ++d) {
    DeviceProperties p;
    p.name = chosen[d].name;
    p.address = chosen[d].address;
    char real[PATH_MAX];
    std::string dev_link = absl::StrCat("/sys/class/net/", p.name, "/device");
    if (realpath(dev_link.c_str(), real) != nullptr) p.pci_path = real;
    if (s.rate_given && !s.config.rate.IsZero()) {
      p.speed_mbps = static_cast<int>(std::min(s.config.rate.bps() / 1e6, 2e9));
    } else {
      int mbps = 0;
      if (absl::SimpleAtoi(ReadFirstLine(absl::StrCat("/sys/class/net/", p.name, "/speed")),
                           &mbps) &&
          mbps > 0) {
        p.speed_mbps = mbps;
      } else {
        p.speed_mbps = 10000;  // what NCCL's socket net assumes when the kernel does not say
      }
    }
    p.latency_us = s.rtt_given ? static_cast<float>(s.config.initial_rtt.microseconds() / 2) : 0;
    p.guid = d;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace longhaul::nccl
