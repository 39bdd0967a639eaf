#!/usr/bin/env python3
"""Two builds' UC datapath side by side in one soft-RoCE testbed boot (docs/rdma.md 7.13).

longhaul-perf over verbs with --qp_type=uc, protected (Noise IK), paced at 97.5 % of the
netem rate, from BUILD and from OTHER in turn (the order alternating per round, so that
neither always runs first) through the same netem on both guests' eth0. Prints each run's
goodput (as uc_compare.py computes it: the receiver's verified bytes after the first
message) and each build's runs at the end. For telling a change from the emulator's
boot-to-boot variance, which is larger than most changes.

    uc_ab.py --build_dir=build --other_build_dir=../old/build [--runs=4] [--seconds=15]
             [--rate_mbit=50] [--loss=0.01] [--client_flags="..."]

Both builds must lie in folders the guests can see (inside the checkout, or given here:
they are kept for the guests).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import longhaul_testbed as lt  # noqa: E402
from rdma_compare import SERVER, pair  # noqa: E402
from uc_compare import lh_mbit  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--other_build_dir", required=True)
    ap.add_argument("--runs", type=int, default=4, help="runs of each build")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rate_mbit", type=float, default=50, help="netem rate")
    ap.add_argument("--loss", type=float, default=0.01)
    ap.add_argument("--client_flags", default="", help="more longhaul-perf client flags")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.seconds < 1:
        ap.error("--runs and --seconds must be at least 1")
    builds = {"build": os.path.abspath(args.build_dir),
              "other": os.path.abspath(args.other_build_dir)}
    perfs = {k: os.path.join(v, "bin", "longhaul-perf") for k, v in builds.items()}
    for k, p in perfs.items():
        if not os.access(p, os.X_OK):
            ap.error("no %s (build it first)" % p)
    why = lt.check_available(lt.default_cache())
    if why:
        print("skipped: " + why)
        return lt.SKIP
    keys = lt.Keys(builds["build"], os.path.join(builds["build"], "uc-ab-keys"))
    r = args.rate_mbit
    spec = "rate %gmbit delay 29ms limit 100000%s" % (
        r, " loss %g%%" % (args.loss * 100) if args.loss else "")
    results = {"build": [], "other": []}
    with lt.Testbed(os.path.join(builds["build"], "uc-ab"), keep=list(builds.values())) as tb:
        tb.require(list(perfs.values()))
        print("booted in %.1f s (%s); netem %s" % (tb.boot_s, tb.accel, spec), flush=True)
        tb.netem("a", spec)
        tb.netem("b", spec)
        for i in range(args.runs):
            for name in ("build", "other") if i % 2 == 0 else ("other", "build"):
                perf = perfs[name]
                scmd = "%s --server --datapath=verbs --one_off --bind=%s --qp_type=uc %s" % (
                    perf, SERVER, keys.flags("ik", "server"))
                ccmd = ("%s --client=%s --datapath=verbs --qp_type=uc --time=%d --interval=%d "
                        "--json --rate=%gmbit --pacing_burst=20ms %s %s"
                        % (perf, SERVER, args.seconds, args.seconds, r * 0.975,
                           args.client_flags, keys.flags("ik", "client")))
                rc, out = pair(tb, scmd, "Server listening", ccmd, args.seconds + 120)
                v = lh_mbit(out) if rc is not None else None
                results[name].append(v)
                print("round %d %s: %s Mbit/s (rc %s)"
                      % (i + 1, name, "%.1f" % v if v is not None else "failed", rc), flush=True)
                if v is None:
                    print(out[-1500:], flush=True)
    for name, vs in results.items():
        ok = [v for v in vs if v is not None]
        mean = sum(ok) / len(ok) if ok else float("nan")
        print("%s (%s): %s; mean %.1f Mbit/s (%.3f x the netem rate)"
              % (name, builds[name], ", ".join("%.1f" % v if v is not None else "failed"
                                               for v in vs), mean, mean / r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
