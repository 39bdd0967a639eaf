#!/usr/bin/env python3
"""The UC datapath side by side in one soft-RoCE testbed boot (docs/rdma.md 7.13).

1. No netem: perftest `ib_write_bw -c UC -s 65536` and `ib_write_bw` RC (what the NIC path
   moves, no crypto), then longhaul-perf over verbs with --qp_type=uc and over UD, in
   plaintext and protected, each unpaced (cc bbr, no cap); UC in plaintext with its
   sender copying the payload as before zero copy (--nozero_copy; docs/rdma.md 7.14), and
   with the receiver staging every chunk instead of posting buffers for the sender's NIC
   to write into (the server's --nozero_copy; docs/rdma.md 7.15); and
   both in plaintext with --verify=off (no test pattern written or checked: longhaul's
   own cost).
2. The same offered rate with no netem (--rate, fixed): UC (with and without zero copy
   at either end) and UD, plaintext and protected, for CPU seconds per GB at equal rates.
3. netem on both guests' eth0 (RATE, 29 ms each way, each loss): longhaul UC protected
   (paced at 97.5 % of the netem rate, as rdma_compare.py does), longhaul UC with
   longhaul-tune's chunk for the loss where it differs, longhaul UD protected and perftest
   RC with the common recipe (1 MiB in flight, MTU 4096, QP timeout 18).

Every run reports the receiver's goodput (Mbit/s; longhaul: verified bytes after the
first message over the time from its delivery to the last) and each guest's whole busy
CPU from /proc/stat per GB moved (rxe works in softirq, billed to whatever runs). Prints
a line per run and a markdown table.

    uc_compare.py --build_dir=build [--seconds=15] [--rate_mbit=50] [--fixed_mbit=50]
                  [--losses=0,0.001,0.01] [--parts=1,2,3]
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import longhaul_testbed as lt  # noqa: E402
from rdma_compare import GID, SERVER, longhaul_mbit, pair, perftest_mbit  # noqa: E402
from uc_lane_cpu import guest_cpu  # noqa: E402


def lh_mbit(out):
    """rdma_compare's longhaul_mbit, also for --verify=off (every byte arrived)."""
    v = longhaul_mbit(out)
    if v is not None:
        return v
    try:
        j = json.loads(out[out.index("{"):out.index("\n--- server ---")])
        r = j["end"]["sum_received"]
        if not j["end"]["longhaul"]["integrity"].get("complete"):
            return None
        return max(0, r["bytes"] - (1 << 20)) * 8 / r["seconds"] / 1e6
    except (ValueError, KeyError, ZeroDivisionError):
        return None


def run(tb, scmd, ready, ccmd, parse, seconds):
    """(Mbit/s or None, busy CPU s per guest, rc, output)."""
    before = {g: guest_cpu(tb, g) for g in lt.GUESTS}
    rc, out = pair(tb, scmd, ready, ccmd, seconds + 120)
    after = {g: guest_cpu(tb, g) for g in lt.GUESTS}
    hz = os.sysconf("SC_CLK_TCK")
    busy = {g: ((after[g][0] - before[g][0]) - (after[g][1] - before[g][1])) / hz
            for g in lt.GUESTS}
    v = parse(out) if rc is not None else None
    return v, busy, rc, out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rate_mbit", type=float, default=50, help="netem rate of part 3")
    ap.add_argument("--fixed_mbit", type=float, default=50, help="offered rate of part 2")
    ap.add_argument("--losses", default="0,0.001,0.01")
    ap.add_argument("--parts", default="1,2,3",
                    help="which parts to run: 1 no netem flat out, 2 no netem at "
                         "--fixed_mbit, 3 through netem")
    args = ap.parse_args(argv)
    build = os.path.abspath(args.build_dir)
    if lt.skipped():
        return lt.SKIP
    keys = lt.Keys(build, os.path.join(build, "uc-compare-keys"))
    perf = os.path.join(build, "bin", "longhaul-perf")
    T = args.seconds
    dev = "-d rxe0 -x %d --report_gbits" % GID
    results = []

    def lh(name, mode, qp, client_flags, section, server_flags=""):
        scmd = "%s --server --datapath=verbs --one_off --bind=%s --qp_type=%s %s %s" % (
            perf, SERVER, qp, server_flags, keys.flags(mode, "server"))
        ccmd = ("%s --client=%s --datapath=verbs --qp_type=%s --time=%d --interval=%d --json %s %s"
                % (perf, SERVER, qp, T, T, client_flags, keys.flags(mode, "client")))
        return (section, name, scmd, "Server listening", ccmd, lh_mbit)

    def perftest(section, name, flags):
        return (section, name, "ib_write_bw %s -D %d %s" % (flags, T, dev), "Waiting for client",
                "ib_write_bw %s -D %d %s %s" % (flags, T, dev, SERVER), perftest_mbit)

    def go(tb, runs):
        for section, name, scmd, ready, ccmd, parse in runs:
            v, busy, rc, out = run(tb, scmd, ready, ccmd, parse, T)
            if v is None and parse is perftest_mbit:
                # perftest's end-of-test key exchange sometimes fails on its TCP socket
                # ("Couldn't read remote address"): once more.
                v, busy, rc, out = run(tb, scmd, ready, ccmd, parse, T)
            gb = (v or 0) * 1e6 / 8 * T / 1e9
            cpu = {g: busy[g] / gb if gb > 0 else float("nan") for g in lt.GUESTS}
            results.append((section, name, v, cpu))
            print("%s | %s: %s Mbit/s; busy CPU s/GB receiver %.1f, sender %.1f (rc %s)"
                  % (section, name, "%.1f" % v if v is not None else None, cpu["a"], cpu["b"],
                     rc), flush=True)
            if v is None:
                print(out[-1500:], flush=True)

    with lt.Testbed(os.path.join(build, "uc-compare"), keep=[build]) as tb:
        tb.require([perf])
        print("booted in %.1f s (%s)" % (tb.boot_s, tb.accel), flush=True)
        tb.netem("a", "")
        tb.netem("b", "")
        parts = set(args.parts.split(","))
        go(tb, [] if "1" not in parts else [perftest("no netem", "ib_write_bw -c UC -s 65536", "-c UC -s 65536"),
                perftest("no netem", "ib_write_bw RC -s 65536", "-s 65536"),
                lh("longhaul UC plaintext, bbr", "insecure", "uc", "", "no netem"),
                # The sender copying its payload as before zero copy (docs/rdma.md 7.14).
                lh("longhaul UC plaintext, bbr, --nozero_copy", "insecure", "uc",
                   "--nozero_copy", "no netem"),
                # The receiver staging every chunk in its ring and copying the payload out
                # (no posted buffers: docs/rdma.md 7.15).
                lh("longhaul UC plaintext, bbr, receiver --nozero_copy", "insecure", "uc", "",
                   "no netem", "--nozero_copy"),
                lh("longhaul UC protected, bbr", "ik", "uc", "", "no netem"),
                lh("longhaul UD plaintext, bbr", "insecure", "ud", "", "no netem"),
                lh("longhaul UD protected, bbr", "ik", "ud", "", "no netem"),
                # Without longhaul-perf's own pattern (written and checked per byte), as
                # perftest, which touches no byte.
                lh("longhaul UC plaintext, bbr, --verify=off", "insecure", "uc", "--verify=off",
                   "no netem"),
                lh("longhaul UD plaintext, bbr, --verify=off", "insecure", "ud", "--verify=off",
                   "no netem")])
        fixed = "--rate=%gmbit" % args.fixed_mbit
        sec = "no netem, %g Mbit/s offered" % args.fixed_mbit
        go(tb, [] if "2" not in parts else [
                lh("longhaul UC plaintext", "insecure", "uc", fixed, sec),
                lh("longhaul UC plaintext, --nozero_copy", "insecure", "uc",
                   fixed + " --nozero_copy", sec),
                lh("longhaul UC plaintext, receiver --nozero_copy", "insecure", "uc", fixed, sec,
                   "--nozero_copy"),
                lh("longhaul UD plaintext", "insecure", "ud", fixed, sec),
                lh("longhaul UC protected", "ik", "uc", fixed, sec),
                lh("longhaul UD protected", "ik", "ud", fixed, sec)])
        r = args.rate_mbit
        paced = "--rate=%gmbit --pacing_burst=20ms" % (r * 0.975)
        for loss in [float(x) for x in args.losses.split(",")] if "3" in parts else []:
            spec = "rate %gmbit delay 29ms limit 100000%s" % (
                r, " loss %g%%" % (loss * 100) if loss else "")
            tb.netem("a", spec)
            tb.netem("b", spec)
            sec = "netem %g Mbit/s, RTT 58 ms, loss %g" % (r, loss)
            # The chunk starts at 64 KiB and follows the loss (halved while more than 2 % of
            # the data packets are lost); beside it, longhaul-tune's chunk at 1e-2 (2
            # packets, docs/tuning.md) from the start.
            runs = [lh("longhaul UC protected, chunk from 64 KiB", "ik", "uc", paced, sec)]
            if loss >= 0.005:
                runs.append(lh("longhaul UC protected, 8 KiB chunks", "ik", "uc",
                               paced + " --uc_chunk=8KiB", sec))
            runs += [lh("longhaul UD protected", "ik", "ud", paced, sec),
                     perftest(sec, "ib_write_bw RC recipe (1 MiB, -m 4096 -u 18)",
                              "-s 1048576 -t 1 -m 4096 -u 18")]
            go(tb, runs)
    print("\n| conditions | run | Mbit/s | receiver CPU s/GB | sender CPU s/GB |\n"
          "| --- | --- | --- | --- | --- |")
    for section, name, v, cpu in results:
        print("| %s | %s | %s | %.1f | %.1f |" % (section, name, "%.1f" % v if v is not None else "failed",
                                              cpu["a"], cpu["b"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
