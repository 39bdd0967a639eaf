"""tune-grid: how good is longhaul-tune? For each link spec, compare in the simulator

  * the best goodput of an exhaustive grid over window x segment x FEC x interleave,
  * the goodput of the profile `longhaul-tune --link=SPEC` writes, and
  * the goodput of the seed recipe (profiles/seed-recipe.profile),

all on the same transfer (same bytes, same seed), and print a Markdown table
(docs/tuning.md, "Tuning quality"). Acceptance: tuned >= 95 % of the grid's best on
every spec, and >= 5 x the seed recipe wherever RTT >= 50 ms.

Every run is bounded (--run-wall per simulator run, --tune-budget per longhaul-tune) and
the whole script by --max-minutes; it stops by itself. Runs one simulator at a time (the
project machine has 2 shared cores).

  tools/bench/tune-grid --build=build-tuner [--specs=1,5,9] [--quick] [--out=table.md]
                        [--json=runs.json]
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time

from longhaul_bench import cli
from longhaul_bench.units import GIB, MIB, parse_duration, parse_rate
from longhaul_bench.units import fmt_size as _fmt_size

# (spec, bytes per run, IP MTUs for the segment dimension). Bytes are scaled per spec so
# each run takes seconds: the simulator moves real bytes (~0.3 M packets per CPU second
# at 9 KB), so a transfer is >= ~8 BDPs or >= ~100k packets, not the terabytes a real
# link would carry. At 100-400 Gbit/s the segment grid skips the 1500-byte MTU (6x the
# packets for the same bytes) and 400 Gbit/s links use 64 KiB datagrams (mtu=65535).
SPECS = [
    ("rate=1gbit,rtt=58ms,loss=1e-3", 1 * GIB, [1500, 4096, 9000]),
    ("rate=1gbit,rtt=200ms,loss=5e-2,burst=20", 1 * GIB, [1500, 4096, 9000]),
    ("rate=2gbit,rtt=1ms", 1 * GIB, [1500, 4096, 9000]),
    ("rate=5gbit,rtt=100ms,loss=1e-2,burst=4", 2 * GIB, [1500, 4096, 9000]),
    ("rate=10gbit,rtt=58ms,loss=1e-4", 2 * GIB, [1500, 4096, 9000]),
    ("rate=10gbit,rtt=150ms,jitter=100us,loss=1e-5", 3 * GIB, [1500, 4096, 9000]),
    ("rate=25gbit,rtt=30ms,loss=1e-3,burst=8,reorder=1e-4", 2 * GIB, [1500, 4096, 9000]),
    ("rate=40gbit,rtt=10ms,loss=2e-2,burst=2", 2 * GIB, [1500, 4096, 9000]),
    ("rate=100gbit,rtt=58ms,loss=1e-4", 6 * GIB, [4096, 9000]),
    ("rate=100gbit,rtt=5ms,loss=1e-6", 4 * GIB, [4096, 9000]),
    ("rate=400gbit,rtt=2ms,loss=1e-4,mtu=65535", 8 * GIB, [9000, 65535]),
    ("rate=400gbit,rtt=20ms,loss=1e-3,burst=4,mtu=65535", 8 * GIB, [9000, 65535]),
]

FEC_GRID = [("off", 1), ("32,2", 1), ("32,2", 8), ("32,4", 1), ("32,4", 8)]
WINDOW_BDP_MULTIPLES = [0.5, 1, 2, 4]  # plus 1 MiB (the seed recipe's)

def spec_keys(spec):
    return dict(kv.split("=", 1) for kv in spec.split(",") if "=" in kv)


def bdp_bytes(spec):
    k = spec_keys(spec)
    return parse_rate(k["rate"]) * parse_duration(k.get("rtt", "0")) / 8


def fmt_size(b):
    return _fmt_size(b, smallest="MiB")


def segment_for_mtu(mtu):
    # TransportConfig::SegmentForMtu: IPv4/UDP (28) + per-packet headers (78).
    return min(mtu - 28 - 78, 65536 - 512)


class Runner:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.join(args.build_dir, "bin")
        self.deadline = time.monotonic() + args.max_minutes * 60
        self.runs = []
        # Grid runs of an earlier invocation (--reuse): same spec and label (a spec's bytes
        # are fixed in SPECS).
        self.reuse = {}
        if args.reuse:
            with open(args.reuse) as f:
                for r in json.load(f)["runs"]:
                    if not r["label"].startswith(("tuned", "seed")):
                        self.reuse[(r["spec"], r["label"])] = r

    def out_of_time(self):
        return time.monotonic() > self.deadline

    def sim(self, spec, nbytes, flags, label):
        old = self.reuse.get((spec, label))
        if old is not None:
            self.runs.append(old)
            return old
        cmd = [os.path.join(self.bin, "longhaul-sim"), "--link=" + spec,
               "--bytes=" + fmt_size(nbytes), "--seed=1", "--json",
               "--max_wall_time=%ds" % self.args.run_wall, "--max_virtual_time=3600s"] + flags
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=self.args.run_wall + 60)
        except subprocess.TimeoutExpired:
            rec = {"spec": spec, "label": label, "cmd": " ".join(cmd), "error": "timeout"}
            self.runs.append(rec)
            return rec
        rec = {"spec": spec, "label": label, "bytes": fmt_size(nbytes), "cmd": " ".join(cmd[1:]),
               "wall_s": round(time.monotonic() - t0, 2)}
        try:
            r = json.loads(p.stdout)["result"]
            rec.update(goodput_bps=r["goodput_bps"], intact=r["delivered_intact"],
                       stop=r["stop_reason"], fec_repair=r["fec_repair_packets_sent"])
        except (ValueError, KeyError):
            rec["error"] = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        self.runs.append(rec)
        if self.args.verbose:
            print("  %-60s %s" % (label, "%.4g Gbit/s" % (rec["goodput_bps"] / 1e9)
                                  if "goodput_bps" in rec else rec.get("error")),
                  file=sys.stderr)
        return rec

    def tune(self, spec, out):
        cmd = [os.path.join(self.bin, "longhaul-tune"), "--link=" + spec, "--out=" + out,
               "--json", "--check_budget=%ds" % self.args.tune_budget]
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=self.args.tune_budget + 120)
        if p.returncode != 0:
            raise RuntimeError("longhaul-tune failed: " + p.stderr.strip())
        return json.loads(p.stdout)


def good(rec):
    return rec.get("goodput_bps", 0.0) if rec.get("intact") else 0.0


def partial(rec):
    # A run stopped by its bound still measured a goodput over what it delivered (the
    # seed recipe on long lossy paths can be that slow); it is reported as such.
    return rec.get("goodput_bps", 0.0)


def make_parser():
    ap = cli.parser(__doc__)
    cli.add_build_dir(ap, default="build", help="build directory (bin/longhaul-sim ...)")
    ap.add_argument("--specs", default="", help="1-based spec numbers, e.g. 1,5,9 (default all)")
    ap.add_argument("--quick", action="store_true",
                    help="smaller grid: the largest segment, windows 1 and 2 BDP, FEC off/32,4")
    ap.add_argument("--run-wall", type=int, default=120, help="wall seconds per simulator run")
    ap.add_argument("--tune-budget", type=int, default=60, help="longhaul-tune --check_budget")
    ap.add_argument("--max-minutes", type=float, default=240, help="bound on the whole script")
    ap.add_argument("--out", default="", help="also write the Markdown table here")
    ap.add_argument("--json", default="", help="write every run (commands, results) here")
    ap.add_argument("--reuse", default="", help="take grid runs from an earlier --json file")
    ap.add_argument("--verbose", action="store_true")
    return ap


def fec_flush_us(fec, depth, seg, rate):
    """--fec_flush for a FEC grid point: give FEC a fair chance, let a group of D x k
    packets fill before the flush deadline closes it short (as longhaul-tune does)."""
    k = int(fec.split(",")[0])
    fill_s = 1.25 * depth * k * (seg + 106) * 8 / rate
    return max(1000, int(math.ceil(fill_s * 1e6 / 100) * 100))


def grid_plan(spec, mtus, quick):
    """The grid's simulator runs of one spec, in order: [(flags, label)] over MTU x window
    x FEC x interleave (--quick: the largest MTU, windows 1 and 2 BDP, FEC off and 32,4)."""
    keys = spec_keys(spec)
    link_mtu = int(keys.get("mtu", 9000))
    rate = parse_rate(keys["rate"])
    bdp = bdp_bytes(spec)
    windows = sorted({MIB} | {max(MIB, int(math.ceil(m * bdp / MIB)) * MIB)
                              for m in WINDOW_BDP_MULTIPLES})
    fec_grid = FEC_GRID
    if quick:
        mtus = [max(m for m in mtus if m <= link_mtu)]
        windows = sorted({max(MIB, int(math.ceil(m * bdp / MIB)) * MIB) for m in (1, 2)})
        fec_grid = [("off", 1), ("32,4", 1)]
    plan = []
    for mtu in [m for m in mtus if m <= link_mtu]:
        seg = segment_for_mtu(mtu)
        for w in windows:
            for fec, depth in fec_grid:
                flags = ["--mtu=%d" % mtu, "--window=" + fmt_size(w), "--fec=" + fec,
                         "--fec_interleave=%d" % depth]
                if fec != "off":
                    flags.append("--fec_flush=%dus" % fec_flush_us(fec, depth, seg, rate))
                plan.append((flags, "mtu=%d window=%s fec=%s/%d" % (mtu, fmt_size(w), fec,
                                                                    depth)))
    return plan


def grid_best(runner, spec, nbytes, plan):
    """Runs the plan (until --max-minutes); its best run (intact, highest goodput)."""
    best = None
    for flags, label in plan:
        if runner.out_of_time():
            break
        rec = runner.sim(spec, nbytes, flags, label)
        if best is None or good(rec) > good(best):
            best = rec
    return best


def verdict(g_best, g_tuned, g_seed, rtt):
    """(tuned / best, tuned / seed, pass): tuned >= 95 % of the grid's best, and >= 5 x the
    seed recipe where RTT >= 50 ms."""
    ratio_best = g_tuned / g_best if g_best else 0
    ratio_seed = g_tuned / g_seed if g_seed else float("inf")
    return ratio_best, ratio_seed, ratio_best >= 0.95 and (rtt < 0.05 or ratio_seed >= 5)


def spec_row(runner, spec, nbytes, best, prof, seed_profile):
    """The tuned profile's and the seed recipe's runs of one spec against the grid's best:
    the table's row (its verdict also on stderr)."""
    try:
        t = runner.tune(spec, prof)
        tuned_label = t["chosen"]["label"]
    except Exception as e:  # report and go on with the next spec
        print("tune-grid: %s" % e, file=sys.stderr)
        t, tuned_label = None, "tune failed"
    tuned = runner.sim(spec, nbytes, ["--profile=" + prof], "tuned: " + tuned_label) if t else {}
    seed = runner.sim(spec, nbytes, ["--profile=" + seed_profile], "seed recipe")
    rtt = parse_duration(spec_keys(spec).get("rtt", "0"))
    g_best, g_tuned, g_seed = good(best or {}), good(tuned), good(seed) or partial(seed)
    seed_note = "" if seed.get("intact") else " (partial: %s)" % seed.get("stop", "failed")
    ratio_best, ratio_seed, ok = verdict(g_best, g_tuned, g_seed, rtt)
    print("tune-grid:   best %.4g, tuned %.4g (%.1f%%), seed %.4g Gbit/s (x%.1f) %s" %
          (g_best / 1e9, g_tuned / 1e9, 100 * ratio_best, g_seed / 1e9, ratio_seed,
           "PASS" if ok else "FAIL"), file=sys.stderr)
    return {
        "spec": spec, "bytes": fmt_size(nbytes), "best": (best or {}).get("label", "-"),
        "best_gbps": g_best / 1e9, "tuned": tuned_label, "tuned_gbps": g_tuned / 1e9,
        "tuned_vs_best": ratio_best, "seed_gbps": g_seed / 1e9, "seed_note": seed_note,
        "tuned_vs_seed": ratio_seed,
        "pass": ok, "grid_runs": sum(1 for r in runner.runs if r["spec"] == spec) - 2,
    }


def markdown_table(rows):
    """The rows as the Markdown table of docs/tuning.md."""
    lines = ["| # | link spec | bytes/run | grid runs | grid best (config) | grid best Gbit/s "
             "| tuned (longhaul-tune choice) | tuned Gbit/s | tuned / best | seed recipe Gbit/s "
             "| tuned / seed | pass |",
             "|---:|---|---:|---:|---|---:|---|---:|---:|---:|---:|---|"]
    for i, r in enumerate(rows, 1):
        lines.append("| %d | `%s` | %s | %d | %s | %.4g | %s | %.4g | %.1f %% | %.4g%s | %s | "
                     "%s |" % (
                         i, r["spec"], r["bytes"], r["grid_runs"], r["best"], r["best_gbps"],
                         r["tuned"], r["tuned_gbps"], 100 * r["tuned_vs_best"], r["seed_gbps"],
                         r.get("seed_note", ""),
                         ("x%.1f" % r["tuned_vs_seed"]) if math.isfinite(r["tuned_vs_seed"])
                         else "-",
                         "yes" if r["pass"] else "**no**"))
    return "\n".join(lines) + "\n"


def main():
    ap = make_parser()
    args = ap.parse_args()

    seed_profile = os.path.join(cli.ROOT, "profiles", "seed-recipe.profile")
    chosen = SPECS
    if args.specs:
        chosen = [SPECS[int(i) - 1] for i in args.specs.split(",")]
    runner = Runner(args)
    rows = []
    tmp = tempfile.mkdtemp(prefix="tune-grid-")
    for spec, nbytes, mtus in chosen:
        if runner.out_of_time():
            print("tune-grid: --max-minutes reached; stopping", file=sys.stderr)
            break
        print("tune-grid: %s (%s per run)" % (spec, fmt_size(nbytes)), file=sys.stderr)
        best = grid_best(runner, spec, nbytes, grid_plan(spec, mtus, args.quick))
        prof = os.path.join(tmp, "tuned-%d.profile" % len(rows))
        rows.append(spec_row(runner, spec, nbytes, best, prof, seed_profile))

    table = markdown_table(rows)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "runs": runner.runs}, f, indent=1)
    return 0 if rows and all(r["pass"] for r in rows) else 1


def entry():
    """What tools/bench/tune-grid runs."""
    sys.exit(main())
