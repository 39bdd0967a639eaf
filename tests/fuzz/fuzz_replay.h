// Shared by the *_fuzz_replay_test programs of the newer fuzz targets (profile,
// link_spec, nccl_frames, key_files): reading a committed corpus directory,
// running the target's LLVMFuzzerTestOneInput on an exactly sized heap copy (as
// libFuzzer does, so ASan catches a read one past the end), writing seed files,
// and one seeded random edit of the kinds libFuzzer makes, with a per-target
// dictionary of tokens.
#pragma once

#include "absl/strings/string_view.h"
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

// Calls the target on a heap copy of exactly input.size() bytes.
void RunOne(const Bytes &input);

// Runs the target on every file of the corpus in `dir` and below it, then on an
// empty input.
// Returns the number of corpus files (0: none found, which the caller fails on).
size_t ReplayCorpus(const std::string &dir);

// The corpus in `dir` as a list of inputs (for RunMutations).
std::vector<Bytes> CorpusInputs(const std::string &dir);

// One random edit: flip a bit, set a byte, insert random bytes or a dictionary
// token, erase a run, truncate, duplicate a chunk, or splice in part of
// `other`.
void Mutate(Rng &rng, const std::vector<std::string> &dictionary,
            const Bytes &other, Bytes &d);

// `iterations` inputs, each 1-6 edits of a random corpus entry, run through the
// target; `accepted(input)` says whether the input reached the accepting path;
// returns how many did.
template <typename Accepted>
int RunMutations(const std::vector<Bytes> &corpus,
                 const std::vector<std::string> &dictionary, uint64_t seed,
                 int iterations, Accepted accepted) {
  Rng rng(seed);
  int ok = 0;
  for (int i = 0; i < iterations; ++i) {
    Bytes d = corpus[rng.UniformInt(corpus.size())];
    const int edits = 1 + static_cast<int>(rng.UniformInt(6));
    for (int e = 0; e < edits; ++e) {
      Mutate(rng, dictionary, corpus[rng.UniformInt(corpus.size())], d);
    }
    RunOne(d);
    ok += accepted(d) ? 1 : 0;
  }
  return ok;
}

} // namespace longhaul::fuzz
