#!/usr/bin/env python3
"""Where the bytes go: one longhaul-perf test in the soft-RoCE testbed, audited.

Boots the two guests once and, for each run given, sends from guest b to guest a
(198.18.1.1) through netem on both guests' eth0 and reads, before and after the test:

- the sender's own view (longhaul-perf --json: bytes and datagrams the endpoint sent,
  retransmissions, lost packets; the pacing rate asked for);
- netem on the sender's eth0 (`tc -s qdisc`: bytes and packets it sent, dropped,
  overlimits, the backlog left);
- rxe0's hardware counters and eth0's link counters on both guests;
- the guests' CPU (/proc/stat: busy share of the guest's time) and the host's CPU given
  to each qemu process (utime + stime over the wall time) and to everything else.

It prints one block per run and a summary table: what the pacer was asked for, what left
the sender's endpoint, what netem passed, what arrived (the receiver's goodput), each as
a share of the netem rate, with the CPU shares beside them.

    rdma_shortfall.py --build_dir=build --rate_mbit=20 --seconds=15 \
        --runs='verbs:loss=0;udp:loss=0;verbs:loss=0.01,pacing_burst=20ms'

A run is DATAPATH:key=value,... (DATAPATH verbs, udp, or timer: how late guest b's
timers fire, 3000 sleeps of 1.65 ms, with the hogs meanwhile); keys: loss (fraction), pace (fraction of the netem rate
the sender paces at, default 0.975), extra (more longhaul-perf flags, ' '-separated
with '+' for spaces), netem (more netem options, '+' for spaces), hogs (busy-looping
processes started on the host for the test: what other jobs on a shared host do).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import longhaul_testbed as lt  # noqa: E402

SERVER = "198.18.1.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_runs(text):
    runs = []
    for item in [x for x in text.split(";") if x.strip()]:
        dp, _, kv = item.strip().partition(":")
        r = {"datapath": dp, "loss": 0.0, "pace": 0.975, "extra": "", "netem": "", "hogs": 0}
        for pair in [x for x in kv.split(",") if x]:
            k, _, v = pair.partition("=")
            if k not in r:
                raise SystemExit("unknown run key %r in %r" % (k, item))
            r[k] = v.replace("+", " ") if k in ("extra", "netem") else float(v)
        r["hogs"] = int(r["hogs"])
        if dp not in ("verbs", "udp", "timer"):
            raise SystemExit("datapath must be verbs, udp or timer: %r" % item)
        runs.append(r)
    return runs


def qdisc(tb, g):
    _, out = tb.run(g, "tc -s qdisc show dev eth0", 20)
    m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) requeues (\d+)\)"
                  r"\s+backlog (\S+) (\d+)p", out)
    if not m:
        return {"raw": out}
    return {"bytes": int(m.group(1)), "pkts": int(m.group(2)), "dropped": int(m.group(3)),
            "overlimits": int(m.group(4)), "backlog": m.group(6), "backlog_pkts": int(m.group(7))}


def counters(tb, g):
    """rxe0's hw counters, eth0's link counters, the guest's /proc/stat CPU line."""
    cmd = ("cd /sys/class/infiniband/rxe0/ports/1/hw_counters && "
           "for f in *; do echo \"rxe.$f $(cat $f)\"; done; "
           "for f in rx_bytes rx_packets rx_dropped tx_bytes tx_packets tx_dropped; do "
           "echo \"eth0.$f $(cat /sys/class/net/eth0/statistics/$f)\"; done; "
           "head -1 /proc/stat; "
           "nstat -az 2>/dev/null | grep -E 'UdpRcvbufErrors|UdpInErrors|UdpInDatagrams|UdpOutDatagrams'"
           " | awk '{print \"snmp.\" $1, $2}'")
    _, out = tb.run(g, cmd, 30)
    c = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            vals = [int(x) for x in parts[1:]]
            c["cpu.total"] = sum(vals)
            c["cpu.idle"] = vals[3] + vals[4]
        elif len(parts) == 2 and re.match(r"^-?\d+$", parts[1]):
            c[parts[0]] = int(parts[1])
    return c


def host_cpu(tb):
    out = {}
    for g, guest in tb.guests.items():
        with open("/proc/%d/stat" % guest.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[g] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime, s
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    out["host.busy"] = (sum(vals) - vals[3] - vals[4]) / CLK_TCK
    out["host.total"] = sum(vals) / CLK_TCK
    return out


def delta(after, before):
    return {k: after[k] - before.get(k, 0) for k in after
            if isinstance(after[k], (int, float)) and k in before}


# In guest b: how late the guest's timers fire. 3000 sleeps of one 4 KiB packet's wire
# time at 20 Mbit/s (1.65 ms), each one's overshoot in microseconds.
TIMER_PROBE = r"""
import time
want = 0.00165
late = []
for _ in range(3000):
    t0 = time.monotonic()
    time.sleep(want)
    late.append((time.monotonic() - t0 - want) * 1e6)
late.sort()
n = len(late)
q = lambda f: late[min(n - 1, int(f * n))]
print("late_us mean %.0f p50 %.0f p90 %.0f p99 %.0f max %.0f over_1ms %.3f" % (
    sum(late) / n, q(0.5), q(0.9), q(0.99), late[-1], sum(1 for x in late if x > 1000) / n))
"""


def run_with_hogs(tb, hogs, cmd, timeout):
    """Runs `cmd` on guest b with `hogs` busy processes on the host meanwhile; returns its
    exit status, its output, the wall seconds and the host's CPU counters before and after."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(hogs)]
    try:
        hb = host_cpu(tb)
        t0 = time.monotonic()
        rc, out = tb.run("b", cmd, timeout)
        wall = time.monotonic() - t0
        ha = host_cpu(tb)
    finally:
        for h in procs:
            h.send_signal(signal.SIGKILL)
            h.wait()
    return rc, out, wall, hb, ha


def host_others(hb, ha, wall):
    """Host CPU (cores) spent outside the two guests' qemu processes over `wall` seconds."""
    return ((ha["host.busy"] - hb["host.busy"]) - (ha["a"] - hb["a"])
            - (ha["b"] - hb["b"])) / wall


def timer_run(tb, r):
    """The guest's wake-up lateness, with `hogs` busy processes on the host meanwhile."""
    with open(os.path.join(tb.work_dir, "timer_probe.py"), "w") as f:
        f.write(TIMER_PROBE)
    rc, out, wall, hb, ha = run_with_hogs(tb, r["hogs"], "python3 /testbed/timer_probe.py", 120)
    res = {"run": r, "rc": rc, "timer": out.strip(), "wall_s": wall}
    res["host_others"] = host_others(hb, ha, wall)
    return res


def one_run(tb, perf, args, r):
    if r["datapath"] == "timer":
        return timer_run(tb, r)
    rate = args.rate_mbit
    spec = "rate %gmbit delay 29ms limit %d%s%s" % (
        rate, args.limit, " loss %g%%" % (r["loss"] * 100) if r["loss"] else "",
        " " + r["netem"] if r["netem"] else "")
    tb.netem("a", spec)
    tb.netem("b", spec)
    dp = "--datapath=verbs" if r["datapath"] == "verbs" else ""
    pace = rate * r["pace"]
    log = "/tmp/shortfall-server.log"
    pid = tb.spawn("a", "%s --server --one_off --bind=%s %s %s"
                   % (perf, SERVER, dp, args.keys.flags(args.security, "server")), log)
    tb.run("a", "timeout 30 sh -c 'until grep -q \"Server listening\" %s; do sleep 0.05; done'"
           % log, 40)
    before = {g: counters(tb, g) for g in lt.GUESTS}
    qb = qdisc(tb, "b")
    rc, out, wall, hb, ha = run_with_hogs(
        tb, r["hogs"], "%s --client=%s %s %s --time=%d --rate=%gmbit --interval=1 --json %s"
        % (perf, SERVER, dp, args.keys.flags(args.security, "client"), args.seconds, pace,
           r["extra"]), args.seconds + 120)
    qa = qdisc(tb, "b")
    after = {g: counters(tb, g) for g in lt.GUESTS}
    if tb.wait("a", pid, 30) is None:
        tb.kill("a", pid)
    res = {"run": r, "spec": spec, "rc": rc, "wall_s": wall}
    try:
        j = json.loads(out[out.index("{"):])
    except ValueError:
        res["error"] = out[-2000:]
        return res
    if "error" in j:
        res["error"] = j["error"]
    end = j.get("end", {})
    lh = end.get("longhaul", {})
    ss = lh.get("sender_stats", {})
    sent = end.get("sum_sent", {})
    recv = end.get("sum_received", {})
    drv = lh.get("driver", {})
    res["intact"] = lh.get("integrity", {}).get("intact")
    res["pace_mbit"] = pace
    res["sender_s"] = sent.get("seconds")
    res["receiver_s"] = recv.get("seconds")
    res["goodput_mbit"] = recv.get("bits_per_second", 0) / 1e6
    # longhaul-perf's receiver span starts at the first message's delivery, so the first
    # message lies outside it: leave it out (1 MiB in ~20 s is ~2 %).
    msg = 1 << 20
    if recv.get("seconds"):
        res["goodput_corr_mbit"] = max(0, recv.get("bytes", 0) - msg) * 8 / recv["seconds"] / 1e6
    # What left the sender's endpoint, counted as the pacer counts it (+28 B/datagram),
    # over the sender's span (first submission to last acknowledgement).
    if sent.get("seconds"):
        dg = drv.get("datagrams_sent", ss.get("packets_sent", 0))
        res["endpoint_mbit"] = (ss.get("bytes_sent", 0) + 28 * dg) * 8 / sent["seconds"] / 1e6
        res["datagrams_sent"] = dg
    res["retransmitted"] = ss.get("packets_retransmitted")
    res["lost"] = ss.get("packets_lost")
    res["spurious"] = ss.get("spurious_losses")
    res["pto"] = ss.get("pto_count")
    res["driver"] = drv
    qd = {k: qa[k] - qb[k] for k in ("bytes", "pkts", "dropped", "overlimits") if k in qa and k in qb}
    res["netem_b"] = dict(qd, backlog_after=qa.get("backlog"))
    if sent.get("seconds") and "bytes" in qd:
        # netem counts the Ethernet frame (skb->len at the qdisc).
        res["netem_mbit"] = qd["bytes"] * 8 / sent["seconds"] / 1e6
    res["guest"] = {g: delta(after[g], before[g]) for g in lt.GUESTS}
    for g in lt.GUESTS:
        d = res["guest"][g]
        if d.get("cpu.total"):
            res["guest_busy_" + g] = 1 - d["cpu.idle"] / d["cpu.total"]
    hw = ha["host.total"] - hb["host.total"]
    res["host_cpu"] = {k: (ha[k] - hb[k]) / wall for k in ("a", "b")}
    res["host_busy_share"] = (ha["host.busy"] - hb["host.busy"]) / hw if hw else None
    res["host_others"] = host_others(hb, ha, wall)
    res["intervals_mbit"] = [round(i["sum"]["bits_per_second"] / 1e6, 1)
                             for i in j.get("intervals", [])]
    return res


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--rate_mbit", type=float, default=20)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--limit", type=int, default=100000, help="netem limit, packets")
    ap.add_argument("--runs", default="verbs:loss=0;udp:loss=0")
    ap.add_argument("--json_out", default="", help="also write every run's record here")
    ap.add_argument("--security", default="ik", choices=["ik", "psk", "insecure"],
                    help="longhaul's packet protection: static keys (the default), a "
                         "pre-shared key, or plaintext")
    args = ap.parse_args(argv)
    runs = parse_runs(args.runs)
    build = os.path.abspath(args.build_dir)
    args.keys = lt.Keys(build, os.path.join(build, "rdma-shortfall-keys"))
    perf = os.path.join(build, "bin", "longhaul-perf")
    results = []
    with lt.Testbed(os.path.join(build, "rdma-shortfall"), keep=[build]) as tb:
        tb.require([perf])
        print("booted in %.1f s (%s)" % (tb.boot_s, tb.accel), flush=True)
        for r in runs:
            res = one_run(tb, perf, args, r)
            results.append(res)
            show = {k: v for k, v in res.items() if k not in ("guest", "driver")}
            print(json.dumps(show, default=str), flush=True)
            for g in lt.GUESTS:
                nz = {k: v for k, v in res.get("guest", {}).get(g, {}).items()
                      if v and not k.startswith("cpu.")}
                print("  guest %s counters: %s" % (g, nz), flush=True)
            print("  driver: %s" % res.get("driver"), flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    R = args.rate_mbit
    print("\n| run | paced | endpoint sent | netem passed | goodput (perf) | goodput | netem drops | guest b / a busy"
          " | host CPU qemu b / a / others |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    pct = lambda v: "%.1f %%" % (100 * v / R) if v else "-"
    for res in results:
        r = res["run"]
        name = "%s loss %g%s%s%s" % (r["datapath"], r["loss"],
                                     " " + r["extra"] if r["extra"] else "",
                                     " netem " + r["netem"] if r["netem"] else "",
                                     ", %d host hogs" % r["hogs"] if r["hogs"] else "")
        if r["datapath"] == "timer":
            print("| timer in guest b%s | %s | host others %.2f |" % (
                ", %d host hogs" % r["hogs"] if r["hogs"] else "", res["timer"],
                res["host_others"]))
            continue
        if "error" in res and not res.get("goodput_mbit"):
            print("| %s | failed: %s |" % (name, str(res["error"])[:200].replace("\n", " ")))
            continue
        hc = res["host_cpu"]
        print("| %s | %s | %s | %s | %s | %s | %s | %.0f / %.0f %% | %.2f / %.2f / %.2f |" % (
            name, pct(res.get("pace_mbit")), pct(res.get("endpoint_mbit")),
            pct(res.get("netem_mbit")), pct(res.get("goodput_mbit")),
            pct(res.get("goodput_corr_mbit")),
            res.get("netem_b", {}).get("dropped"),
            100 * res.get("guest_busy_b", 0), 100 * res.get("guest_busy_a", 0),
            hc["b"], hc["a"], res["host_others"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
