"""coexist: longhaul and TCP at the same time through one emulated bottleneck.

  tools/bench/coexist [--link=rate=1gbit,rtt=58ms] [--losses=0,1e-3]
      [--cases=bbr1,bbr4,cubic1,cubic4] [--time=40] [--warmup=10]
      [--longhaul_flags="..."] [--first=longhaul|tcp_bbr|tcp_cubic] [--json]
      [--plot=FILE] [--build_dir=build] [--out_dir=DIR] [--no_baseline]

Brings up longhaul-emu in TUN mode between two network namespaces it creates (A =
198.18.0.1, B = 198.18.0.2; data flows A -> B) and, for every loss rate and case, on a
fresh emulator with the link spec (plus loss=L) and the same seed:

  together   longhaul-perf (bulk, --interval=1; its default cc=bbr, no rate cap, the
             link's MTU) and iperf3 with N TCP flows of one congestion control (-P N -C
             cc -i 1) started at the same moment, each for --time seconds;
  alone      (unless --no_baseline) the same iperf3 run by itself: TCP's goodput without
             longhaul beside it.

A case is CCn: the TCP congestion control (bbr or cubic) and the number of TCP flows.
--first=tcp_bbr (or tcp_cubic) puts one more TCP flow of that congestion control (a
second iperf3) where longhaul was: the reference for what TCP itself gets beside TCP;
the "longhaul" fields then hold that flow's numbers.
Goodput per second: longhaul-perf's intervals (bytes acknowledged at the sender), iperf3's
server intervals (bytes received), both placed from their client's launch (the two are
launched together; their clocks differ by the connection set-ups, a round trip or two).
longhaul's share of a second is longhaul / (longhaul + TCP). Reported from --warmup on:
the mean share (of the summed bytes), the smallest and largest share over sliding 5 s
windows, each side's mean goodput, and TCP's mean goodput alone and together.

Output: a table (stdout), or with --json one object {"link", "time_s", "warmup_s",
"cases": [{"case", "tcp_cc", "tcp_flows", "loss", "longhaul_bps", "tcp_bps",
"tcp_alone_bps", "share_mean", "share_5s_min", "share_5s_max", "series": [[t,
longhaul_bps, tcp_bps], ...], "commands", "emulator", ...}], "machine", ...}; the raw
outputs stay in --out_dir. --plot writes each case's goodput over time (matplotlib).
Needs root (TUN devices, namespaces) and iperf3. docs/congestion-control.md.

Exit status: 0 when every run completed, 1 when one failed or the set-up failed, 2 bad
flags. It does not judge the shares; docs/congestion-control.md states the targets.
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from longhaul_bench import cli
from longhaul_bench.cli import log
from longhaul_bench.netns_link import (ADDR_A, ADDR_B, Emulator, HostBuffers, Interrupted,
                                       LOCK_PATH, NS_SYSCTLS, Procs, acquire_lock, clean_up,
                                       emu_summary, install_signal_handlers, link_params,
                                       ns_exec, ns_sysctls, parse_json_output, preconditions,
                                       restore_signal_handlers, spec_with, tail, wait_port)
from longhaul_bench.procfs import loadavg
from longhaul_bench.units import parse_duration

PERF_PORT, IPERF_PORT, FIRST_TCP_PORT = 5202, 5201, 5203
WINDOW_S = 5  # the sliding window of the min/max share


def per_second(intervals, length):
    """Goodput (bit/s) of each whole second [k, k+1) for k < length, from intervals
    [(start, end, bps)] (partial overlaps weighted by time)."""
    out = [0.0] * length
    for a, b, bps in intervals:
        for k in range(max(0, int(a)), min(length, int(b) + 1)):
            overlap = min(b, k + 1) - max(a, k)
            if overlap > 0:
                out[k] += bps * overlap
    return out


def perf_intervals(j):
    out = []
    for iv in (j or {}).get("intervals", []):
        s = iv.get("sum", {})
        if "bits_per_second" in s and s.get("end", 0) > s.get("start", 0):
            out.append((s["start"], s["end"], s["bits_per_second"]))
    return out


def iperf_intervals(j, shift):
    """iperf3 server intervals (received bytes), moved by `shift` seconds."""
    out = []
    for iv in (j or {}).get("intervals", []):
        s = iv.get("sum", {})
        if s.get("seconds", 0) < 0.05 or "bits_per_second" not in s:
            continue
        out.append((s["start"] + shift, s["end"] + shift, s["bits_per_second"]))
    return out


class Run:
    """One emulator, servers in B, clients in A started together; raw outputs in out_dir."""

    def __init__(self, args, bins, link_spec, name, out_dir, procs, tag):
        self.args, self.bins, self.spec, self.name = args, bins, link_spec, name
        self.out_dir, self.procs, self.tag = out_dir, procs, tag
        self.entry = {"emulator_link": link_spec}

    def path(self, suffix):
        return os.path.join(self.out_dir, "%s.%s" % (self.name, suffix))

    def go(self, tcp_cc, tcp_flows, with_longhaul, mtu):
        a, b = self.tag + "-a", self.tag + "-b"
        t = self.args.time
        bound = int(t + 60)
        emu = Emulator(self.procs, self.bins["longhaul-emu"], self.spec, a, b, self.args.seed,
                       self.args.emu_realtime, bound + 60, self.path("emu.log"))
        e = self.entry
        e["emulator_command"] = " ".join(emu.cmd)
        servers, files = [], []
        try:
            if emu.wait_event("ready", 30) is None:
                e["error"] = "the emulator did not start: " + tail(self.out_dir,
                                                                   self.name + ".emu.log")
                return e
            err = ns_sysctls((a, b), NS_SYSCTLS)
            if err:
                e["error"] = err
                return e
            if not self.start_servers(b, bound, with_longhaul, servers, files):
                return e
            launched = self.run_clients(a, bound, tcp_cc, tcp_flows, with_longhaul, mtu, files)
            for p in servers:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for p in servers:
                self.procs.kill(p)
            for f in files:
                f.close()
            final, cpu = emu.stop()
            if final:
                e["emulator"] = emu_summary(final, cpu)
        if "error" in e:
            return e
        self.read_series(int(t), launched, with_longhaul)
        return e

    def start(self, ns, cmd, stem, limit, files):
        """Starts `cmd` in namespace `ns`, bounded by `timeout`; its output in stem.out/.err
        (the files kept in `files` to close)."""
        out = open(self.path(stem + ".out"), "w")
        err = open(self.path(stem + ".err"), "w")
        files.extend([out, err])
        full = ns_exec(ns, ["timeout", "-k", "5", str(limit)] + cmd)
        return self.procs.popen(full, stdout=out, stderr=err)

    def start_servers(self, b, bound, with_longhaul, servers, files):
        """B's servers: iperf3 for the TCP flows and the first flow's (longhaul-perf or
        iperf3); False (with the entry's error) when one did not listen."""
        iperf_server = ["iperf3", "-s", "-1", "-B", ADDR_B, "-p", str(IPERF_PORT), "-J",
                        "-i", "1"]
        servers.append(self.start(b, iperf_server, "iperf3.server", bound + 30, files))
        waits = [("tcp", IPERF_PORT)]
        first_tcp = self.args.first.startswith("tcp_")
        if with_longhaul and first_tcp:
            servers.append(self.start(b, ["iperf3", "-s", "-1", "-B", ADDR_B, "-p",
                                          str(FIRST_TCP_PORT), "-J", "-i", "1"],
                                      "first.server", bound + 30, files))
            waits.append(("tcp", FIRST_TCP_PORT))
        elif with_longhaul:
            perf_server = [self.bins["longhaul-perf"], "--server", "--bind=" + ADDR_B,
                           "--port=%d" % PERF_PORT, "--one_off", "--json", "--insecure"]
            servers.append(self.start(b, perf_server, "perf.server", bound + 30, files))
            waits.append(("udp", PERF_PORT))
        for proto, port in waits:
            if not wait_port(b, proto, port, 15):
                self.entry["error"] = "a server did not listen on %s/%d within 15 s" % (
                    proto, port)
                return False
        return True

    def run_clients(self, a, bound, tcp_cc, tcp_flows, with_longhaul, mtu, files):
        """A's clients, the first flow's then the TCP flows', to their end; the seconds
        after the first launch at which each started."""
        e, t = self.entry, self.args.time
        iperf_client = ["iperf3", "-c", ADDR_B, "-B", ADDR_A, "-p", str(IPERF_PORT),
                        "-t", "%g" % t, "-P", str(tcp_flows), "-C", tcp_cc, "-i", "1", "-J"]
        perf_client = [self.bins["longhaul-perf"], "--client=" + ADDR_B,
                       "--port=%d" % PERF_PORT, "--time=%g" % t, "--interval=1", "--json",
                       "--insecure", "--mtu=%d" % mtu] + self.args.lh_flags
        e["tcp_command"] = " ".join(shlex.quote(x) for x in ns_exec("A", iperf_client))
        clients, launched = [], {}
        m0 = time.monotonic()
        if with_longhaul:
            if self.args.first.startswith("tcp_"):
                perf_client = ["iperf3", "-c", ADDR_B, "-B", ADDR_A, "-p",
                               str(FIRST_TCP_PORT), "-t", "%g" % t, "-C",
                               self.args.first[4:], "-i", "1", "-J"]
            e["longhaul_command"] = " ".join(shlex.quote(x)
                                             for x in ns_exec("A", perf_client))
            clients.append(("perf", self.start(a, perf_client, "perf.client", bound, files)))
            launched["perf"] = time.monotonic() - m0
        clients.append(("iperf3", self.start(a, iperf_client, "iperf3.client", bound, files)))
        launched["iperf3"] = time.monotonic() - m0
        e["launch_offsets_s"] = launched
        for kind, p in clients:
            try:
                rc = p.wait(timeout=bound + 20)
            except subprocess.TimeoutExpired:
                rc = -1
            if rc != 0:
                e["error"] = "%s client failed (exit %s): %s" % (
                    kind, rc, tail(self.out_dir, "%s.%s.client.err" % (self.name, kind)))
        return launched

    def read_series(self, length, launched, with_longhaul):
        """The per-second goodput series (and longhaul's integrity and losses, the TCP
        retransmissions) from the outputs, into the entry."""
        e = self.entry
        with open(self.path("iperf3.server.out")) as f:
            tcp_j = parse_json_output(f.read())
        # The server's clock starts at its test start, about the client's launch plus the
        # connection set-up: placed at the client's launch.
        e["tcp_series"] = per_second(iperf_intervals(tcp_j, launched["iperf3"]), length)
        if with_longhaul and self.args.first.startswith("tcp_"):
            with open(self.path("first.server.out")) as f:
                first_j = parse_json_output(f.read())
            e["longhaul_series"] = per_second(iperf_intervals(first_j, launched["perf"]), length)
        elif with_longhaul:
            with open(self.path("perf.client.out")) as f:
                perf_j = parse_json_output(f.read())
            ivs = [(s + launched["perf"], x + launched["perf"], bps)
                   for s, x, bps in perf_intervals(perf_j)]
            e["longhaul_series"] = per_second(ivs, length)
            lh_end = (perf_j or {}).get("end", {})
            e["longhaul_intact"] = lh_end.get("longhaul", {}).get("integrity", {}).get("intact")
            e["longhaul_packets_lost"] = lh_end.get("longhaul", {}).get("loss", {}).get(
                "packets_lost")
        with open(self.path("iperf3.client.out")) as f:
            tcp_client = parse_json_output(f.read())
        e["tcp_retransmits"] = (tcp_client or {}).get("end", {}).get("sum_sent", {}).get(
            "retransmits")


def summarize(case, together, alone, warmup, length):
    lh = together["longhaul_series"]
    tcp = together["tcp_series"]
    k0 = min(int(warmup), length - 1)
    mean = lambda v: sum(v[k0:]) / max(1, len(v[k0:]))  # noqa: E731
    case["longhaul_bps"] = mean(lh)
    case["tcp_bps"] = mean(tcp)
    total = case["longhaul_bps"] + case["tcp_bps"]
    case["share_mean"] = case["longhaul_bps"] / total if total else None
    shares = []
    for k in range(k0, length - WINDOW_S + 1):
        a, b = sum(lh[k:k + WINDOW_S]), sum(tcp[k:k + WINDOW_S])
        if a + b > 0:
            shares.append(a / (a + b))
    case["share_5s_min"] = min(shares) if shares else None
    case["share_5s_max"] = max(shares) if shares else None
    case["link_used"] = total
    if alone is not None and "tcp_series" in alone:
        case["tcp_alone_bps"] = mean(alone["tcp_series"])
    case["series"] = [[k, lh[k], tcp[k]] for k in range(length)]


def fmt_bps(v):
    return "-" if v is None else "%.0f" % (v / 1e6)


def fmt_share(v):
    return "-" if v is None else "%.2f" % v


def print_table(result):
    print("link %s, %g s per run, shares from %g s on (Mbit/s; share = longhaul / (longhaul + "
          "TCP); min/max over %d s windows)" % (result["link"], result["time_s"],
                                              result["warmup_s"], WINDOW_S))
    print("%-8s %-6s %10s %10s %10s %6s %6s %6s %s" % (
        "case", "loss", "longhaul", "TCP", "TCP alone", "share", "min", "max", "note"))
    for c in result["cases"]:
        print("%-8s %-6s %10s %10s %10s %6s %6s %6s %s" % (
            c["case"], c["loss"], fmt_bps(c.get("longhaul_bps")), fmt_bps(c.get("tcp_bps")),
            fmt_bps(c.get("tcp_alone_bps")), fmt_share(c.get("share_mean")),
            fmt_share(c.get("share_5s_min")), fmt_share(c.get("share_5s_max")),
            c.get("error", "")))


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = [c for c in result["cases"] if "series" in c]
    if not cases:
        return
    cols = 2
    rows = (len(cases) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.6 * rows), squeeze=False, sharex=True)
    for ax, c in zip([a for r in axes for a in r], cases):
        t = [s[0] + 0.5 for s in c["series"]]
        first = {"longhaul": "longhaul (bbr)", "tcp_bbr": "TCP bbr (reference)",
                 "tcp_cubic": "TCP cubic (reference)"}[result.get("first", "longhaul")]
        ax.plot(t, [s[1] / 1e6 for s in c["series"]], color="#1f77b4", label=first)
        ax.plot(t, [s[2] / 1e6 for s in c["series"]], color="#d62728" if c["tcp_cc"] == "cubic"
                else "#2ca02c", label="TCP %s x %d" % (c["tcp_cc"], c["tcp_flows"]))
        if c.get("tcp_alone_bps"):
            ax.axhline(c["tcp_alone_bps"] / 1e6, color="grey", ls=":", lw=1, label="TCP alone")
        ax.axvline(result["warmup_s"], color="black", lw=0.5)
        ax.set_title("%s, loss %s: share %s" % (c["case"], c["loss"], fmt_share(
            c.get("share_mean"))), fontsize=9)
        ax.set_ylabel("Mbit/s", fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
        ax.grid(alpha=0.3)
    for ax in [a for r in axes for a in r][len(cases):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("s")
    fig.suptitle("longhaul and TCP through one bottleneck: %s" % result["link"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


def make_parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--link", default="rate=1gbit,rtt=58ms", help="link spec (loss is set per run)")
    ap.add_argument("--losses", default="0,1e-3", help="loss rates, comma-separated")
    ap.add_argument("--cases", default="bbr1,bbr4,cubic1,cubic4",
                    help="TCP congestion control and flow count: bbr1, cubic4, ...")
    ap.add_argument("--time", default="40", help="seconds per run")
    ap.add_argument("--warmup", default="10", help="seconds left out of the shares")
    ap.add_argument("--longhaul_flags", default="", help="extra longhaul-perf client flags")
    ap.add_argument("--first", default="longhaul", choices=["longhaul", "tcp_bbr", "tcp_cubic"],
                    help="the flow measured against the TCP flows (tcp_*: a reference run)")
    ap.add_argument("--no_baseline", action="store_true", help="skip the TCP-alone runs")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--plot", default="", help="write the goodput-over-time plot (.svg/.png)")
    cli.add_build_dir(ap)
    ap.add_argument("--out_dir", default="", help="keep raw outputs here (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=7, help="the emulator's loss seed")
    ap.add_argument("--emu_realtime", type=int, default=10,
                    help="longhaul-emu --realtime priority (0: off)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of quiet between runs")
    ap.add_argument("--lock_wait", type=float, default=1800)
    return ap


def parse_losses(text):
    """The losses of --losses, as given, each in [0, 1)."""
    losses = [x for x in text.split(",") if x]
    for x in losses:
        if not 0 <= float(x) < 1:
            raise ValueError("loss %s is outside [0, 1)" % x)
    return losses


def parse_cases(text):
    """[(congestion control, TCP flows)] of --cases (bbr1, cubic4, ...)."""
    cases = []
    for c in [x for x in text.split(",") if x]:
        cc, n = c.rstrip("0123456789"), c[len(c.rstrip("0123456789")):]
        if cc not in ("bbr", "cubic", "reno") or not n or not 1 <= int(n) <= 16:
            raise ValueError("--cases: '%s' is not CCn (bbr, cubic or reno; 1..16 flows)" % c)
        cases.append((cc, int(n)))
    return cases


def check_args(ap, args):
    """(link, losses, cases) of the flags; --time and --warmup parsed into args (ap.error on
    a bad flag)."""
    try:
        args.time = parse_duration(args.time)
        args.warmup = parse_duration(args.warmup)
        link = link_params(args.link)
        losses = parse_losses(args.losses)
    except (ValueError, KeyError) as e:
        ap.error(str(e))
    if not (5 + WINDOW_S <= args.time <= 600) or not (0 <= args.warmup <= args.time - WINDOW_S):
        ap.error("--time must be in [%d, 600] s and --warmup in [0, time - %d]" %
                 (5 + WINDOW_S, WINDOW_S))
    try:
        cases = parse_cases(args.cases)
    except ValueError as e:
        ap.error(str(e))
    return link, losses, cases


def new_result(args, out_dir):
    return {
        "link": args.link, "time_s": args.time, "warmup_s": args.warmup,
        "command": " ".join(shlex.quote(a) for a in ["tools/bench/coexist"] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                    "load_avg_start": loadavg()},
        "emulator_seed": args.seed, "longhaul_flags": args.lh_flags, "first": args.first,
        "out_dir": out_dir,
        "cases": [],
    }


def run_case(args, bins, spec, mtu, loss, cc, n, out_dir, procs, tag, pause):
    """One case: the TCP flows with the first flow (together), then without it (alone,
    unless --no_baseline), each after pause(); its summary, or its "error"."""
    name = "%s%d-loss%s" % (cc, n, loss)
    case = {"case": "%s%d" % (cc, n), "tcp_cc": cc, "tcp_flows": n, "loss": loss}
    runs = [("together", True)] + ([] if args.no_baseline else [("alone", False)])
    got = {}
    for label, with_lh in runs:
        pause()
        r = Run(args, bins, spec, "%s.%s" % (name, label), out_dir, procs, tag)
        got[label] = r.go(cc, n, with_lh, mtu)
        case[label] = {k: v for k, v in got[label].items() if not k.endswith("_series")}
        if got[label].get("error"):
            case["error"] = "%s: %s" % (label, got[label]["error"])
            break
    if "error" not in case:
        summarize(case, got["together"], got.get("alone"), args.warmup, int(args.time))
    return case


def case_line(case, loss):
    """One case's summary line (stderr)."""
    return "%-7s loss %-5s longhaul %s TCP %s (alone %s) Mbit/s, share %s [%s, %s]%s" % (
        case["case"], loss, fmt_bps(case.get("longhaul_bps")), fmt_bps(case.get("tcp_bps")),
        fmt_bps(case.get("tcp_alone_bps")), fmt_share(case.get("share_mean")),
        fmt_share(case.get("share_5s_min")), fmt_share(case.get("share_5s_max")),
        "  " + case["error"] if "error" in case else "")


def run_cases(args, bins, link, losses, cases, out_dir, procs, tag, result):
    """Every case at every loss, --settle seconds between runs; True when one failed."""
    failed = False
    started = []

    def pause():
        if started:
            time.sleep(args.settle)
        started.append(True)

    for loss in losses:
        spec = spec_with(args.link, loss=loss) if float(loss) else args.link
        for cc, n in cases:
            case = run_case(args, bins, spec, link["mtu"], loss, cc, n, out_dir, procs, tag,
                            pause)
            if "error" in case:
                failed = True
            result["cases"].append(case)
            log(case_line(case, loss))
    return failed


def main():
    ap = make_parser()
    args = ap.parse_args()
    link, losses, cases = check_args(ap, args)
    args.lh_flags = shlex.split(args.longhaul_flags)
    bins = {n: os.path.join(args.build_dir, "bin", n) for n in ("longhaul-perf", "longhaul-emu")}
    env_problems, missing = preconditions(("ip", "ss", "iperf3", "timeout"))
    problems = env_problems + missing + ["%s is missing (build it, or give --build_dir)" % b
                                         for b in bins.values() if not os.access(b, os.X_OK)]
    if problems:
        return cli.cannot_run(problems, args.json)
    lock = acquire_lock(args.lock_wait, log)  # held until main returns
    if lock is None:
        log("another comparison run held %s for %g s; giving up" % (LOCK_PATH, args.lock_wait))
        return 1
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="coexist-")
    os.makedirs(out_dir, exist_ok=True)
    result = new_result(args, out_dir)
    procs = Procs()
    old_handlers = install_signal_handlers()
    host = HostBuffers()
    failed = False
    tag = "lhco%d" % os.getpid()
    try:
        result["host_sysctls"] = host.raise_limits()
        failed = run_cases(args, bins, link, losses, cases, out_dir, procs, tag, result)
    except Interrupted as e:
        log(str(e) + "; cleaning up")
        result["error"] = str(e)
        failed = True
    finally:
        clean_up(procs, [tag + "-a", tag + "-b"], host, log)
        restore_signal_handlers(old_handlers)
    result["machine"]["load_avg_end"] = loadavg()
    with open(os.path.join(out_dir, "coexist.json"), "w") as f:
        json.dump(result, f, indent=1)
    if args.plot:
        plot(result, args.plot)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 1 if failed else 0


def entry():
    """What tools/bench/coexist runs."""
    sys.exit(main())
