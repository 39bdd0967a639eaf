#include "transport/base/file_trust.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longhaul {
namespace {

std::string ModeText(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

// The directory holding the file `path` names, after following links ("." for a bare
// name).
std::string RealDirectory(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(realpath(path.c_str(), nullptr), &std::free);
  const std::string p = real ? std::string(real.get()) : path;
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

// Who besides this user and root may read or write a file, from its mode or, when it has
// a POSIX access ACL, from the ACL's entries (the group bits are then the ACL's mask:
// systemd's credentials are root:root 0440 with "user:SERVICE:r" and show as such).
struct OtherAccess {
  bool acl = false;  // judged from an ACL's entries
  bool group_write = false, other_write = false;
  bool group_read = false, other_read = false, group_or_other_exec = false;
};

// The "system.posix_acl_access" value: a 4-byte version (2), then 8-byte entries
// {u16 tag, u16 permissions, u32 id} (the kernel's xattr layout, little-endian).
constexpr uint32_t kAclVersion = 2;
constexpr uint16_t kAclUser = 0x02, kAclGroupObj = 0x04, kAclGroup = 0x08,
                   kAclMask = 0x10, kAclOther = 0x20;
constexpr uint16_t kAclRead = 4, kAclWrite = 2, kAclExec = 1;

std::optional<OtherAccess> AccessFromAcl(int fd, const struct stat& st) {
  uint8_t buf[4 + 8 * 64];
  const ssize_t n = fgetxattr(fd, "system.posix_acl_access", buf, sizeof(buf));
  if (n < 4 || (n - 4) % 8 != 0) return std::nullopt;  // none (or not one we can read)
  uint32_t version;
  std::memcpy(&version, buf, 4);
  if (version != kAclVersion) return std::nullopt;
  uint16_t mask = kAclRead | kAclWrite | kAclExec;
  for (ssize_t off = 4; off < n; off += 8) {
    uint16_t tag, perm;
    std::memcpy(&tag, buf + off, 2);
    std::memcpy(&perm, buf + off + 2, 2);
    if (tag == kAclMask) mask = perm;
  }
  OtherAccess a;
  a.acl = true;
  const uid_t me = geteuid();
  for (ssize_t off = 4; off < n; off += 8) {
    uint16_t tag, perm;
    uint32_t id;
    std::memcpy(&tag, buf + off, 2);
    std::memcpy(&perm, buf + off + 2, 2);
    std::memcpy(&id, buf + off + 4, 4);
    bool group_like = false;
    if (tag == kAclUser) {
      if (id == me || id == 0) continue;  // named for this user or root
      group_like = true;                  // another user: as bad as the group
      perm &= mask;
    } else if (tag == kAclGroupObj) {
      if (st.st_gid == 0) continue;  // root's group
      group_like = true;
      perm &= mask;
    } else if (tag == kAclGroup) {
      if (id == 0) continue;
      group_like = true;
      perm &= mask;
    } else if (tag == kAclOther) {
      a.other_read |= (perm & kAclRead) != 0;
      a.other_write |= (perm & kAclWrite) != 0;
      a.group_or_other_exec |= (perm & kAclExec) != 0;
      continue;
    } else {
      continue;  // the owner's entry and the mask itself
    }
    if (group_like) {
      a.group_read |= (perm & kAclRead) != 0;
      a.group_write |= (perm & kAclWrite) != 0;
      a.group_or_other_exec |= (perm & kAclExec) != 0;
    }
  }
  return a;
}

OtherAccess AccessOf(int fd, const struct stat& st) {
  if (std::optional<OtherAccess> acl = AccessFromAcl(fd, st)) return *acl;
  OtherAccess a;
  a.group_write = (st.st_mode & S_IWGRP) != 0;
  a.other_write = (st.st_mode & S_IWOTH) != 0;
  a.group_read = (st.st_mode & S_IRGRP) != 0;
  a.other_read = (st.st_mode & S_IROTH) != 0;
  a.group_or_other_exec = (st.st_mode & (S_IXGRP | S_IXOTH)) != 0;
  return a;
}

}  // namespace

absl::Status CheckTrustedFile(int fd, const std::string& path, FileTrust kind) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot stat: ", std::strerror(errno)));
  }
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is owned by uid ", st.st_uid, ", neither this user (uid ", me,
        ") nor root: anyone with that uid could change it; chown ", me, " ", path));
  }
  const char* what = kind == FileTrust::kSecret ? "chmod 600 " : "chmod go-w ";
  const OtherAccess access = AccessOf(fd, st);
  if (access.other_write) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is writable by others (mode ", ModeText(st.st_mode), "): ", what, path));
  }
  // With an ACL, "group" stands for the other users and groups its entries name.
  const char* group = access.acl ? "another user or group (its ACL)" : "its group";
  const std::string fix = access.acl ? absl::StrCat("setfacl -b ", path, " && ") : "";
  if (access.group_write) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is writable by ", group, " (mode ",
                                                      ModeText(st.st_mode), "): ", fix, what, path));
  }
  if (kind == FileTrust::kSecret) {
    const char* why = nullptr;
    if (access.other_read) {
      why = "readable by others";
    } else if (access.group_read) {
      why = access.acl ? "readable by another user or group (its ACL)" : "readable by its group";
    } else if (access.group_or_other_exec) {
      why = "accessible by its group or others";
    }
    if (why != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is ", why, " (mode ", ModeText(st.st_mode), "): ", fix, "chmod 600 ", path));
    }
  }
  // The directory of the name as given (where a link could be swapped) and the one of
  // the file itself.
  const size_t slash = path.rfind('/');
  const std::string named_dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  for (const std::string& dir : {named_dir, RealDirectory(path)}) {
    struct stat ds {};
    if (stat(dir.c_str(), &ds) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": cannot stat its directory ", dir, ": ", std::strerror(errno)));
    }
    if ((ds.st_mode & (S_IWGRP | S_IWOTH)) && !(ds.st_mode & S_ISVTX)) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": its directory ", dir, " is writable by ",
          (ds.st_mode & S_IWOTH) ? "others" : "its group", " (mode ", ModeText(ds.st_mode),
          "), so anyone there could replace the file: chmod go-w ", dir,
          " or keep the file elsewhere"));
    }
  }
  return absl::OkStatus();
}

}  // namespace longhaul
