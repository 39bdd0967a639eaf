// Shared by the *_fuzz_replay_test programs of the newer fuzz targets (profile,
// link_spec, nccl_frames, key_files): reading a committed corpus directory,
// running the target's LLVMFuzzerTestOneInput on an exactly sized heap copy (as
// libFuzzer does, so ASan catches a read one past the end), writing seed files,
// and one seeded random edit of the kinds libFuzzer makes, with a per-target
// dictionary of tokens.
#pragma once

#include "absl/strings/string_view.h"
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "transport/base/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace longhaul::fuzz {

using Bytes = std::vector<uint8_t>;

Bytes ToBytes(absl::string_view s);

// Every regular file in `dir`, by name (empty if there is no such directory);
// with_subdirs: also those below it, named by their relative path (a campaign's
// finds live in `campaign/`: replayed, but not the base of the mutation tests).
std::map<std::string, Bytes> LoadCorpus(const std::string &dir,
                                        bool with_subdirs = false);

// Writes `seeds` (name -> bytes) into `dir` (created). Returns false on an I/O
// error.
bool WriteCorpus(const std::string &dir,
                 const std::map<std::string, Bytes> &seeds);

// The seeds the corpus in `dir` lacks or holds with other bytes, one line each
// ("NAME is missing", "NAME differs from the seed"); empty when it holds every
// seed byte for byte (a stale corpus is refreshed with the MaybeWriteCorpus test).
std::vector<std::string>
CorpusSeedMismatches(const std::string &dir,
                     const std::map<std::string, Bytes> &seeds);

// The MaybeWriteCorpus test of a replay program: with the environment variable
// `env_var` set to a directory, writes `seeds` into it (to regenerate or refresh a
// committed corpus); otherwise the test is skipped, saying how to run it.
void MaybeWriteCorpus(const char *env_var,
                      const std::map<std::string, Bytes> &seeds);

// Expects the corpus in `dir` to hold every seed byte for byte (CorpusSeedMismatches
// empty); otherwise the corpus is to be regenerated with the MaybeWriteCorpus test.
void ExpectCorpusHoldsSeeds(const std::string &dir,
                            const std::map<std::string, Bytes> &seeds);

// How many of the mutated inputs reached one accepting path of a target, and the
// count it must exceed.
struct Reached {
  const char *what;
  int count;
  int more_than;
};

// Prints every path's count of `iterations` ("mutated inputs: 900 frames decoded,
// ... of 50000") and expects each above its bound: the mutations keep reaching the
// accepting paths, not only the first refusal.
void ExpectReached(int iterations, const std::vector<Reached> &paths);

// Calls the target on a heap copy of exactly input.size() bytes.
void RunOne(const Bytes &input);

// Runs the target on every file of the corpus in `dir` and below it, then on an
// empty input.
// Returns the number of corpus files (0: none found, which the caller fails on).
size_t ReplayCorpus(const std::string &dir);

// The corpus in `dir` as a list of inputs (for RunMutations).
std::vector<Bytes> CorpusInputs(const std::string &dir);

// The edits the mutators are made of (each a no-op where it does not apply).
// Flips one random bit.
inline void FlipBit(Rng &rng, Bytes &d) {
  if (!d.empty())
    d[rng.UniformInt(d.size())] ^= static_cast<uint8_t>(1u << rng.UniformInt(8));
}
// Sets one random byte: with probability `p_interesting` to one of `interesting`
// (n of them), else to a random value.
inline void SetByte(Rng &rng, Bytes &d, const uint8_t *interesting, size_t n,
                    double p_interesting) {
  if (!d.empty()) {
    d[rng.UniformInt(d.size())] = rng.Bernoulli(p_interesting)
                                      ? interesting[rng.UniformInt(n)]
                                      : static_cast<uint8_t>(rng.Next());
  }
}
// Inserts 1-8 random bytes at a random place, while d is shorter than max_size.
inline void InsertRandom(Rng &rng, Bytes &d, size_t max_size) {
  if (d.size() < max_size) {
    const size_t at = rng.UniformInt(d.size() + 1);
    Bytes ins(1 + rng.UniformInt(8));
    for (uint8_t &b : ins)
      b = static_cast<uint8_t>(rng.Next());
    d.insert(d.begin() + static_cast<long>(at), ins.begin(), ins.end());
  }
}
// Erases a run of 1-16 bytes.
inline void EraseRun(Rng &rng, Bytes &d) {
  if (!d.empty()) {
    const size_t at = rng.UniformInt(d.size());
    const size_t n = std::min<size_t>(1 + rng.UniformInt(16), d.size() - at);
    d.erase(d.begin() + static_cast<long>(at),
            d.begin() + static_cast<long>(at + n));
  }
}
// Cuts d to a random length.
inline void Truncate(Rng &rng, Bytes &d) { d.resize(rng.UniformInt(d.size() + 1)); }
// Copies a chunk of 1-max_chunk bytes to a random place, while d is shorter than
// max_size.
inline void DuplicateChunk(Rng &rng, Bytes &d, size_t max_chunk, size_t max_size) {
  if (!d.empty() && d.size() < max_size) {
    const size_t at = rng.UniformInt(d.size());
    const size_t n = std::min<size_t>(1 + rng.UniformInt(max_chunk), d.size() - at);
    const Bytes chunk(d.begin() + static_cast<long>(at),
                      d.begin() + static_cast<long>(at + n));
    d.insert(d.begin() + static_cast<long>(rng.UniformInt(d.size() + 1)),
             chunk.begin(), chunk.end());
  }
}

// One random edit: flip a bit, set a byte, insert random bytes or a dictionary
// token, erase a run, truncate, duplicate a chunk, or splice in part of
// `other`.
void Mutate(Rng &rng, const std::vector<std::string> &dictionary,
            const Bytes &other, Bytes &d);

// `iterations` inputs from Rng(seed), each 1-6 edits `mutate(rng, input)` of a
// random corpus entry, run through the target; `accepted(input)` says whether the
// input reached an accepting path; returns how many did.
template <typename Mutator, typename Accepted>
int RunMutationsWith(const std::vector<Bytes> &corpus, uint64_t seed,
                     int iterations, Mutator mutate, Accepted accepted) {
  Rng rng(seed);
  int ok = 0;
  for (int i = 0; i < iterations; ++i) {
    Bytes d = corpus[rng.UniformInt(corpus.size())];
    const int edits = 1 + static_cast<int>(rng.UniformInt(6));
    for (int e = 0; e < edits; ++e)
      mutate(rng, d);
    RunOne(d);
    ok += accepted(d) ? 1 : 0;
  }
  return ok;
}

// RunMutationsWith the edits of Mutate (with `dictionary`, splicing corpus entries).
template <typename Accepted>
int RunMutations(const std::vector<Bytes> &corpus,
                 const std::vector<std::string> &dictionary, uint64_t seed,
                 int iterations, Accepted accepted) {
  return RunMutationsWith(
      corpus, seed, iterations,
      [&](Rng &rng, Bytes &d) {
        Mutate(rng, dictionary, corpus[rng.UniformInt(corpus.size())], d);
      },
      accepted);
}

} // namespace longhaul::fuzz
