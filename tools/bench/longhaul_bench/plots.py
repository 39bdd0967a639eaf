"""Plots of wan-compare results (matplotlib from Debian's python3-matplotlib).

  plot_run(result, path)                 one wan-compare run: goodput over time (bulk),
                                         completion-time distribution (messages) or
                                         completion times (transfer)
  plot_goodput_vs_loss(runs, path)       sweep: bulk goodput against loss, one panel per RTT
  plot_mct_cdf(runs, path)               sweep: message completion-time CDFs per condition
  plot_transfer(runs, path)              sweep: transfer completion time against loss

`runs` is a list of wan-compare --json results. The format follows the file name's
extension (.svg or .png).

  tools/bench/compare-plots RESULT.json OUT.svg     plot one run (main())
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .units import fmt_size  # noqa: E402

PEER_STYLE = {
    "longhaul": ("longhaul (tuned)", "#1f77b4", "o", "-"),
    "seed_recipe": ("seed recipe", "#9467bd", "v", "--"),
    "tcp_bbr": ("TCP BBR", "#2ca02c", "s", "-"),
    "tcp_cubic": ("TCP CUBIC", "#d62728", "^", "-"),
    "udt": ("UDT4", "#ff7f0e", "D", "-"),
}
LOSS_ORDER = ["0", "1e-4", "1e-3", "1e-2", "bursty"]


VARIANT_COLORS = ["#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def style(peer):
    """(label, color, marker, line style); longhaul_NAME variants get their own colors."""
    if peer in PEER_STYLE:
        return PEER_STYLE[peer]
    k = sum(ord(c) for c in peer) % len(VARIANT_COLORS)
    label = "longhaul " + peer[len("longhaul_"):] if peer.startswith("longhaul_") else peer
    return (label, VARIANT_COLORS[k], "x", "-.")


def link_title(result):
    return result.get("link", "")


def condition(result):
    """(rtt_ms, loss label) of a result's link."""
    keys = result.get("link_params", {}).get("keys", {})
    rtt_ms = round(result.get("link_params", {}).get("rtt_s", 0) * 1e3)
    loss = keys.get("loss", "0")
    label = "bursty" if "burst" in keys else ("%g" % float(loss) if float(loss) else "0")
    label = {"0.0001": "1e-4", "0.001": "1e-3", "0.01": "1e-2"}.get(label, label)
    return rtt_ms, label


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_run(result, path):
    w = result.get("workload", {}).get("name", "bulk")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    res = result.get("results", {})
    if w == "bulk":
        for peer, e in res.items():
            ivs = e.get("intervals") or []
            if not ivs:
                continue
            name, color, marker, ls = style(peer)
            xs = [(iv[0] + iv[1]) / 2 for iv in ivs]
            ys = [iv[2] / 1e6 for iv in ivs]
            ax.plot(xs, ys, color=color, marker=marker, ms=3, ls=ls, label=name)
        ax.set_xlabel("time since the start (s); 1 s intervals")
        ax.set_ylabel("goodput (Mbit/s)")
        rate = result.get("link_params", {}).get("rate_bps", 0) / 1e6
        if rate:
            ax.axhline(rate, color="grey", lw=0.8, ls=":")
        ax.set_title("goodput over time, " + link_title(result))
    elif w == "messages":
        draw_cdf(ax, res)
        ax.set_title("message completion time, %s, %s" % (
            link_title(result), workload_text(result)))
    else:
        peers = [p for p in res if res[p].get("completion_s")]
        vals = [res[p]["completion_s"] for p in peers]
        ax.bar([style(p)[0] for p in peers], vals, color=[style(p)[1] for p in peers])
        for i, v in enumerate(vals):
            ax.text(i, v, "%.2f s" % v, ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("completion time (s), connect to last byte")
        ax.set_title("transfer of %s from cold, %s" % (
            fmt_bytes(result.get("workload", {}).get("bytes", 0)), link_title(result)))
    ax.grid(alpha=0.3)
    if w != "transfer":
        ax.legend(fontsize=8)
    _save(fig, path)


def workload_text(result):
    wl = result.get("workload", {})
    return "%s messages at load %g" % (fmt_bytes(wl.get("message_size", 0)), wl.get("load", 0))


def fmt_bytes(b):
    return fmt_size(b, space=True)


def draw_cdf(ax, res):
    """CDF of completion times: the peers' full distributions (mct_cdf), and longhaul-perf's
    published quantiles (p50, p99, p99.9, max) as markers."""
    ideal = None
    for peer, e in res.items():
        name, color, marker, ls = style(peer)
        if e.get("unstable"):
            name += " (unstable: load not carried)"
        if e.get("mct_ideal_s") and peer == "longhaul":
            ideal = e["mct_ideal_s"] * 1e3
        cdf = e.get("mct_cdf")
        if cdf:
            ax.plot([v * 1e3 for _, v in cdf], [q for q, _ in cdf], color=color, ls=ls,
                    label=name)
        elif e.get("mct_p50_s"):
            qs = [(0.5, e["mct_p50_s"]), (0.99, e["mct_p99_s"]),
                  (0.999, e.get("mct_p999_s", e["mct_p99_s"])),
                  (1.0, e.get("mct_max_s", e["mct_p99_s"]))]
            ax.plot([v * 1e3 for _, v in qs], [q for q, _ in qs], color=color, marker=marker,
                    ls=":", label=name + " (p50, p99, p99.9, max)")
    if ideal:
        ax.axvline(ideal, color="grey", lw=0.8, ls=":", label="ideal (longhaul)")
    ax.set_xscale("log")
    ax.set_xlabel("completion time (ms), submission to last byte delivered")
    ax.set_ylabel("fraction of messages")
    ax.set_ylim(0, 1.02)


def _against_loss(runs, workload, value, path, ylabel, title, xlabel=None, legend=None):
    """One panel per RTT: each peer's value(entry) against the loss conditions (log scale);
    title(runs of the workload) is the figure's title. False when there are no runs."""
    sel = [r for r in runs if r.get("workload", {}).get("name") == workload]
    rtts = sorted({condition(r)[0] for r in sel})
    if not rtts:
        return False
    fig, axes = plt.subplots(1, len(rtts), figsize=(max(9.0, 4.4 * len(rtts)), 4.4), sharey=True,
                             squeeze=False)
    for ax, rtt in zip(axes[0], rtts):
        by_peer = {}
        for r in sel:
            c_rtt, loss = condition(r)
            if c_rtt != rtt or loss not in LOSS_ORDER:
                continue
            for peer, e in r.get("results", {}).items():
                v = value(e)
                if v is not None:
                    by_peer.setdefault(peer, {})[loss] = v
        for peer, pts in by_peer.items():
            name, color, marker, ls = style(peer)
            xs = [i for i, l in enumerate(LOSS_ORDER) if l in pts]
            ax.plot(xs, [pts[LOSS_ORDER[i]] for i in xs], color=color, marker=marker, ls=ls,
                    label=name)
        ax.set_xticks(range(len(LOSS_ORDER)))
        ax.set_xticklabels(["0", "1e-4", "1e-3", "1e-2", "1e-3\nbursts of 8"])
        ax.set_yscale("log")
        ax.set_title("RTT %d ms" % rtt)
        if xlabel:
            ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=8, **(legend or {}))
    fig.suptitle(title(sel))
    return _save(fig, path)


def plot_goodput_vs_loss(runs, path):
    return _against_loss(
        runs, "bulk", lambda e: e["goodput_bps"] / 1e6 if e.get("goodput_bps") else None,
        path, "goodput (Mbit/s, log scale)",
        lambda sel: "bulk goodput against loss, 1 Gbit/s, MTU 9000, one-BDP queue",
        xlabel="random loss (both directions)", legend={"loc": "lower left"})


def plot_mct_cdf(runs, path):
    msgs = [r for r in runs if r.get("workload", {}).get("name") == "messages"]
    msgs.sort(key=lambda r: (condition(r)[0], LOSS_ORDER.index(condition(r)[1])
                             if condition(r)[1] in LOSS_ORDER else 99))
    if not msgs:
        return False
    n = len(msgs)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(9.0, 4.6 * cols), 3.9 * rows),
                             squeeze=False)
    for k, r in enumerate(msgs):
        ax = axes[k // cols][k % cols]
        draw_cdf(ax, r.get("results", {}))
        rtt, loss = condition(r)
        ax.set_title("RTT %d ms, loss %s" % (rtt, loss), fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if k == 0:
            ax.legend(fontsize=6, loc="lower right")
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle("message completion-time CDFs, " + workload_text(msgs[0]) +
                 ", 1 Gbit/s, MTU 9000")
    return _save(fig, path)


def plot_transfer(runs, path):
    return _against_loss(
        runs, "transfer", lambda e: e["completion_s"] if e.get("completion_s") else None,
        path, "completion time (s, log scale)",
        lambda sel: "transfer of %s from a cold start (connect to last byte), 1 Gbit/s" %
        fmt_bytes(sel[0].get("workload", {}).get("bytes", 0)))


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        plot_run(json.load(f), argv[1])
    return 0
