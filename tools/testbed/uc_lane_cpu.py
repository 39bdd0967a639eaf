#!/usr/bin/env python3
"""What the NIC path costs: whole-guest busy CPU per GB of one UC lane beside longhaul over UD.

Boots the soft-RoCE testbed once, no netem, and moves data from guest b to guest a
(198.18.1.1) at the same offered rate, reading /proc/stat in both guests before and after
each run (rxe works in softirq, billed to whatever runs, so only the whole guest's busy
time counts):

- a UC lane (tests/rdma/uc_probe: 64 KiB chunks written with immediate into the ring,
  every byte checked; the receiver sleeps on its completion channel). No longhaul core,
  no packet protection: what the NIC path itself costs, the floor under the UC datapath;
- longhaul-perf over the verbs datapath (UD), plaintext and protected (Noise IK).

Each run is repeated ROUNDS times; prints one line per run and its CPU seconds per GB on
each guest. docs/rdma.md section 7.11.

    uc_lane_cpu.py --build_dir=build --rate_mbit=50 --seconds=10 --rounds=2
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import longhaul_testbed as lt  # noqa: E402

SERVER = "198.18.1.1"
CHUNK = 65536
UNITS = {"KBytes": 1 << 10, "MBytes": 1 << 20, "GBytes": 1 << 30}


def guest_cpu(tb, g):
    """(total, idle + iowait) jiffies of `g` from /proc/stat."""
    rc, out = tb.run(g, "head -1 /proc/stat", 10)
    if rc != 0:
        raise RuntimeError("guest %s: /proc/stat: %s" % (g, out))
    v = [int(x) for x in out.split()[1:]]
    return sum(v), v[3] + v[4]


def measured(tb, fn):
    before = {g: guest_cpu(tb, g) for g in lt.GUESTS}
    t0 = time.monotonic()
    nbytes = fn()
    wall = time.monotonic() - t0
    after = {g: guest_cpu(tb, g) for g in lt.GUESTS}
    hz = os.sysconf("SC_CLK_TCK")
    busy = {g: ((after[g][0] - before[g][0]) - (after[g][1] - before[g][1])) / hz
            for g in lt.GUESTS}
    return nbytes, busy, wall


def uc_lane(tb, build, rate, seconds):
    probe = os.path.join(build, "tests", "uc_probe")
    chunks = int(rate * 1e6 / 8 * seconds / CHUNK)
    pid = tb.spawn("a", "%s server %s 6100 %d 90" % (probe, SERVER, CHUNK), "/tmp/uc-cpu.log")
    rc, out = tb.run("a", "timeout 30 sh -c 'until grep -q listening /tmp/uc-cpu.log; "
                     "do sleep 0.05; done'", 40)
    if rc != 0:
        raise RuntimeError("uc_probe server did not start")
    rc, out = tb.run("b", "%s client %s 6100 %d 198.18.1.2 %d %d 0"
                     % (probe, SERVER, CHUNK, chunks, rate), seconds * 10 + 60)
    src = tb.wait("a", pid, 60)
    _, sout = tb.run("a", "cat /tmp/uc-cpu.log", 10)
    if rc != 0 or src != 0:
        raise RuntimeError("uc_probe failed: %s %s" % (out[-800:], sout[-800:]))
    print("  " + [line for line in sout.splitlines() if "delivered" in line][-1], flush=True)
    return chunks * CHUNK


def ud_perf(tb, build, keys, mode, rate, seconds):
    perf = os.path.join(build, "bin", "longhaul-perf")
    pid = tb.spawn("a", "%s --server --datapath=verbs --one_off --bind=%s %s"
                   % (perf, SERVER, keys.flags(mode, "server")), "/tmp/uc-cpu-perf.log")
    rc, _ = tb.run("a", "timeout 30 sh -c 'until grep -q \"Server listening\" "
                   "/tmp/uc-cpu-perf.log; do sleep 0.05; done'", 40)
    if rc != 0:
        raise RuntimeError("longhaul-perf server did not start")
    rc, out = tb.run("b", "%s --client=%s --datapath=verbs --time=%d --rate=%dmbit %s"
                     % (perf, SERVER, seconds, rate, keys.flags(mode, "client")),
                     seconds * 10 + 60)
    tb.wait("a", pid, 60)
    lines = [line for line in out.splitlines() if line.rstrip().endswith("receiver")]
    if rc != 0 or not lines:
        raise RuntimeError("longhaul-perf failed: %s" % out[-800:])
    print("  " + lines[-1].strip(), flush=True)
    m = re.search(r"([\d.]+) (KBytes|MBytes|GBytes)", lines[-1])
    return float(m.group(1)) * UNITS[m.group(2)]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--rate_mbit", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    build = os.path.abspath(args.build_dir)
    if lt.skipped():
        return lt.SKIP
    keys = lt.Keys(build, os.path.join(build, "uc-lane-cpu-keys"))
    runs = [("UC lane, 64 KiB chunks", lambda tb: uc_lane(tb, build, args.rate_mbit, args.seconds)),
            ("longhaul UD, plaintext",
             lambda tb: ud_perf(tb, build, keys, "insecure", args.rate_mbit, args.seconds)),
            ("longhaul UD, protected",
             lambda tb: ud_perf(tb, build, keys, "ik", args.rate_mbit, args.seconds))]
    with lt.Testbed(os.path.join(build, "uc-lane-cpu"), keep=[build]) as tb:
        tb.require([os.path.join(build, "tests", "uc_probe"),
                    os.path.join(build, "bin", "longhaul-perf")])
        print("booted in %.1f s (%s); %d Mbit/s offered for %d s, no netem"
              % (tb.boot_s, tb.accel, args.rate_mbit, args.seconds), flush=True)
        tb.netem("a", "")
        tb.netem("b", "")
        for r in range(args.rounds):
            for name, fn in runs:
                nbytes, busy, wall = measured(tb, lambda: fn(tb))
                gb = nbytes / 1e9
                print("%-24s round %d: %.1f MB in %.1f s; busy a (receiver) %.2f s, b (sender) "
                      "%.2f s: %.1f and %.1f CPU s/GB"
                      % (name, r + 1, nbytes / 1e6, wall, busy["a"], busy["b"],
                         busy["a"] / gb, busy["b"] / gb), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
