// Files that decide trust or hold secrets, checked before they are believed: an edge
// (it stats files), its own layer beside base (docs/layers.txt: filetrust).
//
// A trust file (allowed-keys and pinned-key files, profiles, the bridge's forwards file)
// decides whom a process talks to and how; a secret file (private keys, pre-shared keys)
// also must not be read by others. Both are refused, with the file, the problem and the
// fix in the message (FailedPrecondition), when:
//   - the file is writable by its group or by others ("chmod go-w FILE");
//   - it is owned by neither this process's user nor root ("chown UID FILE");
//   - its directory (of the name as given, and of the file a link leads to) is
//     writable by its group or by others, unless it has the sticky bit (/tmp): anyone
//     there could replace the file.
// Secrets, in addition, must not be readable by its group or others ("chmod 600 FILE").
// A file with a POSIX ACL is judged by its entries, not by the group bits (which are
// then the ACL's mask): entries for this user, root or root's group are fine. That is
// how systemd's newer credentials (LoadCredential=) look: root:root, mode 0440, ACL
// "user:SERVICE:r--".
// A symlink is followed: the file checked is its target (secret mounts in containers
// are links into a directory of the real files).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace longhaul {

enum class FileTrust {
  kTrust,   // decides trust: nobody else may change it
  kSecret,  // also private: nobody else may read it
};

// Checks the file open at `fd`, named `path` (for the directory and the messages).
// The caller opened it (following links) and keeps its own checks (regular file, size).
[[nodiscard]] absl::Status CheckTrustedFile(int fd, const std::string& path, FileTrust kind);

}  // namespace longhaul
