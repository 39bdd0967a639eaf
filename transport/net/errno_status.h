// The one place where a failed socket call's errno becomes an absl::Status. The code says
// what the caller can do about it; the message names the call and its address and ends
// with the system's reason, e.g. "cannot bind UDP 0.0.0.0:5201: address already in use".
//
//   AlreadyExists       EADDRINUSE
//   PermissionDenied    EACCES, EPERM
//   InvalidArgument     EINVAL, EADDRNOTAVAIL, EAFNOSUPPORT, EPROTONOSUPPORT, EDESTADDRREQ,
//                       ENOPROTOOPT, EOPNOTSUPP
//   FailedPrecondition  EMSGSIZE (larger than the path or interface allows), EISCONN, ENOTCONN
//   ResourceExhausted   EMFILE, ENFILE, ENOMEM
//   Internal            EBADF, ENOTSOCK, EFAULT (a bug in the caller)
//   Unavailable         everything else: ECONNREFUSED, EAGAIN, ENOBUFS, unreachable
//                       networks and hosts, ... (conditions of the path or the peer)
//
// Datagram sends and receives have their own functions: there every error but EMSGSIZE
// is Unavailable, because a sender treats any of them as "the peer cannot be reached".
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "transport/net/socket_address.h"

namespace longhaul::net {

// The code of the table above.
absl::StatusCode ErrnoCode(int err);

// "WHAT: REASON" with the code of the table; REASON is strerror(err) starting lowercase.
absl::Status ErrnoStatus(int err, absl::string_view what);

// A datagram of `bytes` to `to` (invalid: the connected peer, unnamed) was refused:
//   ECONNREFUSED     Unavailable "connection refused by TO: nothing listens on that UDP port"
//   EMSGSIZE         FailedPrecondition "datagram of N bytes is too large for the path
//                    (REASON); use a smaller MTU or segment size"
//   EAGAIN, ENOBUFS  Unavailable "UDP socket send buffer full"
//   anything else    Unavailable "UDP send to TO failed: REASON"
absl::Status SendErrorStatus(int err, size_t bytes, const SocketAddress& to);

// A receive failed (EAGAIN and EINTR are not errors; callers handle them first). `peer`
// is the connected peer, if any:
//   ECONNREFUSED     Unavailable "connection refused by PEER: nothing listens on that UDP port"
//   anything else    Unavailable "UDP receive failed: REASON"
absl::Status ReceiveErrorStatus(int err, const SocketAddress& peer);

}  // namespace longhaul::net
