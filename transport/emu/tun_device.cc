#include "transport/emu/tun_device.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/emu/netns.h"

namespace longhaul::emu {
namespace {

absl::Status Fail(absl::string_view what, const std::string& dev) {
  const int e = errno;
  std::string msg = absl::StrCat(what, " (", dev, "): ", strerror(e));
  if (e == EPERM || e == EACCES) {
    return absl::PermissionDeniedError(absl::StrCat(msg, " (TUN mode needs CAP_NET_ADMIN)"));
  }
  if (e == EBUSY) {
    return absl::FailedPreconditionError(
        absl::StrCat(msg,
                     ": a device of that name is in use in the namespace (another "
                     "emulator?); pick another --tun_name or namespace"));
  }
  return absl::InternalError(msg);
}

// SIOCSIFFLAGS |= IFF_UP on `name` through the ioctl socket `s`.
absl::Status LinkUp(int s, const char* name) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) return Fail("SIOCGIFFLAGS", name);
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return Fail("SIOCSIFFLAGS up", name);
  return absl::OkStatus();
}

void WriteSysctl(const std::string& path, const char* value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;  // IPv6 compiled out or disabled: nothing to turn off
  [[maybe_unused]] ssize_t n = write(fd, value, std::strlen(value));
  close(fd);
}

}  // namespace

absl::StatusOr<int> CreateTunInNetns(int netns_fd, const TunConfig& c) {
  if (c.name.empty() || c.name.size() >= IFNAMSIZ || c.name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad TUN device name '", c.name, "': 1..", IFNAMSIZ - 1, " characters"));
  }
  in_addr addr{};
  if (inet_pton(AF_INET, c.address.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad IPv4 address '", c.address, "'"));
  }
  if (c.prefix_len < 1 || c.prefix_len > 31) {
    return absl::InvalidArgumentError("prefix length must be in 1..31");
  }
  if (c.mtu < 68 || c.mtu > 65535) return absl::InvalidArgumentError("MTU must be in 68..65535");
  int tun_fd = -1;
  LH_RETURN_IF_ERROR(RunInNetns(netns_fd, [&]() -> absl::Status {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return Fail("open /dev/net/tun", c.name);
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, c.name.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
      absl::Status st = Fail("TUNSETIFF", c.name);
      close(fd);
      return st;
    }
    // From here on, closing fd removes the device again.
    auto fail = [&](absl::Status st) {
      close(fd);
      return st;
    };
    if (c.disable_ipv6) {
      // /proc/sys/net shows the namespace of the thread that opens it: this one.
      WriteSysctl(absl::StrCat("/proc/sys/net/ipv6/conf/", c.name, "/disable_ipv6"), "1");
    }
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) return fail(Fail("socket", c.name));
    auto fail_sock = [&](absl::Status st) {
      close(sock);
      return fail(st);
    };
    ifreq req{};
    std::strncpy(req.ifr_name, c.name.c_str(), IFNAMSIZ - 1);
    req.ifr_mtu = c.mtu;
    if (ioctl(sock, SIOCSIFMTU, &req) != 0) return fail_sock(Fail("SIOCSIFMTU", c.name));
    auto* sin = reinterpret_cast<sockaddr_in*>(&req.ifr_addr);
    std::memset(&req.ifr_addr, 0, sizeof(req.ifr_addr));
    sin->sin_family = AF_INET;
    sin->sin_addr = addr;
    if (ioctl(sock, SIOCSIFADDR, &req) != 0) return fail_sock(Fail("SIOCSIFADDR", c.name));
    std::memset(&req.ifr_netmask, 0, sizeof(req.ifr_netmask));
    sin = reinterpret_cast<sockaddr_in*>(&req.ifr_netmask);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(~uint32_t{0} << (32 - c.prefix_len));
    if (ioctl(sock, SIOCSIFNETMASK, &req) != 0) return fail_sock(Fail("SIOCSIFNETMASK", c.name));
    if (absl::Status st = LinkUp(sock, c.name.c_str()); !st.ok()) return fail_sock(st);
    if (absl::Status st = LinkUp(sock, "lo"); !st.ok()) return fail_sock(st);
    close(sock);
    tun_fd = fd;
    return absl::OkStatus();
  }));
  return tun_fd;
}

absl::StatusOr<int> OpenNetDevStatsInNetns(int netns_fd) {
  int fd = -1;
  LH_RETURN_IF_ERROR(RunInNetns(netns_fd, [&]() -> absl::Status {
    fd = open("/proc/thread-self/net/dev", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::InternalError(absl::StrCat("open /proc/net/dev: ", strerror(errno)));
    return absl::OkStatus();
  }));
  return fd;
}

std::optional<uint64_t> ReadDeviceTxDrops(int fd, const std::string& name) {
  char buf[16384];
  if (lseek(fd, 0, SEEK_SET) != 0) return std::nullopt;
  size_t len = 0;
  while (len + 1 < sizeof(buf)) {
    const ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  buf[len] = '\0';
  // Lines look like "  lhemu0: rx_bytes rx_packets rx_errs rx_drop rx_fifo rx_frame
  // rx_compressed rx_multicast tx_bytes tx_packets tx_errs tx_drop ...".
  const std::string text(buf, len);
  const std::string key = name + ":";
  size_t pos = 0;
  while ((pos = text.find(key, pos)) != std::string::npos) {
    const bool at_line_start = pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '\n';
    if (!at_line_start) {
      pos += key.size();
      continue;
    }
    const char* p = text.c_str() + pos + key.size();
    uint64_t field = 0;
    for (int i = 0; i <= 11; ++i) {
      char* end = nullptr;
      field = std::strtoull(p, &end, 10);
      if (end == p) return std::nullopt;
      p = end;
    }
    return field;
  }
  return std::nullopt;
}

absl::StatusOr<bool> InterfaceExistsInNetns(int netns_fd, const std::string& name) {
  bool exists = false;
  LH_RETURN_IF_ERROR(RunInNetns(netns_fd, [&]() -> absl::Status {
    exists = if_nametoindex(name.c_str()) != 0;
    return absl::OkStatus();
  }));
  return exists;
}

}  // namespace longhaul::emu
