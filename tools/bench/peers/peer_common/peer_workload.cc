#include "tools/bench/peers/peer_common/peer_workload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/base/percentile.h"
#include "transport/base/status.h"

namespace longhaul::bench {
namespace {

constexpr char kMagic[8] = {'L', 'H', 'P', 'E', 'E', 'R', '0', '1'};
constexpr uint64_t kFrameHeaderBytes = 16;
constexpr int64_t kBinNs = 100'000'000;  // receiver goodput bins: 100 ms
constexpr size_t kMaxMctSamples = size_t{20} << 20;
constexpr uint64_t kMaxMessageSize = uint64_t{64} << 20;  // as longhaul-perf
constexpr uint32_t kMaxResultBytes = 64 << 20;

// The first bytes on the stream. Both ends are this program on one host, so the struct is
// copied as is (host byte order); the magic catches anything else.
struct Hello {
  char magic[8];
  uint32_t workload;
  uint32_t reserved;
  uint64_t message_size;
  uint64_t bytes;
  int64_t time_ns;
  int64_t omit_ns;
  double rate_bps;
  double load;
  int64_t connect_start_realtime_ns;
  int64_t connect_done_realtime_ns;
};
static_assert(std::is_trivially_copyable_v<Hello>);
static_assert(sizeof(Hello) == 80);

struct FrameHeader {
  uint64_t total;      // frame bytes including this header; 0 ends the data
  int64_t submit_ns;   // CLOCK_REALTIME when the sender submitted the message
};
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes);

// A buffer of zeros that every frame's payload is sent from (no copy per message).
const uint8_t* ZeroPayload(uint64_t size) {
  static std::vector<uint8_t>* zeros = new std::vector<uint8_t>();
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  if (zeros->size() < size) zeros->assign(size, 0);
  return zeros->data();
}

absl::Status SendFrame(ByteStream& s, uint64_t total, int64_t submit_ns) {
  FrameHeader h{total, submit_ns};
  LH_RETURN_IF_ERROR(
      s.SendAll(reinterpret_cast<const uint8_t*>(&h), sizeof(h), total > kFrameHeaderBytes));
  if (total <= kFrameHeaderBytes) return absl::OkStatus();
  return s.SendAll(ZeroPayload(total - kFrameHeaderBytes), total - kFrameHeaderBytes, false);
}

// Reads exactly n bytes (retrying the per-call timeouts) until the stream's deadline.
absl::Status RecvExact(ByteStream& s, uint8_t* p, size_t n, const char* what) {
  size_t got = 0;
  while (got < n) {
    absl::StatusOr<size_t> r = s.RecvSome(p + got, n - got);
    if (!r.ok()) {
      if (absl::IsDeadlineExceeded(r.status()) &&
          (s.deadline_ns() == 0 || MonotonicNs() < s.deadline_ns())) {
        continue;
      }
      return absl::Status(r.status().code(),
                          absl::StrCat("receiving the ", what, ": ", r.status().message()));
    }
    if (*r == 0) {
      return absl::UnavailableError(
          absl::StrCat("the peer closed the stream in the middle of the ", what, " (", got,
                       " of ", n, " bytes)"));
    }
    got += *r;
  }
  return absl::OkStatus();
}

nlohmann::json BinsToIntervals(const std::vector<uint64_t>& bins) {
  // One-second intervals from the receiver's 100 ms bins (iperf3's intervals shape).
  nlohmann::json out = nlohmann::json::array();
  const size_t per = 10;
  for (size_t i = 0; i < bins.size(); i += per) {
    uint64_t b = 0;
    size_t n = std::min(per, bins.size() - i);
    for (size_t k = 0; k < n; ++k) b += bins[i + k];
    const double start = static_cast<double>(i) * 0.1, secs = static_cast<double>(n) * 0.1;
    nlohmann::json sum = {{"start", start},
                          {"end", start + secs},
                          {"seconds", secs},
                          {"bytes", b},
                          {"bits_per_second", static_cast<double>(b) * 8 / secs}};
    out.push_back({{"sum", sum}});
  }
  return out;
}

}  // namespace

absl::StatusOr<Workload> ParseWorkload(const std::string& name) {
  if (name == "bulk") return Workload::kBulk;
  if (name == "messages") return Workload::kMessages;
  if (name == "transfer") return Workload::kTransfer;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", name, "' (bulk, messages or transfer)"));
}

std::string WorkloadName(Workload w) {
  switch (w) {
    case Workload::kBulk:
      return "bulk";
    case Workload::kMessages:
      return "messages";
    case Workload::kTransfer:
      return "transfer";
  }
  return "?";
}

absl::StatusOr<WorkloadOptions> WorkloadOptionsFromFlags(const WorkloadFlags& f) {
  WorkloadOptions o;
  absl::StatusOr<Workload> w = ParseWorkload(f.workload);
  if (!w.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--workload: ", w.status().message()));
  }
  o.workload = *w;
  auto bad = [](const char* flag, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", s.message()));
  };
  absl::StatusOr<ByteCount> ms = ParseByteCount(f.message_size);
  if (!ms.ok()) return bad("message_size", ms.status());
  if (*ms < 64 || *ms > kMaxMessageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--message_size=", f.message_size, " is outside [64 B, 64 MiB]"));
  }
  o.message_size = *ms;
  if (!f.bytes.empty()) {
    absl::StatusOr<ByteCount> b = ParseByteCount(f.bytes);
    if (!b.ok()) return bad("bytes", b.status());
    o.bytes = *b;
  }
  if (f.messages > 0) {
    if (!f.bytes.empty()) return absl::InvalidArgumentError("give --bytes or --messages, not both");
    o.bytes = f.messages * o.message_size;
  }
  if (f.time.empty()) {
    // Default: 10 s, except that messages counted with --messages/--bytes are not cut.
    o.time_ns = (o.workload == Workload::kMessages && o.bytes > 0) ? int64_t{3600} * 1'000'000'000
                                                                    : 10'000'000'000;
  } else {
    absl::StatusOr<Duration> t = ParseDuration(f.time);
    if (!t.ok()) return bad("time", t.status());
    if (t->ns() <= 0) return absl::InvalidArgumentError("--time must be positive");
    o.time_ns = t->ns();
  }
  absl::StatusOr<Duration> om = ParseDuration(f.omit);
  if (!om.ok()) return bad("omit", om.status());
  o.omit_ns = std::max<int64_t>(0, om->ns());
  absl::StatusOr<Bandwidth> r = ParseBandwidth(f.rate);
  if (!r.ok()) return bad("rate", r.status());
  if (r->bps() <= 0) return absl::InvalidArgumentError("--rate must be positive");
  o.rate_bps = r->bps();
  if (!(f.load > 0 && f.load <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--load=", f.load, " is outside (0, 1]"));
  }
  o.load = f.load;
  absl::StatusOr<Duration> to = ParseDuration(f.timeout);
  if (!to.ok()) return bad("timeout", to.status());
  o.timeout_ns = std::max<int64_t>(0, to->ns());
  if (o.workload == Workload::kTransfer && o.bytes == 0) {
    return absl::InvalidArgumentError("--workload=transfer needs --bytes (or --messages)");
  }
  return o;
}

nlohmann::json SummarizeCompletionTimes(std::vector<double> s) {
  nlohmann::json j;
  std::sort(s.begin(), s.end());
  double total = 0;
  for (double v : s) total += v;
  j["messages"] = s.size();
  j["mct_mean_s"] = s.empty() ? 0.0 : total / static_cast<double>(s.size());
  j["mct_p50_s"] = InterpolatedPercentile(s, 0.5);
  j["mct_p99_s"] = InterpolatedPercentile(s, 0.99);
  j["mct_p999_s"] = InterpolatedPercentile(s, 0.999);
  j["mct_max_s"] = s.empty() ? 0.0 : s.back();
  // The distribution for plots: the completion time at q = 0, 0.01, ..., 1 and 0.999.
  nlohmann::json cdf = nlohmann::json::array();
  if (!s.empty()) {
    for (int i = 0; i <= 100; ++i) {
      const double q = i / 100.0;
      cdf.push_back({q, InterpolatedPercentile(s, q)});
      if (i == 99) cdf.push_back({0.999, InterpolatedPercentile(s, 0.999)});
    }
  }
  j["mct_cdf"] = cdf;
  return j;
}

// ---------------------------------------------------------------------------------------
// Sender.

namespace {

struct Queued {
  uint64_t total;
  int64_t submit_ns;
};

// Open-loop messages: a scheduler thread submits on the schedule into a queue (as
// longhaul-perf's scheduler submits into the connection), this thread writes the queue
// to the stream. Returns the messages submitted and late submissions.
absl::Status SendMessages(ByteStream& s, const WorkloadOptions& o, uint64_t* submitted_bytes,
                          uint64_t* messages, uint64_t* late) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Queued> queue;
  uint64_t queued_bytes = 0;
  bool scheduler_done = false;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> late_submissions{0};
  const double gap_ns = static_cast<double>(o.message_size) * 8e9 / (o.rate_bps * o.load);
  const uint64_t cap = std::max<uint64_t>(uint64_t{256} << 20, 4 * o.message_size);
  const int64_t t0 = MonotonicNs();
  // Submission stops after --messages (bytes) or --time, whichever comes first.
  const int64_t end_ns = t0 + o.time_ns;

  std::thread scheduler([&] {
    uint64_t k = 0, sub = 0;
    while (!stop.load()) {
      const int64_t now = MonotonicNs();
      if (now >= end_ns || (o.bytes > 0 && sub >= o.bytes)) break;
      if (s.deadline_ns() != 0 && now >= s.deadline_ns()) break;
      const int64_t due = t0 + static_cast<int64_t>(static_cast<double>(k) * gap_ns);
      if (due > now) {
        std::this_thread::sleep_for(
            std::chrono::nanoseconds(std::min<int64_t>(due - now, 50'000'000)));
        continue;
      }
      std::unique_lock<std::mutex> l(mu);
      // Outstanding = submitted and not yet acknowledged: still queued here, or in the
      // transport's send buffer.
      if (queued_bytes + static_cast<uint64_t>(std::max<int64_t>(0, s.UnackedBytes())) >= cap) {
        // The stream cannot keep up with the offered load: wait (counted), as
        // longhaul-perf does, instead of queueing without bound.
        ++late_submissions;
        l.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      uint64_t size = o.message_size;
      if (o.bytes > 0) size = std::min(size, o.bytes - sub);
      size = std::max(size, kFrameHeaderBytes);
      queue.push_back({size, RealtimeNs()});
      queued_bytes += size;
      sub += size;
      ++k;
      l.unlock();
      cv.notify_one();
    }
    std::lock_guard<std::mutex> l(mu);
    scheduler_done = true;
    cv.notify_one();
  });

  absl::Status status;
  while (true) {
    Queued q;
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait_for(l, std::chrono::milliseconds(100),
                  [&] { return !queue.empty() || scheduler_done; });
      if (queue.empty()) {
        if (scheduler_done) break;
        continue;
      }
      q = queue.front();
      queue.pop_front();
    }
    status = SendFrame(s, q.total, q.submit_ns);
    {
      std::lock_guard<std::mutex> l(mu);
      queued_bytes -= q.total;
    }
    if (!status.ok()) break;
    *submitted_bytes += q.total;
    ++*messages;
  }
  stop = true;
  scheduler.join();
  *late = late_submissions.load();
  return status;
}

}  // namespace

absl::StatusOr<nlohmann::json> RunClient(ByteStream& s, const WorkloadOptions& o) {
  if (o.message_size < 64 || o.message_size > kMaxMessageSize) {
    return absl::InvalidArgumentError(absl::StrCat("message_size=", o.message_size,
                                                   " is outside [64, ", kMaxMessageSize, "]"));
  }
  if (o.workload == Workload::kTransfer && o.bytes == 0) {
    return absl::InvalidArgumentError("the transfer workload needs --bytes");
  }
  if (o.workload == Workload::kMessages && (o.load <= 0 || o.load > 1 || o.rate_bps <= 0)) {
    return absl::InvalidArgumentError("messages need --rate > 0 and --load in (0, 1]");
  }
  const int64_t start_mono = MonotonicNs();
  const int64_t send_ns = o.workload == Workload::kBulk ? o.omit_ns + o.time_ns : o.time_ns;
  int64_t timeout = o.timeout_ns;
  if (timeout == 0) {
    timeout = o.bytes > 0 ? int64_t{3600} * 1'000'000'000 : send_ns + 60'000'000'000;
  }
  s.set_deadline_ns(start_mono + timeout);

  Hello h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.workload = static_cast<uint32_t>(o.workload);
  h.message_size = o.message_size;
  h.bytes = o.bytes;
  h.time_ns = o.time_ns;
  h.omit_ns = o.omit_ns;
  h.rate_bps = o.rate_bps;
  h.load = o.load;
  h.connect_start_realtime_ns = o.connect_start_realtime_ns;
  h.connect_done_realtime_ns = o.connect_done_realtime_ns;
  if (absl::Status st = s.SendAll(reinterpret_cast<const uint8_t*>(&h), sizeof(h), false);
      !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("sending the test request: ", st.message()));
  }

  const int64_t first_send_mono = MonotonicNs();
  uint64_t sent = 0, messages = 0, late = 0;
  absl::Status st;
  if (o.workload == Workload::kMessages) {
    st = SendMessages(s, o, &sent, &messages, &late);
  } else {
    const int64_t end = first_send_mono + send_ns;
    while (true) {
      uint64_t size = o.message_size;
      if (o.workload == Workload::kTransfer) {
        if (sent >= o.bytes) break;
        size = std::max(kFrameHeaderBytes, std::min(size, o.bytes - sent));
      } else if (MonotonicNs() >= end) {
        break;
      }
      st = SendFrame(s, size, RealtimeNs());
      if (!st.ok()) break;
      sent += size;
      ++messages;
    }
  }
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("sending data: ", st.message()));
  if (absl::Status e = SendFrame(s, 0, RealtimeNs()); !e.ok()) {
    return absl::Status(e.code(), absl::StrCat("sending the end of data: ", e.message()));
  }
  const int64_t last_send_mono = MonotonicNs();

  // The receiver's result.
  uint32_t len = 0;
  LH_RETURN_IF_ERROR(RecvExact(s, reinterpret_cast<uint8_t*>(&len), sizeof(len), "result"));
  if (len == 0 || len > kMaxResultBytes) {
    return absl::DataLossError(absl::StrCat("the receiver's result has a bad length ", len));
  }
  std::string text(len, '\0');
  LH_RETURN_IF_ERROR(RecvExact(s, reinterpret_cast<uint8_t*>(text.data()), len, "result"));
  nlohmann::json r = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object()) return absl::DataLossError("the receiver's result is not JSON");
  if (r.contains("error")) {
    return absl::InternalError(absl::StrCat("receiver: ", r["error"].get<std::string>()));
  }
  const int64_t result_mono = MonotonicNs();

  nlohmann::json out;
  nlohmann::json start;
  start["workload"] = WorkloadName(o.workload);
  start["message_size"] = o.message_size;
  start["bytes"] = o.bytes;
  start["time_s"] = static_cast<double>(o.time_ns) * 1e-9;
  start["omit_s"] = static_cast<double>(o.omit_ns) * 1e-9;
  start["rate_bps"] = o.rate_bps;
  if (o.workload == Workload::kMessages) start["load"] = o.load;
  start["connect_s"] =
      static_cast<double>(o.connect_done_realtime_ns - o.connect_start_realtime_ns) * 1e-9;
  out["start"] = start;
  out["intervals"] = r.value("intervals", nlohmann::json::array());

  nlohmann::json end;
  const double sent_s = static_cast<double>(last_send_mono - first_send_mono) * 1e-9;
  const int64_t retx = s.Retransmissions();
  end["sum_sent"] = {{"bytes", sent},
                     {"seconds", sent_s},
                     {"bits_per_second", sent_s > 0 ? sent * 8.0 / sent_s : 0.0},
                     {"retransmits", retx}};
  end["sum_received"] = r["sum_received"];
  end["completion_s"] = r["completion_s"];
  end["first_byte_s"] = r["first_byte_s"];
  end["frames"] = messages;
  if (o.workload == Workload::kMessages) {
    for (auto& [k, v] : r["mct"].items()) end[k] = v;
    const int64_t payload = std::max<int64_t>(1, s.PayloadPerPacket());
    const int64_t packets = (static_cast<int64_t>(o.message_size) + payload - 1) / payload;
    end["mct_ideal_s"] = s.MinRttSeconds() / 2 +
                         static_cast<double>(o.message_size + packets * s.HeaderBytesPerPacket()) *
                             8 / o.rate_bps;
    end["late_submissions"] = late;
    // An open-loop load the stream could not carry: completion times grow without bound
    // and are not comparable.
    end["unstable"] = late > 0;
  }
  end["sender_stats"] = s.Stats();
  end["receiver_stats"] = r["stats"];
  end["result_wait_s"] = static_cast<double>(result_mono - last_send_mono) * 1e-9;
  out["end"] = end;
  return out;
}

// ---------------------------------------------------------------------------------------
// Receiver.

absl::StatusOr<nlohmann::json> RunServer(ByteStream& s, double deadline_s) {
  const int64_t t_start = MonotonicNs();
  s.set_deadline_ns(t_start + static_cast<int64_t>(deadline_s * 1e9));
  auto answer = [&](const nlohmann::json& j) -> absl::Status {
    const std::string text = j.dump();
    const uint32_t len = static_cast<uint32_t>(text.size());
    LH_RETURN_IF_ERROR(s.SendAll(reinterpret_cast<const uint8_t*>(&len), sizeof(len), true));
    return s.SendAll(reinterpret_cast<const uint8_t*>(text.data()), text.size(), false);
  };

  Hello h{};
  LH_RETURN_IF_ERROR(RecvExact(s, reinterpret_cast<uint8_t*>(&h), sizeof(h), "test request"));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("the client's first bytes are not a test request of this peer");
  }
  if (h.workload > static_cast<uint32_t>(Workload::kTransfer) || h.message_size < 64 ||
      h.message_size > kMaxMessageSize) {
    absl::Status bad = absl::InvalidArgumentError(absl::StrFormat(
        "bad test request: workload %u, message_size %u", h.workload, h.message_size));
    (void)answer({{"error", std::string(bad.message())}});
    return bad;
  }
  const Workload workload = static_cast<Workload>(h.workload);

  std::vector<uint8_t> buf(size_t{4} << 20);
  std::vector<uint64_t> bins;
  std::vector<double> mct;
  uint64_t bytes = 0, frames = 0;
  int64_t first_mono = 0, last_mono = 0, first_real = 0, last_real = 0;
  // Frame parser state.
  uint8_t hdr[kFrameHeaderBytes];
  size_t hdr_have = 0;
  uint64_t payload_left = 0;
  FrameHeader cur{};
  bool ended = false;
  while (!ended) {
    absl::StatusOr<size_t> r = s.RecvSome(buf.data(), buf.size());
    if (!r.ok()) {
      if (absl::IsDeadlineExceeded(r.status()) && MonotonicNs() < s.deadline_ns()) continue;
      return absl::Status(r.status().code(),
                          absl::StrCat("receiving data after ", bytes, " bytes: ",
                                       r.status().message()));
    }
    if (*r == 0) {
      return absl::UnavailableError(
          absl::StrCat("the client closed the stream before the end of data (", bytes,
                       " bytes received)"));
    }
    const int64_t now_mono = MonotonicNs(), now_real = RealtimeNs();
    if (first_mono == 0) {
      first_mono = now_mono;
      first_real = now_real;
    }
    size_t n = *r, off = 0;
    uint64_t data_in_read = 0;
    while (off < n && !ended) {
      if (payload_left > 0) {
        const uint64_t take = std::min<uint64_t>(payload_left, n - off);
        payload_left -= take;
        off += take;
        data_in_read += take;
      } else {
        const size_t take = std::min(kFrameHeaderBytes - hdr_have, n - off);
        std::memcpy(hdr + hdr_have, buf.data() + off, take);
        hdr_have += take;
        off += take;
        if (hdr_have < kFrameHeaderBytes) break;
        hdr_have = 0;
        std::memcpy(&cur, hdr, sizeof(cur));
        if (cur.total == 0) {
          ended = true;
          break;
        }
        if (cur.total < kFrameHeaderBytes || cur.total > kMaxMessageSize) {
          absl::Status bad = absl::DataLossError(absl::StrCat(
              "frame ", frames, " has a bad length ", cur.total, " (stream out of step)"));
          (void)answer({{"error", std::string(bad.message())}});
          return bad;
        }
        data_in_read += kFrameHeaderBytes;
        payload_left = cur.total - kFrameHeaderBytes;
      }
      if (payload_left == 0 && hdr_have == 0 && !ended) {
        // The frame's last byte arrived in this read.
        ++frames;
        if (workload == Workload::kMessages && mct.size() < kMaxMctSamples) {
          mct.push_back(static_cast<double>(now_real - cur.submit_ns) * 1e-9);
        }
      }
    }
    if (data_in_read > 0) {
      bytes += data_in_read;
      last_mono = now_mono;
      last_real = now_real;
      const size_t bin = static_cast<size_t>((now_mono - first_mono) / kBinNs);
      if (bins.size() <= bin) bins.resize(bin + 1, 0);
      bins[bin] += data_in_read;
    }
  }

  nlohmann::json res;
  res["bytes"] = bytes;
  res["frames"] = frames;
  const double span_s = static_cast<double>(last_mono - first_mono) * 1e-9;
  double goodput = span_s > 0 ? bytes * 8.0 / span_s : 0.0;
  double seconds = span_s;
  uint64_t measured = bytes;
  if (workload == Workload::kBulk && h.omit_ns > 0) {
    // Like iperf3 -O: the first omit seconds (from the first byte) are left out.
    const size_t b0 = static_cast<size_t>(h.omit_ns / kBinNs);
    const size_t b1 = std::min(bins.size(), static_cast<size_t>((h.omit_ns + h.time_ns) / kBinNs));
    measured = 0;
    for (size_t i = b0; i < b1; ++i) measured += bins[i];
    seconds = b1 > b0 ? static_cast<double>(b1 - b0) * kBinNs * 1e-9 : 0.0;
    goodput = seconds > 0 ? measured * 8.0 / seconds : 0.0;
  }
  res["sum_received"] = {{"bytes", measured},
                         {"seconds", seconds},
                         {"bits_per_second", goodput},
                         {"total_bytes", bytes},
                         {"total_seconds", span_s}};
  if (h.connect_start_realtime_ns > 0) {
    res["completion_s"] = static_cast<double>(last_real - h.connect_start_realtime_ns) * 1e-9;
    res["first_byte_s"] = static_cast<double>(first_real - h.connect_start_realtime_ns) * 1e-9;
  }
  if (workload == Workload::kMessages) res["mct"] = SummarizeCompletionTimes(std::move(mct));
  res["bin_s"] = kBinNs * 1e-9;
  res["bins"] = bins;
  res["intervals"] = BinsToIntervals(bins);
  res["stats"] = s.Stats();
  if (absl::Status st = answer(res); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("sending the result: ", st.message()));
  }
  // Let the client read the result and close first (bounded).
  const int64_t linger_end = std::min(s.deadline_ns(), MonotonicNs() + 5'000'000'000);
  while (MonotonicNs() < linger_end) {
    absl::StatusOr<size_t> r = s.RecvSome(buf.data(), buf.size());
    if (!r.ok() && !absl::IsDeadlineExceeded(r.status())) break;
    if (r.ok() && *r == 0) break;
  }
  return res;
}

}  // namespace longhaul::bench
