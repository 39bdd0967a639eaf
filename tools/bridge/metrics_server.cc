#include "tools/bridge/metrics_server.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read_until.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/streambuf.hpp"
#include "boost/asio/write.hpp"

namespace longhaul::bridge {

namespace asio = boost::asio;
using asio::ip::tcp;

struct MetricsServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, std::function<std::string()> r) : acceptor(io), render(std::move(r)) {}
  tcp::acceptor acceptor;
  std::function<std::string()> render;

  struct Client {
    explicit Client(tcp::socket s) : sock(std::move(s)), timer(sock.get_executor()), buf(8192) {}
    tcp::socket sock;
    asio::steady_timer timer;
    asio::streambuf buf;
    std::string reply;
  };

  void Accept() {
    acceptor.async_accept([self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
      if (!ec) self->Serve(std::make_shared<Client>(std::move(s)));
      self->Accept();
    });
  }

  void Serve(std::shared_ptr<Client> c) {
    c->timer.expires_after(std::chrono::seconds(5));
    c->timer.async_wait([c](boost::system::error_code ec) {
      if (!ec) {
        boost::system::error_code e2;
        c->sock.close(e2);
      }
    });
    asio::async_read_until(
        c->sock, c->buf, "\r\n\r\n",
        [self = shared_from_this(), c](boost::system::error_code ec, size_t) {
          if (ec) {
            c->timer.cancel();
            return;
          }
          std::string head(asio::buffers_begin(c->buf.data()), asio::buffers_end(c->buf.data()));
          const std::string line = head.substr(0, head.find("\r\n"));
          std::string status = "200 OK", body;
          const char* type = "text/plain; version=0.0.4; charset=utf-8";
          if (!absl::StartsWith(line, "GET ")) {
            status = "405 Method Not Allowed";
            body = "only GET /metrics\n";
            type = "text/plain";
          } else if (!absl::StartsWith(line, "GET /metrics ") && line != "GET /metrics") {
            status = "404 Not Found";
            body = "see /metrics\n";
            type = "text/plain";
          } else {
            body = self->render();
          }
          c->reply = absl::StrCat("HTTP/1.0 ", status, "\r\nContent-Type: ", type,
                                  "\r\nContent-Length: ", body.size(),
                                  "\r\nConnection: close\r\n\r\n", body);
          asio::async_write(c->sock, asio::buffer(c->reply), [c](boost::system::error_code, size_t) {
            c->timer.cancel();
            boost::system::error_code e2;
            c->sock.shutdown(tcp::socket::shutdown_both, e2);
            c->sock.close(e2);
          });
        });
  }
};

MetricsServer::MetricsServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() { Stop(); }

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    asio::io_context& io, const std::string& host, uint16_t port,
    std::function<std::string()> render) {
  auto impl = std::make_shared<Impl>(io, std::move(render));
  boost::system::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--metrics: bad address '", host, "'"));
  const tcp::endpoint ep(addr, port);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(64, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", ec.message()));
  }
  impl->Accept();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

uint16_t MetricsServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void MetricsServer::Stop() {
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

}  // namespace longhaul::bridge
