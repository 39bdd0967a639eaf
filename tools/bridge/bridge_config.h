// Forwards of longhaul-bridge: which TCP port a client bridge listens on, and which TCP
// service a server bridge connects to, for each named forward. One comes from the
// command line (--listen on the client, --target on the server, named "default"); more
// come from a forwards file (--forwards=FILE), one a line:
//
//   # comment                 (blank lines and '#' comments are ignored)
//   NAME ADDRESS:PORT         client: the TCP address to listen on for this forward
//                             server: the TCP service to connect to for this forward
//
// NAME is 1..64 of [A-Za-z0-9._-]; the client's OPEN carries it and the server looks it
// up, so both files name the same forwards. Pure parsing; the file is read by the tool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace longhaul::bridge {

struct Forward {
  std::string name;
  std::string host;  // listen address (client) or target host (server)
  uint16_t port = 0;
  std::string origin;  // "--listen", "--target" or "FILE:LINE", for messages
};

// Checks a forward's name: InvalidArgument "forward name 'x y': ..." otherwise.
absl::Status CheckForwardName(absl::string_view name);

// Parses a forwards file's text. `source` names it in errors: InvalidArgument
// "bridge.fwd:3: expected 'NAME ADDRESS:PORT', got 'x'", "bridge.fwd:4: bad address
// '...': ...", "bridge.fwd:5: forward 'db' is already defined at bridge.fwd:2".
absl::StatusOr<std::vector<Forward>> ParseForwards(absl::string_view text,
                                                   absl::string_view source);

// Adds `f` to `all`, refusing a name defined twice (naming both places).
absl::Status AddForward(Forward f, std::vector<Forward>* all);


}  // namespace longhaul::bridge
