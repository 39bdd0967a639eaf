// BbrController's PROBE_BW (bbr.h): a cycle DOWN (0.75) -> CRUISE (1.0, 2-4 rounds) ->
// UP. UP goes on while the bandwidth keeps growing, faster (1.5) on an empty queue, so a
// link whose rate went up is filled within a few rounds; it ends once it has queued
// 0.25 min RTT, as BBR's 1.25 would at most. DOWN lasts a min RTT, or for a flow alone
// after a larger probe until that probe's excess is out (DrainsOwnProbeExcess).
//
// Fairness among longhaul flows: the UP probe asks for the same number of packets per
// round trip on top of every flow's bandwidth (1000: gain 1 + 1000 / bandwidth in packets
// per RTT, clamped to [1.05, 1.75]), an additive increase: after the multiplicative cuts
// of the congestion response, what the link has spare goes to whichever flows probe
// first, and a probe that grew with the flow's size handed the large flows more of it.
// With equal increments the shares converge (AIMD); one flow alone at 10 Gbit/s x 58 ms
// probes by 1.12.
// A flow alone at its bottleneck gains nothing from that fairness and pays for it where
// 1000 packets are most of the BDP (1 Gbit/s x 58 ms: a 1.75 probe overflowed a one-BDP
// buffer, and random loss on its queue cut the model after every probe): a probe that
// found nothing while its own excess queued backs the next ones off towards BBR's 1.25;
// a probe that finds more restores the fair gain. Losses of packets sent during a probe
// or the drain after it end the probe, with no cut (bbr_congestion.cc).

#include <algorithm>

#include "glog/logging.h"
#include "transport/core/cc/bbr.h"

namespace longhaul {

double BbrController::ProbeGain() const {
  const BbrParams::ProbeBw& p = params_.probe_bw;
  const Bandwidth bw = max_bw_.Get();
  // Competing with queue-building traffic: probe as BBR does (1.25); the fair probe is
  // for converging with flows that drain, and against a loss-based flow each probe's
  // overflow costs that flow a multiplicative cut.
  if (bw.IsZero() || min_rtt_.IsInfinite() || p.fair_probe_packets <= 0) return p.up_gain;
  if (competing_) {
    // ... but a competitor that ignores loss (TCP BBR) loses nothing to the overflow,
    // and the equal 1.25 probes of two BBRs move their shares towards each other over
    // tens of seconds: the fair probe's additive excess (where larger) gets a small
    // share up sooner.
    return competitor_ignores_loss_ ? std::max(FairGain(), p.up_gain) : p.up_gain;
  }
  // Packets per round trip at the current bandwidth: an absolute measure of the flow's
  // size that every flow on the link computes the same way. Every flow asks for the same
  // number of packets more (BBR's 1.25 asks a flow four times larger for four times
  // more, and the spare capacity after a cut goes to whichever probes first).
  const double gain = FairGain();
  // After probes that found nothing and queued their own excess (JudgeProbe): less
  // excess, down to BBR's probe (or the fair gain where that is smaller).
  if (probe_scale_ >= 1) return gain;
  return std::max(std::min(gain, p.up_gain), 1 + (gain - 1) * probe_scale_);
}

double BbrController::FairGain() const {
  const BbrParams::ProbeBw& p = params_.probe_bw;
  const double packets = PacketsPerMinRtt(max_bw_.Get());
  return std::clamp(1 + p.fair_probe_packets / std::max(packets, 1.0), p.min_fair_probe_gain,
                    p.max_probe_gain);
}

void BbrController::UpdateProbeBw(Time now) {
  if (probe_judge_pending_ && round_start_ && phase_ != Phase::kUp &&
      round_count_ >= probe_judge_round_) {
    JudgeProbe(now);
  }
  switch (phase_) {
    case Phase::kDown: {
      // Drain this flow's part of the queue: in flight down to the BDP and the RTT
      // back near min RTT, or give up after the longest drain.
      Duration longest =
          min_rtt_.Scaled(deep_drain_ ? params_.congestion.standing_queue_drain_rtts : 1.0);
      const bool own_excess = DrainsOwnProbeExcess(now);
      if (own_excess) longest = ProbeDrainTime();
      if (now - phase_start_ > longest ||
          (bytes_in_flight_ <= Bdp() && (QueueEmpty() || own_excess))) {
        EnterPhase(now, Phase::kCruise);
      }
      break;
    }
    case Phase::kCruise:
      if (round_start_ && round_count_ >= next_probe_round_) EnterPhase(now, Phase::kUp);
      break;
    case Phase::kUp:
      UpdateProbeUp(now);
      break;
  }
}

void BbrController::UpdateProbeUp(Time now) {
  const BbrParams::ProbeBw& p = params_.probe_bw;
  // Catching up after competing started, the probe lasts the whole round, the
  // competitor's queue included (BbrParams::Compete::catch_up).
  const bool whole_round = competing_ && now < catch_up_until_ && srtt_ > min_rtt_;
  const bool full_length = now - phase_start_ > (whole_round ? srtt_ : min_rtt_);
  const double rounds = whole_round ? srtt_.seconds() / min_rtt_.seconds() : 1.0;
  // The pipe plus up_gain - 1 BDP of queue is in flight: the bottleneck is full.
  // While the link has room the bandwidth estimate (and so the BDP) grows with
  // the probe and this does not happen: the probe goes on.
  // Or the probe has queued what BBR's 1.25 probe would at most (a larger gain
  // finds room faster; it does not queue more, which would overflow the buffer
  // for loss-based neighbours such as TCP CUBIC).
  const bool probe_queued = !competing_ && now - phase_start_ > min_rtt_ / 4 &&
                            latest_rtt_ > min_rtt_.Scaled(1 + p.queue_fraction) + ack_delay_;
  if ((full_length && bytes_in_flight_ >= Bdp(up_gain_ * rounds)) || probe_queued ||
      round_count_ - phase_start_round_ > p.max_up_rounds) {
    ScheduleProbe();
    EnterPhase(now, Phase::kDown);
  } else if (round_start_) {
    // A round of the probe found more bandwidth and no queue: the link's rate went
    // up (or a competitor left). Probe faster to get there within a few rounds.
    const Bandwidth bw = max_bw_.Get();
    const double growth = std::min(p.accel_growth, 1 + 0.6 * (up_gain_ - 1));
    if (bw >= up_round_bw_.Scaled(growth) &&
        last_round_max_rtt_ <= min_rtt_.Scaled(1.05) + ack_delay_) {
      up_gain_ = std::max(up_gain_, p.accel_gain);
      pacing_gain_ = up_gain_;
    }
    up_round_bw_ = bw;
  }
}

void BbrController::EnterProbeBw(Time now, Phase phase) {
  mode_ = Mode::kProbeBw;
  ScheduleProbe();
  EnterPhase(now, phase);
}

void BbrController::ScheduleProbe() {
  // The next probe comes a random number of rounds from now, so flows sharing a link
  // probe at different times. A standing-queue drain does not move it: the probes are
  // what lets the flows' shares converge.
  // Competing, as often as BBR probes (a cycle of eight phases: six rounds at gain 1
  // between probes); a flow that probed more often than the TCP BBR beside it took from it
  // round after round.
  const BbrParams::ProbeBw& p = params_.probe_bw;
  const uint32_t cruise =
      competing_ ? params_.compete.cruise_rounds
                 : p.cruise_rounds_min + static_cast<uint32_t>(rng_.UniformInt(
                                             p.cruise_rounds_max - p.cruise_rounds_min + 1));
  next_probe_round_ = round_count_ + 1 + cruise;
}

void BbrController::EnterPhase(Time now, Phase phase) {
  const bool was_up = phase_ == Phase::kUp;
  if (was_up && phase != Phase::kUp) probe_length_ = now - phase_start_;
  // The drain after a probe is over (however it ended): later losses are not the probe's.
  if (phase == Phase::kCruise && probe_down_end_.IsInfinite()) probe_down_end_ = now;
  phase_ = phase;
  phase_start_ = now;
  phase_start_round_ = round_count_;
  cwnd_gain_ = competing_ ? params_.compete.cwnd_gain : params_.probe_bw.cwnd_gain;
  deep_drain_ = false;
  drain_after_probe_ = was_up && phase == Phase::kDown;
  switch (phase) {
    case Phase::kDown:
      pacing_gain_ = params_.probe_bw.down_gain;
      break;
    case Phase::kCruise:
      pacing_gain_ = 1.0;
      break;
    case Phase::kUp:
      up_gain_ = ProbeGain();
      pacing_gain_ = up_gain_;
      up_round_bw_ = max_bw_.Get();
      probe_start_ = now;
      probe_from_empty_queue_ = QueueEmpty();
      probe_down_end_ = Time::Infinite();
      if (params_.probe_bw.found_share > 0) {
        // Judged at the first round start after it, at least two rounds on: by then the
        // packets it sent have been acknowledged.
        probe_judge_pending_ = true;
        probe_judge_round_ = round_count_ + 2;
        probe_base_delivery_ = last_round_delivery_;
        probe_ask_ = up_gain_ - 1;
        probe_max_rtt_ = Duration::Zero();
      }
      break;
  }
}

bool BbrController::LastProbeRoundQueued(double seen) const {
  const Duration rise = probe_max_rtt_ - min_rtt_ - ack_delay_;
  const Duration last = std::min(probe_length_, min_rtt_);
  return up_gain_ > 1 &&
         rise >= last.Scaled(params_.probe_bw.own_queue_share * (up_gain_ - 1) * seen);
}

// The DOWN phase after a probe of more than BBR's 1.25 lasts one min RTT at 0.75, which
// takes out only a third of what a 1.75 probe of one min RTT queues at a bottleneck the
// flow fills alone: the rest stood until the standing-queue response cut the model and
// drained at 0.5 past the point where the pipe was empty (the RTT shows the queue gone a
// round trip late): in the second second of every run, and after a probe that climbed to
// a rate that came back (docs/congestion-control.md, "A flow alone", rule 4).
// After one min RTT, a flow that is not competing and whose probe's last min RTT of
// excess shows in the RTTs back so far drains on, at most until that excess is out
// (ProbeDrainTime), and stops as soon as its in flight fits the BDP: its own excess is
// then out of the queue, and waiting for the RTT to say so overshoots by a round trip.
// That is for a flow that is alone, as far as it can tell: the probe began on an empty
// queue, no standing queue was cut for in the last 10 rounds (TCP CUBIC filling the
// buffer before competing starts: draining each probe out handed it the link, a share
// of 0.36-0.40 where 0.51-0.55 is the rule), and one of
//   - small enough for the fair probe's cap, and the probe found nothing (it refilled a
//     cut at most): a newcomer's probe takes share from the others and finds more;
//   - or the probe at least doubled the delivery (the link had room) and its last round
//     found nothing.
// Flows sharing a link, whose probes queue together, each draining to its BDP gave back
// the newcomers' share (four flows: Jain 0.84-0.93 in some seeds of eight).
bool BbrController::DrainsOwnProbeExcess(Time now) const {
  if (!drain_after_probe_ || deep_drain_ || competing_ || !probe_from_empty_queue_ ||
      WithinBwWindow(last_standing_queue_round_) || now - phase_start_ <= min_rtt_ ||
      ProbeDrainTime() <= min_rtt_ || !LastProbeRoundQueued(1 / up_gain_)) {
    return false;
  }
  const BbrParams::ProbeBw& p = params_.probe_bw;
  const bool last_round_found_nothing =
      max_bw_.Get() < up_round_bw_.Scaled(1 + p.found_share * (up_gain_ - 1));
  return (FairGain() >= p.max_probe_gain && !ProbeFoundMore()) ||
         (last_round_delivery_ >= probe_base_delivery_.Scaled(2) && last_round_found_nothing);
}

bool BbrController::ProbeFoundMore() const {
  return last_round_delivery_ >=
         probe_base_delivery_.Scaled(1 + params_.probe_bw.found_share * probe_ask_);
}

bool BbrController::WithinBwWindow(uint64_t round) const {
  return round != ~uint64_t{0} && round_count_ - round <= params_.model.bw_window_rounds;
}

Duration BbrController::ProbeDrainTime() const {
  const BbrParams::ProbeBw& p = params_.probe_bw;
  const double excess = (up_gain_ - 1) / std::max(1 - p.down_gain, 0.05);
  return std::min(std::min(probe_length_, min_rtt_).Scaled(excess),
                  min_rtt_.Scaled(p.max_drain_rtts));
}

void BbrController::JudgeProbe(Time now) {
  const BbrParams::ProbeBw& p = params_.probe_bw;
  probe_judge_pending_ = false;
  // Found more: the round that acknowledged the probe delivered more than the round
  // before it, by a share of what the probe asked for. (A newcomer's probe takes share
  // from the others in the FIFO, so its delivery grows; a flow alone at the bottleneck
  // gets nothing more.)
  const bool found = ProbeFoundMore();
  // Its own queue: the RTT rose by a good part of the probe's excess over its length, as
  // when all of it queued at a bottleneck this flow fills alone.
  const Duration rise = probe_max_rtt_ - min_rtt_ - ack_delay_;
  const bool own_queue =
      probe_ask_ > 0 && rise >= probe_length_.Scaled(p.own_queue_share * probe_ask_);
  // A refill: delivery grew back to what the model was before the last cut (within 5 %)
  // and no further, the queue emptied since that cut (no traffic keeps one), and the
  // flow is small enough for the fair probe's cap: a flow alone at a bottleneck of about
  // its fair probe, cut for the queue of its own 1.75 probe. Restoring the fair gain for
  // that overflowed the buffer again, cut after cut; the scale stays.
  const bool refill = queue_empty_since_cut_ && last_round_delivery_ <= model_before_cut_ &&
                      last_round_delivery_ >= model_before_cut_.Scaled(p.refill_share) &&
                      FairGain() >= p.max_probe_gain;
  if (found) {
    if (!refill) probe_scale_ = 1.0;
  } else if (own_queue) {
    probe_scale_ = std::max(probe_scale_ * 0.5, 1.0 / 64);
    ++probe_backoffs_;
  }
  VLOG(2) << "bbr " << this << " t=" << now.seconds() << " probe x" << 1 + probe_ask_
          << " found=" << found << " own_queue=" << own_queue << " rise_ms=" << rise.milliseconds()
          << " length_ms=" << probe_length_.milliseconds() << " next scale " << probe_scale_;
}

}  // namespace longhaul
