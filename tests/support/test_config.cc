#include "tests/support/test_config.h"

#include <memory>

namespace longhaul::testing {

TransportConfig PipeTestConfig() {
  TransportConfig c;
  c.segment = 1000;
  c.rate = Bandwidth::Gbps(1);
  c.window = 8 << 20;
  c.recv_window = 16 << 20;
  c.tail_protect = false;
  return c;
}

TransportConfig LoopbackTestConfig() {
  TransportConfig c;
  c.rate = Bandwidth::Gbps(2);
  c.initial_rtt = Duration::Milliseconds(1);
  return c;
}

crypto::NoiseSplit TestNoiseSplit() {
  crypto::NoiseSplit s;
  s.initiator_to_responder.fill(0x11);
  s.responder_to_initiator.fill(0x22);
  s.handshake_hash.fill(0x33);
  return s;
}

endpoint::EndpointConfig InsecureEndpointConfig(uint64_t seed) {
  endpoint::EndpointConfig c;
  c.seed = seed;
  c.cookie_secret = endpoint::SipKey{seed * 7 + 1, seed * 13 + 5};
  c.security = endpoint::SecurityConfig::Insecure();
  return c;
}

SendBuffer HeldSend(const std::vector<uint8_t>& bytes) {
  auto held = std::make_shared<const std::vector<uint8_t>>(bytes);
  return SendBuffer{held->data(), held->size(), held};
}

} // namespace longhaul::testing
