// Corpus files and mutations for the fuzz replay tests (fuzz_replay.h).
#include "tests/fuzz/fuzz_replay.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

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
    if (!d.empty())
      d[rng.UniformInt(d.size())] ^=
          static_cast<uint8_t>(1u << rng.UniformInt(8));
    break;
  case 1: // set a byte, often to an interesting one
    if (!d.empty()) {
      d[rng.UniformInt(d.size())] =
          rng.Bernoulli(0.6)
              ? kInteresting[rng.UniformInt(sizeof(kInteresting))]
              : static_cast<uint8_t>(rng.Next());
    }
    break;
  case 2: // insert random bytes
    if (d.size() < kMaxSize) {
      const size_t at = rng.UniformInt(d.size() + 1);
      Bytes ins(1 + rng.UniformInt(8));
      for (uint8_t &b : ins)
        b = static_cast<uint8_t>(rng.Next());
      d.insert(d.begin() + static_cast<long>(at), ins.begin(), ins.end());
    }
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
    if (!d.empty()) {
      const size_t at = rng.UniformInt(d.size());
      const size_t n = std::min<size_t>(1 + rng.UniformInt(16), d.size() - at);
      d.erase(d.begin() + static_cast<long>(at),
              d.begin() + static_cast<long>(at + n));
    }
    break;
  case 5: // truncate
    d.resize(rng.UniformInt(d.size() + 1));
    break;
  case 6: // duplicate a chunk
    if (!d.empty() && d.size() < kMaxSize) {
      const size_t at = rng.UniformInt(d.size());
      const size_t n = std::min<size_t>(1 + rng.UniformInt(256), d.size() - at);
      const Bytes chunk(d.begin() + static_cast<long>(at),
                        d.begin() + static_cast<long>(at + n));
      d.insert(d.begin() + static_cast<long>(rng.UniformInt(d.size() + 1)),
               chunk.begin(), chunk.end());
    }
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
