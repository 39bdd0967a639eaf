#include "tuner/probe/prober.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/base/rng.h"
#include "transport/base/status.h"
#include "transport/net/resolver.h"
#include "tuner/estimate/pmtu_search.h"
#include "tuner/probe/probe_phases.h"
#include "tuner/probe/probe_protocol.h"
#include "tuner/probe/udp_socket.h"

namespace longhaul::tuner {
namespace {

using probe::kIpUdpOverhead;
using probe::ProbeMessage;
using probe::ProbeType;

constexpr uint64_t kEchoSeqBase = uint64_t{1} << 62;  // ECHO ids; DATA seqs stay below

std::string Rate(double bps) {
  return bps >= 1e9 ? absl::StrFormat("%.4g Gbit/s", bps / 1e9)
                    : absl::StrFormat("%.4g Mbit/s", bps / 1e6);
}

void SleepUntilNs(int64_t t_ns) {
  timespec ts;
  ts.tv_sec = t_ns / 1000000000;
  ts.tv_nsec = t_ns % 1000000000;
  clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr);
}

class Prober {
 public:
  Prober(const ProbeOptions& opt, probe::UdpSocket sock, uint32_t session)
      : opt_(opt), sock_(std::move(sock)), session_(session) {
    bufs_.assign(64, std::vector<uint8_t>(probe::kMaxDatagram));
  }

  absl::StatusOr<ProbeReport> Run() {
    start_ns_ = RealtimeNs();
    deadline_ns_ = start_ns_ + opt_.max_duration.ns();
    report_.responder = opt_.target;
    LH_RETURN_IF_ERROR(Hello());
    LH_RETURN_IF_ERROR(RttPhase());
    LH_RETURN_IF_ERROR(RatePhase());
    if (opt_.pmtu && !pmtu_done_) {
      const double pace = std::max(0.5 * rate_.bps(), 1e6);
      LH_RETURN_IF_ERROR(PmtuPhase(pace, PhaseEnd(0.7)));
    }
    LH_RETURN_IF_ERROR(LossPhase());
    SendMessage(Header(ProbeType::kBye, 0), 0).IgnoreError();
    Finish();
    return report_;
  }

 private:
  // ---- plumbing ----
  ProbeMessage Header(ProbeType t, uint64_t seq) const {
    ProbeMessage m;
    m.header.type = t;
    m.header.session = session_;
    m.header.seq = seq;
    return m;
  }

  void Progress(const std::string& line) {
    if (opt_.progress) opt_.progress(absl::StrCat("probe: ", line));
  }

  double Elapsed() const { return (RealtimeNs() - start_ns_) * 1e-9; }
  bool OverBudget(size_t next_bytes = 0) const {
    return report_.wire_bytes_sent + next_bytes > opt_.max_bytes;
  }

  absl::Status SendMessage(const ProbeMessage& m, size_t pad) {
    LH_RETURN_IF_ERROR(probe::EncodeProbe(m, pad, &scratch_));
    absl::Status s = sock_.Send(scratch_);
    if (s.ok()) Count(scratch_.size());
    return s;
  }

  void Count(size_t payload) {
    report_.wire_bytes_sent += payload + kIpUdpOverhead;
    ++report_.packets_sent;
  }

  // Reads what has arrived (waiting up to `timeout` for the first) and dispatches it.
  absl::Status Poll(Duration timeout) {
    LH_RETURN_IF_ERROR(sock_.Receive(&bufs_, probe::kMaxDatagram, &got_, timeout).status());
    for (size_t i = 0; i < got_.size(); ++i) {
      absl::StatusOr<ProbeMessage> m =
          probe::DecodeProbe(std::span<const uint8_t>(bufs_[i].data(), got_[i].length));
      if (!m.ok() || m->header.session != session_) continue;
      const int64_t at = got_[i].at_ns;
      switch (m->header.type) {
        case ProbeType::kHelloAck:
          hello_ack_ = *m;
          break;
        case ProbeType::kEchoReply: {
          // Take out the time the request waited in the responder.
          const Duration rtt = Duration::Nanoseconds(at - static_cast<int64_t>(m->send_ns) -
                                                     static_cast<int64_t>(m->hold_ns));
          if (rtt <= Duration::Zero()) break;
          if (m->header.seq >= kEchoSeqBase) {
            echo_replies_[m->header.seq] = {rtt, m->size_received};
            if (rtt_phase_ != nullptr) rtt_phase_->OnReply(m->header.seq, rtt);
          } else {
            loaded_rtts_.push_back(rtt);
          }
          break;
        }
        case ProbeType::kReport:
          reports_[m->report.train] = m->report;
          break;
        case ProbeType::kError:
          error_ = absl::StrCat("responder refused: ", m->error_text, " (code ", m->error_code, ")");
          break;
        default:
          break;
      }
    }
    return absl::OkStatus();
  }

  // Polls until `done()` or `until_ns`.
  template <typename Done>
  absl::Status PollUntil(int64_t until_ns, Done done) {
    while (!done()) {
      const int64_t now = RealtimeNs();
      if (now >= until_ns) break;
      LH_RETURN_IF_ERROR(Poll(Duration::Nanoseconds(until_ns - now)));
      if (!error_.empty()) return absl::UnavailableError(error_);
    }
    return absl::OkStatus();
  }

  int64_t PhaseEnd(double fraction_of_budget) const {
    return std::min(deadline_ns_,
                    start_ns_ + static_cast<int64_t>(fraction_of_budget * opt_.max_duration.ns()));
  }

  Duration RttP99() const {
    return rtt_p99_ > Duration::Zero() ? rtt_p99_ : Duration::Milliseconds(200);
  }

  // ---- phases ----
  absl::Status Hello() {
    for (int attempt = 0; attempt < 3; ++attempt) {
      ProbeMessage m = Header(ProbeType::kHello, 1);
      m.version = probe::kProbeVersion;
      if (absl::Status s = SendMessage(m, 0); !s.ok()) {
        return absl::UnavailableError(absl::StrCat("no probe responder at ", opt_.target, ": ",
                                                   s.message()));
      }
      const int64_t until = std::min(deadline_ns_, RealtimeNs() + 1000000000);
      absl::Status s = PollUntil(until, [&] { return hello_ack_.has_value(); });
      if (!s.ok()) {
        return absl::UnavailableError(absl::StrCat("no probe responder at ", opt_.target, ": ",
                                                   s.message()));
      }
      if (hello_ack_) break;
    }
    if (!hello_ack_) {
      return absl::UnavailableError(absl::StrCat(
          "no answer from a probe responder at ", opt_.target,
          " after 3 tries (is `longhaul-probe --server` or a longhaul-perf server running there?)"));
    }
    max_trace_packets_ = hello_ack_->max_trace_packets;
    Progress(absl::StrFormat("responder at %s answered (protocol %d)", opt_.target,
                             hello_ack_->version));
    return absl::OkStatus();
  }

  // Sends the echoes on RttPhase's schedule, waits for stragglers, keeps the summary.
  absl::Status RttPhase() {
    probe::RttPhase phase(opt_.rtt_probes, opt_.rtt_spacing, RealtimeNs());
    rtt_phase_ = &phase;
    absl::Status s = RunRttPhase(phase);
    rtt_phase_ = nullptr;
    if (!s.ok()) return s;
    LH_ASSIGN_OR_RETURN(report_.rtt_idle, phase.Verdict(opt_.target));
    rtt_min_ = report_.rtt_idle.min;
    rtt_p99_ = report_.rtt_idle.p99;
    Progress(absl::StrCat("rtt ", report_.rtt_idle.ToString()));
    return absl::OkStatus();
  }

  absl::Status RunRttPhase(probe::RttPhase& phase) {
    while (std::optional<int64_t> next = phase.NextSendNs(PhaseEnd(0.15))) {
      SleepUntilNs(*next);
      ProbeMessage m = Header(ProbeType::kEcho, next_echo_++);
      m.send_ns = static_cast<uint64_t>(RealtimeNs());
      phase.OnSent(m.header.seq);
      LH_RETURN_IF_ERROR(SendMessage(m, 0));
      LH_RETURN_IF_ERROR(Poll(Duration::Zero()));
    }
    const int64_t until = phase.StragglerDeadlineNs(RealtimeNs(), PhaseEnd(0.25));
    return PollUntil(until, [&] { return phase.AllAnswered(); });
  }

  // Sends `n` DATA packets of `payload` bytes paced at `rate` as train `train`. Returns
  // the send span's wire rate; fills first/last send times.
  absl::StatusOr<Bandwidth> SendTrain(uint32_t train, uint64_t n, uint32_t payload, Bandwidth rate,
                                      bool trace, uint64_t echo_every, int64_t stop_ns,
                                      int64_t* first_ns, int64_t* last_ns, uint64_t* sent_out) {
    const double wire = payload + kIpUdpOverhead;
    const double gap_ns = wire * 8e9 / std::max(rate.bps(), 1.0);
    // Send what is due up to this far ahead in one batch: fewer wake-ups at high packet
    // rates, while a burst stays within 32 KiB (or one packet) so a small bottleneck
    // queue is not overrun by it.
    const int64_t kLookaheadNs = std::clamp<int64_t>(
        static_cast<int64_t>(std::max(32768.0, wire) * 8e9 / std::max(rate.bps(), 1.0)), 50000,
        1000000);
    // Behind by more than this (the host was busy elsewhere: a sleeping thread can wait
    // milliseconds for a CPU), the schedule moves instead of catching up; up to it, the
    // sender catches up in one burst of at most 64 KiB (or 1 ms at the rate).
    const int64_t kMaxLagNs = std::max<int64_t>(
        1000000, static_cast<int64_t>(65536.0 * 8e9 / std::max(rate.bps(), 1.0)));
    std::vector<std::vector<uint8_t>> pkts;
    std::vector<std::span<const uint8_t>> views;
    int64_t t0 = RealtimeNs() + 100000;
    uint64_t i = 0, sent = 0;
    *first_ns = 0;
    while (i < n) {
      const int64_t now = RealtimeNs();
      if (now >= stop_ns) break;
      int64_t due = t0 + static_cast<int64_t>(static_cast<double>(i) * gap_ns);
      // Behind schedule by more than a millisecond (the host was busy): move the schedule
      // instead of catching up in one burst that a small bottleneck queue would drop.
      if (now - due > kMaxLagNs) {
        t0 += now - due;
        due = now;
      }
      if (due > now + kLookaheadNs) {
        // Read replies while waiting; sleep the rest.
        if (due - now > 200000) {
          LH_RETURN_IF_ERROR(Poll(Duration::Zero()));
        }
        const int64_t wake = due - kLookaheadNs / 2;
        SleepUntilNs(wake);
        // How late this host wakes a sleeping sender (the search sizes the pacing burst
        // from it).
        if (timer_late_ns_.size() < 200000) {
          timer_late_ns_.push_back(std::max<int64_t>(0, RealtimeNs() - wake));
        }
        continue;
      }
      pkts.clear();
      views.clear();
      while (i < n && pkts.size() < 64 &&
             t0 + static_cast<int64_t>(static_cast<double>(i) * gap_ns) <= now + kLookaheadNs) {
        if (OverBudget(payload)) break;
        ProbeMessage m = Header(ProbeType::kData, i);
        m.train = train;
        m.data_flags = trace ? probe::kDataTrace : 0;
        m.send_ns = static_cast<uint64_t>(now);
        if (echo_every > 0 && i % echo_every == 0) m.header.flags = probe::kFlagEcho;
        pkts.emplace_back();
        LH_RETURN_IF_ERROR(probe::EncodeProbe(m, payload, &pkts.back()));
        ++i;
      }
      if (pkts.empty()) break;  // byte budget
      for (const auto& p : pkts) views.emplace_back(p);
      size_t done = 0;
      int stuck = 0;
      while (done < views.size()) {
        LH_ASSIGN_OR_RETURN(size_t k, sock_.SendBatch(std::span<const std::span<const uint8_t>>(
                                          views.data() + done, views.size() - done)));
        if (k == 0) {
          if (++stuck > 100) break;  // the socket stays full for a second: give up on these
          sock_.WaitWritable(Duration::Milliseconds(10));
          continue;
        }
        for (size_t j = 0; j < k; ++j) Count(views[done + j].size());
        done += k;
        sent += k;
      }
      const int64_t after = RealtimeNs();
      if (*first_ns == 0) *first_ns = after;
      *last_ns = after;
    }
    *sent_out = sent;
    if (sent < 2 || *last_ns <= *first_ns) return Bandwidth::Zero();
    return Bandwidth::FromBytesAndDuration(
        static_cast<ByteCount>((sent - 1) * wire), Duration::Nanoseconds(*last_ns - *first_ns));
  }

  // Asks for train `train`'s report (retrying); nullopt if none came.
  absl::StatusOr<std::optional<probe::TrainReport>> RequestReport(uint32_t train, uint64_t sent,
                                                                   Duration wait) {
    reports_.erase(train);
    for (int attempt = 0; attempt < 4; ++attempt) {
      ProbeMessage m = Header(ProbeType::kReportReq, next_echo_++);
      m.train = train;
      m.packets_sent = sent;
      LH_RETURN_IF_ERROR(SendMessage(m, probe::kReportReqPaddedSize));
      const int64_t until = std::min(deadline_ns_, RealtimeNs() + wait.ns());
      if (until <= RealtimeNs()) break;
      if (absl::Status s = PollUntil(until, [&] { return reports_.count(train) > 0; }); !s.ok()) {
        return s;
      }
      if (reports_.count(train)) return std::optional<probe::TrainReport>(reports_[train]);
    }
    return std::optional<probe::TrainReport>();
  }

  // Sends RatePhase's trains and feeds it their reports; keeps its outcome.
  absl::Status RatePhase() {
    report_.local_mtu = static_cast<uint32_t>(std::max(sock_.PathMtu(), 0));
    probe::RatePhaseOptions ro;
    ro.target = opt_.target;
    ro.start_rate = opt_.start_rate;
    ro.max_rate = opt_.max_rate;
    ro.train_duration = opt_.train_duration;
    ro.max_mtu = opt_.max_mtu;
    ro.local_mtu = report_.local_mtu;
    probe::RatePhase phase(ro);
    const int64_t phase_end = PhaseEnd(0.55);
    while (!phase.done()) {
      const probe::TrainPlan plan = phase.NextTrain(RttP99());
      if (std::optional<std::string> stop = phase.StopBefore(
              plan, RealtimeNs(), phase_end, OverBudget(static_cast<size_t>(plan.wire_bytes())))) {
        report_.notes.push_back(*stop);
        break;
      }
      LH_RETURN_IF_ERROR(RunTrain(phase, plan, phase_end));
    }
    LH_ASSIGN_OR_RETURN(probe::RateOutcome outcome,
                        phase.Finish(opt_.max_duration, opt_.max_bytes));
    report_.rate_stop_reason = outcome.stop_reason;
    report_.rate_saturated = outcome.saturated;
    report_.max_delivery_bps = outcome.max_delivery_bps;
    rate_ = outcome.rate;
    rate_rel_error_ = outcome.rel_error;
    report_.short_trains = outcome.short_trains;
    report_.host_limited = outcome.host_limited;
    for (std::string& note : outcome.notes) report_.notes.push_back(std::move(note));
    Progress(absl::StrFormat("rate %s (%s; %d trains)", Rate(rate_.bps()), report_.rate_stop_reason,
                             report_.trains.size()));
    return absl::OkStatus();
  }

  // Sends one train, asks for its report and does what the phase decides with it.
  absl::Status RunTrain(probe::RatePhase& phase, const probe::TrainPlan& plan, int64_t phase_end) {
    const uint32_t train = next_train_++;
    int64_t first = 0, last = 0;
    uint64_t sent = 0;
    LH_ASSIGN_OR_RETURN(Bandwidth send_rate, SendTrain(train, plan.packets, plan.payload, plan.rate,
                                                       false, 0, phase_end, &first, &last, &sent));
    LH_ASSIGN_OR_RETURN(std::optional<probe::TrainReport> rep,
                        RequestReport(train, sent, plan.wait));
    probe::RatePhase::Verdict v{probe::RatePhase::Action::kRepeat, ""};
    if (!rep.has_value()) {
      v = phase.OnNoReport(train);
      if (v.action == probe::RatePhase::Action::kRepeat) report_.notes.push_back(v.text);
    } else if (rep->packets == 0) {
      v = phase.OnEmptyTrain(train, plan.payload, opt_.pmtu && !pmtu_done_);
      if (v.action == probe::RatePhase::Action::kSearchPmtu) {
        Progress(v.text);
        if (absl::Status s = PmtuPhase(opt_.start_rate.bps() * 0.5, PhaseEnd(0.35)); !s.ok()) {
          return s;
        }
        v = phase.OnPathMtu(train, plan.payload, report_.pmtu);
      }
      if (v.action == probe::RatePhase::Action::kNextSize) Progress(v.text);
    } else {
      const TrainResult t =
          phase.OnReport(plan, send_rate, sent, Duration::Nanoseconds(last - first), *rep);
      report_.trains.push_back(t);
      report_.train_payload_bytes = plan.payload;
      Progress(absl::StrFormat("train %d: %d x %d B at %s: sent %s, delivered %s (%d/%d arrived)",
                               train, sent, plan.payload, Rate(plan.rate.bps()),
                               Rate(t.send_rate.bps()), Rate(t.delivery_rate.bps()), rep->packets,
                               sent));
      return absl::OkStatus();
    }
    if (v.action == probe::RatePhase::Action::kFail) return absl::UnavailableError(v.text);
    return absl::OkStatus();
  }

  // Searches the path MTU with DF-set echoes paced at `pace_bps`, until `phase_end`.
  absl::Status PmtuPhase(double pace_bps, int64_t phase_end) {
    pmtu_done_ = true;
    PmtuSearchOptions po;
    const uint32_t local = report_.local_mtu ? report_.local_mtu : 1500;
    po.max_size = std::min<uint32_t>(opt_.max_mtu ? opt_.max_mtu : local,
                                     probe::kMaxDatagram + kIpUdpOverhead);
    po.min_size = std::min<uint32_t>(576, po.max_size);
    PmtuSearch search(po);
    pace_bps = std::max(pace_bps, 1e6);
    while (!search.done()) {
      std::vector<uint32_t> sizes = search.NextRound();
      if (sizes.empty()) break;
      std::map<uint64_t, uint32_t> sent;  // echo id -> size
      std::set<uint32_t> refused;
      int64_t t = RealtimeNs();
      for (int copy = 0; copy < 3; ++copy) {
        for (uint32_t size : sizes) {
          if (refused.count(size)) continue;
          if (OverBudget(size)) break;
          SleepUntilNs(t);
          ProbeMessage m = Header(ProbeType::kEcho, next_echo_++);
          m.send_ns = static_cast<uint64_t>(RealtimeNs());
          if (absl::Status s = SendMessage(m, size - kIpUdpOverhead); !s.ok()) {
            if (absl::IsFailedPrecondition(s)) {
              refused.insert(size);  // EMSGSIZE: bigger than the local interface
              continue;
            }
            return s;
          }
          sent[m.header.seq] = size;
          t += static_cast<int64_t>(size * 8e9 / pace_bps);
          LH_RETURN_IF_ERROR(Poll(Duration::Zero()));
        }
      }
      const int64_t until = std::min(phase_end, RealtimeNs() + RttP99().ns() * 2 +
                                                    Duration::Milliseconds(20).ns());
      auto all = [&] {
        for (const auto& [id, size] : sent) {
          if (!echo_replies_.count(id)) return false;
        }
        return true;
      };
      LH_RETURN_IF_ERROR(PollUntil(until, all));
      std::vector<std::pair<uint32_t, bool>> results;
      std::set<uint32_t> ok;
      for (const auto& [id, size] : sent) {
        if (echo_replies_.count(id)) ok.insert(size);
      }
      for (uint32_t size : sizes) results.push_back({size, ok.count(size) > 0});
      search.OnRound(results);
      if (RealtimeNs() >= phase_end) {
        report_.notes.push_back("path-MTU search stopped at its time share");
        break;
      }
    }
    report_.pmtu = search.pmtu();
    report_.pmtu_rounds = search.rounds();
    if (report_.pmtu == 0) {
      report_.notes.push_back("no path-MTU probe was confirmed; assuming 1500");
    }
    Progress(absl::StrFormat("path MTU %d (%d rounds, local interface %d)", report_.pmtu,
                             report_.pmtu_rounds, report_.local_mtu));
    return absl::OkStatus();
  }

  // Sends the loss phase's train (PlanLossPhase) and reads its report.
  absl::Status LossPhase() {
    probe::LossPlanInput in;
    in.now_ns = RealtimeNs();
    in.deadline_ns = deadline_ns_;
    in.rtt_p99 = RttP99();
    in.rtt_idle = report_.rtt_idle;
    in.max_bytes = opt_.max_bytes;
    in.bytes_sent = report_.wire_bytes_sent;
    in.loss_load = opt_.loss_load;
    in.rate = rate_;
    in.pmtu = report_.pmtu;
    in.packets_per_s = opt_.loss_packets_per_s;
    in.max_trace_packets = max_trace_packets_;
    const probe::LossPlan plan = probe::PlanLossPhase(in);
    if (!plan.skip.empty()) {
      report_.notes.push_back(plan.skip);
      return absl::OkStatus();
    }
    Progress(absl::StrFormat("loss phase: %d x %d B at %s for %.1f s", plan.packets, plan.payload,
                             Rate(plan.rate_bps), plan.seconds()));
    const uint32_t train = next_train_++;
    int64_t first = 0, last = 0;
    uint64_t sent = 0;
    LH_ASSIGN_OR_RETURN(
        Bandwidth sr,
        SendTrain(train, plan.packets, plan.payload, Bandwidth::BitsPerSecond(plan.rate_bps), true,
                  plan.echo_every, plan.stop_ns, &first, &last, &sent));
    // Let reordered stragglers land before asking (they would read as losses).
    SleepUntilNs(RealtimeNs() + Duration::Milliseconds(20).ns() +
                 (report_.rtt_idle.p99 - report_.rtt_idle.min).ns());
    LH_ASSIGN_OR_RETURN(std::optional<probe::TrainReport> rep,
                        RequestReport(train, sent, RttP99() * 2 + Duration::Milliseconds(150)));
    if (!rep.has_value()) {
      report_.notes.push_back("the loss-phase report did not arrive: loss unknown");
      return absl::OkStatus();
    }
    probe::LossReading reading = probe::ReadLossReport(*rep);
    report_.loss = reading.loss;
    report_.reorder = reading.reorder;
    report_.duplicates = reading.duplicates;
    report_.responder_drops = reading.responder_drops;
    for (std::string& note : reading.notes) report_.notes.push_back(std::move(note));
    report_.loss_phase_rate_bps = sr.bps();
    report_.loss_phase_s = (last - first) * 1e-9;
    report_.loss_phase_payload_bytes = plan.payload;
    have_loss_ = true;
    Progress(report_.loss.ToString());
    Progress(report_.reorder.ToString());
    return absl::OkStatus();
  }

  void Finish() {
    LinkEstimate& e = report_.estimate;
    e.source = absl::StrCat("probe of ", opt_.target);
    e.rate = rate_;
    e.rate_rel_error = rate_rel_error_;
    std::vector<Duration> all;
    for (const auto& [id, r] : echo_replies_) all.push_back(r.rtt);
    if (!loaded_rtts_.empty()) report_.rtt_loaded = *SummarizeRtt(loaded_rtts_);
    Duration lo = rtt_min_;
    for (Duration d : loaded_rtts_) lo = std::min(lo, d);
    e.rtt = lo;
    // The RTT spread a transfer sees: from the loaded samples when there are enough.
    const RttSummary& spread = report_.rtt_loaded.count >= 30 ? report_.rtt_loaded : report_.rtt_idle;
    e.rtt_p50 = std::max(spread.p50, e.rtt);
    e.rtt_p99 = std::max(spread.p99, e.rtt_p50);
    if (have_loss_) {
      e.loss = report_.loss.loss_rate;
      e.mean_burst = std::max(1.0, report_.loss.mean_burst);
      e.loss_rel_error = report_.loss.loss_rate_rel_error;
      e.reorder = report_.reorder.reordered_fraction();
      e.reorder_late = report_.reorder.max_late;
    }
    e.mtu = report_.pmtu ? report_.pmtu : 1500;
    if (!timer_late_ns_.empty()) {
      std::vector<Duration> late;
      late.reserve(timer_late_ns_.size());
      for (int64_t ns : timer_late_ns_) late.push_back(Duration::Nanoseconds(ns));
      absl::StatusOr<Duration> p99 = RttPercentile(late, 0.99);
      if (p99.ok()) {
        report_.timer_late_p99 = *p99;
        e.host_timer_late = *p99;
      }
    }
    e.overhead = kIpUdpOverhead;
    report_.elapsed_s = Elapsed();
    Progress(absl::StrFormat("done in %.2f s, %s sent: %s", report_.elapsed_s,
                             FormatByteCount(report_.wire_bytes_sent), e.ToString()));
  }

  struct EchoReply {
    Duration rtt;
    uint32_t size = 0;
  };

  ProbeOptions opt_;
  probe::UdpSocket sock_;
  uint32_t session_;
  ProbeReport report_;
  int64_t start_ns_ = 0;
  int64_t deadline_ns_ = 0;
  std::vector<std::vector<uint8_t>> bufs_;
  std::vector<probe::Received> got_;
  std::vector<uint8_t> scratch_;
  std::optional<ProbeMessage> hello_ack_;
  std::string error_;
  std::map<uint64_t, EchoReply> echo_replies_;
  probe::RttPhase* rtt_phase_ = nullptr;  // while the RTT phase runs
  std::vector<Duration> loaded_rtts_;
  std::map<uint32_t, probe::TrainReport> reports_;
  uint64_t next_echo_ = kEchoSeqBase;
  uint32_t next_train_ = 1;
  uint64_t max_trace_packets_ = 0;
  Duration rtt_min_;
  Duration rtt_p99_;
  Bandwidth rate_;
  double rate_rel_error_ = 0;
  bool have_loss_ = false;
  bool pmtu_done_ = false;
  std::vector<int64_t> timer_late_ns_;
};

}  // namespace

absl::StatusOr<ProbeReport> RunProbe(const ProbeOptions& options) {
  if (options.max_duration <= Duration::Zero()) {
    return absl::InvalidArgumentError("probe duration must be > 0");
  }
  if (options.max_bytes < (ByteCount{1} << 20)) {
    return absl::InvalidArgumentError("probe byte budget must be at least 1MiB");
  }
  if (!(options.start_rate.bps() > 0) || options.max_rate < options.start_rate) {
    return absl::InvalidArgumentError("probe rates: need 0 < start_rate <= max_rate");
  }
  if (!(options.loss_load > 0 && options.loss_load <= 1)) {
    return absl::InvalidArgumentError("loss_load must be in (0, 1]");
  }
  LH_ASSIGN_OR_RETURN(net::SocketAddress addr, net::ResolveHostPort(options.target));
  if (addr.port() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad port in '", options.target, "': a probe target needs 1..65535"));
  }
  if (addr.family() != AF_INET) {
    return absl::InvalidArgumentError(absl::StrCat("'", options.target, "' is ", addr.ToString(),
                                                   ": the probe measures IPv4 paths only"));
  }
  LH_ASSIGN_OR_RETURN(probe::UdpSocket sock, probe::UdpSocket::Connect(addr));
  sock.SetBuffers(64 << 20);
  Rng rng(static_cast<uint64_t>(RealtimeNs()) ^ (uint64_t{sock.LocalPort()} << 32));
  uint32_t session = static_cast<uint32_t>(rng.Next());
  if (session == 0) session = 1;
  // Pacing sleeps of tens of microseconds need a small timer slack (this thread's,
  // restored afterwards).
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Prober p(options, std::move(sock), session);
  absl::StatusOr<ProbeReport> r = p.Run();
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
  return r;
}

}  // namespace longhaul::tuner
