#include "transport/net/errno_status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace longhaul::net {
namespace {

std::string Reason(int err) {
  std::string r = std::strerror(err);
  if (!r.empty()) r[0] = absl::ascii_tolower(static_cast<unsigned char>(r[0]));
  return r;
}

std::string PeerName(const SocketAddress& a) { return a.valid() ? a.ToString() : "the peer"; }

absl::Status Refused(const SocketAddress& peer) {
  return absl::UnavailableError(
      absl::StrCat("connection refused by ", PeerName(peer), ": nothing listens on that UDP port"));
}

}  // namespace

absl::StatusCode ErrnoCode(int err) {
  switch (err) {
    case EADDRINUSE:
      return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM:
      return absl::StatusCode::kPermissionDenied;
    case EINVAL:
    case EADDRNOTAVAIL:
    case EAFNOSUPPORT:
    case EPROTONOSUPPORT:
    case EDESTADDRREQ:
    case ENOPROTOOPT:
    case EOPNOTSUPP:
      return absl::StatusCode::kInvalidArgument;
    case EMSGSIZE:
    case EISCONN:
    case ENOTCONN:
      return absl::StatusCode::kFailedPrecondition;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::StatusCode::kResourceExhausted;
    case EBADF:
    case ENOTSOCK:
    case EFAULT:
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  return absl::Status(ErrnoCode(err), absl::StrCat(what, ": ", Reason(err)));
}

absl::Status SendErrorStatus(int err, size_t bytes, const SocketAddress& to) {
  switch (err) {
    case ECONNREFUSED:
      return Refused(to);
    case EMSGSIZE:
      return absl::FailedPreconditionError(
          absl::StrCat("datagram of ", bytes, " bytes is too large for the path (", Reason(err),
                       "); use a smaller MTU or segment size"));
    case EAGAIN:
    case ENOBUFS:
      return absl::UnavailableError("UDP socket send buffer full");
    default:
      return absl::UnavailableError(
          absl::StrCat("UDP send to ", PeerName(to), " failed: ", Reason(err)));
  }
}

absl::Status ReceiveErrorStatus(int err, const SocketAddress& peer) {
  if (err == ECONNREFUSED) return Refused(peer);
  return absl::UnavailableError(absl::StrCat("UDP receive failed: ", Reason(err)));
}

}  // namespace longhaul::net
