#include "tools/nccl_bench/control.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace longhaul::nccl::bench {

bool SendMsg(int fd, const void* m, size_t n) {
  return send(fd, m, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

ssize_t RecvMsg(int fd, void* buf, size_t cap, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (rc < 0 && errno != EINTR) return -1;
    if (rc <= 0) continue;
    ssize_t n = recv(fd, buf, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

}  // namespace longhaul::nccl::bench
