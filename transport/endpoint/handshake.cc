// Handshake bodies are fixed-layout big-endian fields (like the packet header) rather than
// varints: they are rare, small, and easier to read in a packet dump this way.

#include "transport/endpoint/handshake.h"

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::endpoint {
namespace {

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Be(v, 2); }
  void U32(uint32_t v) { Be(v, 4); }
  void U64(uint64_t v) { Be(v, 8); }
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  void Be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : p_(b.data()), end_(b.data() + b.size()) {}
  bool U8(uint8_t* v) {
    uint64_t x;
    if (!Be(1, &x)) return false;
    *v = static_cast<uint8_t>(x);
    return true;
  }
  bool U16(uint16_t* v) {
    uint64_t x;
    if (!Be(2, &x)) return false;
    *v = static_cast<uint16_t>(x);
    return true;
  }
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Be(4, &x)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool U64(uint64_t* v) { return Be(8, v); }
  bool Bytes(size_t n, const uint8_t** p) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    *p = p_;
    p_ += n;
    return true;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  bool Be(int n, uint64_t* v) {
    if (end_ - p_ < n) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x = (x << 8) | p_[i];
    p_ += n;
    *v = x;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

void WriteParams(Writer* w, const HandshakeParams& p) {
  w->U32(p.segment);
  w->U32(p.max_datagram);
  w->U64(p.recv_window);
  w->U32(p.max_inflight_messages);
  w->U16(p.flows);
  w->U32(p.idle_timeout_ms);
}

bool ReadParams(Reader* r, HandshakeParams* p) {
  return r->U32(&p->segment) && r->U32(&p->max_datagram) && r->U64(&p->recv_window) &&
         r->U32(&p->max_inflight_messages) && r->U16(&p->flows) && r->U32(&p->idle_timeout_ms);
}

absl::Status Malformed(HandshakeKind k, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed handshake ", HandshakeKindName(k), ": ", what));
}

}  // namespace

const char* HandshakeKindName(HandshakeKind k) {
  switch (k) {
    case HandshakeKind::kHello:
      return "Hello";
    case HandshakeKind::kRetry:
      return "Retry";
    case HandshakeKind::kAccept:
      return "Accept";
    case HandshakeKind::kConfirm:
      return "Confirm";
    case HandshakeKind::kReject:
      return "Reject";
  }
  return "unknown";
}

absl::StatusOr<std::vector<uint8_t>> EncodeHandshakeBody(const HandshakeMessage& m) {
  if (m.cookie.size() > kMaxCookieSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake cookie of ", m.cookie.size(), " bytes exceeds ", kMaxCookieSize));
  }
  if (m.app_data.size() > kMaxAppDataSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handshake application data of ", m.app_data.size(), " bytes exceeds ", kMaxAppDataSize));
  }
  if (m.reason.size() > kMaxReasonSize) {
    return absl::InvalidArgumentError(absl::StrCat("handshake reject reason of ", m.reason.size(),
                                                   " bytes exceeds ", kMaxReasonSize));
  }
  Writer w;
  w.U8(static_cast<uint8_t>(m.kind));
  w.U32(m.version);
  w.U64(m.client_cid);
  switch (m.kind) {
    case HandshakeKind::kHello:
      WriteParams(&w, m.params);
      w.U8(static_cast<uint8_t>(m.cookie.size()));
      w.Bytes(m.cookie.data(), m.cookie.size());
      w.U16(static_cast<uint16_t>(m.app_data.size()));
      w.Bytes(m.app_data.data(), m.app_data.size());
      break;
    case HandshakeKind::kRetry:
      w.U8(static_cast<uint8_t>(m.cookie.size()));
      w.Bytes(m.cookie.data(), m.cookie.size());
      break;
    case HandshakeKind::kAccept:
      w.U64(m.server_cid);
      WriteParams(&w, m.params);
      w.U16(static_cast<uint16_t>(m.app_data.size()));
      w.Bytes(m.app_data.data(), m.app_data.size());
      break;
    case HandshakeKind::kConfirm:
      w.U64(m.server_cid);
      break;
    case HandshakeKind::kReject:
      w.U16(static_cast<uint16_t>(m.reason.size()));
      w.Bytes(m.reason.data(), m.reason.size());
      break;
    default:
      return absl::InvalidArgumentError("unknown handshake kind");
  }
  if (m.security.mode != 0 && m.kind != HandshakeKind::kRetry &&
      m.kind != HandshakeKind::kReject) {
    if (m.security.noise.size() > kMaxNoiseSize) {
      return absl::InvalidArgumentError(absl::StrCat("handshake Noise message of ",
                                                     m.security.noise.size(),
                                                     " bytes exceeds ", kMaxNoiseSize));
    }
    w.U8(m.security.mode);
    w.U8(m.security.ciphers);
    w.U16(static_cast<uint16_t>(m.security.noise.size()));
    w.Bytes(m.security.noise.data(), m.security.noise.size());
  }
  return w.Take();
}

namespace {
// A label, then the body as encoded.
std::vector<uint8_t> Labelled(std::string_view label, const HandshakeMessage& m) {
  absl::StatusOr<std::vector<uint8_t>> body = EncodeHandshakeBody(m);
  std::vector<uint8_t> out;
  out.reserve(label.size() + (body.ok() ? body->size() : 0));
  for (char c : label) out.push_back(static_cast<uint8_t>(c));
  if (body.ok()) out.insert(out.end(), body->begin(), body->end());
  return out;
}
}  // namespace

std::vector<uint8_t> HelloPrologue(const HandshakeMessage& hello) {
  HandshakeMessage m = hello;
  m.cookie.clear();
  m.security.noise.clear();
  return Labelled("longhaul hello", m);
}

std::vector<uint8_t> AcceptContext(const HandshakeMessage& accept) {
  HandshakeMessage m = accept;
  m.security.noise.clear();
  return Labelled("longhaul accept", m);
}

absl::StatusOr<HandshakeMessage> DecodeHandshakeBody(std::span<const uint8_t> body) {
  Reader r(body);
  HandshakeMessage m;
  uint8_t kind = 0;
  if (!r.U8(&kind)) return absl::InvalidArgumentError("malformed handshake: empty body");
  if (kind < 1 || kind > 5) {
    return absl::InvalidArgumentError(absl::StrCat("malformed handshake: unknown kind ", kind));
  }
  m.kind = static_cast<HandshakeKind>(kind);
  if (!r.U32(&m.version) || !r.U64(&m.client_cid)) return Malformed(m.kind, "truncated prefix");
  // Another version may lay out the rest differently: the prefix is all a peer needs to
  // answer with a clear version-mismatch Reject.
  if (m.version != kProtocolVersion) return m;
  const uint8_t* p = nullptr;
  switch (m.kind) {
    case HandshakeKind::kHello: {
      uint8_t cookie_len = 0;
      uint16_t app_len = 0;
      if (!ReadParams(&r, &m.params)) return Malformed(m.kind, "truncated parameters");
      if (!r.U8(&cookie_len)) return Malformed(m.kind, "truncated cookie length");
      if (cookie_len > kMaxCookieSize) return Malformed(m.kind, "cookie too long");
      if (!r.Bytes(cookie_len, &p)) return Malformed(m.kind, "cookie runs past the body");
      m.cookie.assign(p, p + cookie_len);
      if (!r.U16(&app_len)) return Malformed(m.kind, "truncated application data length");
      if (app_len > kMaxAppDataSize) return Malformed(m.kind, "application data too long");
      if (!r.Bytes(app_len, &p)) return Malformed(m.kind, "application data runs past the body");
      m.app_data.assign(reinterpret_cast<const char*>(p), app_len);
      break;
    }
    case HandshakeKind::kRetry: {
      uint8_t cookie_len = 0;
      if (!r.U8(&cookie_len)) return Malformed(m.kind, "truncated cookie length");
      if (cookie_len == 0 || cookie_len > kMaxCookieSize) {
        return Malformed(m.kind, "bad cookie length");
      }
      if (!r.Bytes(cookie_len, &p)) return Malformed(m.kind, "cookie runs past the body");
      m.cookie.assign(p, p + cookie_len);
      break;
    }
    case HandshakeKind::kAccept: {
      uint16_t app_len = 0;
      if (!r.U64(&m.server_cid)) return Malformed(m.kind, "truncated server id");
      if (!ReadParams(&r, &m.params)) return Malformed(m.kind, "truncated parameters");
      if (!r.U16(&app_len)) return Malformed(m.kind, "truncated application data length");
      if (app_len > kMaxAppDataSize) return Malformed(m.kind, "application data too long");
      if (!r.Bytes(app_len, &p)) return Malformed(m.kind, "application data runs past the body");
      m.app_data.assign(reinterpret_cast<const char*>(p), app_len);
      break;
    }
    case HandshakeKind::kConfirm:
      if (!r.U64(&m.server_cid)) return Malformed(m.kind, "truncated server id");
      break;
    case HandshakeKind::kReject: {
      uint16_t len = 0;
      if (!r.U16(&len)) return Malformed(m.kind, "truncated reason length");
      if (len > kMaxReasonSize) return Malformed(m.kind, "reason too long");
      if (!r.Bytes(len, &p)) return Malformed(m.kind, "reason runs past the body");
      m.reason.assign(reinterpret_cast<const char*>(p), len);
      break;
    }
  }
  if (r.remaining() != 0 && (m.kind == HandshakeKind::kHello || m.kind == HandshakeKind::kAccept ||
                             m.kind == HandshakeKind::kConfirm)) {
    uint16_t len = 0;
    if (!r.U8(&m.security.mode) || !r.U8(&m.security.ciphers) || !r.U16(&len)) {
      return Malformed(m.kind, "truncated security fields");
    }
    if (m.security.mode == 0) return Malformed(m.kind, "security fields with mode 0");
    if (len > kMaxNoiseSize) return Malformed(m.kind, "Noise message too long");
    if (!r.Bytes(len, &p)) return Malformed(m.kind, "Noise message runs past the body");
    m.security.noise.assign(p, p + len);
  }
  if (r.remaining() != 0) return Malformed(m.kind, "trailing bytes");
  return m;
}

wire::PacketType PacketTypeFor(HandshakeKind k) {
  switch (k) {
    case HandshakeKind::kHello:
      return wire::PacketType::kInitial;
    case HandshakeKind::kRetry:
      return wire::PacketType::kRetry;
    default:
      return wire::PacketType::kHandshake;
  }
}

uint64_t HeaderCidFor(const HandshakeMessage& m) {
  switch (m.kind) {
    case HandshakeKind::kHello:
      return 0;
    case HandshakeKind::kConfirm:
      return m.server_cid;
    default:
      return m.client_cid;
  }
}

absl::StatusOr<std::vector<uint8_t>> BuildHandshakePacket(const HandshakeMessage& m) {
  LH_ASSIGN_OR_RETURN(std::vector<uint8_t> body, EncodeHandshakeBody(m));
  // Header + frame type + 2-byte varint length + body + checksum, padded for a Hello.
  size_t need = wire::kPacketOverhead + 1 + 2 + body.size();
  size_t total = m.kind == HandshakeKind::kHello ? std::max(need, kMinInitialSize) : need;
  std::vector<uint8_t> out(total);
  wire::PacketWriter w(out.data(), out.size());
  wire::PacketHeader h;
  h.type = PacketTypeFor(m.kind);
  h.connection_id = HeaderCidFor(m);
  h.packet_number = 0;
  w.WriteHeader(h);
  if (!w.WriteHandshake(body)) return absl::InternalError("handshake body does not fit");
  if (w.remaining() > 0 && !w.WritePadding(w.remaining())) {
    return absl::InternalError("handshake padding does not fit");
  }
  out.resize(w.Finish());
  return out;
}

absl::StatusOr<HandshakeMessage> ParseHandshakePacket(std::span<const uint8_t> datagram) {
  LH_ASSIGN_OR_RETURN(wire::PacketView v, wire::ParsePacket(datagram));
  if (v.header.type == wire::PacketType::kOneRtt) {
    return absl::InvalidArgumentError("not a handshake packet (1-RTT)");
  }
  wire::FrameReader reader(v);
  wire::Frame f;
  bool found = false;
  HandshakeMessage m;
  while (true) {
    LH_ASSIGN_OR_RETURN(bool more, reader.Next(&f));
    if (!more) break;
    if (f.type == wire::FrameType::kPadding) continue;
    if (f.type != wire::FrameType::kHandshake || found) {
      return absl::InvalidArgumentError(
          "handshake packet must carry exactly one HANDSHAKE frame (and PADDING)");
    }
    LH_ASSIGN_OR_RETURN(m, DecodeHandshakeBody(f.handshake.body));
    found = true;
  }
  if (!found) return absl::InvalidArgumentError("handshake packet without a HANDSHAKE frame");
  if (PacketTypeFor(m.kind) != v.header.type) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake ", HandshakeKindName(m.kind), " in a packet of the wrong type"));
  }
  if (m.version == kProtocolVersion && HeaderCidFor(m) != v.header.connection_id) {
    return absl::InvalidArgumentError(absl::StrCat("handshake ", HandshakeKindName(m.kind),
                                                   ": header connection id does not match"));
  }
  return m;
}

// ---- cookies ----

uint64_t CookieMinter::Mac(uint64_t issued_ms, const PeerAddress& client, uint64_t client_cid,
                           uint32_t version) const {
  uint8_t buf[1 + 8 + PeerAddress::kMaxSize + 1 + 8 + 4];
  size_t n = 0;
  buf[n++] = 1;
  for (int i = 7; i >= 0; --i) buf[n++] = static_cast<uint8_t>(issued_ms >> (8 * i));
  buf[n++] = static_cast<uint8_t>(client.size());
  for (uint8_t b : client.bytes()) buf[n++] = b;
  for (int i = 7; i >= 0; --i) buf[n++] = static_cast<uint8_t>(client_cid >> (8 * i));
  for (int i = 3; i >= 0; --i) buf[n++] = static_cast<uint8_t>(version >> (8 * i));
  return SipHash24(secret_, buf, n);
}

std::vector<uint8_t> CookieMinter::Mint(Time now, const PeerAddress& client, uint64_t client_cid,
                                        uint32_t version) const {
  const uint64_t issued = static_cast<uint64_t>(std::max<int64_t>(0, now.ns() / 1000000));
  const uint64_t mac = Mac(issued, client, client_cid, version);
  std::vector<uint8_t> c(kCookieSize);
  c[0] = 1;
  for (int i = 0; i < 8; ++i) c[1 + i] = static_cast<uint8_t>(issued >> (8 * (7 - i)));
  for (int i = 0; i < 8; ++i) c[9 + i] = static_cast<uint8_t>(mac >> (8 * (7 - i)));
  return c;
}

CookieVerdict CookieMinter::Check(Time now, std::span<const uint8_t> cookie,
                                  const PeerAddress& client, uint64_t client_cid,
                                  uint32_t version) const {
  if (cookie.size() != kCookieSize || cookie[0] != 1) return CookieVerdict::kInvalid;
  uint64_t issued = 0, mac = 0;
  for (int i = 0; i < 8; ++i) issued = (issued << 8) | cookie[1 + i];
  for (int i = 0; i < 8; ++i) mac = (mac << 8) | cookie[9 + i];
  // Compare without an early exit (the MAC is 64 bits; timing leaks nothing useful, but
  // it costs nothing either).
  const uint64_t diff = mac ^ Mac(issued, client, client_cid, version);
  if (diff != 0) return CookieVerdict::kInvalid;
  const int64_t now_ms = now.ns() / 1000000;
  const int64_t issued_ms = static_cast<int64_t>(issued);
  if (issued_ms > now_ms + 1000) return CookieVerdict::kInvalid;  // from the future
  if (now_ms - issued_ms > lifetime_.ns() / 1000000) return CookieVerdict::kExpired;
  return CookieVerdict::kValid;
}

}  // namespace longhaul::endpoint
