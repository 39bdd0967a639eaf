// A private temporary directory for a test (mkdtemp under /tmp, mode 0700),
// removed with everything in it when the object goes out of scope; and the file
// helpers tests use with it.
#pragma once

#include <sys/types.h>

#include <string>

namespace longhaul::testing {

class TempDir {
public:
  // PREFIX names the directory: /tmp/PREFIX-XXXXXX. A failure to create it is a
  // test failure (EXPECT) and leaves path() empty.
  explicit TempDir(const std::string &prefix = "lh-test");
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  bool ok() const { return !path_.empty(); }
  // path()/name.
  std::string Path(const std::string &name) const;
  // Writes `text` to path()/name (truncating it) and returns the file's path;
  // with mode >= 0 the file then gets that mode.
  std::string Write(const std::string &name, const std::string &text,
                    int mode = -1) const;

private:
  std::string path_;
};

// The permission bits of `path` (st_mode & 07777); a failed stat is a test
// failure.
mode_t ModeOf(const std::string &path);

// The whole content of a file ("" if it cannot be read).
std::string ReadFile(const std::string &path);

} // namespace longhaul::testing
