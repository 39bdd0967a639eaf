#include "transport/datapath/options.h"

#include "absl/strings/str_cat.h"

namespace longhaul {

const char* DatapathName(Datapath d) {
  switch (d) {
    case Datapath::kUdp:
      return "udp";
    case Datapath::kVerbs:
      return "verbs";
  }
  return "?";
}

absl::StatusOr<Datapath> ParseDatapath(const std::string& name) {
  if (name == "udp") return Datapath::kUdp;
  if (name == "verbs") return Datapath::kVerbs;
  return absl::InvalidArgumentError(absl::StrCat("unknown datapath '", name, "' (udp, verbs)"));
}

}  // namespace longhaul
