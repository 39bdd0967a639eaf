#include "tests/support/temp_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul::testing {

TempDir::TempDir(const std::string &prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char *p = mkdtemp(buf.data());
  EXPECT_NE(p, nullptr) << tmpl << ": " << std::strerror(errno);
  if (p != nullptr)
    path_ = p;
}

TempDir::~TempDir() {
  if (path_.empty())
    return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Path(const std::string &name) const {
  return path_ + "/" + name;
}

std::string TempDir::Write(const std::string &name, const std::string &text,
                           int mode) const {
  const std::string p = Path(name);
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    EXPECT_TRUE(out.good()) << p;
  }
  if (mode >= 0) {
    EXPECT_EQ(chmod(p.c_str(), static_cast<mode_t>(mode)), 0) << p;
  }
  return p;
}

mode_t ModeOf(const std::string &path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string ReadFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

} // namespace longhaul::testing
