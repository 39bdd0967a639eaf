// BbrController sharing with traffic that keeps a queue (bbr.h). TCP CUBIC or BBR fill a
// buffer whatever longhaul does (TransportConfig::cc_compete, on by default): after more
// than two queue-based cuts (standing queue, loss with queue) spread over at least 40
// rounds, with the queue never seen empty three rounds in a row, the flow competes.
// (Longhaul flows among themselves empty the queue within that: a newcomer's startup and
// drain keep it ~20 rounds.) The response that starts it does not cut. Competing,
// queueing delay stops being a signal and the min RTT is not replaced by samples that show
// the competitor's queue; the probe is BBR's 1.25 on BBR's cycle (six rounds at gain 1
// between probes, not 2-4: probing more often than a TCP BBR beside it took from that flow
// round after round), lasting a min RTT, or the whole round for 10 s where the responses
// before had squeezed the model below half of what it was (catching up); loss is
// congestion above 8 x cc_loss_threshold, or as an overflow episode (the first loss after
// 16 loss-free rounds): the model is halved and grows back no faster than CUBIC's window
// would (W(t) = 0.4 (t - K)^3 + W_max packets per RTT), as long as the queue empties
// within 4 rounds of the cut; where it does not, the competitor ignores loss (TCP BBR) and
// the cut is undone. Eight rounds with an empty queue end it; a competitor seen within the
// last 10 s is recognised after one response: one that made it compete, or a flat queue
// taken for the path's RTT that gave way to the old RTT (TCP BBR keeps its queue flat and
// empties it in its PROBE_RTT). A flat queue taken for the path's RTT after drains that
// moved it (not a step, as a route change is) does not restart the count towards
// competing.
// cc_yield (or cc_compete off) never competes: longhaul yields (a scavenger).
// Parameters: BbrParams::Compete.

#include <algorithm>
#include <cmath>

#include "glog/logging.h"
#include "transport/core/cc/bbr.h"

namespace longhaul {

void BbrController::NoteRoundQueue(Time now) {
  const BbrParams::Compete& p = params_.compete;
  // The queue was seen empty this round: whatever keeps it is gone (or was ours). After a
  // suspect path change, only at the old path RTT.
  const Duration empty_rtt = path_rtt_suspect_ ? path_rtt_before_ : min_rtt_;
  if (!empty_rtt.IsInfinite() && !round_min_rtt_.IsInfinite() &&
      round_min_rtt_ <= empty_rtt.Scaled(1.05) + ack_delay_) {
    queue_empty_since_cut_ = true;
    ineffective_drains_ = 0;
    last_standing_rtt_ = Duration::Infinite();
    ++empty_rounds_;
    if (empty_rounds_ >= p.queue_reset_empty_rounds) queue_responses_ = 0;
    if (competing_ && empty_rounds_ >= p.exit_empty_rounds) {
      VLOG(1) << "bbr " << this << " t=" << now.seconds() << " competing ends";
      competing_ = false;
      competitor_ignores_loss_ = false;
      flat_queue_gave_way_ = false;
      competitor_seen_ = now;
    }
    episode_check_rounds_ = 0;  // the competitor answered the episode: the cut stands
  } else {
    empty_rounds_ = 0;
    if (episode_check_rounds_ > 0 && --episode_check_rounds_ == 0) {
      // The queue stayed through the rounds after an overflow episode: the competitor
      // did not answer the loss (TCP BBR), and the cut only handed it the link.
      VLOG(1) << "bbr " << this << " t=" << now.seconds() << " episode not answered: undone";
      competitor_ignores_loss_ = flat_queue_gave_way_;
      episode_bound_ = Bandwidth();
      if (episode_bw_ > max_bw_.Get()) {
        max_bw_.Reset(episode_bw_, static_cast<int64_t>(round_count_));
      }
    }
  }
  // The bound stops mattering once it is well above the model.
  if (!episode_bound_.IsZero() && episode_bound_ > max_bw_.Get().Scaled(2)) {
    episode_bound_ = Bandwidth();
  }
}

BbrController::Entry BbrController::NoteQueueResponse(Time now) {
  const BbrParams::Compete& p = params_.compete;
  // Cuts for a queue that never empties: traffic that does not yield to delay keeps it
  // (TCP fills a buffer whatever we do), and cutting again would hand it the link.
  // Compete, with loss as an overflow episode or above a higher rate as the congestion
  // signals, until the queue is seen empty. A competitor seen within the last min-RTT
  // window (its queue emptied for a moment, as CUBIC's does after a cut) is likely back:
  // one such response says so.
  const bool recent =
      !competitor_seen_.IsInfinite() && now - competitor_seen_ < params_.model.min_rtt_window;
  if (queue_responses_++ == 0) {
    first_response_round_ = round_count_;
    streak_first_bw_ = max_bw_.Get();
  }
  const bool persistent = queue_responses_ > p.after_queue_responses &&
                          round_count_ - first_response_round_ >= p.after_rounds;
  if (!compete_ || p.after_queue_responses == 0) return Entry::kNone;
  if (persistent) return Entry::kPersistent;
  return recent ? Entry::kRecent : Entry::kNone;
}

void BbrController::StartCompeting(Time now, Entry why) {
  // The response that found the queue persistent does not cut (it would only hand the
  // link to the traffic that keeps the queue), and the drain it would begin ends. Where
  // the responses through after_rounds cut the model below squeezed_share of what it was
  // at the first of them, the competitor took the link meanwhile (TCP BBR's startup):
  // catch up (BbrParams::Compete::catch_up).
  VLOG(1) << "bbr " << this << " t=" << now.seconds() << " competing starts ("
          << (why == Entry::kPersistent ? "persistent queue" : "competitor back") << "), model "
          << max_bw_.Get().bps() / 1e6 << " Mbit/s, " << streak_first_bw_.bps() / 1e6
          << " at the first response";
  competing_ = true;
  ++competing_entries_;
  queue_responses_ = 0;
  const bool squeezed = why == Entry::kPersistent &&
                        max_bw_.Get() < streak_first_bw_.Scaled(params_.compete.squeezed_share);
  catch_up_until_ = squeezed ? now + params_.compete.catch_up : Time();
  if (mode_ == Mode::kProbeBw) {
    if (phase_ == Phase::kDown) EnterPhase(now, Phase::kCruise);
    cwnd_gain_ = params_.compete.cwnd_gain;
  }
  UpdatePacingRate();
}

void BbrController::OverflowEpisode(Time now) {
  const BbrParams::Compete& p = params_.compete;
  // CUBIC's window at the loss: what was in flight at the model's rate over the
  // RTT with the queue, not the min RTT (its rate is W / RTT).
  const double packets_before =
      bandwidth().bps() * srtt_.seconds() / (8.0 * static_cast<double>(max_datagram_));
  episode_bw_ = max_bw_.Get();
  episode_check_rounds_ = p.episode_check_rounds;
  Congestion(now, Signal::kLossWithQueue, p.episode_beta);
  if (p.cubic_c > 0 && packets_before > 0) {
    // CUBIC's fast convergence, at every episode: the curve levels off below the
    // window before the loss, (1 + beta) / 2 of it, releasing bandwidth to a flow
    // that has less (CUBIC does so only when its window is below the last plateau).
    const double floor = p.episode_beta * packets_before;
    const double plateau =
        p.fast_convergence ? packets_before * (1 + p.episode_beta) / 2 : packets_before;
    episode_time_ = now;
    episode_packets_ = plateau;
    episode_floor_packets_ = floor;
    episode_k_ = std::cbrt((plateau - floor) / p.cubic_c);
    episode_bound_ = EpisodeBound(now);
  }
}

Bandwidth BbrController::EpisodeBound(Time now) const {
  // CUBIC's window since the episode, W(t) = C (t - K)^3 + W_max, as a rate over the RTT;
  // never below the cut itself.
  const double t = (now - episode_time_).seconds() - episode_k_;
  const double packets =
      std::max(params_.compete.cubic_c * t * t * t + episode_packets_, episode_floor_packets_);
  return Bandwidth::BitsPerSecond(packets * 8.0 * static_cast<double>(max_datagram_) /
                                  srtt_.seconds());
}

}  // namespace longhaul
