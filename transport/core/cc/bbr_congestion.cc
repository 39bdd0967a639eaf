// BbrController's congestion response, the long-haul part (bbr.h). Loss alone says
// nothing on a long lossy path, so random loss does not cut the rate. These are
// congestion, answered once per round by restarting the bandwidth model from the rate the
// path delivered lately (x params.congestion.loss_beta, 0.9) and draining (PROBE_BW DOWN;
// STARTUP ends):
//   - loss that comes with a queue: the RTT when the loss was found exceeds min RTT by
//     0.3 x min RTT (+ the ACK delay); BBR's own 1.25 probe queues at most 0.25 BDP;
//   - a round whose loss rate exceeds TransportConfig::cc_loss_threshold (counted from
//     8 lost packets), for buffers too shallow to show queueing delay;
//   - a standing queue: even the smallest RTT of a round sent without probing is 15%
//     above min RTT. The flows sharing the bottleneck pace above its rate in sum (each
//     max filter remembers a share it no longer has): they re-anchor on what they
//     delivered and drain at gain 0.5 until the queue is gone, so a flow that started
//     behind the queue also learns the path's RTT;
//   - ECN marks (bbr_ecn.cc); while competing, loss as an overflow episode
//     (bbr_compete.cc).
// A path whose RTT went up (a route change) looks like a standing queue that drains
// cannot empty. Unless competing or cc_yield, after two drains in a row that did not
// move the round's smallest RTT by 3 % and saw it flat within the round (a queue others
// keep grows or varies as they probe), that RTT is the path's: it becomes the min RTT and
// the cuts of those drains are undone (before: up to 10 s of drains, until the min-RTT
// window let go of the old path's RTT). A round that was app-limited does not drain (the
// flow sends what its application offers, below its model: cutting the model below the
// offered load only queues messages at the sender) but counts the same way.

#include <algorithm>

#include "glog/logging.h"
#include "transport/core/cc/bbr.h"
#include "transport/core/loss/rtt_estimator.h"

namespace longhaul {

void BbrController::OnLoss(const LossEvent& loss, const RttEstimator& rtt) {
  // A probe timeout says that nothing was acknowledged for a long time, not how fast the
  // bottleneck is: the model stays (the connection sends its probes regardless), and the
  // round it falls in says nothing either (its RTTs and delivery span the silence).
  if (loss.persistent) {
    round_had_timeout_ = true;
    return;
  }
  bytes_in_flight_ = loss.bytes_in_flight;
  round_lost_ += loss.bytes_lost;
  round_lost_packets_ += loss.packets_lost;
  if (min_rtt_.IsInfinite() || !rtt.has_sample()) return;
  if (mode_ == Mode::kStartup || mode_ == Mode::kDrain) return;
  // Drop-tail loss happens at a full queue; the ACK that revealed the loss was for a
  // packet sent just after the lost one, so its RTT shows that queue. Random loss on an
  // empty queue comes without queueing delay. (Not in startup: a new flow on a busy link
  // sees the queue and the overflow losses of the others; it leaves startup on its own
  // loss rate or when its bandwidth stops growing, not at a fraction of its share. Not in
  // drain: the queue is startup's own and is going away.)
  const Duration queue_delay = rtt.latest() - min_rtt_;
  const Duration threshold = min_rtt_.Scaled(params_.congestion.queue_delay_fraction) + ack_delay_;
  if (!competing_ && queue_delay > threshold &&
      loss.largest_lost_sent_time > last_congestion_time_) {
    if (params_.probe_bw.loss_ends_probe && !probe_start_.IsInfinite() &&
        loss.largest_lost_sent_time >= probe_start_ &&
        (probe_down_end_.IsInfinite() || loss.largest_lost_sent_time < probe_down_end_)) {
      // Sent during this flow's probe or the drain after it: the queue is (mostly) the
      // probe's own, and so is the overflow. The probe found the limit: it ends, and the
      // model, which did not include the probe, stays (random loss on that queue would
      // otherwise cut a flow alone on a lossy link after every probe).
      if (mode_ == Mode::kProbeBw && phase_ == Phase::kUp) {
        ScheduleProbe();
        EnterPhase(loss.now, Phase::kDown);
      }
      return;
    }
    Congestion(loss.now, Signal::kLossWithQueue, params_.congestion.loss_beta);
  }
}

void BbrController::RespondToRound(Time now, bool sent_at_gain_1) {
  const BbrParams::Congestion& p = params_.congestion;
  const double loss_threshold =
      competing_ ? loss_threshold_ * params_.compete.loss_multiple : loss_threshold_;
  if (round_lost_packets_ >= p.min_loss_packets && last_loss_rate_ > loss_threshold) {
    Congestion(now, Signal::kLossRate, p.loss_beta);
  } else if (competing_ && round_lost_packets_ > 0 &&
             loss_free_rounds_ >= params_.compete.episode_gap_rounds) {
    OverflowEpisode(now);
  } else if (!competing_ && !min_rtt_.IsInfinite() && !round_min_rtt_.IsInfinite() &&
             round_min_rtt_ > min_rtt_ + min_rtt_.Scaled(p.standing_queue_fraction) + ack_delay_ &&
             ((mode_ == Mode::kProbeBw && phase_ != Phase::kUp && sent_at_gain_1) ||
              (round_app_limited_ && mode_ != Mode::kProbeRtt))) {
    // Even the smallest RTT of a round sent without probing (or sending less than the
    // model, app-limited, in any mode: a flow of messages may never leave startup)
    // shows a queue: it stands.
    StandingQueue(now, round_app_limited_);
  } else if (round_ce_ > 0) {
    RespondToEcn(now, sent_at_gain_1);
  }
}

void BbrController::StandingQueue(Time now, bool app_limited) {
  const BbrParams::Congestion& p = params_.congestion;
  // Did the last drain lower the queue? A queue this flow (or longhaul flows draining
  // together) built goes down within the drain's two round trips. A new path RTT stays
  // where it is and is flat within the round (no queue moves it); a queue other traffic
  // keeps moves (it grows, or varies within the round as they probe).
  const Duration tolerance = round_min_rtt_.Scaled(p.path_change_tolerance);
  const bool unmoved = !last_standing_rtt_.IsInfinite() &&
                       round_min_rtt_ + tolerance >= last_standing_rtt_ &&
                       round_min_rtt_ <= last_standing_rtt_ + tolerance &&
                       round_max_rtt_ <= round_min_rtt_ + tolerance + ack_delay_;
  if (unmoved) {
    ++ineffective_drains_;
  } else {
    ineffective_drains_ = 0;
    bw_before_drains_ = max_bw_.Get();
  }
  last_standing_rtt_ = round_min_rtt_;
  if (!competing_ && !yield_ && p.path_change_drains > 0 &&
      ineffective_drains_ >= p.path_change_drains) {
    // Drains at half the rate did not move it: not a queue this flow can drain but the
    // path's RTT (a route change; or traffic that keeps a queue whatever longhaul does,
    // which the min-RTT window would take for the path's RTT after 10 s anyway). Take it
    // as the min RTT and undo the cuts of those drains.
    // A route change is a step: the first drains after it already fail to move the RTT.
    // More responses before those (a queue that grew through drains) say traffic keeps it:
    // the new RTT is taken (the drains stop cutting) but the count toward competing goes
    // on, and this is one more response.
    const bool suspect = queue_responses_ > params_.compete.after_queue_responses;
    VLOG(1) << "bbr " << this << " t=" << now.seconds() << " path RTT " << min_rtt_.milliseconds()
            << " -> " << round_min_rtt_.milliseconds() << " ms" << (suspect ? " (suspect)" : "");
    path_rtt_before_ = std::min(path_rtt_before_, min_rtt_);
    path_rtt_suspect_ = path_rtt_suspect_ || suspect;
    min_rtt_ = round_min_rtt_;
    min_rtt_stamp_ = now;
    ++path_rtt_changes_;
    ineffective_drains_ = 0;
    last_standing_rtt_ = Duration::Infinite();
    if (bw_before_drains_ > max_bw_.Get()) {
      max_bw_.Reset(bw_before_drains_, static_cast<int64_t>(round_count_));
    }
    if (mode_ == Mode::kProbeBw && phase_ == Phase::kDown) EnterPhase(now, Phase::kCruise);
    if (suspect) {
      const Entry entry = NoteQueueResponse(now);
      if (entry != Entry::kNone) return StartCompeting(now, entry);
    }
    UpdatePacingRate();
    return;
  }
  if (app_limited) return;
  Congestion(now, Signal::kStandingQueue, p.standing_queue_beta);
}

void BbrController::Congestion(Time now, Signal signal, double factor) {
  if (round_count_ == last_congestion_round_) return;  // once per round
  // The model before the cut, or before the first of cuts that follow each other within
  // the bandwidth filter's window: what a probe's refill would bring back (JudgeProbe).
  model_before_cut_ = WithinBwWindow(last_congestion_round_)
                          ? std::max(model_before_cut_, max_bw_.Get())
                          : max_bw_.Get();
  queue_empty_since_cut_ = false;
  last_congestion_round_ = round_count_;
  last_congestion_time_ = now;
  switch (signal) {
    case Signal::kEcn:
      ++ecn_reductions_;
      break;
    case Signal::kStandingQueue:
      ++queue_drains_;
      last_standing_queue_round_ = round_count_;
      if (const Entry entry = NoteQueueResponse(now); entry != Entry::kNone) {
        return StartCompeting(now, entry);  // no cut
      }
      break;
    case Signal::kLossWithQueue:
      ++congestion_events_;
      if (competing_) break;  // (an overflow episode)
      if (const Entry entry = NoteQueueResponse(now); entry != Entry::kNone) {
        return StartCompeting(now, entry);  // no cut
      }
      break;
    case Signal::kLossRate:
      ++congestion_events_;
      break;
  }
  // Restart the model from what the path delivered lately, times the reduction: the max
  // filter would otherwise hold a rate the path no longer has (a rate step down, a new
  // competitor) for bw_window_rounds and keep the queue full all that time.
  static constexpr const char* kSignalNames[] = {"loss_with_queue", "loss_rate", "standing_queue",
                                                 "ecn"};
  VLOG(1) << "bbr " << this << " t=" << now.seconds() << " " << ModeName()
          << " congestion: " << kSignalNames[static_cast<int>(signal)] << " x" << factor;
  const Bandwidth bw = max_bw_.Get();
  Bandwidth latest = RecentDeliveryRate(now);
  if (latest.IsZero() || latest > bw) latest = bw;
  if (!latest.IsZero()) max_bw_.Reset(latest.Scaled(factor), static_cast<int64_t>(round_count_));
  // Samples of packets sent before now measured the old sending rate; after a standing
  // queue, what each flow got while the queue built, which favours the largest. The cut
  // holds until the probes refill the link (equal probes: the shares converge). Not where
  // the flow delivered less than half its model (held back by its peer's credit, or
  // jitter on a short path read as a queue): held there, the model falls to what a flow
  // that hardly sent delivered, and never climbs back.
  if (signal != Signal::kStandingQueue || latest >= bw.Scaled(0.5)) {
    bw_valid_from_delivered_ = total_delivered_ + 1;
  }
  switch (mode_) {
    case Mode::kStartup:
      EnterDrain(now);
      break;
    case Mode::kProbeBw:
      if (signal == Signal::kStandingQueue) {
        // Drain the queue the flows built together, deep enough that it empties and every
        // flow (also one that started behind the queue) sees the path's RTT.
        EnterPhase(now, Phase::kDown);
        pacing_gain_ = params_.congestion.standing_queue_drain_gain;
        deep_drain_ = true;
      } else if (signal == Signal::kEcn) {
        // The cut itself lowers the queue (DCTCP); only a probe in progress ends.
        if (phase_ == Phase::kUp) {
          ScheduleProbe();
          EnterPhase(now, Phase::kDown);
        }
      } else {
        ScheduleProbe();
        EnterPhase(now, Phase::kDown);
      }
      break;
    case Mode::kDrain:
    case Mode::kProbeRtt:
      break;
  }
  UpdatePacingRate();
  cwnd_ = std::max(MinCwnd(), std::min(cwnd_, TargetCwnd(cwnd_gain_)));
}

}  // namespace longhaul
