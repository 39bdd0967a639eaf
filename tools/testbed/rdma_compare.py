#!/usr/bin/env python3
"""Side by side in the soft-RoCE testbed (docs/rdma.md section 6, docs/benchmarks.md).

Boots the two guests once, measures what UD carries between them with no netem, then
with netem (rate, 29 ms each way, loss) on both guests' eth0 runs longhaul-tune against
a verbs server (the profile it writes is used below) and, for each loss: longhaul over
verbs and over UDP (paced at 97.5 % of the netem rate, --pacing_burst=20ms: see
docs/rdma.md section 6 for why), longhaul over verbs with the tuned profile, perftest
ib_write_bw RC with the common recipe (1 MiB in flight, MTU 4096, QP timeout 18 =
1.07 s), with perftest's defaults, and the recipe with 4 QPs. Prints one line per run
(receiver goodput, Mbit/s; for longhaul the verified bytes after the first message over
the time from its delivery to the last one's) with the host CPU that other processes
took meanwhile, and a markdown table.

    rdma_compare.py --build_dir=build [--rate_mbit=20] [--seconds=15] [--losses=0,0.001,0.01]
                    [--pacing_burst=20ms] [--tune=true]
"""

import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import longhaul_testbed as lt  # noqa: E402
from rdma_shortfall import host_cpu  # noqa: E402

SERVER = "198.18.1.1"
GID = 1  # rxe0's RoCE v2 IPv4-mapped GID in the guests (ibv_devinfo -v)


def wait_ready(tb, text, log):
    # perftest's stdout is block-buffered into the log: wait for its TCP port instead.
    cond = ("ss -ltn | grep -q ':18515 '" if text == "Waiting for client"
            else "grep -q \"%s\" %s" % (text, log))
    rc, _ = tb.run("a", "timeout 30 sh -c \"until %s; do sleep 0.05; done\"" % cond.replace('"', '\\"'), 40)
    return rc == 0


def pair(tb, server_cmd, ready, client_cmd, timeout):
    log = "/tmp/cmp-server.log"
    pid = tb.spawn("a", server_cmd, log)
    if not wait_ready(tb, ready, log):
        tb.kill("a", pid)
        return None, tb.run("a", "cat " + log, 10)[1]
    rc, out = tb.run("b", client_cmd, timeout)
    if tb.wait("a", pid, 30) is None:
        tb.kill("a", pid)
    _, sout = tb.run("a", "cat " + log, 10)
    return rc, out + "\n--- server ---\n" + sout


def longhaul_mbit(out):
    """Goodput from longhaul-perf --json: its receiver span starts when the first message
    is delivered, so that message is left out of the bytes (1 MiB of ~20 s: ~2 %)."""
    try:
        j = json.loads(out[out.index("{"):out.index("\n--- server ---")])
        r = j["end"]["sum_received"]
        if not j["end"]["longhaul"]["integrity"]["intact"]:
            return None
        return max(0, r["bytes"] - (1 << 20)) * 8 / r["seconds"] / 1e6
    except (ValueError, KeyError, ZeroDivisionError):
        return None


def perftest_mbit(out):
    # --report_gbits: "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]"
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", out, re.M)
    return float(rows[0][3]) * 1000 if rows else None


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--rate_mbit", type=float, default=20)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--losses", default="0,0.001,0.01")
    ap.add_argument("--pacing_burst", default="20ms", help="longhaul's, for the paced runs")
    ap.add_argument("--tune", default="true", help="run longhaul-tune and the tuned runs")
    ap.add_argument("--security", default="ik", choices=["ik", "psk", "insecure"],
                    help="longhaul's packet protection: static keys (the default), a "
                         "pre-shared key, or plaintext")
    args = ap.parse_args(argv)
    tune = args.tune.lower() in ("1", "true", "yes")
    build = os.path.abspath(args.build_dir)
    keys = lt.Keys(build, os.path.join(build, "rdma-compare-keys"))
    perf = os.path.join(build, "bin", "longhaul-perf")
    sperf = "%s %s" % (perf, keys.flags(args.security, "server"))  # the server's command
    cperf = "%s %s" % (perf, keys.flags(args.security, "client"))  # the client's
    print("longhaul packet protection: %s" % args.security, flush=True)
    tuner = os.path.join(build, "bin", "longhaul-tune")
    work = os.path.join(build, "rdma-compare")
    T = args.seconds
    dev = "-d rxe0 -x %d --report_gbits" % GID
    results = []
    with lt.Testbed(work, keep=[build]) as tb:
        tb.require([perf, tuner])
        print("booted in %.1f s (%s)" % (tb.boot_s, tb.accel), flush=True)
        tb.netem("a", "")
        tb.netem("b", "")
        # 1. What UD carries with no netem.
        rc, out = pair(tb, "ib_send_bw -c UD -s 4096 -D %d %s" % (T, dev), "Waiting for client",
                       "ib_send_bw -c UD -s 4096 -D %d %s %s" % (T, dev, SERVER), T + 60)
        print("no netem: ib_send_bw UD 4096 B: %s Mbit/s (client side)" % perftest_mbit(out),
              flush=True)
        if perftest_mbit(out) is None:
            print(out[-2500:], flush=True)
        for rate in (200, 100):
            rc, out = pair(tb, "%s --server --datapath=verbs --one_off --bind=%s" % (sperf, SERVER),
                           "Server listening",
                           "%s --client=%s --datapath=verbs --time=%d --rate=%dmbit --interval=%d --json"
                           % (cperf, SERVER, T, rate, T), T + 90)
            print("no netem: longhaul verbs paced at %d Mbit/s: %s Mbit/s received"
                  % (rate, longhaul_mbit(out)), flush=True)
        # 2. Through netem. Paced a little below the netem rate: netem counts the Ethernet
        # header (14 B) too, which no datapath's pacer counts.
        r = args.rate_mbit
        pace = r * 0.975
        lh = "--time=%d --rate=%gmbit --pacing_burst=%s --interval=%d --json" % (
            T, pace, args.pacing_burst, T)
        profile = "/testbed/verbs-tuned.profile"
        if tune:
            spec = "rate %gmbit delay 29ms limit 100000" % r
            tb.netem("a", spec)
            tb.netem("b", spec)
            pid = tb.spawn("a", "%s --server --datapath=verbs --bind=%s" % (sperf, SERVER),
                           "/tmp/tune-server.log")
            wait_ready(tb, "Server listening", "/tmp/tune-server.log")
            t0 = time.monotonic()
            rc, out = tb.run("b", "%s --target=%s:5201 --max_rate=%dmbit --out=%s"
                             % (tuner, SERVER, 5 * r, profile), 600)
            tb.kill("a", pid, 2)
            if tb.wait("a", pid, 30) is None:
                tb.kill("a", pid)
            print("longhaul-tune against the verbs server (netem %s), %.0f s, rc %s:\n%s"
                  % (spec, time.monotonic() - t0, rc, out), flush=True)
            if rc != 0:
                tune = False
        for loss in [float(x) for x in args.losses.split(",")]:
            spec = "rate %gmbit delay 29ms limit 100000%s" % (r, " loss %g%%" % (loss * 100) if loss else "")
            tb.netem("a", spec)
            tb.netem("b", spec)
            runs = [
                ("longhaul verbs", "%s --server --datapath=verbs --one_off --bind=%s" % (sperf, SERVER),
                 "Server listening",
                 "%s --client=%s --datapath=verbs %s" % (cperf, SERVER, lh), longhaul_mbit),
                ("longhaul UDP", "%s --server --one_off --bind=%s" % (sperf, SERVER),
                 "Server listening", "%s --client=%s %s" % (cperf, SERVER, lh), longhaul_mbit),
            ]
            if tune:
                runs.append(
                    ("longhaul verbs, longhaul-tune's profile",
                     "%s --server --datapath=verbs --one_off --bind=%s" % (sperf, SERVER),
                     "Server listening",
                     "%s --client=%s --datapath=verbs --profile=%s --time=%d --interval=%d --json"
                     % (cperf, SERVER, profile, T, T), longhaul_mbit))
            runs += [
                ("ib_write_bw RC recipe (1 MiB in flight, -m 4096 -u 18)",
                 "ib_write_bw -s 1048576 -t 1 -m 4096 -u 18 -D %d %s" % (T, dev), "Waiting for client",
                 "ib_write_bw -s 1048576 -t 1 -m 4096 -u 18 -D %d %s %s" % (T, dev, SERVER),
                 perftest_mbit),
                ("ib_write_bw RC defaults", "ib_write_bw -D %d %s" % (T, dev), "Waiting for client",
                 "ib_write_bw -D %d %s %s" % (T, dev, SERVER), perftest_mbit),
                ("ib_write_bw RC recipe, 4 QPs",
                 "ib_write_bw -q 4 -s 1048576 -t 1 -m 4096 -u 18 -D %d %s" % (T, dev),
                 "Waiting for client",
                 "ib_write_bw -q 4 -s 1048576 -t 1 -m 4096 -u 18 -D %d %s %s" % (T, dev, SERVER),
                 perftest_mbit),
            ]
            for name, scmd, ready, ccmd, parse in runs:
                h0 = host_cpu(tb)
                t0 = time.monotonic()
                rc, out = pair(tb, scmd, ready, ccmd, T + 120)
                wall = time.monotonic() - t0
                h1 = host_cpu(tb)
                others = ((h1["host.busy"] - h0["host.busy"]) - (h1["a"] - h0["a"])
                          - (h1["b"] - h0["b"])) / wall
                v = parse(out) if rc is not None else None
                results.append((loss, name, v, rc, others))
                print("loss %g: %s: %s Mbit/s (rc %s; other processes took %.2f host cores)"
                      % (loss, name, "%.2f" % v if v is not None else None, rc, others), flush=True)
                if v is None:
                    print(out[-1500:], flush=True)
    print("\n| loss | run | Mbit/s | of the %g Mbit/s netem rate | host cores others took |\n"
          "| --- | --- | --- | --- | --- |" % args.rate_mbit)
    for loss, name, v, rc, others in results:
        share = "%.1f %%" % (100 * v / args.rate_mbit) if v is not None else "failed (rc %s)" % rc
        print("| %g | %s | %s | %s | %.2f |" % (loss, name, "%.2f" % v if v is not None else "-",
                                               share, others))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
