// Named network namespaces, compatible with iproute2's `ip netns`: a namespace NAME is
// kept alive by a bind mount of its nsfs file on /run/netns/NAME, so
// `ip netns exec NAME ...` works on the namespaces created here, and namespaces created
// by `ip netns add` can be used here.
//
// Everything that enters a namespace does it on a short-lived helper thread (setns()
// changes only the calling thread), so the caller's threads never leave their namespace.
// Needs root (CAP_SYS_ADMIN for the mounts and setns, CAP_NET_ADMIN for devices); errors
// say so. Thread-safe (no shared state besides the file system).
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace longhaul::emu {

// Where named namespaces live (iproute2's NETNS_RUN_DIR).
inline constexpr char kNetnsRunDir[] = "/run/netns";

// A namespace name usable as a file name: 1..64 of [A-Za-z0-9._-], not "." or "..".
absl::Status ValidateNetnsName(absl::string_view name);

// The path of a named namespace (/run/netns/NAME).
std::string NetnsPath(absl::string_view name);

// Whether /run/netns/NAME exists and is a network namespace.
bool NetnsExists(absl::string_view name);

struct NetnsHandle {
  std::string name;
  int fd = -1;           // O_RDONLY fd of the namespace (for setns); owned
  bool created = false;  // created by OpenOrCreateNetns (the caller should delete it)
};

// Opens the named namespace, creating it if it does not exist. The caller owns handle.fd.
absl::StatusOr<NetnsHandle> OpenOrCreateNetns(absl::string_view name);

// Removes a named namespace (unmounts and unlinks /run/netns/NAME). The namespace itself
// lives on while processes or fds still use it. NotFound if there is no such name.
absl::Status DeleteNetns(absl::string_view name);

// Runs `fn` on a new thread that has entered the namespace `netns_fd`, and waits for it.
// Sockets and devices created by `fn` belong to that namespace and stay usable from any
// thread. Returns the setns error, or fn's status.
absl::Status RunInNetns(int netns_fd, const std::function<absl::Status()>& fn);

// Whether this process can create namespaces and TUN devices; if not, why (for skipping
// tests and for a clear error up front).
absl::Status CheckTunModePrivileges();

}  // namespace longhaul::emu
