// A TUN device (IFF_TUN | IFF_NO_PI: whole IP packets, no extra header) created inside a
// network namespace and configured there: MTU, an IPv4 address with its prefix, IPv6 off
// (no router solicitations or MLD reports crossing the emulated link), link up, and the
// namespace's loopback up. The device lives as long as its fd: closing the fd removes it.
//
// Needs CAP_NET_ADMIN in the namespace. Thread-safe (each call works on its own thread
// inside the namespace).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace longhaul::emu {

struct TunConfig {
  std::string name = "lhemu0";  // interface name, < 16 characters
  std::string address;          // IPv4, e.g. "198.18.0.1"
  int prefix_len = 30;
  int mtu = 9000;
  bool disable_ipv6 = true;
};

// Creates and configures the device in the namespace `netns_fd`; returns its non-blocking
// fd (owned by the caller). Errors name the step and the device: an existing device of
// that name (busy), a bad MTU or address, missing privileges.
absl::StatusOr<int> CreateTunInNetns(int netns_fd, const TunConfig& config);

// Opens the namespace's /proc/net/dev (the file keeps showing that namespace, whichever
// thread reads it later). The caller owns the fd.
absl::StatusOr<int> OpenNetDevStatsInNetns(int netns_fd);

// The transmit-drop counter of device `name` from an fd of OpenNetDevStatsInNetns. For a
// TUN device these are packets the namespace sent that the reader (the emulator) did not
// take in time: its queue was full. nullopt if the device is not listed.
std::optional<uint64_t> ReadDeviceTxDrops(int proc_net_dev_fd, const std::string& name);

// Whether an interface `name` exists in the namespace `netns_fd` (for tests and checks).
absl::StatusOr<bool> InterfaceExistsInNetns(int netns_fd, const std::string& name);

}  // namespace longhaul::emu
