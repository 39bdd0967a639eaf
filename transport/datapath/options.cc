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

const char* QpTypeName(QpType t) { return t == QpType::kUc ? "uc" : "ud"; }

absl::StatusOr<QpType> ParseQpType(const std::string& name) {
  if (name == "ud") return QpType::kUd;
  if (name == "uc") return QpType::kUc;
  return absl::InvalidArgumentError(absl::StrCat("unknown qp_type '", name, "' (ud, uc)"));
}

}  // namespace longhaul
