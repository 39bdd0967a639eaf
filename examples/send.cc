// longhaul-example-send HOST PORT PSK_FILE COUNT SIZE: connects, sends COUNT messages of
// SIZE bytes (rate capped at 1 Gbit/s), waits until every one was acknowledged, closes,
// and prints the same summary line as the receiver.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common.h"
#include "longhaul/longhaul.h"

using namespace longhaul::api;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s HOST PORT PSK_FILE COUNT SIZE\n", argv[0]);
    return 2;
  }
  const std::string host = argv[1];
  const auto port = static_cast<uint16_t>(std::strtoul(argv[2], nullptr, 10));
  const uint64_t count = std::strtoull(argv[4], nullptr, 10);
  const size_t size = std::strtoull(argv[5], nullptr, 10);
  EndpointOptions eo;
  eo.security.psk_file = argv[3];
  auto ep = Endpoint::Create(eo);
  if (!ep.ok()) {
    std::fprintf(stderr, "endpoint: %s\n", ep.status().ToString().c_str());
    return 1;
  }
  ConnectOptions co;
  co.settings.values = {{"rate", "1gbit"}, {"cc", "fixed"}};
  auto conn = (*ep)->Connect(host, port, co);
  if (!conn.ok()) {
    std::fprintf(stderr, "connect: %s\n", conn.status().ToString().c_str());
    return 1;
  }
  example::Digest digest;
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < count; ++i) {
    std::vector<uint8_t> m = example::MakeMessage(i, size);
    digest.Add(m);
    bytes += m.size();
    auto id = (*conn)->Send(std::move(m), /*tag=*/i);  // the transport holds the copy
    if (!id.ok()) {
      std::fprintf(stderr, "send: %s\n", id.status().ToString().c_str());
      return 1;
    }
  }
  uint64_t completed = 0;
  Event e;
  while (completed < count && (*conn)->Wait(&e, std::chrono::seconds(30))) {
    if (e.type == Event::Type::kSendComplete && e.status.ok()) ++completed;
    if (e.type == Event::Type::kClosed) break;
  }
  if (completed != count) {
    std::fprintf(stderr, "only %" PRIu64 " of %" PRIu64 " messages acknowledged (%s)\n",
                 completed, count, (*conn)->status().ToString().c_str());
    return 1;
  }
  (*conn)->Close();
  (*conn)->WaitClosed(std::chrono::seconds(10));
  std::printf("sent %" PRIu64 " messages, %" PRIu64 " bytes, digest %016" PRIx64 "\n", count,
              bytes, digest.value());
  return 0;
}
