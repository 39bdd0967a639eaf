#include "tuner/probe/probe_protocol.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace longhaul::tuner::probe {
namespace {

constexpr size_t kReportFields = 20;  // u64 fields of TrainReport after the u32 train

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v) {
    for (int i = 1; i >= 0; --i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U32(uint32_t v) {
    for (int i = 3; i >= 0; --i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 7; i >= 0; --i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }

 private:
  std::vector<uint8_t>* out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> d) : d_(d) {}
  bool U8(uint8_t* v) {
    if (!Need(1)) return false;
    *v = d_[p_++];
    return true;
  }
  bool U16(uint16_t* v) {
    uint64_t x;
    if (!Get(2, &x)) return false;
    *v = static_cast<uint16_t>(x);
    return true;
  }
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Get(4, &x)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool U64(uint64_t* v) { return Get(8, v); }
  bool Bytes(size_t n, std::string* s) {
    if (!Need(n)) return false;
    s->assign(reinterpret_cast<const char*>(d_.data() + p_), n);
    p_ += n;
    return true;
  }

 private:
  bool Need(size_t n) const { return d_.size() - p_ >= n; }
  bool Get(size_t n, uint64_t* v) {
    if (!Need(n)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x = (x << 8) | d_[p_ + i];
    p_ += n;
    *v = x;
    return true;
  }
  std::span<const uint8_t> d_;
  size_t p_ = 0;
};

uint64_t* ReportField(TrainReport& r, size_t i) {
  uint64_t* f[kReportFields] = {&r.packets,   &r.wire_bytes, &r.first_wire_bytes,
                                &r.span_ns,   &r.fit_rate_bps, &r.duplicates, &r.rx_drops,
                                &r.reordered,
                                &r.max_extent_packets, &r.max_late_ns, &r.trace_packets,
                                &r.lost,      &r.bursts,     &r.n0x,
                                &r.n01,       &r.n1x,        &r.n11,
                                &r.n1x1,      &r.n111,       &r.triples};
  return f[i];
}

}  // namespace

const char* ProbeTypeName(ProbeType t) {
  switch (t) {
    case ProbeType::kHello: return "HELLO";
    case ProbeType::kHelloAck: return "HELLO_ACK";
    case ProbeType::kEcho: return "ECHO";
    case ProbeType::kEchoReply: return "ECHO_REPLY";
    case ProbeType::kData: return "DATA";
    case ProbeType::kReportReq: return "REPORT_REQ";
    case ProbeType::kReport: return "REPORT";
    case ProbeType::kBye: return "BYE";
    case ProbeType::kError: return "ERROR";
  }
  return "?";
}

size_t ProbeBodySize(ProbeType type, size_t error_text_length) {
  switch (type) {
    case ProbeType::kHello: return kHeaderSize + 4;
    case ProbeType::kHelloAck: return kHeaderSize + 4 + 4 + 8;
    case ProbeType::kEcho: return kHeaderSize + 8;
    case ProbeType::kEchoReply: return kHeaderSize + 8 + 4 + 8;
    case ProbeType::kData: return kHeaderSize + 4 + 4 + 8;
    case ProbeType::kReportReq: return kHeaderSize + 4 + 8;
    case ProbeType::kReport: return kHeaderSize + 4 + 8 * kReportFields;
    case ProbeType::kBye: return kHeaderSize;
    case ProbeType::kError: return kHeaderSize + 2 + 2 + error_text_length;
  }
  return kHeaderSize;
}

absl::Status EncodeProbe(const ProbeMessage& m, size_t pad_to, std::vector<uint8_t>* out) {
  if (pad_to > kMaxDatagram) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe datagram of ", pad_to, " bytes exceeds ", kMaxDatagram));
  }
  const std::string text = m.error_text.substr(0, 1024);
  out->clear();
  out->reserve(std::max(pad_to, ProbeBodySize(m.header.type, text.size())));
  Writer w(out);
  w.U8(kProbeMagic);
  w.U8(kProbeVersion);
  w.U8(static_cast<uint8_t>(m.header.type));
  w.U8(m.header.flags);
  w.U32(m.header.session);
  w.U64(m.header.seq);
  switch (m.header.type) {
    case ProbeType::kHello:
      w.U32(m.version);
      break;
    case ProbeType::kHelloAck:
      w.U32(m.version);
      w.U32(m.max_trains);
      w.U64(m.max_trace_packets);
      break;
    case ProbeType::kEcho:
      w.U64(m.send_ns);
      break;
    case ProbeType::kEchoReply:
      w.U64(m.send_ns);
      w.U32(m.size_received);
      w.U64(m.hold_ns);
      break;
    case ProbeType::kData:
      w.U32(m.train);
      w.U32(m.data_flags);
      w.U64(m.send_ns);
      break;
    case ProbeType::kReportReq:
      w.U32(m.train);
      w.U64(m.packets_sent);
      break;
    case ProbeType::kReport: {
      w.U32(m.report.train);
      TrainReport r = m.report;
      for (size_t i = 0; i < kReportFields; ++i) w.U64(*ReportField(r, i));
      break;
    }
    case ProbeType::kBye:
      break;
    case ProbeType::kError:
      w.U16(m.error_code);
      w.U16(static_cast<uint16_t>(text.size()));
      out->insert(out->end(), text.begin(), text.end());
      break;
  }
  if (out->size() < pad_to) out->resize(pad_to, 0);
  return absl::OkStatus();
}

absl::StatusOr<ProbeMessage> DecodeProbe(std::span<const uint8_t> d) {
  Reader r(d);
  ProbeMessage m;
  uint8_t magic = 0, version = 0, type = 0;
  auto truncated = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("probe message truncated: no room for ", what,
                                                   " (", d.size(), " bytes)"));
  };
  if (!r.U8(&magic)) return truncated("the magic byte");
  if (magic != kProbeMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a probe message: first byte 0x", absl::Hex(magic), ", expected 0xb7"));
  }
  if (!r.U8(&version) || !r.U8(&type) || !r.U8(&m.header.flags) || !r.U32(&m.header.session) ||
      !r.U64(&m.header.seq)) {
    return truncated("the header");
  }
  if (version != kProbeVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported probe protocol version ", version, " (this side speaks ",
                     kProbeVersion, ")"));
  }
  if (type < static_cast<uint8_t>(ProbeType::kHello) || type > static_cast<uint8_t>(ProbeType::kError)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown probe message type ", type));
  }
  m.header.type = static_cast<ProbeType>(type);
  const char* name = ProbeTypeName(m.header.type);
  switch (m.header.type) {
    case ProbeType::kHello:
      if (!r.U32(&m.version)) return truncated(name);
      break;
    case ProbeType::kHelloAck:
      if (!r.U32(&m.version) || !r.U32(&m.max_trains) || !r.U64(&m.max_trace_packets)) {
        return truncated(name);
      }
      break;
    case ProbeType::kEcho:
      if (!r.U64(&m.send_ns)) return truncated(name);
      break;
    case ProbeType::kEchoReply:
      if (!r.U64(&m.send_ns) || !r.U32(&m.size_received) || !r.U64(&m.hold_ns)) {
        return truncated(name);
      }
      break;
    case ProbeType::kData:
      if (!r.U32(&m.train) || !r.U32(&m.data_flags) || !r.U64(&m.send_ns)) return truncated(name);
      break;
    case ProbeType::kReportReq:
      if (!r.U32(&m.train) || !r.U64(&m.packets_sent)) return truncated(name);
      break;
    case ProbeType::kReport:
      if (!r.U32(&m.report.train)) return truncated(name);
      for (size_t i = 0; i < kReportFields; ++i) {
        if (!r.U64(ReportField(m.report, i))) return truncated(name);
      }
      break;
    case ProbeType::kBye:
      break;
    case ProbeType::kError: {
      uint16_t len = 0;
      if (!r.U16(&m.error_code) || !r.U16(&len) || !r.Bytes(len, &m.error_text)) {
        return truncated(name);
      }
      break;
    }
  }
  return m;
}

}  // namespace longhaul::tuner::probe
