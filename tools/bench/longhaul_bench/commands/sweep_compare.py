"""sweep-compare: wan-compare over a grid of links, then the tables and plots of
docs/comparison.md and docs/benchmarks.md. One command reruns it all (root; about 2
hours on the project VM with the defaults):

  tools/bench/sweep-compare --build_dir=build-bench

Grid (1 Gbit/s, MTU 9000, one-BDP drop-tail queue, loss in both directions):
  RTT 10, 58, 150 ms  x  loss 0, 1e-4, 1e-3, 1e-2, and bursty (1e-3 in bursts of 8)
  bulk      every condition: --time (20 s) after --omit (3 s)
  messages  RTT 58 ms, every loss: 4 MiB messages at load 0.5 (--messages, 200)
  transfer  every condition: 64 MiB from a cold start
  timeline  one bulk run at RTT 58 ms, loss 1e-3 with --omit=0 (goodput over time from
            the first byte, slow start included)
--extra passes more wan-compare flags to every case, e.g.
  --extra="--longhaul_variant='bigwin:--window=64MiB --recv_window=128MiB'"
to also run longhaul with 64 MiB windows as entry longhaul_bigwin.

Each wan-compare result is kept as docs/comparison-data/<case>.json (rerun with --resume
to skip the cases already there); then the tables replace the block between
"<!-- sweep:begin -->" and "<!-- sweep:end -->" in docs/comparison.md, and the plots are
written to docs/comparison-*.svg. --report_only redoes tables and plots from the JSON.

Every run is bounded (wan-compare bounds each peer; --max_minutes bounds the sweep).
"""

import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import time

from longhaul_bench import cli
from longhaul_bench import plots
from longhaul_bench.cli import BENCH_DIR, ROOT

RTTS = [10, 58, 150]
LOSSES = [("0", ""), ("1e-4", ",loss=1e-4"), ("1e-3", ",loss=1e-3"), ("1e-2", ",loss=1e-2"),
          ("bursty", ",loss=1e-3,burst=8")]
PEERS = ["longhaul", "seed_recipe", "tcp_bbr", "tcp_cubic", "udt"]
NAMES = {"longhaul": "longhaul", "seed_recipe": "seed recipe", "tcp_bbr": "TCP BBR",
         "tcp_cubic": "TCP CUBIC", "udt": "UDT4"}


def cases(args):
    out = []
    for rtt in args.rtts:
        for label, loss in LOSSES:
            if label not in args.losses:
                continue
            spec = "rate=1gbit,rtt=%dms%s" % (rtt, loss)
            if "bulk" in args.only:
                out.append(("bulk-rtt%d-%s" % (rtt, label), spec,
                            ["--workload=bulk", "--time=%g" % args.time,
                             "--omit=%g" % args.omit]))
            if "messages" in args.only and rtt == 58:
                out.append(("messages-rtt%d-%s" % (rtt, label), spec,
                            ["--workload=messages", "--message_size=4MiB", "--load=0.5",
                             "--messages=%d" % args.messages]))
            if "transfer" in args.only:
                out.append(("transfer-rtt%d-%s" % (rtt, label), spec,
                            ["--workload=transfer", "--bytes=64MiB"]))
    if "timeline" in args.only:
        out.append(("timeline-rtt58-1e-3", "rate=1gbit,rtt=58ms,loss=1e-3",
                    ["--workload=bulk", "--time=%g" % args.time, "--omit=0"]))
    return out


def mbit(v):
    return "%.0f" % (v / 1e6) if v else "-"


def columns(runs):
    """longhaul, its variants (longhaul_NAME) in the data, then the peers."""
    variants = sorted({p for r in runs for p in r.get("results", {})
                       if p.startswith("longhaul_")})
    return ["longhaul"] + variants + [p for p in PEERS if p != "longhaul"]


def name(p):
    return NAMES.get(p, "longhaul " + p[len("longhaul_"):] if p.startswith("longhaul_") else p)


def mine(cols):
    return [p for p in cols if p == "longhaul" or p.startswith("longhaul_")]


def cell_error(e):
    if not e:
        return "-"
    if "Check failed" in e.get("error", "") or "SIGABRT" in e.get("error", ""):
        return "crash"
    return "error"


def rows(runs, cols, cell):
    """Per run: RTT, loss, the peers' results, a cell per peer in `cols` (cell(entry), or
    why it has none) and the run's comparison."""
    for r in runs:
        rtt, loss = plots.condition(r)
        res = r["results"]
        cells = []
        for p in cols:
            e = res.get(p, {})
            cells.append(cell_error(e) if not e or e.get("error") else cell(e))
        yield rtt, loss, res, cells, r.get("comparison", {})


def mct_cell(e):
    if e.get("unstable"):
        return "unstable"
    if e.get("mct_p99_s"):
        return "%.0f / %.0f" % (e["mct_p50_s"] * 1e3, e["mct_p99_s"] * 1e3)
    return "-"


def transfer_cell(e):
    return "%.2f" % e["completion_s"] if e.get("completion_s") else "-"


def table_bulk(runs):
    cols = columns(runs)
    lines = ["| RTT | loss | " + " | ".join(name(p) for p in cols) + " | " +
             " | ".join(name(p) + " / best peer" for p in mine(cols)) + " | load avg |",
             "|---|---|" + "---:|" * (len(cols) + len(mine(cols))) + "---:|"]
    for rtt, loss, res, cells, c in rows(runs, cols, lambda e: mbit(e.get("goodput_bps"))):
        ratios = ["%.3f" % c[p + "_over_best"] if p + "_over_best" in c else "-"
                  for p in mine(cols)]
        loads = [e.get("load_avg", {}).get("before", [0])[0] for e in res.values()
                 if e.get("load_avg")]
        lines.append("| %d ms | %s | %s | %s | %s |" % (
            rtt, loss, " | ".join(cells), " | ".join(ratios),
            "%.1f-%.1f" % (min(loads), max(loads)) if loads else "-"))
    return lines


def table_messages(runs):
    cols = columns(runs)
    lines = ["| RTT | loss | ideal | " + " | ".join(name(p) + " p50 / p99" for p in cols) +
             " | " + " | ".join(name(p) + " p99 / ideal, / BBR p99" for p in mine(cols)) + " |",
             "|---|---|---:|" + "---:|" * (len(cols) + len(mine(cols)))]
    for rtt, loss, res, cells, c in rows(runs, cols, mct_cell):
        ratios = []
        for p in mine(cols):
            a, b = c.get(p + "_p99_over_ideal"), c.get(p + "_p99_over_tcp_bbr")
            ratios.append("%s, %s" % ("%.2f" % a if a else "-", "%.2f" % b if b else "-"))
        ideal = res.get("longhaul", {}).get("mct_ideal_s")
        lines.append("| %d ms | %s | %s | %s | %s |" % (
            rtt, loss, "%.0f" % (ideal * 1e3) if ideal else "-", " | ".join(cells),
            " | ".join(ratios)))
    return lines


def table_transfer(runs):
    cols = columns(runs)
    lines = ["| RTT | loss | " + " | ".join(name(p) for p in cols) + " | " +
             " | ".join(name(p) + " / BBR" for p in mine(cols)) + " |",
             "|---|---|" + "---:|" * (len(cols) + len(mine(cols)))]
    for rtt, loss, res, cells, c in rows(runs, cols, transfer_cell):
        ratios = ["%.2f" % c[p + "_completion_over_tcp_bbr"]
                  if p + "_completion_over_tcp_bbr" in c else "-" for p in mine(cols)]
        lines.append("| %d ms | %s | %s | %s |" % (rtt, loss, " | ".join(cells),
                                                     " | ".join(ratios)))
    return lines


def order_key(r):
    rtt, loss = plots.condition(r)
    return (rtt, plots.LOSS_ORDER.index(loss) if loss in plots.LOSS_ORDER else 9)


def write_block(doc, out):
    """Replaces the sweep block of `doc` (or appends one)."""
    if os.path.exists(doc):
        with open(doc) as f:
            text = f.read()
        b = text.find("<!-- sweep:begin")
        e = text.find("<!-- sweep:end -->")
        if b >= 0 and e > b:
            text = text[:b] + "\n".join(out) + text[e + len("<!-- sweep:end -->"):]
        else:
            text = text.rstrip() + "\n\n" + "\n".join(out) + "\n"
    else:
        text = "# Comparison\n\n" + "\n".join(out) + "\n"
    with open(doc, "w") as f:
        f.write(text)


def report(data_dir, doc, svg_prefix):
    runs = {}
    for path in sorted(glob.glob(os.path.join(data_dir, "*.json"))):
        with open(path) as f:
            runs[os.path.basename(path)[:-5]] = json.load(f)
    bulk = sorted([r for k, r in runs.items() if k.startswith("bulk-")], key=order_key)
    msgs = sorted([r for k, r in runs.items() if k.startswith("messages-")], key=order_key)
    tr = sorted([r for k, r in runs.items() if k.startswith("transfer-")], key=order_key)
    out = ["<!-- sweep:begin (written by tools/bench/sweep-compare; do not edit) -->", ""]
    if bulk:
        out += ["### Bulk goodput (Mbit/s, wan-compare --workload=bulk --time=%g --omit=%g)" % (
            bulk[0]["workload"].get("time_s", 0), bulk[0]["workload"].get("omit_s", 0)), ""]
        out += table_bulk(bulk) + [""]
    if msgs:
        out += ["### Message completion time (ms; %s)" % plots.workload_text(msgs[0]),
                ""]
        out += table_messages(msgs) + [""]
    if tr:
        out += ["### Transfer of 64 MiB from a cold start (s, first connect to last byte)", ""]
        out += table_transfer(tr) + [""]
    dates = sorted(r["date"] for r in bulk + msgs + tr if r.get("date"))
    if dates:
        out += ["Runs from %s to %s; every cell's exact commands, emulator counters, load "
                "average and CPU are in docs/comparison-data/." % (dates[0], dates[-1]), ""]
    figures = []
    if plots.plot_goodput_vs_loss(bulk, svg_prefix + "goodput-vs-loss.svg"):
        figures.append(("bulk goodput against loss", "goodput-vs-loss.svg"))
    if plots.plot_mct_cdf(msgs, svg_prefix + "mct-cdf.svg"):
        figures.append(("message completion-time CDFs", "mct-cdf.svg"))
    if plots.plot_transfer(tr, svg_prefix + "transfer.svg"):
        figures.append(("transfer completion time", "transfer.svg"))
    if "timeline-rtt58-1e-3" in runs:
        plots.plot_run(runs["timeline-rtt58-1e-3"], svg_prefix + "goodput-time.svg")
        figures.append(("goodput over time, RTT 58 ms, loss 1e-3, from the first byte",
                        "goodput-time.svg"))
    for title, name in figures:
        out += ["![%s](%s)" % (title, os.path.basename(svg_prefix) + name), ""]
    out.append("<!-- sweep:end -->")
    for path in [d for d in doc.split(",") if d]:
        write_block(path, out)
    print("sweep-compare: wrote %s and %d plots" % (doc, len(figures)), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    cli.add_build_dir(ap)
    ap.add_argument("--data_dir", default=os.path.join(ROOT, "docs", "comparison-data"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "comparison.md") + "," +
                    os.path.join(ROOT, "docs", "benchmarks.md"),
                    help="documents whose sweep block is rewritten (comma-separated)")
    ap.add_argument("--svg_prefix", default=os.path.join(ROOT, "docs", "comparison-"))
    ap.add_argument("--rtts", default="10,58,150")
    ap.add_argument("--losses", default="0,1e-4,1e-3,1e-2,bursty")
    ap.add_argument("--only", default="bulk,messages,transfer,timeline")
    ap.add_argument("--time", type=float, default=20)
    ap.add_argument("--omit", type=float, default=3)
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--resume", action="store_true", help="skip cases with a JSON already")
    ap.add_argument("--report_only", action="store_true")
    ap.add_argument("--max_minutes", type=float, default=240)
    ap.add_argument("--extra", default="",
                    help="more wan-compare flags for every case, e.g. "
                         "--longhaul_variant='bigwin:--window=64MiB --recv_window=128MiB'")
    args = ap.parse_args()
    args.rtts = [int(x) for x in args.rtts.split(",") if x]
    args.losses = [x for x in args.losses.split(",") if x]
    args.only = [x for x in args.only.split(",") if x]

    os.makedirs(args.data_dir, exist_ok=True)
    if not args.report_only:
        deadline = time.monotonic() + args.max_minutes * 60
        todo = cases(args)
        for i, (name, spec, flags) in enumerate(todo):
            path = os.path.join(args.data_dir, name + ".json")
            if args.resume and os.path.exists(path):
                continue
            if time.monotonic() > deadline:
                print("sweep-compare: --max_minutes reached; stopping (rerun with --resume)",
                      file=sys.stderr)
                break
            cmd = [os.path.join(BENCH_DIR, "wan-compare"), "--link=" + spec, "--json",
                   "--build_dir=" + args.build_dir] + flags + shlex.split(args.extra)
            print("sweep-compare: [%d/%d] %s" % (i + 1, len(todo), " ".join(cmd[1:])),
                  file=sys.stderr, flush=True)
            p = subprocess.run(cmd, capture_output=True, text=True)
            try:
                result = json.loads(p.stdout)
            except ValueError:
                print("sweep-compare: %s failed: %s" % (name, p.stderr.strip()[-500:]),
                      file=sys.stderr)
                continue
            with open(path, "w") as f:
                json.dump(result, f, indent=1)
            if p.returncode == 130 or "stopped by signal" in str(result.get("error", "")):
                print("sweep-compare: interrupted", file=sys.stderr)
                break
    report(args.data_dir, args.doc, args.svg_prefix)
    return 0


def entry():
    """What tools/bench/sweep-compare runs."""
    sys.exit(main())
