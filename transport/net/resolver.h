// Name resolution: a host name or numeric address and a port to one SocketAddress. The
// one resolver of the tree (Endpoint::Connect, the prober, the tools' HOST:PORT flags).
//
// A numeric address is taken as is, without asking the system. A name goes to
// getaddrinfo(3) (/etc/hosts, DNS, ... as the system is configured): the first IPv4
// address it lists wins, else the first IPv6 one.
//
// Errors: NotFound naming the host ("cannot resolve host 'x': Name or service not known",
// "host 'x' has no IPv4 or IPv6 address"); InvalidArgument for a malformed HOST:PORT.
//
// Thread-safety: thread-safe (getaddrinfo is). Resolving a name may block for as long as
// the system's resolver takes (DNS timeouts); numeric addresses never block.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/net/socket_address.h"

namespace longhaul::net {

// `host` is a name, a numeric IPv4 address or a numeric IPv6 address (with or without
// brackets).
absl::StatusOr<SocketAddress> Resolve(absl::string_view host, uint16_t port);

// "HOST:PORT" or "[V6]:PORT" (SplitHostPort), then Resolve. PORT may be 0.
absl::StatusOr<SocketAddress> ResolveHostPort(absl::string_view host_port);

}  // namespace longhaul::net
