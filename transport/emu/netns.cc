#include "transport/emu/netns.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::emu {
namespace {

absl::Status Errno(absl::string_view what) {
  const int e = errno;
  std::string hint;
  if (e == EPERM || e == EACCES) {
    hint = " (TUN mode needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)";
    return absl::PermissionDeniedError(absl::StrCat(what, ": ", strerror(e), hint));
  }
  return absl::InternalError(absl::StrCat(what, ": ", strerror(e)));
}

// Like `ip netns add`: make the run directory a shared mount point so the bind mounts in
// it propagate to other mount namespaces (e.g. those of `ip netns exec`).
void MakeRunDirShared() {
  if (mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) == 0) return;
  if (errno != EINVAL) return;
  if (mount(kNetnsRunDir, kNetnsRunDir, "none", MS_BIND | MS_REC, nullptr) == 0) {
    mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr);
  }
}

bool IsNetNamespaceFd(int fd) { return ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET; }

}  // namespace

absl::Status ValidateNetnsName(absl::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("bad namespace name '", name, "': 1..64 characters, not '.' or '..'"));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad namespace name '", name, "': only letters, digits, '-', '_' and '.' allowed"));
    }
  }
  return absl::OkStatus();
}

std::string NetnsPath(absl::string_view name) { return absl::StrCat(kNetnsRunDir, "/", name); }

bool NetnsExists(absl::string_view name) {
  int fd = open(NetnsPath(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = IsNetNamespaceFd(fd);
  close(fd);
  return ok;
}

absl::StatusOr<NetnsHandle> OpenOrCreateNetns(absl::string_view name) {
  LH_RETURN_IF_ERROR(ValidateNetnsName(name));
  NetnsHandle h;
  h.name = std::string(name);
  const std::string path = NetnsPath(name);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (!IsNetNamespaceFd(fd)) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(path,
                       " exists but is not a network namespace (a stale file? remove it "
                       "or pick another name)"));
    }
    h.fd = fd;
    return h;
  }
  if (mkdir(kNetnsRunDir, 0755) != 0 && errno != EEXIST) {
    return Errno(absl::StrCat("mkdir ", kNetnsRunDir));
  }
  MakeRunDirShared();
  int mp = open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (mp < 0) return Errno(absl::StrCat("create ", path));
  close(mp);
  // A fresh thread unshares its network namespace and pins it with a bind mount; the
  // thread then ends, and the mount keeps the namespace alive.
  absl::Status made;
  std::thread t([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      made = Errno("unshare(CLONE_NEWNET)");
      return;
    }
    if (mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
      made = Errno(absl::StrCat("bind mount on ", path));
    }
  });
  t.join();
  if (!made.ok()) {
    unlink(path.c_str());
    return made;
  }
  fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || !IsNetNamespaceFd(fd)) {
    const absl::Status s = Errno(absl::StrCat("open ", path));
    if (fd >= 0) close(fd);
    umount2(path.c_str(), MNT_DETACH);
    unlink(path.c_str());
    return s;
  }
  h.fd = fd;
  h.created = true;
  return h;
}

absl::Status DeleteNetns(absl::string_view name) {
  LH_RETURN_IF_ERROR(ValidateNetnsName(name));
  const std::string path = NetnsPath(name);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no namespace ", path));
  }
  umount2(path.c_str(), MNT_DETACH);
  if (unlink(path.c_str()) != 0) return Errno(absl::StrCat("unlink ", path));
  return absl::OkStatus();
}

absl::Status RunInNetns(int netns_fd, const std::function<absl::Status()>& fn) {
  absl::Status result;
  std::thread t([&] {
    if (setns(netns_fd, CLONE_NEWNET) != 0) {
      result = Errno("setns(CLONE_NEWNET)");
      return;
    }
    result = fn();
  });
  t.join();
  return result;
}

absl::Status CheckTunModePrivileges() {
  // CapEff bit 12 is CAP_NET_ADMIN, bit 21 CAP_SYS_ADMIN.
  std::ifstream status("/proc/self/status");
  std::string line;
  uint64_t caps = 0;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "CapEff:")) {
      std::string hex = line.substr(7);
      hex.erase(0, hex.find_first_not_of(" \t"));
      absl::SimpleHexAtoi(hex, &caps);
    }
  }
  const bool net_admin = caps & (uint64_t{1} << 12);
  const bool sys_admin = caps & (uint64_t{1} << 21);
  if (!net_admin || !sys_admin) {
    return absl::PermissionDeniedError(
        absl::StrCat("TUN mode needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); missing:",
                     net_admin ? "" : " CAP_NET_ADMIN", sys_admin ? "" : " CAP_SYS_ADMIN"));
  }
  if (access("/dev/net/tun", R_OK | W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("/dev/net/tun is not usable: ", strerror(errno),
                     " (load the tun module or give the container the device)"));
  }
  return absl::OkStatus();
}

}  // namespace longhaul::emu
