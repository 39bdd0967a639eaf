// Fuzz target for everything that reads handshake input before a connection exists: the
// handshake body and packet decoders, the Noise message readers of both sides, and a
// protected server endpoint fed the bytes as a datagram from a spoofed address.
// Invariants: nothing crashes or reads out of bounds (ASan/UBSan in the fuzz build); a body
// that decodes re-encodes to bytes that decode to the same message; the server keeps no
// state for input that is not a completed, authenticated handshake.
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON (clang), and replayed as an ordinary
// test (handshake_fuzz_replay_test) over seeds and bounded mutations on every compiler.

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transport/base/rng.h"
#include "transport/crypto/noise.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/endpoint/handshake.h"

namespace longhaul::endpoint {
namespace {

// The fixed key pairs, derived once: an X25519 derivation per call was most of the cost
// of an input (six per input), and the derived pairs are the same every time.
const crypto::KeyPair& Pair(uint8_t v) {
  static const auto* pairs = [] {
    auto* p = new std::array<crypto::KeyPair, 4>;
    for (uint8_t i = 1; i < p->size(); ++i) {  // 1: client, 2: server
      crypto::Key32 k;
      k.fill(i);
      absl::StatusOr<crypto::KeyPair> kp = crypto::KeyPairFromPrivate(k);
      LH_FUZZ_CHECK(kp.ok());
      (*p)[i] = *kp;
    }
    return p;
  }();
  LH_FUZZ_CHECK(v >= 1 && v < pairs->size());
  return (*pairs)[v];
}

void CheckBody(std::span<const uint8_t> d) {
  absl::StatusOr<HandshakeMessage> m = DecodeHandshakeBody(d);
  if (!m.ok()) return;
  if (m->version != kProtocolVersion) return;  // only the prefix was read
  absl::StatusOr<std::vector<uint8_t>> again = EncodeHandshakeBody(*m);
  LH_FUZZ_CHECK(again.ok());
  absl::StatusOr<HandshakeMessage> m2 = DecodeHandshakeBody(*again);
  LH_FUZZ_CHECK(m2.ok());
  LH_FUZZ_CHECK(*m2 == *m);
}

// The two prepared states of a pattern: a responder waiting for message 1 and an initiator
// that wrote it, waiting for message 2. Prepared once: their X25519 work is the same for
// every input; only the reads below depend on the input.
struct NoiseStates {
  crypto::NoiseHandshake responder;
  crypto::NoiseHandshake initiator;
};

const NoiseStates& States(crypto::NoisePattern p) {
  static const auto* states = [] {
    auto* v = new std::vector<NoiseStates>;
    for (crypto::NoisePattern p : {crypto::NoisePattern::kIK, crypto::NoisePattern::kIKpsk1,
                                   crypto::NoisePattern::kNNpsk0}) {
      crypto::NoiseKeys server, client;
      crypto::Key32 psk;
      psk.fill(7);
      if (p != crypto::NoisePattern::kNNpsk0) {
        server.static_key = Pair(2);
        client.static_key = Pair(1);
        client.remote_static = Pair(2).public_key;
      }
      if (p != crypto::NoisePattern::kIK) server.psk = client.psk = psk;
      crypto::Key32 e;
      e.fill(3);
      absl::StatusOr<crypto::NoiseHandshake> r =
          crypto::NoiseHandshake::Responder(p, server, {}, e);
      LH_FUZZ_CHECK(r.ok());
      absl::StatusOr<crypto::NoiseHandshake> i =
          crypto::NoiseHandshake::Initiator(p, client, {}, e);
      LH_FUZZ_CHECK(i.ok());
      LH_FUZZ_CHECK(i->WriteMessage1({}).ok());
      v->push_back(NoiseStates{std::move(*r), std::move(*i)});
    }
    return v;
  }();
  return (*states)[static_cast<size_t>(p == crypto::NoisePattern::kIK       ? 0
                                       : p == crypto::NoisePattern::kIKpsk1 ? 1
                                                                            : 2)];
}

// The input as message 1 to a responder and as message 2 to an initiator, of the pattern
// its first byte selects, for the inputs whose first byte is even (the reads cost X25519
// operations, most of an input's time: the decoders and the endpoint get the other half
// of the inputs at several times the rate).
void CheckNoise(std::span<const uint8_t> d) {
  static constexpr crypto::NoisePattern kPatterns[] = {
      crypto::NoisePattern::kIK, crypto::NoisePattern::kIKpsk1, crypto::NoisePattern::kNNpsk0};
  if (!d.empty() && d[0] % 2 == 1) return;
  const crypto::NoisePattern p = kPatterns[d.empty() ? 0 : (d[0] / 2) % 3];
  crypto::NoiseHandshake r = States(p).responder;
  // Random bytes authenticate only by a 2^-128 chance: a success here is a bug.
  LH_FUZZ_CHECK(!r.ReadMessage1(d).ok());
  crypto::NoiseHandshake i = States(p).initiator;
  LH_FUZZ_CHECK(!i.ReadMessage2(d).ok());
}

SansIoEndpoint& Server() {
  static SansIoEndpoint* ep = [] {
    EndpointConfig c;
    c.seed = 1;
    c.cookie_secret = SipKey{1, 2};
    c.security.key = Pair(2);
    c.security.peer_keys = {Pair(1).public_key};
    auto rng = std::make_shared<Rng>(5);
    c.security.entropy = [rng](std::span<uint8_t> out) {
      for (uint8_t& b : out) b = static_cast<uint8_t>(rng->Next());
    };
    auto* e = new SansIoEndpoint(c);
    TransportConfig t;
    LH_FUZZ_CHECK(e->Listen(1, ListenConfig{t}).ok());
    return e;
  }();
  return *ep;
}

void CheckEndpoint(std::span<const uint8_t> d) {
  SansIoEndpoint& s = Server();
  const uint8_t from_bytes[6] = {198, 18, 0, 9, 0x9c, 0x40};
  const PeerAddress from(std::span<const uint8_t>(from_bytes, 6));
  s.OnDatagram(Time::FromNanoseconds(1'000'000'000), 1, from, d);
  static std::vector<uint8_t> buf(65536);  // allocated once: its clearing cost as much as a read
  Transmit t;
  while (s.PollTransmit(Time::FromNanoseconds(1'000'000'000), buf.data(), buf.size(), &t) > 0) {
  }
  EndpointEvent e;
  while (s.PollEvent(&e)) {
  }
  // No cookie we minted can appear in fuzz input, so no connection can be created.
  LH_FUZZ_CHECK(s.connection_count() == 0);
  LH_FUZZ_CHECK(s.pending_count() == 0);
}

}  // namespace
}  // namespace longhaul::endpoint

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace longhaul::endpoint;
  const std::span<const uint8_t> d(data, size);
  CheckBody(d);
  (void)ParseHandshakePacket(d);
  CheckNoise(d);
  CheckEndpoint(d);
  // The same bytes as the body of a well-formed Initial packet (one HANDSHAKE frame,
  // padded to the minimum size), so the packet checks pass and the body decoder and the
  // endpoint's handshake paths see them.
  if (size <= 1100) {
    std::vector<uint8_t> p(longhaul::wire::kMaxDatagramSize);
    longhaul::wire::PacketWriter w(p.data(), p.size());
    longhaul::wire::PacketHeader h;
    h.type = longhaul::wire::PacketType::kInitial;
    w.WriteHeader(h);
    if (w.WriteHandshake(d)) {
      if (w.size() + longhaul::wire::kChecksumSize < kMinInitialSize) {
        w.WritePadding(kMinInitialSize - w.size() - longhaul::wire::kChecksumSize);
      }
      p.resize(w.Finish());
      (void)ParseHandshakePacket(p);
      CheckEndpoint(p);
    }
  }
  return 0;
}
