#include "tests/unit/api/udp_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <vector>

namespace longhaul::testing {
namespace {

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

UdpRelay::UdpRelay(uint16_t server_port) : server_port_(server_port) {
  listen_fd_ = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a = Loopback(0);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { Run(); });
}

UdpRelay::~UdpRelay() {
  stop_.store(true);
  thread_.join();
  close(listen_fd_);
}

void UdpRelay::Run() {
  // client port -> (client address, upstream socket)
  std::map<uint16_t, std::pair<sockaddr_in, int>> upstream;
  std::vector<uint8_t> buf(65536);
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{listen_fd_, POLLIN, 0});
    std::vector<uint16_t> ports;
    for (auto& [port, u] : upstream) {
      fds.push_back(pollfd{u.second, POLLIN, 0});
      ports.push_back(port);
    }
    if (poll(fds.data(), fds.size(), 10) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      ssize_t n = recvfrom(listen_fd_, buf.data(), buf.size(), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &len);
      if (n >= 0) {
        uint16_t p = ntohs(from.sin_port);
        auto it = upstream.find(p);
        if (it == upstream.end()) {
          int fd = socket(AF_INET, SOCK_DGRAM, 0);
          sockaddr_in any = Loopback(0);
          bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any));
          sockaddr_in srv = Loopback(server_port_);
          connect(fd, reinterpret_cast<sockaddr*>(&srv), sizeof(srv));
          it = upstream.emplace(p, std::make_pair(from, fd)).first;
          client_ports_.store(upstream.size());
        }
        if (!drop_.load()) {
          send(it->second.second, buf.data(), static_cast<size_t>(n), MSG_DONTWAIT);
          forwarded_.fetch_add(1);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      auto& u = upstream[ports[i - 1]];
      ssize_t n = recv(u.second, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n >= 0 && !drop_.load()) {
        sendto(listen_fd_, buf.data(), static_cast<size_t>(n), MSG_DONTWAIT,
               reinterpret_cast<sockaddr*>(&u.first), sizeof(u.first));
        forwarded_.fetch_add(1);
      }
    }
  }
  for (auto& [port, u] : upstream) close(u.second);
}

}  // namespace longhaul::testing
