#include "transport/nccl/plugin_handle.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"
#include "transport/nccl/nccl_net_abi.h"

namespace longhaul::nccl {
namespace {

struct Wire {
  uint32_t magic;
  uint16_t version;
  uint16_t port;
  uint64_t instance;
  uint64_t listen_id;
  uint64_t credit;
  char address[48];
  uint8_t public_key[32];
  uint8_t flags;
  uint8_t unused[15];
};
constexpr uint8_t kHasPublicKey = 1;
static_assert(sizeof(Wire) == kHandleBytes);
static_assert(kHandleBytes <= LH_NCCL_NET_HANDLE_MAXSIZE, "NCCL's handle is 128 bytes");
static_assert(offsetof(Wire, instance) == 8);
static_assert(offsetof(Wire, listen_id) == 16);
static_assert(offsetof(Wire, credit) == 24);
static_assert(offsetof(Wire, address) == 32);
static_assert(offsetof(Wire, public_key) == 80);
static_assert(offsetof(Wire, flags) == 112);

}  // namespace

absl::Status EncodeHandle(const PluginHandle& h, void* out) {
  Wire w;
  std::memset(&w, 0, sizeof(w));
  if (h.address.empty() || h.address.size() >= sizeof(w.address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("handle: address '", h.address, "' is empty or longer than 47 bytes"));
  }
  w.magic = kHandleMagic;
  w.version = kHandleVersion;
  w.port = h.port;
  w.instance = h.instance;
  w.listen_id = h.listen_id;
  w.credit = h.credit;
  std::memcpy(w.address, h.address.data(), h.address.size());
  if (h.public_key) {
    std::memcpy(w.public_key, h.public_key->data(), sizeof(w.public_key));
    w.flags = kHasPublicKey;
  }
  std::memcpy(out, &w, sizeof(w));
  return absl::OkStatus();
}

absl::StatusOr<PluginHandle> DecodeHandle(const void* in) {
  if (in == nullptr) return absl::InvalidArgumentError("handle is NULL");
  Wire w;
  std::memcpy(&w, in, sizeof(w));
  if (w.magic != kHandleMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a longhaul handle (magic 0x", absl::Hex(w.magic), ", expected 0x",
                     absl::Hex(kHandleMagic), "): was it written by another plugin's listen?"));
  }
  if (w.version != kHandleVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handle version ", w.version, " is not supported (this plugin: ", kHandleVersion,
        "): every rank must load the same plugin"));
  }
  if (memchr(w.address, 0, sizeof(w.address)) == nullptr || w.address[0] == 0) {
    return absl::InvalidArgumentError("handle: address is empty or not terminated");
  }
  if (w.port == 0) return absl::InvalidArgumentError("handle: port is 0");
  if ((w.flags & ~kHasPublicKey) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("handle: unknown flags 0x", absl::Hex(w.flags), " (this plugin knows 0x1)"));
  }
  PluginHandle h;
  h.address = w.address;
  h.port = w.port;
  h.instance = w.instance;
  h.listen_id = w.listen_id;
  h.credit = w.credit;
  if (w.flags & kHasPublicKey) {
    h.public_key.emplace();
    std::memcpy(h.public_key->data(), w.public_key, sizeof(w.public_key));
  }
  return h;
}

absl::Status RedirectHandle(void* handle, const std::string& address, uint16_t port) {
  LH_ASSIGN_OR_RETURN(PluginHandle h, DecodeHandle(handle));
  h.address = address;
  h.port = port;
  return EncodeHandle(h, handle);
}

}  // namespace longhaul::nccl
