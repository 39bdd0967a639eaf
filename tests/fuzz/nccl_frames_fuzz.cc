// Fuzz target for what longhaul's NCCL net plugin decodes from its peers and
// its user (transport/nccl): the 32-byte frame header at the start of every
// message from a peer plugin (frames.h), the 128-byte connection handle that
// reaches connect() through NCCL's bootstrap network (plugin_handle.h), and the
// NCCL_LONGHAUL_* environment (settings.h: ReadSettings, ApplySetting,
// ParseAddressPort).
//
// The whole input is a received message (DecodeFrameHeader); its first 128
// bytes, zero padded, a handle (DecodeHandle, RedirectHandle); and its text up
// to the first NUL (an environment string cannot hold one) the environment: one
// NAME=VALUE per line, each name prefixed with NCCL_LONGHAUL_
// (NCCL_LONGHAUL_PROFILE is left out: it names a file to read), and each line's
// value given to every setting (ApplySetting).
//
// Invariants (each aborts when it fails):
//   - a header decodes exactly when the message holds 32 bytes with the
//   plugin's magic
//     and version; what decodes re-encodes to the same 32 bytes;
//     IsKnownFrameKind is true exactly for kinds 1..6; errors are non-empty;
//   - an OPEN body decodes exactly when the message is 48 bytes, its flags are
//     0 or 1 and a comm id comes with flag 1; what decodes re-encodes to the
//     same 16 bytes; every REJECT reason (any tag) has a non-empty text;
//   - a handle decodes exactly when magic, version, address (non-empty,
//   terminated),
//     port (non-zero) and flags (bit 0 only) are valid; what decodes re-encodes
//     and decodes to the same handle with the same header bytes; redirecting
//     keeps everything but the address and port and succeeds exactly when the
//     handle decodes;
//   - an address:port that parses is numeric with a port in [1, 65535] and,
//   formatted
//     again, parses to the same address and port;
//   - settings that parse are Validate()d, with the credit and the durations
//   within
//     their specs' bounds; errors are FailedPrecondition with a non-empty
//     message.
//
// Built as a libFuzzer binary with -DLONGHAUL_FUZZ=ON (clang), and replayed as
// an ordinary test (nccl_frames_fuzz_replay_test) over
// tests/fuzz/corpus/nccl_frames.

#include "absl/strings/string_view.h"
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/fuzz/fuzz_check.h"
#include "transport/nccl/frames.h"
#include "transport/nccl/plugin_handle.h"
#include "transport/nccl/settings.h"

namespace longhaul::nccl {
namespace {

template <typename T> T Load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

void CheckFrame(const uint8_t *data, size_t size) {
  absl::StatusOr<FrameHeader> h = DecodeFrameHeader(data, size);
  const bool valid = size >= kFrameHeaderBytes &&
                     Load<uint32_t>(data) == kFrameMagic &&
                     data[5] == kFrameVersion;
  LH_FUZZ_CHECK(h.ok() == valid);
  if (!h.ok()) {
    fuzz::CheckUserError(h.status());
  } else {
    uint8_t again[kFrameHeaderBytes];
    EncodeFrameHeader(*h, again);
    LH_FUZZ_CHECK(std::memcmp(again, data, kFrameHeaderBytes) == 0);
    LH_FUZZ_CHECK(h->kind == data[4]);
    LH_FUZZ_CHECK(h->value == Load<uint64_t>(data + 16));
    LH_FUZZ_CHECK(IsKnownFrameKind(h->kind) == (h->kind >= 1 && h->kind <= 6));
    // A header built from the decoded fields is the same header (kinds the
    // plugin sends).
    if (IsKnownFrameKind(h->kind) && h->reserved == 0) {
      const FrameHeader m =
          MakeFrameHeader(static_cast<FrameKind>(h->kind), h->comm, h->tag,
                          h->value, h->instance);
      uint8_t made[kFrameHeaderBytes];
      EncodeFrameHeader(m, made);
      LH_FUZZ_CHECK(std::memcmp(made, data, kFrameHeaderBytes) == 0);
    }
  }
  fuzz::CheckUserError(DecodeFrameHeader(nullptr, size).status());
  // The OPEN body (whatever the header says: the receiver decodes it for kOpen).
  absl::StatusOr<OpenBody> b = DecodeOpenBody(data, size);
  const bool body_valid =
      size == kOpenFrameBytes &&
      (Load<uint64_t>(data + 40) == 0 || Load<uint64_t>(data + 40) == kOpenHasCommId) &&
      (Load<uint64_t>(data + 40) == kOpenHasCommId || Load<uint64_t>(data + 32) == 0);
  LH_FUZZ_CHECK(b.ok() == body_valid);
  if (b.ok()) {
    uint8_t again[kOpenBodyBytes];
    EncodeOpenBody(*b, again);
    LH_FUZZ_CHECK(std::memcmp(again, data + kFrameHeaderBytes, kOpenBodyBytes) == 0);
  } else {
    fuzz::CheckUserError(b.status());
  }
  if (size >= kFrameHeaderBytes) {
    const char* why = RejectReasonText(Load<int32_t>(data + 12));
    LH_FUZZ_CHECK(why != nullptr && why[0] != 0);
  }
}

bool SameHandle(const PluginHandle &a, const PluginHandle &b) {
  return a.address == b.address && a.port == b.port &&
         a.instance == b.instance && a.listen_id == b.listen_id &&
         a.credit == b.credit && a.public_key == b.public_key;
}

void CheckHandle(const uint8_t *data, size_t size, absl::string_view text) {
  uint8_t in[kHandleBytes] = {};
  if (size > 0) std::memcpy(in, data, std::min(size, kHandleBytes));  // data may be null
  absl::StatusOr<PluginHandle> h = DecodeHandle(in);
  const void *nul = std::memchr(in + 32, 0, 48);
  const bool valid = Load<uint32_t>(in) == kHandleMagic &&
                     Load<uint16_t>(in + 4) == kHandleVersion &&
                     nul != nullptr && in[32] != 0 &&
                     Load<uint16_t>(in + 6) != 0 && (in[112] & ~1) == 0;
  LH_FUZZ_CHECK(h.ok() == valid);
  uint8_t redirected[kHandleBytes];
  std::memcpy(redirected, in, kHandleBytes);
  const absl::Status r = RedirectHandle(redirected, "198.18.0.7", 7000);
  LH_FUZZ_CHECK(r.ok() == h.ok());
  if (!h.ok()) {
    fuzz::CheckUserError(h.status());
    fuzz::CheckUserError(r);
    LH_FUZZ_CHECK(std::memcmp(redirected, in, kHandleBytes) == 0); // untouched
    return;
  }
  LH_FUZZ_CHECK(!h->address.empty() && h->address.size() < 48 && h->port != 0);
  LH_FUZZ_CHECK(h->address == reinterpret_cast<const char *>(in + 32));
  LH_FUZZ_CHECK(h->public_key.has_value() == ((in[112] & 1) != 0));
  uint8_t again[kHandleBytes];
  LH_FUZZ_CHECK(EncodeHandle(*h, again).ok());
  LH_FUZZ_CHECK(std::memcmp(again, in, 32) ==
                0); // magic, version, port, ids, credit
  absl::StatusOr<PluginHandle> h2 = DecodeHandle(again);
  LH_FUZZ_CHECK(h2.ok() && SameHandle(*h2, *h));
  absl::StatusOr<PluginHandle> moved = DecodeHandle(redirected);
  LH_FUZZ_CHECK(moved.ok());
  LH_FUZZ_CHECK(moved->address == "198.18.0.7" && moved->port == 7000);
  PluginHandle expect = *h;
  expect.address = "198.18.0.7";
  expect.port = 7000;
  LH_FUZZ_CHECK(SameHandle(*moved, expect));
  // A redirect to a user's text (NCCL_LONGHAUL_ADVERTISE's address part, a
  // relay's name) succeeds exactly when it fits, and then is what the handle
  // says.
  const std::string to(text.substr(0, 64));
  std::memcpy(redirected, in, kHandleBytes);
  const absl::Status r2 = RedirectHandle(redirected, to, 1);
  LH_FUZZ_CHECK(r2.ok() == (!to.empty() && to.size() < 48));
  if (r2.ok()) {
    absl::StatusOr<PluginHandle> m2 = DecodeHandle(redirected);
    LH_FUZZ_CHECK(m2.ok() && m2->address == to && m2->port == 1);
  } else {
    fuzz::CheckUserError(r2);
  }
}

void CheckAddressPort(absl::string_view text) {
  absl::StatusOr<AddressPort> a = ParseAddressPort(text);
  if (!a.ok()) {
    fuzz::CheckUserError(a.status());
    return;
  }
  LH_FUZZ_CHECK(!a->address.empty() && a->port >= 1);
  LH_FUZZ_CHECK(a->address.find('\0') == std::string::npos);
  const bool v6 = a->address.find(':') != std::string::npos;
  const std::string again_text =
      v6 ? absl::StrCat("[", a->address, "]:", a->port)
         : absl::StrCat(a->address, ":", a->port);
  absl::StatusOr<AddressPort> again = ParseAddressPort(again_text);
  LH_FUZZ_CHECK(again.ok() && again->address == a->address &&
                again->port == a->port);
}

void CheckSettings(absl::string_view text) {
  std::vector<std::string> env;
  std::vector<absl::string_view> values;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "PROFILE="))
      continue; // a file to read
    env.push_back(absl::StrCat(kSettingPrefix, line));
    const size_t eq = line.find('=');
    values.push_back(eq == absl::string_view::npos ? line
                                                   : line.substr(eq + 1));
    if (env.size() == 32)
      break;
  }
  std::vector<const char *> envp;
  for (const std::string &e : env)
    envp.push_back(e.c_str());
  envp.push_back(nullptr);
  absl::StatusOr<Settings> s = ReadSettings(envp.data());
  if (!s.ok()) {
    fuzz::CheckUserError(s.status());
    LH_FUZZ_CHECK(s.status().code() == absl::StatusCode::kFailedPrecondition);
  } else {
    LH_FUZZ_CHECK(s->config.Validate().ok());
    LH_FUZZ_CHECK(s->credit >= 64 * 1024 && s->credit <= (uint64_t{64} << 30));
    LH_FUZZ_CHECK(s->spin <= Duration::Milliseconds(10));
    LH_FUZZ_CHECK(s->connect_timeout >= Duration::Milliseconds(100));
    LH_FUZZ_CHECK(s->datapath == "udp" || s->datapath == "verbs");
    if (!s->advertise.empty())
      LH_FUZZ_CHECK(ParseAddressPort(s->advertise).ok());
  }
  // Each value (the first few) as each setting.
  for (size_t i = 0; i < values.size() && i < 4; ++i) {
    const absl::string_view v = values[i];
    for (const SettingSpec &spec : PluginSettingSpecs()) {
      Settings one;
      absl::Status st = ApplySetting(spec, v, &one);
      if (!st.ok()) {
        fuzz::CheckUserError(st, absl::StrCat(kSettingPrefix, spec.key));
        LH_FUZZ_CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
      }
    }
  }
}

} // namespace
} // namespace longhaul::nccl

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace longhaul::nccl;
  if (size > 8192)
    return 0;
  absl::string_view text = longhaul::fuzz::AsText(data, size);
  text = text.substr(0, text.find('\0'));
  CheckFrame(data, size);
  CheckHandle(data, size, text);
  CheckAddressPort(text);
  CheckSettings(text);
  return 0;
}
