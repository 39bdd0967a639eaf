#include "tuner/probe/responder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/base/clock.h"
#include "transport/base/status.h"
#include "transport/net/resolver.h"

namespace longhaul::tuner::probe {

struct ProbeResponder::Train {
  bool trace = false;
  TrainReceipt receipt;        // distinct arrivals, in arrival order
  uint64_t duplicates = 0;
  std::vector<uint64_t> seen;  // bitmap by sequence number (all trains, for duplicates)
  ReorderTracker reorder;
  uint64_t max_seq = 0;
  uint64_t drops_at_start = 0;  // the socket's drop count at the first packet
};

struct ProbeResponder::Session {
  int64_t last_ns = 0;
  std::map<uint32_t, Train> trains;
};

ProbeResponder::ProbeResponder(const ResponderOptions& options) : opt_(options) {}
ProbeResponder::~ProbeResponder() = default;

void ProbeResponder::Reply(const ProbeMessage& m, std::vector<std::vector<uint8_t>>* replies) {
  std::vector<uint8_t> out;
  if (EncodeProbe(m, 0, &out).ok()) {
    // Sources are not validated: never send more than 3x what the request carried, so a
    // spoofed request cannot turn the responder into an amplifier (docs/endpoint.md).
    if (out.size() > 3 * request_bytes_) {
      ++stats_.amplification_limited;
      return;
    }
    replies->push_back(std::move(out));
    ++stats_.replies;
  }
}

void ProbeResponder::Refuse(const ProbeHeader& h, ProbeError code, const std::string& text,
                            std::vector<std::vector<uint8_t>>* replies) {
  ProbeMessage m;
  m.header = h;
  m.header.type = ProbeType::kError;
  m.header.flags = 0;
  m.error_code = static_cast<uint16_t>(code);
  m.error_text = text;
  ++stats_.refused;
  Reply(m, replies);
}

void ProbeResponder::Expire(int64_t now_ns) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now_ns - it->second->last_ns > opt_.session_idle.ns()) {
      it = sessions_.erase(it);
      ++stats_.sessions_expired;
    } else {
      ++it;
    }
  }
}

void ProbeResponder::Handle(const std::string& peer, std::span<const uint8_t> d, int64_t now_ns,
                            std::vector<std::vector<uint8_t>>* replies, int64_t handled_ns) {
  ++stats_.datagrams;
  request_bytes_ = d.size();
  const uint64_t hold =
      handled_ns > now_ns ? static_cast<uint64_t>(handled_ns - now_ns) : uint64_t{0};
  absl::StatusOr<ProbeMessage> in = DecodeProbe(d);
  if (!in.ok()) {
    ++stats_.malformed;
    // A newer prober deserves to hear why it gets no answers (it opens with a HELLO);
    // anything else is ignored.
    if (d.size() >= kHeaderSize && d[0] == kProbeMagic && d[1] != kProbeVersion &&
        d[2] == static_cast<uint8_t>(ProbeType::kHello)) {
      ProbeHeader h;
      h.type = ProbeType::kError;
      h.session = (uint32_t{d[4]} << 24) | (uint32_t{d[5]} << 16) | (uint32_t{d[6]} << 8) | d[7];
      Refuse(h, ProbeError::kBadVersion,
             absl::StrCat("probe protocol version ", kProbeVersion, " only"), replies);
    }
    return;
  }
  const ProbeHeader& h = in->header;
  if (h.type == ProbeType::kHelloAck || h.type == ProbeType::kEchoReply ||
      h.type == ProbeType::kReport || h.type == ProbeType::kError) {
    ++stats_.malformed;  // responder-to-prober messages: not for us
    return;
  }
  const auto key = std::make_pair(peer, h.session);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) {
    if (h.type == ProbeType::kBye) return;
    Expire(now_ns);
    if (sessions_.size() >= opt_.max_sessions) {
      Refuse(h, ProbeError::kSessionsFull,
             absl::StrCat("responder busy: ", opt_.max_sessions, " probe sessions open"), replies);
      return;
    }
    it = sessions_.emplace(key, std::make_unique<Session>()).first;
    ++stats_.sessions_opened;
  }
  Session& s = *it->second;
  s.last_ns = now_ns;

  ProbeMessage out;
  out.header = h;
  out.header.flags = 0;
  switch (h.type) {
    case ProbeType::kHello:
      out.header.type = ProbeType::kHelloAck;
      out.version = kProbeVersion;
      out.max_trains = opt_.max_trains;
      out.max_trace_packets = opt_.max_trace_packets;
      Reply(out, replies);
      return;
    case ProbeType::kEcho:
      out.header.type = ProbeType::kEchoReply;
      out.send_ns = in->send_ns;
      out.size_received = static_cast<uint32_t>(d.size());
      out.hold_ns = hold;
      Reply(out, replies);
      return;
    case ProbeType::kData:
      OnData(s, *in, d.size(), now_ns, hold, out, replies);
      return;
    case ProbeType::kReportReq: {
      out.header.type = ProbeType::kReport;
      out.report.train = in->train;
      auto t = s.trains.find(in->train);
      if (t != s.trains.end()) FillReport(t->second, in->packets_sent, &out.report);
      Reply(out, replies);
      return;
    }
    case ProbeType::kBye:
      sessions_.erase(it);
      return;
    default:
      return;
  }
}

void ProbeResponder::OnData(Session& s, const ProbeMessage& in, size_t size, int64_t now_ns,
                            uint64_t hold_ns, ProbeMessage& out,
                            std::vector<std::vector<uint8_t>>* replies) {
  const ProbeHeader& h = in.header;
  auto t = s.trains.find(in.train);
  if (t == s.trains.end()) {
    if (s.trains.size() >= opt_.max_trains) {
      Refuse(h, ProbeError::kTrainsFull,
             absl::StrCat("more than ", opt_.max_trains, " trains in one session"), replies);
      return;
    }
    t = s.trains.try_emplace(in.train).first;
    t->second.trace = (in.data_flags & kDataTrace) != 0;
    t->second.drops_at_start = socket_drops_;
  }
  Train& tr = t->second;
  const uint64_t seq = h.seq;
  bool duplicate = false;
  if (seq < opt_.max_trace_packets) {
    const size_t word = seq / 64;
    if (tr.seen.size() <= word) tr.seen.resize(word + 1 + word / 2, 0);
    const uint64_t bit = uint64_t{1} << (seq % 64);
    duplicate = (tr.seen[word] & bit) != 0;
    tr.seen[word] |= bit;
  }
  if (duplicate) {
    ++tr.duplicates;
  } else {
    tr.receipt.Add(size + kIpUdpOverhead, Time::FromNanoseconds(now_ns));
    if (tr.trace) tr.reorder.OnArrival(seq, Time::FromNanoseconds(now_ns));
    tr.max_seq = std::max(tr.max_seq, seq);
  }
  if (h.flags & kFlagEcho) {
    out.header.type = ProbeType::kEchoReply;
    out.send_ns = in.send_ns;
    out.size_received = static_cast<uint32_t>(size);
    out.hold_ns = hold_ns;
    Reply(out, replies);
  }
}

void ProbeResponder::FillReport(const Train& tr, uint64_t packets_sent, TrainReport* r) const {
  r->packets = tr.receipt.packets;
  r->wire_bytes = tr.receipt.wire_bytes;
  r->first_wire_bytes = tr.receipt.first_wire_bytes;
  r->span_ns = static_cast<uint64_t>(
      std::max<int64_t>(0, (tr.receipt.last_arrival - tr.receipt.first_arrival).ns()));
  r->fit_rate_bps = static_cast<uint64_t>(tr.receipt.FittedRate().bps());
  r->duplicates = tr.duplicates;
  // SO_RXQ_OVFL counts are 32-bit and wrap.
  r->rx_drops = static_cast<uint32_t>(socket_drops_ - tr.drops_at_start);
  if (!tr.trace) return;
  const ReorderEstimate& re = tr.reorder.estimate();
  r->reordered = re.reordered;
  r->max_extent_packets = re.max_extent_packets;
  r->max_late_ns = static_cast<uint64_t>(std::max<int64_t>(0, re.max_late.ns()));
  // The loss trace over what the prober says it sent.
  const uint64_t n = std::min(packets_sent, opt_.max_trace_packets);
  LossCounter counter;
  for (uint64_t i = 0; i < n; ++i) {
    const size_t word = i / 64;
    const bool got = word < tr.seen.size() && (tr.seen[word] >> (i % 64)) & 1;
    counter.Add(!got);
  }
  const LossCounts& c = counter.counts();
  r->trace_packets = c.packets;
  r->lost = c.lost;
  r->bursts = c.bursts;
  r->n0x = c.n0x;
  r->n01 = c.n01;
  r->n1x = c.n1x;
  r->n11 = c.n11;
  r->n1x1 = c.n1x1;
  r->n111 = c.n111;
  r->triples = c.triples;
}

absl::StatusOr<std::unique_ptr<ProbeServer>> ProbeServer::Create(const std::string& listen,
                                                                 const ResponderOptions& options) {
  LH_ASSIGN_OR_RETURN(net::SocketAddress addr, net::ResolveHostPort(listen));
  LH_ASSIGN_OR_RETURN(UdpSocket sock, UdpSocket::Bind(addr));
  sock.SetBuffers(64 << 20);
  return std::unique_ptr<ProbeServer>(new ProbeServer(std::move(sock), options));
}

absl::Status ProbeServer::Run(Duration duration) {
  const int64_t start = RealtimeNs();
  std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(kMaxDatagram));
  std::vector<Received> got;
  std::vector<std::vector<uint8_t>> replies;
  int64_t last_expire = start;
  while (!stop_.load()) {
    const int64_t now = RealtimeNs();
    if (duration > Duration::Zero() && now - start >= duration.ns()) break;
    absl::StatusOr<size_t> n =
        socket_.Receive(&bufs, kMaxDatagram, &got, Duration::Milliseconds(100));
    if (!n.ok()) {
      if (absl::IsUnavailable(n.status())) continue;  // ICMP from a departed prober
      return n.status();
    }
    for (size_t i = 0; i < got.size(); ++i) {
      uint8_t id[net::SocketAddress::kMaxIdentityBytes];
      const std::string peer(reinterpret_cast<const char*>(id), got[i].from.Identity(id));
      replies.clear();
      if (got[i].socket_drops != 0) responder_.NoteSocketDrops(got[i].socket_drops);
      responder_.Handle(peer, std::span<const uint8_t>(bufs[i].data(), got[i].length),
                        got[i].at_ns, &replies, RealtimeNs());
      for (const auto& r : replies) socket_.SendTo(r, got[i].from).IgnoreError();
    }
    if (now - last_expire > Duration::Seconds(1).ns()) {
      responder_.Expire(now);
      last_expire = now;
    }
  }
  return absl::OkStatus();
}

}  // namespace longhaul::tuner::probe
