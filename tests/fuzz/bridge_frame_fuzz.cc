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
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_frames.h"

namespace longhaul::bridge {
namespace {

// Not glog: the fuzzer should not depend on logging initialisation.
#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

void FuzzFrame(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> m(data, size);
  absl::StatusOr<Frame> f = DecodeFrame(m);
  if (!f.ok()) {
    FUZZ_CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(f.status().message(), "malformed bridge "));
    return;
  }
  FUZZ_CHECK(size >= kFrameHeaderSize);
  const uint8_t type = data[0];
  FUZZ_CHECK(type >= 1 && type <= 6);
  FUZZ_CHECK(static_cast<uint8_t>(f->type) == type);
  FUZZ_CHECK(std::strcmp(FrameTypeName(f->type), "unknown") != 0);
  FUZZ_CHECK(f->body.data() == data + kFrameHeaderSize);
  FUZZ_CHECK(f->body.size() == size - kFrameHeaderSize);
  FUZZ_CHECK((f->stream == 0) == (f->type == FrameType::kGoAway));
  switch (f->type) {
    case FrameType::kOpen:
      FUZZ_CHECK(!f->body.empty() && f->body.size() <= kMaxForwardName);
      break;
    case FrameType::kData:
      FUZZ_CHECK(f->value >= 1);
      break;
    case FrameType::kFin:
      FUZZ_CHECK(f->value >= 1);
      FUZZ_CHECK(f->body.empty());
      break;
    case FrameType::kWindow:
      FUZZ_CHECK(f->body.empty());
      break;
    case FrameType::kReset:
      FUZZ_CHECK(ResetCodeName(static_cast<ResetCode>(f->value)) != nullptr);
      [[fallthrough]];
    case FrameType::kGoAway:
      FUZZ_CHECK(f->body.size() <= kMaxReason);
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
  FUZZ_CHECK(again.size() == size);
  FUZZ_CHECK(std::memcmp(again.data(), data, size) == 0);
  absl::StatusOr<Frame> f2 = DecodeFrame(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(again.data()), again.size()));
  FUZZ_CHECK(f2.ok());
  FUZZ_CHECK(f2->type == f->type && f2->stream == f->stream && f2->value == f->value);
  FUZZ_CHECK(f2->text() == f->text());
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
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(parsed.status().message(), "fuzz.fwd"));
    return;
  }
  FUZZ_CHECK(!parsed->empty());
  std::set<std::string> names;
  std::string written;
  for (const Forward& f : *parsed) {
    FUZZ_CHECK(CheckForwardName(f.name).ok());
    FUZZ_CHECK(names.insert(f.name).second);
    FUZZ_CHECK(!f.host.empty());
    FUZZ_CHECK(f.port != 0);
    FUZZ_CHECK(absl::StartsWith(f.origin, "fuzz.fwd:"));
    FUZZ_CHECK(f.host.find_first_of(" \t\n#") == std::string::npos);
    absl::StrAppend(&written, f.name, " ", HostPort(f), "\n");
  }
  absl::StatusOr<std::vector<Forward>> again = ParseForwards(written, "again.fwd");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == parsed->size());
  for (size_t i = 0; i < parsed->size(); ++i) {
    FUZZ_CHECK((*again)[i].name == (*parsed)[i].name);
    FUZZ_CHECK((*again)[i].host == (*parsed)[i].host);
    FUZZ_CHECK((*again)[i].port == (*parsed)[i].port);
    FUZZ_CHECK((*again)[i].origin == absl::StrCat("again.fwd:", i + 1));
  }
}

}  // namespace
}  // namespace longhaul::bridge

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  longhaul::bridge::FuzzFrame(data, size);
  longhaul::bridge::FuzzForwards(data, size);
  return 0;
}
