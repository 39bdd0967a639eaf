// BbrParams: the constants of BbrController (bbr.h), grouped by the concern that reads
// them, one group per source file: the model (bbr_model.cc), the modes (bbr_startup.cc,
// bbr_drain.cc, bbr_probe_bw.cc, bbr_probe_rtt.cc), the congestion response to loss and
// queues (bbr_congestion.cc), ECN (bbr_ecn.cc) and competing with queue-building traffic
// (bbr_compete.cc). The defaults are the documented behaviour; tests change single fields
// (`BbrParams p; p.probe_bw.cruise_rounds_min = 20;`) to isolate one mechanism.
// Plain values: copyable, no invariants checked (the controller trusts them).
#pragma once

#include <cstdint>

#include "transport/base/units.h"

namespace longhaul {

struct BbrParams {
  // The network model: bandwidth and min-RTT filters, pacing and window bounds.
  struct Model {
    uint32_t bw_window_rounds = 10;
    Duration min_rtt_window = Duration::Seconds(10);
    double min_rtt_tolerance = 0.01;  // a sample this close to min RTT refreshes it
    double pacing_margin = 0.01;      // pace this fraction below the estimate
    uint32_t initial_cwnd_packets = 10;
    uint32_t min_cwnd_packets = 4;
  };
  // STARTUP.
  struct Startup {
    double pacing_gain = 2.77;  // 4 ln 2 (BBRv3): the delivery rate doubles per round
    double cwnd_gain = 2.0;
    double full_bw_growth = 1.25;  // startup ends after full_bw_rounds below this growth
    uint32_t full_bw_rounds = 3;
    double ce_exit = 0.1;  // CE-marked share of a startup round that ends it
  };
  // DRAIN (its window gain is startup's).
  struct Drain {
    double pacing_gain = 1.0 / 2.77;
  };
  // PROBE_BW.
  struct ProbeBw {
    double cwnd_gain = 2.0;
    double down_gain = 0.75;
    // The drain after a probe by a flow alone takes out the probe's excess: at most this
    // many min RTTs (BbrController::DrainsOwnProbeExcess).
    double max_drain_rtts = 4;
    double up_gain = 1.25;  // BBR's probe: without a model yet, and while competing
    // The fair probe: this many packets per round trip on top of the flow's bandwidth
    // (0: BBR's probe always), as a gain within [min_fair_probe_gain, max_probe_gain].
    double fair_probe_packets = 1000;
    double min_fair_probe_gain = 1.05;
    double max_probe_gain = 1.75;
    // The UP phase also ends, after at least a quarter of a min RTT, once the RTT is this
    // fraction of min RTT above it (+ ACK delay): the queue BBR's own 1.25 probe builds at
    // most. A larger gain finds room faster, it does not queue more (not while competing).
    double queue_fraction = 0.25;
    // A probe that found nothing (the round that acknowledged it delivered less than
    // 1 + found_share x (gain - 1) times what the round before it did) while the RTT rose
    // by at least own_queue_share x (gain - 1) x its length (its excess queued: the flow is
    // alone at the bottleneck, or nearly) halves the next probes' excess over 1, never
    // below BBR's up_gain; a probe that finds more restores the fair gain. A flow alone on
    // a 1 Gbit/s x 58 ms link probed by 1.75 and queued more than the buffer
    // (found_share 0: off).
    double found_share = 0.25;
    double own_queue_share = 0.6;
    // Losses of packets sent from the start of a probe to the end of the DOWN phase after
    // it, found while the RTT shows a queue, are the probe's own overflow: the probe ends
    // (as for CE marks it caused), the model is not cut.
    bool loss_ends_probe = true;
    // A probe that found more but only brought the round's delivery back to between
    // refill_share and 1 times the model before the last cut (or the first of cuts
    // within bw_window_rounds), with the queue seen empty since that cut and the fair
    // gain at max_probe_gain, refilled what the cut took: the probe scale stays.
    double refill_share = 0.95;
    // A probe round that grew the bandwidth by this much, or by 60 % of what the probe
    // asked for if that is less, on an empty queue raises the probe's gain to accel_gain
    // (the link has room).
    double accel_growth = 1.15;
    double accel_gain = 1.5;
    uint32_t max_up_rounds = 30;     // bound on a probe that keeps finding room
    uint32_t cruise_rounds_min = 2;  // rounds at gain 1 between probes: uniform in
    uint32_t cruise_rounds_max = 4;  // [min, max]
  };
  // PROBE_RTT.
  struct ProbeRtt {
    Duration duration = Duration::Milliseconds(200);
    double cwnd_gain = 0.5;
  };
  // Congestion: loss with a queue, a round's loss rate, a standing queue, a path change.
  struct Congestion {
    double queue_delay_fraction = 0.3;      // of min RTT: a loss with more queueing is congestion
    uint32_t min_loss_packets = 8;          // a round's loss rate counts from this many losses
    double loss_beta = 0.9;                 // model after congestion, x the recent delivery rate
    double standing_queue_fraction = 0.15;  // of min RTT, through a whole round
    double standing_queue_beta = 0.9;
    double standing_queue_drain_gain = 0.5;
    double standing_queue_drain_rtts = 2;  // longest drain, in min RTTs
    // A path change: this many standing-queue drains in a row that did not lower the
    // round's smallest RTT by path_change_tolerance make that RTT the min RTT (0: never;
    // cc_compete on: never, it competes instead; cc_yield: never, it drains).
    uint32_t path_change_drains = 2;
    double path_change_tolerance = 0.03;
  };
  // ECN, DCTCP-like.
  struct Ecn {
    double gain = 1.0 / 16;  // DCTCP g
    double alpha_init = 0;   // DCTCP starts at 1; see bbr_ecn.cc
  };
  // Competing with queue-building traffic, and the CUBIC bound after an overflow episode.
  struct Compete {
    // After more than this many responses to a queue (standing-queue drains, cuts for
    // loss with queueing delay) that never saw it empty, the queue is not longhaul's to
    // drain (TCP CUBIC or BBR fills it whatever longhaul does); 0: never compete (yield).
    uint32_t after_queue_responses = 2;
    // ... spread over at least this many rounds: a longhaul newcomer's startup and drain
    // keep a queue for ~20 rounds that the other flows' drains cannot empty; traffic that
    // keeps a queue whatever longhaul does keeps it longer.
    uint32_t after_rounds = 40;
    // The count of responses starts again once this many rounds in a row saw the queue
    // empty (one is not enough: a drain empties it for a round even under a competitor
    // whose window is still growing, such as TCP CUBIC after its start).
    uint32_t queue_reset_empty_rounds = 3;
    // ... and it stops competing once this many rounds in a row saw the queue empty (not
    // one: a TCP BBR competitor empties it in its PROBE_RTT, 200 ms, every 10 s).
    uint32_t exit_empty_rounds = 8;
    // While competing, rounds at gain 1 between probes: BBR's (its cycle has six).
    uint32_t cruise_rounds = 6;
    // While competing, the window in BDPs of the path's min RTT (PROBE_BW's is 2).
    double cwnd_gain = 3.0;
    // Catching up: where the responses before competing (after_rounds of them) cut the
    // model below squeezed_share of what it was at the first, the competitor took the link
    // meanwhile (TCP BBR's startup squeezed longhaul to 0.01-0.1 of it). For catch_up after
    // competing starts, the UP phase then lasts the whole round, the competitor's queue
    // included, instead of a min RTT: behind a queue as deep as the pipe a probe of one
    // min RTT spans half the round its rate samples cover and shows half its gain (a share
    // of 0.1 took 20 s to reach 0.45 beside TCP BBR). Probing so for good out-grew TCP BBR
    // (shares 0.51-0.63).
    double squeezed_share = 0.5;
    Duration catch_up = Duration::Seconds(10);
    // While competing, a round's loss rate is congestion above this multiple of
    // cc_loss_threshold (a queue-filling competitor keeps the buffer overflowing: it
    // answers loss late or not at all, and a flow that cuts at every overflow starves).
    // Beside TCP BBR rounds lost over 15 % about once a second: x 5 (15 %) held longhaul
    // at 0.36-0.45 of the link, x 8 (24 %) let it reach 0.45-0.55.
    double loss_multiple = 8.0;
    // While competing, the first round with loss after this many loss-free rounds is a
    // loss-based competitor's overflow (CUBIC fills the buffer, loses, cuts, and grows
    // back for seconds): answered like that competitor answers it, x episode_beta.
    // Loss in every round (TCP BBR keeps the buffer overflowing) is not an episode.
    uint32_t episode_gap_rounds = 16;
    double episode_beta = 0.5;
    // ... and the model grows back no faster than CUBIC's window would (W(t) = C (t - K)^3
    // + W_max in packets per min RTT, C in packets/s^3; 0: no bound): a model that probed
    // back within a few rounds took a little more from CUBIC at every episode.
    double cubic_c = 0.4;
    // ... levelling off at (1 + beta) / 2 of the model before the episode (CUBIC's fast
    // convergence, applied at every episode) rather than at the model itself.
    bool fast_convergence = true;
    // ... unless the competitor did not answer the loss: the queue was not seen empty in
    // this many rounds after the cut (TCP BBR keeps its rate through loss; cutting alone
    // hands it the link): the cut and the bound are undone.
    uint32_t episode_check_rounds = 4;
  };

  Model model;
  Startup startup;
  Drain drain;
  ProbeBw probe_bw;
  ProbeRtt probe_rtt;
  Congestion congestion;
  Ecn ecn;
  Compete compete;
};

}  // namespace longhaul
