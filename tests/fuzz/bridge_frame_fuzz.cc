// Fuzz target for longhaul-bridge's input parsers (tools/bridge/bridge_frames.h,
// bridge_config.h): what a peer bridge sends and what an operator writes.
//
// Each input is used two ways:
//   1. as one longhaul message: DecodeFrame. A frame that decodes obeys the documented
//      rules (type 1..6, stream 0 exactly for GOAWAY, OPEN's name 1..255 bytes, DATA
//      and FIN sequence numbers >= 1, no body on FIN or WINDOW, reasons <= 1024 bytes,
//      the body a view of the message's tail) and re-encodes, with the encoder the
//      bridge uses for its type, to the input byte for byte (the format has one
//      encoding). A refused one is InvalidArgument with a message saying so.
//   2. as a forwards file: ParseForwards. What parses is non-empty, has valid unique
//      names and non-zero ports, names its lines, and written back one forward a line
//      parses to the same forwards. An error is InvalidArgument naming the file.
// Any violation aborts, which libFuzzer reports as a crash.
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON under clang (the fuzz preset:
// build-fuzz/fuzz/bridge_frame_fuzz tests/fuzz/corpus/bridge), and linked into the
// bridge_frame_fuzz_replay_test ctest (label fuzz) everywhere else.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/fuzz/fuzz_check.h"
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_frames.h"

namespace longhaul::bridge {
namespace {

void FuzzFrame(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> m(data, size);
  absl::StatusOr<Frame> f = DecodeFrame(m);
  if (!f.ok()) {
    LH_FUZZ_CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
    LH_FUZZ_CHECK(absl::StartsWith(f.status().message(), "malformed bridge "));
    return;
  }
  LH_FUZZ_CHECK(size >= kFrameHeaderSize);
  const uint8_t type = data[0];
  LH_FUZZ_CHECK(type >= 1 && type <= 6);
  LH_FUZZ_CHECK(static_cast<uint8_t>(f->type) == type);
  LH_FUZZ_CHECK(std::strcmp(FrameTypeName(f->type), "unknown") != 0);
  LH_FUZZ_CHECK(f->body.data() == data + kFrameHeaderSize);
  LH_FUZZ_CHECK(f->body.size() == size - kFrameHeaderSize);
  LH_FUZZ_CHECK((f->stream == 0) == (f->type == FrameType::kGoAway));
  switch (f->type) {
    case FrameType::kOpen:
      LH_FUZZ_CHECK(!f->body.empty() && f->body.size() <= kMaxForwardName);
      break;
    case FrameType::kData:
      LH_FUZZ_CHECK(f->value >= 1);
      break;
    case FrameType::kFin:
      LH_FUZZ_CHECK(f->value >= 1);
      LH_FUZZ_CHECK(f->body.empty());
      break;
    case FrameType::kWindow:
      LH_FUZZ_CHECK(f->body.empty());
      break;
    case FrameType::kReset:
      LH_FUZZ_CHECK(ResetCodeName(static_cast<ResetCode>(f->value)) != nullptr);
      [[fallthrough]];
    case FrameType::kGoAway:
      LH_FUZZ_CHECK(f->body.size() <= kMaxReason);
      break;
  }
  // Re-encode as the bridge does: DATA with WriteFrameHeader in front of the payload,
  // the rest with EncodeFrame.
  std::string again;
  if (f->type == FrameType::kData) {
    again.assign(kFrameHeaderSize, '\0');
    WriteFrameHeader(f->type, f->stream, f->value, reinterpret_cast<uint8_t*>(again.data()));
    again.append(f->text().data(), f->text().size());
  } else {
    again = EncodeFrame(f->type, f->stream, f->value, f->text());
  }
  LH_FUZZ_CHECK(again.size() == size);
  LH_FUZZ_CHECK(std::memcmp(again.data(), data, size) == 0);
  absl::StatusOr<Frame> f2 = DecodeFrame(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(again.data()), again.size()));
  LH_FUZZ_CHECK(f2.ok());
  LH_FUZZ_CHECK(f2->type == f->type && f2->stream == f->stream && f2->value == f->value);
  LH_FUZZ_CHECK(f2->text() == f->text());
}

// HOST:PORT as SplitHostPort reads it back (brackets where the host needs them).
std::string HostPort(const Forward& f) {
  const bool brackets = f.host.find(':') != std::string::npos || f.host[0] == '[';
  return brackets ? absl::StrCat("[", f.host, "]:", f.port) : absl::StrCat(f.host, ":", f.port);
}

void FuzzForwards(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<Forward>> parsed = ParseForwards(text, "fuzz.fwd");
  if (!parsed.ok()) {
    LH_FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    LH_FUZZ_CHECK(absl::StartsWith(parsed.status().message(), "fuzz.fwd"));
    return;
  }
  LH_FUZZ_CHECK(!parsed->empty());
  std::set<std::string> names;
  std::string written;
  for (const Forward& f : *parsed) {
    LH_FUZZ_CHECK(CheckForwardName(f.name).ok());
    LH_FUZZ_CHECK(names.insert(f.name).second);
    LH_FUZZ_CHECK(!f.host.empty());
    LH_FUZZ_CHECK(f.port != 0);
    LH_FUZZ_CHECK(absl::StartsWith(f.origin, "fuzz.fwd:"));
    LH_FUZZ_CHECK(f.host.find_first_of(" \t\n#") == std::string::npos);
    absl::StrAppend(&written, f.name, " ", HostPort(f), "\n");
  }
  absl::StatusOr<std::vector<Forward>> again = ParseForwards(written, "again.fwd");
  LH_FUZZ_CHECK(again.ok());
  LH_FUZZ_CHECK(again->size() == parsed->size());
  for (size_t i = 0; i < parsed->size(); ++i) {
    LH_FUZZ_CHECK((*again)[i].name == (*parsed)[i].name);
    LH_FUZZ_CHECK((*again)[i].host == (*parsed)[i].host);
    LH_FUZZ_CHECK((*again)[i].port == (*parsed)[i].port);
    LH_FUZZ_CHECK((*again)[i].origin == absl::StrCat("again.fwd:", i + 1));
  }
}

}  // namespace
}  // namespace longhaul::bridge

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  longhaul::bridge::FuzzFrame(data, size);
  longhaul::bridge::FuzzForwards(data, size);
  return 0;
}
