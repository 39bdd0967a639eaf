// Device discovery: the plugin's NCCL devices are network interfaces that are up and have
// an address, chosen by an interface list in NCCL's syntax (NCCL_LONGHAUL_IFNAME, else
// NCCL_SOCKET_IFNAME; Settings::ifname), else the first interface that is not loopback,
// else loopback. A device's properties (speed, latency) come from the settings' rate and
// RTT, else from /sys/class/net.
//
// Thread-safety: pure functions, except that UpInterfaces and FindDevices read the
// system's interfaces (getifaddrs, /sys); all may run on any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/nccl/net_plugin.h"
#include "transport/nccl/settings.h"

namespace longhaul::nccl {

struct Interface {
  std::string name;
  std::string address;  // numeric
  bool loopback = false;
};

// Interfaces that are up, each once with its first IPv4 address, else its first IPv6
// address that is not link-local; in getifaddrs order.
std::vector<Interface> UpInterfaces();

// NCCL's interface list syntax: "eth,ib" (prefixes), "=eth0" (exact names), "^docker"
// (exclude these prefixes; "^=docker0" excludes exact names).
bool MatchesInterfaceList(const std::string& name, std::string spec);

// The interfaces of `ifs` that `spec` (from `variable`) selects; spec empty: the first
// that is not loopback, else the first loopback. FailedPrecondition naming the variable
// and listing `ifs` when nothing is selected.
absl::StatusOr<std::vector<Interface>> SelectInterfaces(const std::vector<Interface>& ifs,
                                                        const std::string& spec,
                                                        const std::string& variable);

// The devices for `s`: the selected interfaces with their properties (guid = index).
absl::StatusOr<std::vector<DeviceProperties>> FindDevices(const Settings& s);

}  // namespace longhaul::nccl
