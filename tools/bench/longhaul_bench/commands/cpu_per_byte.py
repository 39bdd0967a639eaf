"""cpu-per-byte: CPU seconds per delivered gigabyte, longhaul against iperf3, on loopback.

  tools/bench/cpu-per-byte [--build=build] [--rounds=N] [--seconds=S]
                           [--rates=2,5,10,20] [--json=FILE]

Each round runs, on 127.0.0.1, one sender and one receiver process per run, the tools
of each scenario in an order that rotates from round to round:

  at each offered rate R Gbit/s (--rates):
    lh-plain    longhaul-perf --insecure       --cc=fixed --rate=Rgbit --verify=off --segment=8192
    lh-psk      longhaul-perf --psk_file=FILE  (the same; AES-256-GCM where the CPU has AES)
    iperf3-tcp  iperf3 -b RG -l 128K
    iperf3-udp  iperf3 -u -b 10G -l 8192       (only at R = 10)
  flat out ("max"):
    lh-plain, lh-psk  longhaul-perf --cc=bbr --rate=40gbit --verify=off --segment=8192
    iperf3-tcp        iperf3 -l 128K
    iperf3-udp        iperf3 -u -b 0 -l 8192

longhaul-perf runs 1 MiB messages with --verify=off (no payload pattern, no check, as
iperf3), so both measure the transport and not the test's own work; the pre-shared key
is written for the run by build/bin/longhaul-keygen --psk=FILE. The client sends, the
server receives (no -R).

Per run: goodput (the receiver's delivered bytes from each tool's JSON, end.sum_received,
over the test's time: iperf3's receiver seconds; longhaul-perf's sender span, first
submission to last acknowledgement, end.sum_sent.seconds, which covers the whole
transfer, where its receiver span starts at the first complete message), loss (longhaul: end.longhaul.loss packets lost / data packets sent
and the retransmissions; iperf3 TCP: the sender's retransmits; iperf3 UDP:
lost_percent), and the user + system CPU seconds of the sender and of the receiver
process over its whole life, taken from wait4()'s rusage of the process (what
/usr/bin/time -f "%U %S" reports, at microsecond resolution; every thread counted).
CPU s/GB = CPU seconds / delivered bytes x 1e9, for the sender, the receiver and both.
On loopback the receiving side's softirq work (IP/UDP/TCP input) mostly runs in the
sending process's system call and is billed to the sender; what the kernel defers to
ksoftirqd is billed to neither and is reported apart (`softirqd`, the ksoftirqd
threads' CPU during the run; other traffic on the host lands there too).

Prints the CPU model and whether it has the aes, vaes and avx512f flags, the load
average, one line per run and a table of medians over the rounds; --json=FILE writes
{"machine", "config", "runs": [...], "summary": [...]} with the exact commands.

Every process runs in its own session, bounded in time (the server --seconds + 60 s, the
client --seconds + 45 s; then SIGTERM, and SIGKILL 5 s later, to its process group:
longhaul_bench/process.py; no `timeout` binary), and is killed with its group on exit;
CPU is wait4's of the tool itself. Traffic goes to 127.0.0.1 only; a default run (3
rounds of 17 runs of 5 s) takes about 5 minutes. It takes the comparison lock
(tools/bench/longhaul_bench/netns_link.py) when it can, so it does not run beside
wan-compare or bridge-compare.

Exit status: 0 when every run gave numbers, 1 when one failed, 2 bad flags or a missing
tool.
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

from longhaul_bench import cli, keys, process
from longhaul_bench.cli import ROOT, log
from longhaul_bench.netns_link import (Interrupted, install_signal_handlers,
                                       restore_signal_handlers)
from longhaul_bench.process import fmt, start
from longhaul_bench.procfs import cpu_info, loadavg, pids_named, threads_cpu_s
from longhaul_bench.stats import median

TOOLS = ["lh-plain", "lh-psk", "iperf3-tcp", "iperf3-udp"]
LH_COMMON = ["--verify=off", "--segment=8192", "--message_size=1MiB"]


# ---------------------------------------------------------------------------------------
# Ports and readiness.

def free_port():
    """A port free for both UDP and TCP on 127.0.0.1 (the kernel's pick, then released)."""
    for _ in range(50):
        port = random.randint(20000, 60000)
        ok = True
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            return port
    raise RuntimeError("no free port found")


def tcp_listening(port):
    want = "0100007F:%04X" % port
    for path in ("/proc/net/tcp",):
        try:
            with open(path) as f:
                for line in f.readlines()[1:]:
                    parts = line.split()
                    if len(parts) > 3 and parts[1] == want and parts[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def wait_ready(server, check, wait_s=10.0):
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        if check():
            return True
        if server.poll():
            return False
        time.sleep(0.02)
    return False


# ---------------------------------------------------------------------------------------
# The runs.

def rate_text(gbps):
    return "%g" % gbps


def plan(tool, scenario, seconds, perf, psk):
    """(server argv, client argv, kind) for one run. scenario: a rate in Gbit/s or None
    (flat out)."""
    secs = "%g" % seconds
    if tool.startswith("lh-"):
        keys = ["--insecure"] if tool == "lh-plain" else ["--psk_file=" + psk]
        if scenario is None:
            cc = ["--cc=bbr", "--rate=40gbit"]
        else:
            cc = ["--cc=fixed", "--rate=%sgbit" % rate_text(scenario)]
        server = [perf, "--server", "--bind=127.0.0.1", "--port={port}", "--one_off",
                  "--json"] + keys
        client = [perf, "--client=127.0.0.1", "--port={port}", "--time=" + secs, "--json",
                  "--timeout=%ds" % int(seconds + 30)] + keys + cc + LH_COMMON
        return server, client, "longhaul"
    server = ["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", "{port}"]
    client = ["iperf3", "-c", "127.0.0.1", "-p", "{port}", "-t", secs, "-J"]
    if tool == "iperf3-tcp":
        client += ["-l", "128K"]
        if scenario is not None:
            client += ["-b", rate_text(scenario) + "G"]
    else:
        client += ["-u", "-l", "8192", "-b",
                   "0" if scenario is None else rate_text(scenario) + "G"]
    return server, client, "iperf3"


def parse_longhaul(j):
    e = j["end"]
    r = e["sum_received"]
    lh = e["longhaul"]
    # Goodput over the sender's span (first submission to last acknowledgement: the whole
    # transfer). The receiver's own span (sum_received.seconds, first to last message
    # delivered) starts at the first complete message, which on a loaded host can come
    # hundreds of ms late and overstate the rate of a short run; it is kept as
    # receiver_span_bps.
    secs = e["sum_sent"]["seconds"]
    out = {"delivered_bytes": r["bytes"], "seconds": secs,
           "goodput_bps": r["bytes"] * 8 / secs if secs > 0 else 0.0,
           "receiver_span_bps": r["bits_per_second"],
           "packets_lost": lh["loss"]["packets_lost"], "loss_rate": lh["loss"]["loss_rate"],
           "packets_retransmitted": lh["retransmission"]["packets_retransmitted"],
           "verified": lh["integrity"].get("verified"),
           "cipher": j["start"]["longhaul"]["security"].get("cipher")}
    out["loss_text"] = "%.3f%% (%d retx)" % (100 * out["loss_rate"],
                                            out["packets_retransmitted"])
    if j.get("error"):
        out["error"] = j["error"]
    return out


def parse_iperf3(j, udp):
    e = j["end"]
    r = e["sum_received"]
    out = {"delivered_bytes": r["bytes"], "seconds": r["seconds"],
           "goodput_bps": r["bits_per_second"]}
    if udp:
        out["lost_percent"] = r.get("lost_percent", e.get("sum", {}).get("lost_percent", 0))
        out["lost_packets"] = r.get("lost_packets", 0)
        out["loss_text"] = "%.3f%%" % out["lost_percent"]
    else:
        out["retransmits"] = e["sum_sent"].get("retransmits", 0)
        out["loss_text"] = "%d retr" % out["retransmits"]
    if j.get("error"):
        out["error"] = j["error"]
    return out


def run_one(tool, scenario, seconds, perf, psk, tmp, index):
    server_t, client_t, kind = plan(tool, scenario, seconds, perf, psk)
    port = free_port()
    server_argv = [a.replace("{port}", str(port)) for a in server_t]
    client_argv = [a.replace("{port}", str(port)) for a in client_t]
    rec = {"tool": tool, "scenario": "max" if scenario is None else scenario,
           "server": " ".join(server_argv), "client": " ".join(client_argv),
           "load_average": loadavg()}
    name = "run%03d" % index
    soft_pids = pids_named("ksoftirqd/")
    soft0 = threads_cpu_s(soft_pids)
    t0 = time.monotonic()
    server = start(server_argv, seconds + 60, tmp, name + "-server")
    client = None
    try:
        if kind == "longhaul":
            ready = wait_ready(server, lambda: '"listening"' in server.output())
        else:
            ready = wait_ready(server, lambda: tcp_listening(port))
        if not ready:
            rec["error"] = "the server did not start"
            return rec
        client = start(client_argv, seconds + 45, tmp, name + "-client")
        if process.await_pair(client, server, seconds + 55):
            rec["server_stopped"] = True
    finally:
        process.release(client, server)
    rec["wall_s"] = time.monotonic() - t0
    rec["softirqd_cpu_s"] = threads_cpu_s(soft_pids) - soft0
    rec["client_status"], rec["server_status"] = client.status, server.status
    if not process.parse_client_output(
            rec, client, parse_longhaul if kind == "longhaul"
            else lambda j: parse_iperf3(j, tool == "iperf3-udp")):
        return rec
    if client.status != 0 and "error" not in rec:
        rec["error"] = "client exit status %d" % client.status
    # The client sends, the server receives (no reverse mode anywhere here).
    return process.account_cpu(rec, (("sender", client), ("receiver", server)))


# ---------------------------------------------------------------------------------------
# Output.

def scenario_text(s):
    return "max" if s == "max" else "%s Gbit/s" % rate_text(s)


def run_line(rec):
    if "error" in rec and "both_s_per_gb" not in rec:
        return "%-10s %-10s  FAILED: %s" % (scenario_text(rec["scenario"]), rec["tool"],
                                           rec["error"])
    return ("%-10s %-10s %7.2f Gbit/s  loss %-18s cpu snd %6.2f s rcv %6.2f s  "
            "s/GB snd %.3f rcv %.3f both %.3f  softirqd %.2f s  load %.1f%s") % (
        scenario_text(rec["scenario"]), rec["tool"], rec["goodput_bps"] / 1e9,
        rec["loss_text"], rec["sender_cpu_s"], rec["receiver_cpu_s"],
        rec["sender_s_per_gb"], rec["receiver_s_per_gb"], rec["both_s_per_gb"],
        rec["softirqd_cpu_s"], rec["load_average"][0],
        ("  (" + rec["error"] + ")") if "error" in rec else "")


def summarize(runs, scenarios):
    rows = []
    for s in scenarios:
        key = "max" if s is None else s
        for tool in TOOLS:
            mine = [r for r in runs if r["scenario"] == key and r["tool"] == tool]
            if not mine:
                continue
            good = [r for r in mine if "both_s_per_gb" in r]
            row = {"scenario": key, "tool": tool, "runs": len(mine), "ok_runs": len(good)}
            for k in ("goodput_bps", "sender_cpu_s", "receiver_cpu_s", "softirqd_cpu_s",
                      "sender_s_per_gb", "receiver_s_per_gb", "both_s_per_gb", "loss_rate",
                      "packets_retransmitted", "retransmits", "lost_percent"):
                row[k] = median([r.get(k) for r in good])
            if tool.startswith("lh-"):
                row["loss_text"] = (fmt(None if row["loss_rate"] is None
                                        else 100 * row["loss_rate"], "%.3f%%") +
                                    fmt(row["packets_retransmitted"], " (%d retx)"))
            elif tool == "iperf3-udp":
                row["loss_text"] = fmt(row["lost_percent"], "%.3f%%")
            else:
                row["loss_text"] = fmt(row["retransmits"], "%d retr")
            rows.append(row)
    return rows


def print_table(rows, rounds):
    print()
    print("medians over %d round(s); CPU = user + system seconds of the process; "
          "s/GB = CPU s per 1e9 delivered bytes" % rounds)
    head = ("%-10s %-10s %8s  %-18s %8s %8s %8s  %8s %8s %8s" %
            ("offered", "tool", "Gbit/s", "loss", "snd s", "rcv s", "softirqd",
             "snd s/GB", "rcv s/GB", "both s/GB"))
    print(head)
    print("-" * len(head))
    for r in rows:
        print("%-10s %-10s %8s  %-18s %8s %8s %8s  %8s %8s %8s%s" % (
            scenario_text(r["scenario"]), r["tool"],
            fmt(None if r["goodput_bps"] is None else r["goodput_bps"] / 1e9, "%.2f"),
            r["loss_text"], fmt(r["sender_cpu_s"], "%.2f"), fmt(r["receiver_cpu_s"], "%.2f"),
            fmt(r["softirqd_cpu_s"], "%.2f"), fmt(r["sender_s_per_gb"], "%.3f"),
            fmt(r["receiver_s_per_gb"], "%.3f"), fmt(r["both_s_per_gb"], "%.3f"),
            "" if r["ok_runs"] == r["runs"] else
            "  (%d of %d runs failed)" % (r["runs"] - r["ok_runs"], r["runs"])))


# ---------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="cpu-per-byte",
        description="CPU seconds per delivered GB: longhaul-perf (plaintext and "
                    "protected) against iperf3 TCP and UDP on loopback.")
    cli.add_build_dir(p, default="build", help="build directory (default: build)")
    process.add_rounds_seconds(p)
    p.add_argument("--rates", default="2,5,10,20",
                   help="offered rates in Gbit/s, comma-separated (default: 2,5,10,20)")
    p.add_argument("--json", default="", metavar="FILE", help="write the results here")
    a = p.parse_args(argv)
    process.check_rounds_seconds(p, a)
    try:
        a.rate_list = [float(x) for x in a.rates.split(",") if x.strip()]
    except ValueError:
        p.error("--rates: '%s' is not a comma-separated list of numbers" % a.rates)
    if not a.rate_list or any(not 0 < r <= 400 for r in a.rate_list):
        p.error("--rates: each rate must be in (0, 400] Gbit/s")
    return a


def main(argv):
    a = parse_args(argv)
    build = a.build_dir
    if not os.path.isabs(build):
        build = os.path.join(os.getcwd(), a.build_dir)
    if not os.path.isdir(build) and os.path.isdir(os.path.join(ROOT, a.build_dir)):
        build = os.path.join(ROOT, a.build_dir)
    perf = os.path.join(build, "bin", "longhaul-perf")
    keygen = os.path.join(build, "bin", "longhaul-keygen")
    missing = [x for x in (perf, keygen) if not os.access(x, os.X_OK)]
    if subprocess.run(["sh", "-c", "command -v iperf3"], capture_output=True).returncode:
        missing.append("iperf3 (tools/setup.sh)")
    if missing:
        log("missing: " + ", ".join(missing))
        return 2
    help_text = subprocess.run([perf, "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    if "--verify" not in help_text:
        log(perf + " has no --verify flag (an older build): rebuild longhaul-perf")
        return 2

    machine = cpu_info()
    process.print_machine(machine)
    print("note: on loopback the receive softirq (IP/UDP/TCP input) runs mostly in the "
          "sender's system call and is billed to the sender; work deferred to ksoftirqd is "
          "billed to neither (the softirqd column)")

    go_on, lock = process.comparison_lock(log)
    if not go_on:
        return 1

    scenarios = list(a.rate_list) + [None]
    old = install_signal_handlers()
    runs, failed = [], 0
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="cpu-per-byte-")
    try:
        psk = os.path.join(tmp, "link.psk")
        try:
            keys.write_psk(keygen, psk, force=False)
        except (OSError, subprocess.SubprocessError) as e:
            log("longhaul-keygen --psk failed: " + (getattr(e, "stderr", None) or str(e)).strip())
            return 1
        index = 0
        for rnd in range(a.rounds):
            for s in scenarios:
                tools = ["lh-plain", "lh-psk", "iperf3-tcp"]
                if s is None or s == 10:
                    tools.append("iperf3-udp")
                k = rnd % len(tools)
                for tool in tools[k:] + tools[:k]:  # the order rotates round by round
                    index += 1
                    rec = run_one(tool, s, a.seconds, perf, psk, tmp, index)
                    rec["round"] = rnd + 1
                    runs.append(rec)
                    if "both_s_per_gb" not in rec:
                        failed += 1
                    print("round %d: %s" % (rnd + 1, run_line(rec)), flush=True)
    except Interrupted as ex:
        log(str(ex))
        failed += 1
    finally:
        process.stop_all()
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
        restore_signal_handlers(old)

    rows = summarize(runs, scenarios)
    print_table(rows, a.rounds)
    ciphers = sorted({r["cipher"] for r in runs if r["tool"] == "lh-psk" and r.get("cipher")})
    if ciphers:
        print("lh-psk cipher: " + ", ".join(ciphers))
    process.print_end(t_start)
    if a.json:
        out = {"machine": machine,
               "config": {"rounds": a.rounds, "seconds": a.seconds, "rates_gbps": a.rate_list,
                          "longhaul_flags": LH_COMMON, "build": build},
               "runs": runs, "summary": rows,
               "note": "CPU is user + system seconds of each process (wait4 rusage); on "
                       "loopback the receive softirq is billed mostly to the sender; "
                       "softirqd_cpu_s is ksoftirqd's CPU during the run"}
        process.write_json(a.json, out)
    return 1 if failed else 0


def entry():
    """What tools/bench/cpu-per-byte runs."""
    sys.exit(main(sys.argv[1:]))
