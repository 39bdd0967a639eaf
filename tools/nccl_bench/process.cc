#include "tools/nccl_bench/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace longhaul::nccl::bench {

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, int* out_fd,
                            const std::string& err_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int out[2] = {-1, -1};
  if (out_fd != nullptr) {
    if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  }
  if (!err_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (out_fd != nullptr) {
    close(out[1]);
    *out_fd = out[0];
  }
  if (rc != 0) {
    if (out_fd != nullptr) close(*out_fd);
    return absl::InternalError(absl::StrCat("cannot start ", args[0], ": ", strerror(rc)));
  }
  return pid;
}

}  // namespace longhaul::nccl::bench
