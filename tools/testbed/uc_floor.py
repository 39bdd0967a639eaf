#!/usr/bin/env python3
"""Where the receiving guest's CPU goes, UC flat out (docs/rdma.md 7.13, the floors).

In one soft-RoCE testbed boot, no netem:
1. One CRC32C pass in a guest: longhaul-crypto-bench's BM_Crc32c over a 9000-byte
   packet (the check every plaintext datagram gets, at each end), as CPU s/GB.
2. perftest `ib_write_bw -c UC -s 65536` (the NIC path alone: no byte touched in user
   space) and longhaul-perf over verbs with --qp_type=uc in plaintext, unpaced, zero copy
   at both ends (the default), each for --seconds: the receiver's goodput and its whole
   busy CPU from /proc/stat per GB moved, split into user time (the processes) and
   system + interrupt time (rxe works in softirq, billed to whatever runs).

If both runs saturate the receiving guest's one vCPU, longhaul's rate is perftest's x
(perftest's CPU per GB / longhaul's): reaching 0.8 x perftest's needs longhaul's
receiver within 1.25 x perftest's CPU per GB, which bounds what its user-space work
may cost; the CRC32C pass alone is compared with that budget.

    uc_floor.py --build_dir=build [--seconds=15] [--rounds=2]
"""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import longhaul_testbed as lt  # noqa: E402
from rdma_compare import GID, SERVER, pair, perftest_mbit  # noqa: E402
from uc_compare import lh_mbit  # noqa: E402


def cpu_split(tb, g):
    """(user + nice, system + irq + softirq, idle + iowait) jiffies of guest `g`."""
    rc, out = tb.run(g, "head -1 /proc/stat", 10)
    if rc != 0:
        raise RuntimeError("guest %s: /proc/stat: %s" % (g, out))
    v = [int(x) for x in out.split()[1:]]
    return v[0] + v[1], v[2] + v[5] + v[6], v[3] + v[4]


def crc_s_per_gb(tb, bench):
    rc, out = tb.run("a", "%s --benchmark_filter='BM_Crc32c/0/8972' --benchmark_min_time=2"
                     % bench, 120)
    m = re.search(r"BM_Crc32c/0/8972\s+(\d+(?:\.\d+)?) ns\s+(\d+(?:\.\d+)?) ns", out)
    if rc != 0 or m is None:
        raise RuntimeError("longhaul-crypto-bench in the guest: rc %s\n%s" % (rc, out[-1500:]))
    return float(m.group(2)) * 1e-9 / 8968 * 1e9  # CPU ns per packet -> s per GB


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    build = os.path.abspath(args.build_dir)
    if lt.skipped():
        return lt.SKIP
    perf = os.path.join(build, "bin", "longhaul-perf")
    bench = os.path.join(build, "bin", "longhaul-crypto-bench")
    T = args.seconds
    dev = "-d rxe0 -x %d --report_gbits" % GID
    runs = [
        ("perftest ib_write_bw -c UC -s 65536",
         "ib_write_bw -c UC -s 65536 -D %d %s" % (T, dev), "Waiting for client",
         "ib_write_bw -c UC -s 65536 -D %d %s %s" % (T, dev, SERVER), perftest_mbit),
        ("longhaul UC plaintext, bbr",
         "%s --server --datapath=verbs --one_off --bind=%s --qp_type=uc --insecure"
         % (perf, SERVER), "Server listening",
         "%s --client=%s --datapath=verbs --qp_type=uc --time=%d --interval=%d --json --insecure"
         % (perf, SERVER, T, T), lh_mbit),
    ]
    hz = os.sysconf("SC_CLK_TCK")
    with lt.Testbed(os.path.join(build, "uc-floor"), keep=[build]) as tb:
        tb.require([perf, bench])
        print("booted in %.1f s (%s)" % (tb.boot_s, tb.accel), flush=True)
        tb.netem("a", "")
        tb.netem("b", "")
        crc = crc_s_per_gb(tb, bench)
        print("one CRC32C pass in a guest: %.2f CPU s/GB" % crc, flush=True)
        for r in range(args.rounds):
            for name, scmd, ready, ccmd, parse in runs:
                before = cpu_split(tb, "a")
                rc, out = pair(tb, scmd, ready, ccmd, T + 120)
                after = cpu_split(tb, "a")
                v = parse(out) if rc is not None else None
                if v is None:
                    print("round %d | %s: failed (rc %s)\n%s" % (r + 1, name, rc, out[-1500:]),
                          flush=True)
                    continue
                gb = v * 1e6 / 8 * T / 1e9
                user, kern, idle = ((after[i] - before[i]) / hz for i in range(3))
                print("round %d | %s: %.1f Mbit/s; receiver CPU s/GB: user %.1f, system + "
                      "interrupts %.1f, busy %.1f (idle %.1f s)"
                      % (r + 1, name, v, user / gb, kern / gb, (user + kern) / gb, idle),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
