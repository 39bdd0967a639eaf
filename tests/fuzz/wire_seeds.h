// Seed packets for the wire fuzzer: a small set of valid datagrams covering every packet
// type and frame type. The same bytes are committed under tests/fuzz/corpus/wire/, and
// wire_fuzz_replay_test checks that the writer still produces them, so they double as
// golden vectors of wire format version 1.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace longhaul::wire::fuzz {

// (file name, datagram) pairs, in a fixed order. Deterministic.
std::vector<std::pair<std::string, std::vector<uint8_t>>> WireSeedPackets();

}  // namespace longhaul::wire::fuzz
