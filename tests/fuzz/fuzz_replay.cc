// Corpus files and mutations for the fuzz replay tests (fuzz_replay.h).
#include "tests/fuzz/fuzz_replay.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::fuzz {

namespace fs = std::filesystem;

Bytes ToBytes(absl::string_view s) { return Bytes(s.begin(), s.end()); }

std::map<std::string, Bytes> LoadCorpus(const std::string &dir, bool with_subdirs) {
  std::map<std::string, Bytes> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return out;
  auto add = [&](const fs::directory_entry &e) {
    if (!e.is_regular_file())
      return;
    std::ifstream in(e.path(), std::ios::binary);
    out[fs::relative(e.path(), dir).string()] = Bytes(
        std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  if (with_subdirs) {
    for (const auto &e : fs::recursive_directory_iterator(dir)) add(e);
  } else {
    for (const auto &e : fs::directory_iterator(dir)) add(e);
  }
  return out;
}

bool WriteCorpus(const std::string &dir,
                 const std::map<std::string, Bytes> &seeds) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return false;
  for (const auto &[name, bytes] : seeds) {
    std::ofstream out(fs::path(dir) / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out.good())
      return false;
  }
  return true;
}

std::vector<std::string>
CorpusSeedMismatches(const std::string &dir,
                     const std::map<std::string, Bytes> &seeds) {
  const std::map<std::string, Bytes> corpus = LoadCorpus(dir);
  std::vector<std::string> out;
  for (const auto &[name, bytes] : seeds) {
    auto it = corpus.find(name);
    if (it == corpus.end()) {
      out.push_back(name + " is missing");
    } else if (it->second != bytes) {
      out.push_back(name + " differs from the seed");
    }
  }
  return out;
}

void RunOne(const Bytes &input) {
  Bytes copy(input);
  copy.shrink_to_fit();
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
}

void Mutate(Rng &rng, const std::vector<std::string> &dictionary,
            const Bytes &other, Bytes &d) {
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x02, 0x0a, 0x0d,
                                             0x20, 0x23, 0x2c, 0x3a, 0x3d,
                                             0x7f, 0x80, 0xff};
  constexpr size_t kMaxSize = 8192;
  switch (rng.UniformInt(8)) {
  case 0: // flip a bit
    FlipBit(rng, d);
    break;
  case 1: // set a byte, often to an interesting one
    SetByte(rng, d, kInteresting, sizeof(kInteresting), 0.6);
    break;
  case 2: // insert random bytes
    InsertRandom(rng, d, kMaxSize);
    break;
  case 3: // insert or overwrite with a dictionary token
    if (!dictionary.empty() && d.size() < kMaxSize) {
      const std::string &t = dictionary[rng.UniformInt(dictionary.size())];
      const size_t at = rng.UniformInt(d.size() + 1);
      if (rng.Bernoulli(0.5) || at + t.size() > d.size()) {
        d.insert(d.begin() + static_cast<long>(at), t.begin(), t.end());
      } else {
        std::copy(t.begin(), t.end(), d.begin() + static_cast<long>(at));
      }
    }
    break;
  case 4: // erase a run
    EraseRun(rng, d);
    break;
  case 5: // truncate
    Truncate(rng, d);
    break;
  case 6: // duplicate a chunk
    DuplicateChunk(rng, d, 256, kMaxSize);
    break;
  default: // splice: a prefix of this one and a suffix of another
    if (!other.empty()) {
      const size_t keep = rng.UniformInt(d.size() + 1);
      const size_t from = rng.UniformInt(other.size());
      d.resize(keep);
      d.insert(d.end(), other.begin() + static_cast<long>(from), other.end());
      if (d.size() > kMaxSize)
        d.resize(kMaxSize);
    }
    break;
  }
}

void MaybeWriteCorpus(const char *env_var,
                      const std::map<std::string, Bytes> &seeds) {
  const char *dir = std::getenv(env_var);
  if (dir == nullptr) {
    GTEST_SKIP() << "set " << env_var << "=<dir> to regenerate the corpus there";
  }
  ASSERT_TRUE(WriteCorpus(dir, seeds)) << dir;
}

void ExpectCorpusHoldsSeeds(const std::string &dir,
                            const std::map<std::string, Bytes> &seeds) {
  EXPECT_THAT(CorpusSeedMismatches(dir, seeds), ::testing::IsEmpty())
      << "regenerate the corpus " << dir << " (the MaybeWriteCorpus test)";
}

void ExpectReached(int iterations, const std::vector<Reached> &paths) {
  std::string line = "mutated inputs:";
  for (size_t i = 0; i < paths.size(); ++i) {
    line += (i == 0 ? " " : ", ") + std::to_string(paths[i].count) + " " + paths[i].what;
  }
  std::printf("%s of %d\n", line.c_str(), iterations);
  for (const Reached &p : paths) {
    EXPECT_GT(p.count, p.more_than) << p.what << " of " << iterations;
  }
}

size_t ReplayCorpus(const std::string &dir) {
  const std::map<std::string, Bytes> corpus = LoadCorpus(dir, /*with_subdirs=*/true);
  for (const auto &[name, bytes] : corpus) RunOne(bytes);
  RunOne(Bytes{});
  return corpus.size();
}

std::vector<Bytes> CorpusInputs(const std::string &dir) {
  std::vector<Bytes> out;
  for (auto &[name, bytes] : LoadCorpus(dir)) out.push_back(std::move(bytes));
  return out;
}

} // namespace longhaul::fuzz
