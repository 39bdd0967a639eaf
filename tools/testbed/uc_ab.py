#!/usr/bin/env python3
"""Two builds' (or two settings') UC datapath side by side in one soft-RoCE testbed boot
(docs/rdma.md 7.13).

longhaul-perf over verbs with --qp_type=uc, protected (Noise IK) or plaintext, paced at
97.5 % of RATE, from BUILD and from OTHER in turn (the order alternating per round, so
that neither always runs first) through the same netem on both guests' eth0 (or none).
OTHER is BUILD again with other flags when only those are given. Prints each run's
goodput (as uc_compare.py computes it: the receiver's verified bytes after the first
message) and each guest's busy CPU seconds per GB (/proc/stat), and each side's runs at
the end. For telling a change from the emulator's boot-to-boot variance, which is larger
than most changes.

    uc_ab.py --build_dir=build [--other_build_dir=../old/build] [--runs=4] [--seconds=15]
             [--rate_mbit=50] [--loss=0.01] [--no_netem] [--security=ik|insecure]
             [--client_flags="..."] [--server_flags="..."]
             [--other_client_flags="..."] [--other_server_flags="..."]

Both builds must lie in folders the guests can see (inside the checkout, or given here:
they are kept for the guests).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import longhaul_testbed as lt  # noqa: E402
from rdma_compare import SERVER  # noqa: E402
from uc_compare import lh_mbit, run  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--other_build_dir", default="", help="default: --build_dir")
    ap.add_argument("--runs", type=int, default=4, help="runs of each build")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rate_mbit", type=float, default=50, help="netem rate")
    ap.add_argument("--loss", type=float, default=0.01)
    ap.add_argument("--client_flags", default="", help="more longhaul-perf client flags")
    ap.add_argument("--server_flags", default="", help="more longhaul-perf server flags")
    ap.add_argument("--other_client_flags", default=None, help="OTHER's (default: the same)")
    ap.add_argument("--other_server_flags", default=None, help="OTHER's (default: the same)")
    ap.add_argument("--no_netem", action="store_true", help="no netem (RATE only paces)")
    ap.add_argument("--security", default="ik", choices=["ik", "insecure"])
    args = ap.parse_args(argv)
    if args.runs < 1 or args.seconds < 1:
        ap.error("--runs and --seconds must be at least 1")
    builds = {"build": os.path.abspath(args.build_dir),
              "other": os.path.abspath(args.other_build_dir or args.build_dir)}
    flags = {"build": (args.client_flags, args.server_flags),
             "other": (args.client_flags if args.other_client_flags is None
                       else args.other_client_flags,
                       args.server_flags if args.other_server_flags is None
                       else args.other_server_flags)}
    perfs = {k: os.path.join(v, "bin", "longhaul-perf") for k, v in builds.items()}
    for k, p in perfs.items():
        if not os.access(p, os.X_OK):
            ap.error("no %s (build it first)" % p)
    if lt.skipped():
        return lt.SKIP
    keys = lt.Keys(builds["build"], os.path.join(builds["build"], "uc-ab-keys"))
    r = args.rate_mbit
    spec = "" if args.no_netem else "rate %gmbit delay 29ms limit 100000%s" % (
        r, " loss %g%%" % (args.loss * 100) if args.loss else "")
    results = {"build": [], "other": []}
    cpus = {"build": [], "other": []}
    with lt.Testbed(os.path.join(builds["build"], "uc-ab"), keep=list(builds.values())) as tb:
        tb.require(list(perfs.values()))
        print("booted in %.1f s (%s); netem %s" % (tb.boot_s, tb.accel, spec or "none"),
              flush=True)
        tb.netem("a", spec)
        tb.netem("b", spec)
        for i in range(args.runs):
            for name in ("build", "other") if i % 2 == 0 else ("other", "build"):
                perf = perfs[name]
                cflags, sflags = flags[name]
                scmd = "%s --server --datapath=verbs --one_off --bind=%s --qp_type=uc %s %s" % (
                    perf, SERVER, sflags, keys.flags(args.security, "server"))
                ccmd = ("%s --client=%s --datapath=verbs --qp_type=uc --time=%d --interval=%d "
                        "--json --rate=%gmbit --pacing_burst=20ms %s %s"
                        % (perf, SERVER, args.seconds, args.seconds, r * 0.975,
                           cflags, keys.flags(args.security, "client")))
                v, busy, rc, out = run(tb, scmd, "Server listening", ccmd, lh_mbit, args.seconds)
                gb = (v or 0) * 1e6 / 8 * args.seconds / 1e9
                cpu = {g: busy[g] / gb if gb > 0 else float("nan") for g in lt.GUESTS}
                results[name].append(v)
                cpus[name].append(cpu)
                print("round %d %s: %s Mbit/s, busy CPU s/GB receiver %.1f, sender %.1f (rc %s)"
                      % (i + 1, name, "%.1f" % v if v is not None else "failed", cpu["a"],
                         cpu["b"], rc), flush=True)
                if v is None:
                    print(out[-1500:], flush=True)
    for name, vs in results.items():
        ok = [v for v in vs if v is not None]
        mean = sum(ok) / len(ok) if ok else float("nan")
        rx = [c["a"] for c in cpus[name] if c["a"] == c["a"]]
        tx = [c["b"] for c in cpus[name] if c["b"] == c["b"]]
        print("%s (%s %s): %s; mean %.1f Mbit/s (%.3f x RATE); busy CPU s/GB receiver %s "
              "(mean %.1f), sender %s (mean %.1f)"
              % (name, builds[name], " ".join(flags[name]).strip() or "-",
                 ", ".join("%.1f" % v if v is not None else "failed" for v in vs), mean, mean / r,
                 ", ".join("%.1f" % x for x in rx), sum(rx) / len(rx) if rx else float("nan"),
                 ", ".join("%.1f" % x for x in tx), sum(tx) / len(tx) if tx else float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
