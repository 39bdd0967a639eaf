// longhaul-example-receive PSK_FILE: listens on 127.0.0.1 (any free port, printed as
// "port N"), accepts one connection, takes its messages until the sender closes, and
// prints how many arrived, their bytes and their digest.
#include <cinttypes>
#include <cstdio>

#include "common.h"
#include "longhaul/longhaul.h"

using namespace longhaul::api;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PSK_FILE\n", argv[0]);
    return 2;
  }
  std::fprintf(stderr, "%s\n", longhaul::VersionLine("longhaul-example-receive").c_str());
  EndpointOptions eo;
  eo.security.psk_file = argv[1];
  auto ep = Endpoint::Create(eo);
  if (!ep.ok()) {
    std::fprintf(stderr, "endpoint: %s\n", ep.status().ToString().c_str());
    return 1;
  }
  auto port = (*ep)->Listen("127.0.0.1", 0, ListenOptions{});
  if (!port.ok()) {
    std::fprintf(stderr, "listen: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::printf("port %u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  auto conn = (*ep)->Accept(std::chrono::seconds(30));
  if (!conn.ok()) {
    std::fprintf(stderr, "accept: %s\n", conn.status().ToString().c_str());
    return 1;
  }
  example::Digest digest;
  uint64_t messages = 0, bytes = 0;
  Event e;
  // Messages arrive whole and in order, in memory each event owns (no posted buffers).
  while ((*conn)->Wait(&e, std::chrono::seconds(30))) {
    if (e.type == Event::Type::kReceiveComplete) {
      if (!e.status.ok()) {
        std::fprintf(stderr, "message %" PRIu64 ": %s\n", e.message_id,
                     e.status.ToString().c_str());
        return 1;
      }
      digest.Add(e.bytes());
      ++messages;
      bytes += e.size;
    } else if (e.type == Event::Type::kClosed) {
      if (!e.status.ok()) {
        std::fprintf(stderr, "closed: %s\n", e.status.ToString().c_str());
        return 1;
      }
      break;
    }
  }
  std::printf("received %" PRIu64 " messages, %" PRIu64 " bytes, digest %016" PRIx64 "\n",
              messages, bytes, digest.value());
  return 0;
}
