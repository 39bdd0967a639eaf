"""fec-grid: message completion tails of FEC `auto` over a grid of links, in the simulator.

For every cell (loss x mean burst x RTT x rate x message size) it runs
`longhaul-sim --fec=auto --workload=messages --load=0.5 --payload=off` and reports the
message completion time (MCT) mean, p99, p99.9 and max as multiples of the ideal (one-way
delay + serialisation), the parity overhead, the repairs by retransmission, and what the
FEC policy said at the end (reason, k, m, D, its loss and burst estimates). A cell
passes when p99.9 <= 1.15 x ideal and mean <= 1.05 x ideal. Cells parity cannot serve
are reported as such, not as passes: `cannot` where the policy says `best-effort` (no
parity within fec_max_overhead meets its target there) or `over-limits`, and
`parity-time` where the parity the tail needs costs more than the budget: parity takes
link time, so every message that carries a fraction r of parity takes about
1 + r x (serialisation / ideal) times the ideal, which exceeds 1.05 (the mean target;
above 1.15 the tail target too) where serialisation dominates the ideal (large messages
on slow links); such a cell counts when its mean and tail are within that cost.

The window is sized as a tuned profile would (>= 2 x BDP + 2 messages), so that a cell
measures FEC, not a window too small for the link. Runs in parallel (--jobs), each run
bounded by --run_wall seconds, the whole grid by --max_minutes; it stops by itself.

  tools/bench/fec-grid --build=build [--quick] [--jobs=2] [--out=table.md] [--json=runs.json]
                       [--losses=1e-4,1e-3,1e-2] [--bursts=1,4,8] [--rtts=10ms,58ms,200ms]
                       [--rates=1gbit,10gbit,100gbit] [--sizes=1MiB,16MiB,64MiB]
                       [--messages=1000] [--extra="--fec_tail=0.999"]
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import time

from longhaul_bench import cli, units


def parse_size(v):
    try:
        return units.parse_size(v)
    except ValueError:
        raise SystemExit(f"fec-grid: bad size {v!r} (e.g. 16MiB)")


def parse_rate(v):
    try:
        return units.parse_rate(v)
    except ValueError:
        raise SystemExit(f"fec-grid: bad rate {v!r} (e.g. 10gbit)")


def parse_ms(v):
    try:
        return float(v[:-2]) if v.endswith("ms") else units.parse_duration(v) * 1e3
    except ValueError:
        raise SystemExit(f"fec-grid: bad rtt {v!r} (e.g. 58ms)")


def run_cell(args, cell):
    loss, burst, rtt, rate, size = cell
    bdp = parse_rate(rate) * parse_ms(rtt) / 1e3 / 8
    msg = parse_size(size)
    window = max(units.GIB, int(2 * bdp + 2 * msg))
    window = min(window, 64 * units.GIB)
    recv_window = max(4 * units.GIB, 2 * window)
    link = f"rate={rate},rtt={rtt},loss={loss},burst={burst}"
    cmd = [os.path.join(args.build_dir, "bin", "longhaul-sim"), f"--link={link}", "--fec=auto",
           "--workload=messages", f"--message_size={size}", f"--messages={args.messages}",
           "--load=0.5", f"--window={window}", f"--recv_window={recv_window}",
           "--payload=off", f"--seed={args.seed}", f"--max_wall_time={args.run_wall}s",
           "--max_virtual_time=100000s", "--json"] + args.extra.split()
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_wall + 60)
    out = {"link": link, "size": size, "cmd": " ".join(cmd), "wall_s": time.time() - t0}
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError:
        out["error"] = (p.stderr or p.stdout).strip()[-300:]
        return out
    r = j["result"]
    ideal = r.get("mct_ideal_s", 0) or 1
    out["serialisation_share"] = max(0.0, (ideal - parse_ms(rtt) / 2e3) / ideal)
    out.update({
        "intact": r["delivered_intact"],
        "stop": r["stop_reason"],
        "mean_x": r.get("mct_mean_s", 0) / ideal,
        "p99_x": r.get("mct_p99_s", 0) / ideal,
        "p999_x": r.get("mct_p999_s", 0) / ideal,
        "max_x": r.get("mct_max_s", 0) / ideal,
        "overhead": r["fec_overhead_bytes"] / max(1, r["bytes_delivered"]),
        "retransmitted": r["packets_retransmitted"],
        "fec": r.get("fec_auto", {}),
        "cpu_s": r["cpu_s"],
    })
    return out


def verdict(o):
    if "error" in o or not o.get("intact"):
        return "ERROR"
    if o["p999_x"] <= 1.15 and o["mean_x"] <= 1.05:
        return "pass"
    reason = o["fec"].get("reason", "")
    if reason in ("best-effort", "over-limits"):
        return "cannot"
    # What parity costs every message: 1 + overhead x the serialisation's share of the
    # ideal. Where that is above 1.05 the mean target is out of reach with the parity the
    # tail needs (and above 1.15 the tail target too).
    cost = 1 + o["overhead"] * o["serialisation_share"]
    if cost > 1.05 and o["mean_x"] <= cost + 0.01 and o["p999_x"] <= max(1.15, cost + 0.02):
        return "parity-time"
    return "FAIL"


def main():
    ap = cli.parser(__doc__)
    cli.add_build_dir(ap, default="build")
    cli.add_defaults(ap, losses="1e-4,1e-3,1e-2", bursts="1,4,8", rtts="10ms,58ms,200ms",
                     rates="1gbit,10gbit,100gbit", sizes="1MiB,16MiB,64MiB", messages=1000,
                     seed=1, jobs=2, run_wall=300, max_minutes=60.0)
    ap.add_argument("--extra", default="", help="more longhaul-sim flags for every run")
    ap.add_argument("--quick", action="store_true",
                    help="loss 1e-3,1e-2 x burst 1,8 x rtt 58ms x rate 10gbit x 1MiB,16MiB")
    ap.add_argument("--out", help="write the Markdown table here too")
    ap.add_argument("--json", help="write every run's numbers here")
    args = ap.parse_args()
    if args.quick:
        args.losses, args.bursts, args.rtts = "1e-3,1e-2", "1,8", "58ms"
        args.rates, args.sizes = "10gbit", "1MiB,16MiB"
    sim = os.path.join(args.build_dir, "bin", "longhaul-sim")
    if not os.access(sim, os.X_OK):
        raise SystemExit(f"fec-grid: {sim} not found; build first (cmake --build {args.build_dir})")
    cells = [(l, b, t, r, s) for l in args.losses.split(",") for b in args.bursts.split(",")
             for t in args.rtts.split(",") for r in args.rates.split(",")
             for s in args.sizes.split(",")]
    deadline = time.time() + args.max_minutes * 60
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {}
        for c in cells:
            futures[pool.submit(lambda c=c: run_cell(args, c) if time.time() < deadline
                                else {"link": "rate=%s,rtt=%s,loss=%s,burst=%s" % (c[3], c[2], c[0], c[1]),
                                      "size": c[4], "error": "skipped: --max_minutes reached"})] = c
        for f in concurrent.futures.as_completed(futures):
            o = f.result()
            o["verdict"] = verdict(o)
            results.append(o)
            print(f"{o['verdict']:6} {o['link']:42} {o['size']:6} " +
                  ("%s" % o.get("error") if "error" in o else
                   "mean %.3f p99 %.3f p99.9 %.3f max %.3f ovh %.3f retx %d %s" % (
                       o["mean_x"], o["p99_x"], o["p999_x"], o["max_x"], o["overhead"],
                       o["retransmitted"], o["fec"].get("reason", "?"))),
                  file=sys.stderr, flush=True)
    order = {c: i for i, c in enumerate(
        "rate=%s,rtt=%s,loss=%s,burst=%s %s" % (c[3], c[2], c[0], c[1], c[4]) for c in cells)}
    results.sort(key=lambda o: order.get(o["link"] + " " + o["size"], 0))
    lines = ["| link | message | mean x | p99 x | p99.9 x | max x | parity | retx | policy (k,m,D; loss, burst seen) | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for o in results:
        if "error" in o:
            lines.append(f"| {o['link']} | {o['size']} | | | | | | | {o['error']} | {o['verdict']} |")
            continue
        f = o["fec"]
        pol = "%s (%s,%s,%s; %.1e, %.1f)" % (f.get("reason", "?"), f.get("k", "-"), f.get("m", "-"),
                                            f.get("interleave", "-"), f.get("loss_estimate", 0),
                                            f.get("burst_estimate", 0))
        lines.append("| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %d | %s | %s |" % (
            o["link"], o["size"], o["mean_x"], o["p99_x"], o["p999_x"], o["max_x"], o["overhead"],
            o["retransmitted"], pol, o["verdict"]))
    counts = {}
    for o in results:
        counts[o["verdict"]] = counts.get(o["verdict"], 0) + 1
    lines.append("")
    lines.append("cells: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if counts.get("FAIL", 0) == 0 and counts.get("ERROR", 0) == 0 else 1


def entry():
    """What tools/bench/fec-grid runs."""
    sys.exit(main())
