// A minimal HTTP/1.0 server for longhaul-bridge's metrics: GET /metrics answers with
// the Prometheus text the callback returns, anything else with 404 (405 for other
// methods). One request per connection; requests over 8 KiB or slower than 5 s are
// dropped. Runs on the caller's io_context thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"

namespace longhaul::bridge {

class MetricsServer {
 public:
  // Listens on host:port (port 0: any). Returns the bound port, or an error naming the
  // address ("address in use").
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      boost::asio::io_context& io, const std::string& host, uint16_t port,
      std::function<std::string()> render);
  ~MetricsServer();
  uint16_t port() const;
  void Stop();

 private:
  struct Impl;
  explicit MetricsServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace longhaul::bridge
