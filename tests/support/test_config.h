// Configuration presets shared by the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/core/config.h"
#include "transport/core/connection.h"
#include "transport/crypto/noise.h"
#include "transport/endpoint/sans_io_endpoint.h"

namespace longhaul::testing {

// Two Connections over the ConnectionPair pipe (transport/testing): 1000-byte
// segments, 1 Gbit/s, an 8 MiB window and a 16 MiB receive window, tail
// protection off (tests of plain selective repeat turn it on where they need
// it).
TransportConfig PipeTestConfig();

// Endpoints over 127.0.0.1: 2 Gbit/s, a 1 ms initial RTT.
TransportConfig LoopbackTestConfig();

// Fixed Noise split keys for tests of packet protection: initiator to responder all
// 0x11, responder to initiator all 0x22, handshake hash all 0x33.
crypto::NoiseSplit TestNoiseSplit();

// A sans-IO endpoint without packet protection, its seed and cookie secret
// derived from `seed`.
endpoint::EndpointConfig InsecureEndpointConfig(uint64_t seed);

// A SendBuffer over a copy of `bytes` that the transport holds (SendBuffer::owner) until
// the message's send completion. Send reads a plain SendBuffer in place until then, also
// after the peer has received the message (a retransmission or repair may still read
// it), so a test whose buffer goes out of scope before its connection ends sends this.
SendBuffer HeldSend(const std::vector<uint8_t>& bytes);

} // namespace longhaul::testing
