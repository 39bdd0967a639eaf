// Key material for tests, written with the library's own writer and modes (as
// longhaul-keygen writes it): private keys and PSKs 0600, public keys
// world-readable.
#pragma once

#include <string>

#include "transport/crypto/primitives.h"

namespace longhaul::testing {

// A fresh key pair written to PREFIX.key and PREFIX.pub; returns it. Failures
// are test failures (EXPECT).
crypto::KeyPair WriteKeyPair(const std::string &prefix);

// A fresh key pair whose private key is written to `path`; returns its public
// key.
crypto::Key32 WritePrivateKey(const std::string &path);

// A fresh pre-shared key written to `path`; returns it.
crypto::Key32 WritePsk(const std::string &path);

} // namespace longhaul::testing
