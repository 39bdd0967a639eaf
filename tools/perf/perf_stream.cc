#include "tools/perf/perf_stream.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "tools/common/json_fields.h"
#include "tools/common/transport_flags.h"
#include "transport/base/clock.h"
#include "transport/base/status.h"
#include "transport/base/parse.h"
#include "transport/base/percentile.h"

namespace longhaul::perf {
namespace {

constexpr uint64_t kTagData = 1;
constexpr uint64_t kTagControl = 2;
// How long a reverse-mode server waits for the last ACKs before its final summary.
constexpr Duration kFinalWait = Duration::Seconds(1);
constexpr size_t kMaxCorruptionDetails = 10;
constexpr size_t kMaxMctSamples = size_t{4} << 20;  // 32 MiB of samples per stream

void CpuNow(double* user, double* system) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  *user = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6;
  *system = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6;
}

// The process's CPU time since `user0`/`system0` (the whole process: concurrent tests
// share it).
nlohmann::json CpuJson(double user0, double system0) {
  double u, s;
  CpuNow(&u, &s);
  nlohmann::json j;
  j["user_s"] = u - user0;
  j["system_s"] = s - system0;
  return j;
}

}  // namespace

std::shared_ptr<PatternRegions> ZeroCopyRegions(Endpoint& ep, const EndpointOptions& o,
                                                bool on) {
  if (!on || o.datapath != Datapath::kVerbs || o.verbs.qp_type != QpType::kUc) return nullptr;
  return std::make_shared<PatternRegions>(&ep);
}

std::unique_ptr<ReceiveBuffers> ReceiveBuffers::Create(Endpoint* ep, size_t size,
                                                       uint32_t count) {
  std::unique_ptr<ReceiveBuffers> b(new ReceiveBuffers());
  b->ep_ = ep;
  b->size_ = std::max<size_t>(size, 1);
  b->count_ = count;
  b->mem_.reset(new uint8_t[b->size_ * count]);
  absl::StatusOr<uint64_t> r = ep->RegisterMemory(b->mem_.get(), b->size_ * count);
  if (!r.ok()) {
    LOG(WARNING) << "longhaul-perf: receive buffers not registered (" << r.status().message()
                 << "); messages arrive in the transport's memory";
    return nullptr;
  }
  b->region_ = *r;
  return b;
}

ReceiveBuffers::~ReceiveBuffers() {
  if (region_ != 0) (void)ep_->DeregisterMemory(region_);
}

absl::Status ReceiveBuffers::PostAll(ConnectionHandle& h) {
  for (uint32_t i = 0; i < count_; ++i) {
    LH_RETURN_IF_ERROR(h.PostReceive(mem_.get() + i * size_, size_, kFirstTag + i));
  }
  return absl::OkStatus();
}

absl::Status ReceiveBuffers::Repost(ConnectionHandle& h, uint64_t tag) {
  if (!Owns(tag)) return absl::InvalidArgumentError("not a receive buffer's tag");
  return h.PostReceive(mem_.get() + (tag - kFirstTag) * size_, size_, tag);
}

uint64_t PatternRegions::For(const std::shared_ptr<const Pattern>& p) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [pattern, region] : regions_) {
    if (pattern == p) return region;
  }
  absl::StatusOr<uint64_t> r = ep_->RegisterMemory(p->bytes().data(), p->bytes().size());
  if (!r.ok() && !warned_) {
    warned_ = true;
    LOG(WARNING) << "longhaul-perf: the payload pattern is not registered ("
                 << r.status().message() << "); it is copied";
  }
  regions_.emplace_back(p, r.ok() ? *r : 0);
  return regions_.back().second;
}

MctSummary Summarize(std::vector<double> s) {
  MctSummary m;
  if (s.empty()) return m;
  std::sort(s.begin(), s.end());
  m.count = s.size();
  double total = 0;
  for (double v : s) total += v;
  m.mean_s = total / static_cast<double>(s.size());
  m.p50_s = InterpolatedPercentile(s, 0.5);
  m.p99_s = InterpolatedPercentile(s, 0.99);
  m.p999_s = InterpolatedPercentile(s, 0.999);
  m.max_s = s.back();
  return m;
}

nlohmann::json MctToJson(const MctSummary& m) {
  nlohmann::json j;
  j["messages"] = m.count;
  SetMctPercentiles(j, m);
  return j;
}

PerfStream::PerfStream(std::shared_ptr<ConnectionHandle> handle, Options options)
    : handle_(std::move(handle)), opt_(std::move(options)) {
  state_ = opt_.is_client ? (opt_.request.reverse ? State::kReceiving : State::kSending)
                          : State::kWaitRequest;
  start_ns_ = MonotonicNs();
  if (opt_.is_client) {
    pattern_ = PatternFor(opt_.request.message_size);
    if (opt_.regions) pattern_region_ = opt_.regions->For(pattern_);
    with_header_ = opt_.request.workload == "messages";
    has_request_ = true;
    if (opt_.request.reverse) PostReceiveBuffersLocked();
  }
}

void PerfStream::PostReceiveBuffersLocked() {
  if (!opt_.regions || receive_buffers_) return;
  // Every message lands in them, control messages too (up to 1 MiB): 4 to 32 within
  // 16 MiB (more for messages of more than 4 MiB). Registering pins them, which costs
  // CPU time in proportion (a short test pays it whole).
  const size_t size = std::max<size_t>(opt_.request.message_size, kMaxControlMessage);
  const uint32_t count =
      static_cast<uint32_t>(std::clamp<size_t>((size_t{16} << 20) / size, 4, 32));
  receive_buffers_ = ReceiveBuffers::Create(opt_.regions->endpoint(), size, count);
  if (receive_buffers_ && !receive_buffers_->PostAll(*handle_).ok()) receive_buffers_.reset();
}

PerfStream::~PerfStream() {
  stop_scheduler_ = true;
  if (scheduler_.joinable()) scheduler_.join();
}

void PerfStream::Attach() {
  std::weak_ptr<PerfStream> weak = weak_from_this();
  handle_->SetCallback([weak](Event& e) {
    if (std::shared_ptr<PerfStream> s = weak.lock()) s->OnEvent(e);
  });
}

void PerfStream::Begin() {
  std::lock_guard<std::mutex> l(mu_);
  if (!SendControlLocked(RequestToJson(opt_.request), kTagControl)) return;
  StartRole();
}

// Called with mu_ held once the request is known.
void PerfStream::StartRole() {
  const int64_t now = MonotonicNs();
  start_ns_ = now;
  CpuNow(&cpu_user0_, &cpu_system0_);
  next_report_ns_ = now + static_cast<int64_t>(opt_.request.interval_s * 1e9);
  if (state_ != State::kSending) return;
  end_ns_ = opt_.request.bytes > 0 ? 0 : now + static_cast<int64_t>(opt_.request.time_s * 1e9);
  first_send_ns_ = now;
  if (opt_.request.workload == "messages") {
    scheduler_ = std::thread([this] { SchedulerLoop(); });
  } else {
    PumpLocked();
  }
}

bool PerfStream::sender() const { return opt_.is_client != opt_.request.reverse; }

uint64_t PerfStream::OutstandingLimit() const {
  // Enough submitted to keep the window full through loss repair: four bandwidth-delay
  // products at the test's rate (RTT from the connection, at least 10 ms) plus 16 MiB,
  // or the connection's window if that is smaller; plus two messages, so that data is
  // queued behind a full window whenever acknowledgements open it (a message counts as
  // outstanding until its last byte is acknowledged, while the window opens packet by
  // packet). Submitted messages reference the shared pattern: no memory per byte.
  // With no rate (cc=bbr, no cap) the controller's pacing rate stands in for it (it grows
  // with the controller's estimate; not the window, which at 1 GiB would keep the test
  // draining long after --time on a slow link).
  const ConnectionDebugState d = handle_->debug_state();
  const double rtt_s = std::max(0.010, d.srtt.seconds());
  const double rate_bps =
      opt_.request.rate_bps > 0 ? opt_.request.rate_bps : d.pacing_rate.bps();
  const double bdp = rate_bps / 8 * rtt_s;
  const uint64_t want = static_cast<uint64_t>(4 * bdp) + (uint64_t{16} << 20);
  return std::min<uint64_t>(want, handle_->config().window) + 2 * opt_.request.message_size;
}

void PerfStream::PumpLocked() {
  if (state_ != State::kSending || opt_.request.workload != "bulk") return;
  const int64_t now = MonotonicNs();
  if (end_ns_ != 0 && now >= end_ns_) {
    StopSendingLocked();
    return;
  }
  const uint64_t limit = OutstandingLimit();
  const uint64_t ms = opt_.request.message_size;
  while (outstanding_ < limit) {
    uint64_t size = ms;
    if (opt_.request.bytes > 0) {
      if (submitted_ >= opt_.request.bytes) {
        StopSendingLocked();
        return;
      }
      size = std::min(ms, opt_.request.bytes - submitted_);
    }
    SendBuffer b;
    // --verify=off: the same bytes for every message (one message's worth of the pattern
    // stays in the cache; nothing per message but this pointer either way).
    b.data = pattern_->For(opt_.request.verify ? next_id_ : 0, opt_.request.stream);
    b.size = size;
    b.owner = pattern_;
    b.region = pattern_region_;
    absl::StatusOr<uint64_t> id = handle_->Send(std::move(b), kTagData);
    if (!id.ok()) return;  // closed; kClosed reports why
    ++next_id_;
    outstanding_ += size;
    submitted_ += size;
    ++data_messages_;
  }
}

void PerfStream::StopSendingLocked() {
  if (state_ != State::kSending) return;
  state_ = State::kEndSent;
  nlohmann::json j = SenderSummaryLocked();
  j["type"] = "end";
  SendControlLocked(j, kTagControl);
}

bool PerfStream::SendControlLocked(const nlohmann::json& j, uint64_t tag) {
  auto text = std::make_shared<std::string>(EncodeControl(j));
  SendBuffer b;
  b.data = reinterpret_cast<const uint8_t*>(text->data());
  b.size = text->size();
  b.owner = text;
  absl::StatusOr<uint64_t> id = handle_->Send(std::move(b), tag);
  if (!id.ok()) return false;
  ++next_id_;
  return true;
}

void PerfStream::SchedulerLoop() {
  const TestRequest& r = opt_.request;
  const double per_stream_bps = r.rate_bps * r.load / r.streams;
  const double gap_ns = static_cast<double>(r.message_size) * 8e9 / per_stream_bps;
  const int64_t t0 = MonotonicNs();
  const uint64_t cap = std::max<uint64_t>(uint64_t{256} << 20, 4 * r.message_size);
  uint64_t k = 0;
  while (!stop_scheduler_.load()) {
    const int64_t now = MonotonicNs();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (state_ != State::kSending) return;
      if ((end_ns_ != 0 && now >= end_ns_) || (r.bytes > 0 && submitted_ >= r.bytes)) {
        StopSendingLocked();
        return;
      }
    }
    const int64_t due = t0 + static_cast<int64_t>(static_cast<double>(k) * gap_ns);
    if (due > now) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(due - now, 50000000)));
      continue;
    }
    std::unique_lock<std::mutex> l(mu_);
    if (state_ != State::kSending) return;
    if (outstanding_ >= cap) {
      // The link cannot keep up with the offered load: wait (counted) instead of queueing
      // without bound.
      ++late_submissions_;
      l.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    uint64_t size = r.message_size;
    if (r.bytes > 0) size = std::min(size, r.bytes - submitted_);
    auto buf = std::make_shared<std::vector<uint8_t>>(size);
    if (r.verify) {
      pattern_->Fill(next_id_, r.stream, RealtimeNs(), buf->data(), size);
    } else if (size >= kMessageHeaderSize) {
      // --verify=off: only the header the completion times need, on zeros.
      Pattern::StampHeader(next_id_, RealtimeNs(), buf->data());
    }
    SendBuffer b;
    b.data = buf->data();
    b.size = size;
    b.owner = buf;
    if (!handle_->Send(std::move(b), kTagData).ok()) return;
    ++next_id_;
    outstanding_ += size;
    submitted_ += size;
    ++data_messages_;
    ++k;
  }
}

void PerfStream::MaybeSendFinalLocked(int64_t now_ns) {
  if (final_due_ns_ == 0 || result_sent_) return;
  if (outstanding_ > 0 && now_ns < final_due_ns_) return;
  nlohmann::json f = SenderSummaryLocked();
  f["type"] = "final";
  SendControlLocked(f, kTagControl);
  result_sent_ = true;
}

void PerfStream::Tick() {
  const int64_t now = MonotonicNs();
  std::lock_guard<std::mutex> l(mu_);
  if (state_ == State::kDone || state_ == State::kFailed) return;
  MaybeSendFinalLocked(now);
  if (!opt_.is_client) {
    if (state_ == State::kWaitRequest) {
      if (now - start_ns_ > opt_.request_timeout.ns()) {
        FailLocked(absl::StrCat("no test request within ", FormatDuration(opt_.request_timeout)),
                   true);
      }
      return;
    }
    if (now - start_ns_ > static_cast<int64_t>(opt_.max_duration_s * 1e9)) {
      FailLocked(absl::StrFormat("test exceeded the server's limit of %gs", opt_.max_duration_s),
                 true);
      return;
    }
    if (now >= next_report_ns_ && !result_sent_) {
      next_report_ns_ = now + static_cast<int64_t>(opt_.request.interval_s * 1e9);
      const ConnectionStats st = handle_->stats();
      nlohmann::json j;
      j["type"] = "report";
      j["t_s"] = (now - start_ns_) * 1e-9;
      j["bytes"] = sender() ? bytes_acked_.load() : bytes_delivered();
      j["packets_retransmitted"] = st.packets_retransmitted;
      j["fec_recovered_packets"] = st.fec_recovered_packets;
      j["srtt_ms"] = handle_->debug_state().srtt.milliseconds();
      SendControlLocked(j, kTagControl);
    }
  }
  if (state_ == State::kSending && end_ns_ != 0 && now >= end_ns_ &&
      opt_.request.workload == "bulk") {
    StopSendingLocked();
  }
}

void PerfStream::Shutdown() {
  stop_scheduler_ = true;
  if (scheduler_.joinable()) scheduler_.join();
  handle_->SetCallback(nullptr);
}

std::string PerfStream::error() const { return Locked(error_); }

nlohmann::json PerfStream::remote_report() const { return Locked(remote_report_); }
nlohmann::json PerfStream::remote_end() const { return Locked(remote_end_); }
nlohmann::json PerfStream::remote_result() const { return Locked(remote_result_); }
nlohmann::json PerfStream::remote_final() const { return Locked(remote_final_); }
std::vector<std::string> PerfStream::corruption_details() const { return Locked(corruption_); }

void PerfStream::FailLocked(const std::string& why, bool abort_connection) {
  if (error_.empty()) error_ = why;
  state_ = State::kFailed;
  stop_scheduler_ = true;
  if (abort_connection) handle_->Abort(why);
}

void PerfStream::Fail(const std::string& why, bool abort_connection) {
  std::lock_guard<std::mutex> l(mu_);
  FailLocked(why, abort_connection);
}

// ---- events (driver thread) ----

void PerfStream::OnEvent(Event& e) {
  switch (e.type) {
    case Event::Type::kReceiveComplete: {
      const bool posted = receive_buffers_ && receive_buffers_->Owns(e.tag);
      if (posted && absl::IsCancelled(e.status)) return;  // handed back at the close
      if (!e.status.ok()) {
        Fail(absl::StrCat("message ", e.message_id, " not received: ", e.status.message()), true);
      } else if (IsControl(e.data, e.size)) {
        absl::StatusOr<nlohmann::json> j = DecodeControl(e.data, e.size);
        if (!j.ok()) {
          Fail(absl::StrCat("bad control message from the peer: ", j.status().message()), true);
        } else {
          OnControl(*j);
        }
      } else {
        OnData(e);
      }
      handle_->ReturnBuffer(std::move(e.owned));
      if (posted && !closed_) (void)receive_buffers_->Repost(*handle_, e.tag);
      return;
    }
    case Event::Type::kSendComplete: {
      if (e.tag != kTagData) return;
      std::lock_guard<std::mutex> l(mu_);
      if (!e.status.ok()) return;
      bytes_acked_ += e.size;
      last_ack_ns_ = MonotonicNs();
      outstanding_ -= std::min<uint64_t>(outstanding_, e.size);
      PumpLocked();
      MaybeSendFinalLocked(last_ack_ns_);
      return;
    }
    case Event::Type::kOfferWithdrawn:  // never: longhaul-perf offers no buffers
      break;
    case Event::Type::kClosed: {
      std::lock_guard<std::mutex> l(mu_);
      closed_ = true;
      stop_scheduler_ = true;
      const bool finished =
          opt_.is_client ? complete_.load() : result_sent_ || remote_final_.is_object();
      if (!finished && error_.empty()) {
        if (!e.status.ok()) {
          error_ = std::string(e.status.message());
        } else if (opt_.is_client || state_ != State::kWaitRequest) {
          error_ = "the peer closed the connection before the test ended";
        }
      }
      if (state_ != State::kFailed) state_ = State::kDone;
      return;
    }
  }
}

void PerfStream::OnData(Event& e) {
  const int64_t now = MonotonicNs();
  {
    std::lock_guard<std::mutex> l(mu_);
    const bool receiving = state_ == State::kReceiving;
    if (!receiving || sender()) {
      FailLocked(absl::StrCat("unexpected data message ", e.message_id, " (",
                              state_ == State::kWaitRequest ? "before the test request"
                                                            : "this side sends the data",
                              ")"),
                 true);
      return;
    }
  }
  int64_t expected_zero = 0;
  first_data_ns_.compare_exchange_strong(expected_zero, now);
  last_data_ns_ = now;
  bytes_received_ += e.size;
  int64_t send_ns = 0;
  if (!opt_.request.verify) {
    // --verify=off: no check; the messages workload still reads its header's send time.
    if (with_header_ && e.size >= kMessageHeaderSize) {
      send_ns = Pattern::HeaderSendTimeNs(e.data);
      std::lock_guard<std::mutex> l(mu_);
      if (mct_s_.size() < kMaxMctSamples) {
        mct_s_.push_back(static_cast<double>(RealtimeNs() - send_ns) * 1e-9);
      }
    }
    return;
  }
  std::string bad;
  if (e.size > opt_.request.message_size) {
    bad = absl::StrCat("message ", e.message_id, ": ", e.size, " bytes, larger than the test's ",
                       opt_.request.message_size);
  } else {
    bad =
        pattern_->Verify(e.message_id, opt_.request.stream, e.data, e.size, with_header_, &send_ns);
  }
  if (!bad.empty()) {
    ++corrupt_messages_;
    std::lock_guard<std::mutex> l(mu_);
    if (corruption_.size() < kMaxCorruptionDetails) corruption_.push_back(bad);
    LOG_FIRST_N(ERROR, 10) << "payload corruption: " << bad;
    return;
  }
  bytes_verified_ += e.size;
  ++messages_verified_;
  if (with_header_) {
    std::lock_guard<std::mutex> l(mu_);
    if (mct_s_.size() < kMaxMctSamples) {
      mct_s_.push_back(static_cast<double>(RealtimeNs() - send_ns) * 1e-9);
    }
  }
}

void PerfStream::OnControl(const nlohmann::json& j) {
  const std::string type = j["type"].get<std::string>();
  if (type == "request") {
    OnRequest(j);
    return;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (state_ == State::kWaitRequest) {
    FailLocked(absl::StrCat("'", type, "' message before the test request"), true);
    return;
  }
  if (type == "report" && opt_.is_client) {
    remote_report_ = j;
  } else if (type == "end" && !sender()) {
    remote_end_ = j;
    nlohmann::json r = ReceiverResultLocked();
    r["type"] = "result";
    state_ = State::kEndSent;
    result_sent_ = SendControlLocked(r, kTagControl);
  } else if (type == "result" && sender()) {
    remote_result_ = j;
    if (opt_.is_client) {
      complete_ = true;
    } else {
      const int64_t now = MonotonicNs();
      final_due_ns_ = now + kFinalWait.ns();
      MaybeSendFinalLocked(now);
    }
  } else if (type == "final" && opt_.is_client && !sender()) {
    remote_final_ = j;
    complete_ = true;
  } else {
    FailLocked(absl::StrCat("unexpected '", type, "' message"), true);
  }
}

void PerfStream::OnRequest(const nlohmann::json& j) {
  std::lock_guard<std::mutex> l(mu_);
  if (opt_.is_client || state_ != State::kWaitRequest) {
    FailLocked("unexpected test request", true);
    return;
  }
  absl::StatusOr<TestRequest> r = RequestFromJson(j, opt_.max_duration_s);
  if (!r.ok()) {
    FailLocked(absl::StrCat("bad test request: ", r.status().message()), true);
    return;
  }
  opt_.request = *r;
  pattern_ = PatternFor(r->message_size);
  if (opt_.regions && r->reverse) pattern_region_ = opt_.regions->For(pattern_);
  with_header_ = r->workload == "messages";
  state_ = r->reverse ? State::kSending : State::kReceiving;
  has_request_ = true;
  if (!r->reverse) PostReceiveBuffersLocked();
  StartRole();
  if (opt_.on_request) opt_.on_request(this);
}

nlohmann::json PerfStream::LocalReceiverResult() const {
  std::lock_guard<std::mutex> l(mu_);
  return ReceiverResultLocked();
}

nlohmann::json PerfStream::LocalSenderSummary() const {
  std::lock_guard<std::mutex> l(mu_);
  return SenderSummaryLocked();
}

uint64_t PerfStream::outstanding() const {
  std::lock_guard<std::mutex> l(mu_);
  return outstanding_;
}

nlohmann::json PerfStream::ReceiverResultLocked() const {
  nlohmann::json r;
  r["verified"] = opt_.request.verify;
  r["bytes_verified"] = bytes_verified_.load();
  r["bytes_received"] = bytes_received_.load();
  r["messages_verified"] = messages_verified_.load();
  r["corrupt_messages"] = corrupt_messages_.load();
  r["corruption"] = corruption_;
  const int64_t first = first_data_ns_.load(), last = last_data_ns_.load();
  r["seconds"] = first > 0 && last > first ? (last - first) * 1e-9 : 0.0;
  r["start_offset_s"] = first > 0 ? (first - start_ns_.load()) * 1e-9 : 0.0;
  if (with_header_) r["mct"] = MctToJson(Summarize(mct_s_));
  r["stats"] = ConnectionStatsToJson(handle_->stats());
  r["debug"] = DebugToJson(handle_->debug_state());
  r["cpu"] = CpuJson(cpu_user0_, cpu_system0_);
  return r;
}

nlohmann::json PerfStream::SenderSummaryLocked() const {
  nlohmann::json s;
  s["data_bytes_submitted"] = submitted_;
  s["data_messages"] = data_messages_;
  s["bytes_acked"] = bytes_acked_.load();
  const int64_t first = first_send_ns_.load(), last = last_ack_ns_.load();
  s["seconds"] = first > 0 && last > first ? (last - first) * 1e-9 : 0.0;
  s["late_submissions"] = late_submissions_.load();
  s["stats"] = ConnectionStatsToJson(handle_->stats());
  s["debug"] = DebugToJson(handle_->debug_state());
  s["cpu"] = CpuJson(cpu_user0_, cpu_system0_);
  return s;
}

}  // namespace longhaul::perf
