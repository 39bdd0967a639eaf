"""wan-compare: longhaul side by side with what users run today, on one emulated link.

  tools/bench/wan-compare --link=SPEC
      [--workload=bulk --time=SEC [--omit=SEC]
       | --workload=messages --message_size=SIZE --load=FRACTION --messages=N
       | --workload=transfer --bytes=SIZE]
      [--json] [--plot=FILE] [--build_dir=build] [--peers=longhaul,seed_recipe,...]
      [--profile=FILE] [--out_dir=DIR] [--security=insecure|psk|keys]

Brings up longhaul-emu in TUN mode between two network namespaces it creates (A =
198.18.0.1, B = 198.18.0.2; data flows A -> B) and runs, one after another, each on a
fresh emulator with the same link spec and seed:

  longhaul      longhaul-perf with the link's tuned profile (profiles/<link>.profile for a
                named link; otherwise `longhaul-tune --link=SPEC` writes one for the run:
                objective goodput for bulk and transfer, mct for messages)
  seed_recipe   longhaul-perf with profiles/seed-recipe.profile (the commonly copied recipe)
  tcp_bbr       TCP BBR: iperf3 for bulk, longhaul-tcp-peer for messages and transfer
  tcp_cubic     TCP CUBIC: the same with -C cubic / --cc=cubic
  udt           UDT4 (libudt) via longhaul-udt-peer, window and buffers raised past the BDP
  longhaul_defaults  (only when named in --peers) longhaul-perf with no profile and no
                flags but the address and keys: cc=bbr, no rate cap, as a new user runs it

longhaul's runs are plaintext (--insecure) by default, as every other peer is; with
--security=psk or keys they are protected, with a pre-shared key or a key pair per side
that longhaul-keygen writes into the output directory for the run (docs/perf.md).

Inside both namespaces it sets net.ipv4.tcp_rmem/tcp_wmem (max 256 MiB) and
tcp_no_metrics_save=1; the host's net.core.rmem_max/wmem_max (global, not per namespace)
are raised to 256 MiB for the run and restored afterwards, also on errors and Ctrl-C.
Everything it starts is bounded in time and killed on exit; the namespaces are removed.

Output: a table (stdout), or with --json one object
  {"link", "workload", "results": {"longhaul": {...}, "seed_recipe": {...}, "tcp_bbr": {...},
   "tcp_cubic": {...}, "udt": {...}}, "machine", ...}
where each entry has goodput_bps (bulk), mct_mean_s/mct_p50_s/mct_p99_s/mct_ideal_s
(messages), completion_s (transfer: first connect to last byte delivered), retransmissions,
the exact commands, the emulator's counters (model drops, its own drops, CPU), the load
average and the host's CPU use during the run. A peer that could not run says why in
"error". Needs root (TUN devices, namespaces). docs/comparison.md.

Exit status: 0 when every peer ran, 1 when one failed or the setup failed, 2 bad flags.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

# Link specs, processes, the emulated link, sysctls and the lock: shared with
# bridge-compare (tools/bench/longhaul_bench/netns_link.py).
from longhaul_bench import cli, keys
from longhaul_bench.cli import ROOT, log
from longhaul_bench.netns_link import (ADDR_A, ADDR_B, Emulator, HostBuffers, Interrupted,
                                       LOCK_PATH, NS_SYSCTLS, Procs, acquire_lock, clean_up,
                                       emu_summary, exit_text, first_failure,
                                       install_signal_handlers, link_params, named_link_for,
                                       ns_exec, ns_sysctls, parse_json_output, preconditions,
                                       restore_signal_handlers, run_bounded, tail, wait_port)
from longhaul_bench.procfs import cpu_times, loadavg
from longhaul_bench.units import MIB, fmt_size, parse_duration, parse_size

PEERS = ["longhaul", "seed_recipe", "tcp_bbr", "tcp_cubic", "udt"]
# Not run unless named in --peers: longhaul-perf with no profile and no flags but the
# address and the keys, as a new user runs it (cc=bbr with no rate cap).
OPTIONAL_PEERS = ["longhaul_defaults"]


# ---------------------------------------------------------------------------------------
# The peers: what each runs for each workload, and how its JSON is read.

class Plan:
    """One peer's server and client commands and how to read the client's output."""

    def __init__(self, server, client, proto, port, kind):
        self.server, self.client, self.proto, self.port = server, client, proto, port
        self.kind = kind  # "perf" | "iperf3" | "peer"


def perf_client_cmd(bins, w, extra):
    c = [bins["longhaul-perf"], "--client=" + ADDR_B, "--port=5201", "--json"]
    if w.workload == "bulk":
        c += ["--time=%g" % (w.time + w.omit)]
    elif w.workload == "messages":
        # --time bounds the submissions (a peer that cannot carry the load still ends):
        # messages 0..N-1 are due before it.
        c += ["--workload=messages", "--message_size=" + fmt_size(w.message_size),
              "--load=%g" % w.load, "--time=%.3f" % messages_time(w)]
    else:
        c += ["--bytes=" + fmt_size(w.bytes)]
    return c + extra


def messages_time(w):
    """Seconds of submissions for N messages on the open-loop schedule (N - 0.5 gaps)."""
    return (w.messages - 0.5) * w.message_size * 8 / (w.rate_bps * w.load)


def security_flags(mode, bins, out_dir):
    """longhaul-perf's key flags for (server, client): --insecure, or files longhaul-keygen
    writes into out_dir for this run (--force: a kept out_dir may hold older ones)."""
    return keys.perf_flags(mode, bins["longhaul-keygen"], out_dir)


def make_plan(peer, bins, w, link, profile):
    rate = link["rate_bps"]
    if peer == "longhaul" or peer.startswith("longhaul_") or peer == "seed_recipe":
        server = [bins["longhaul-perf"], "--server", "--bind=" + ADDR_B, "--port=5201",
                  "--one_off", "--json"] + w.server_security
        if peer == "longhaul_defaults":
            extra = []
        elif peer != "seed_recipe":
            extra = ["--profile=" + profile]
        else:
            # The recipe leaves the rate to the tool: pace at the link's rate.
            extra = ["--profile=" + os.path.join(ROOT, "profiles", "seed-recipe.profile"),
                     "--rate=%dbit" % rate]
        extra += w.longhaul_flags + w.client_security
        if peer in w.variants:
            extra += w.variants[peer]
        return Plan(server, perf_client_cmd(bins, w, extra), "udp", 5201, "perf")
    if peer in ("tcp_bbr", "tcp_cubic"):
        cc = peer[4:]
        if w.workload == "bulk":
            server = ["iperf3", "-s", "-1", "-B", ADDR_B, "-p", "5201", "-J"]
            client = ["iperf3", "-c", ADDR_B, "-B", ADDR_A, "-p", "5201", "-t", "%g" % w.time,
                      "-O", "%g" % w.omit, "-C", cc, "-J"]
            return Plan(server, client, "tcp", 5201, "iperf3")
        server = [bins["longhaul-tcp-peer"], "--server", "--bind=" + ADDR_B, "--port=5302",
                  "--one_off", "--cc=" + cc]
        client = [bins["longhaul-tcp-peer"], "--client=" + ADDR_B, "--bind=" + ADDR_A,
                  "--port=5302", "--cc=" + cc] + peer_workload_flags(w, rate)
        return Plan(server, client, "tcp", 5302, "peer")
    if peer == "udt":
        sizing = ["--rate=%dbit" % rate, "--rtt=%gms" % (link["rtt_s"] * 1e3),
                  "--mss=%d" % link["mtu"]]
        server = [bins["longhaul-udt-peer"], "--server", "--bind=" + ADDR_B, "--port=5303",
                  "--one_off"] + sizing
        client = [bins["longhaul-udt-peer"], "--client=" + ADDR_B, "--port=5303"] + sizing + \
            [f for f in peer_workload_flags(w, rate) if not f.startswith("--rate=")]
        return Plan(server, client, "udp", 5303, "peer")
    raise ValueError(peer)


def peer_workload_flags(w, rate):
    f = ["--workload=" + w.workload, "--rate=%dbit" % rate]
    if w.workload == "bulk":
        f += ["--time=%g" % w.time, "--omit=%g" % w.omit]
    elif w.workload == "messages":
        f += ["--message_size=" + fmt_size(w.message_size), "--load=%g" % w.load,
              "--messages=%d" % w.messages, "--time=%.3f" % messages_time(w)]
    else:
        f += ["--bytes=" + fmt_size(w.bytes)]
    return f


def intervals_of(kind, j):
    """[(start_s, end_s, bits_per_second, omitted)]: bytes delivered at the receiver per
    interval (longhaul-perf forward tests: bytes acknowledged at the sender)."""
    out = []
    for iv in j.get("intervals", []):
        s = iv.get("sum", {})
        if s.get("seconds", 1) < 0.05:
            continue  # iperf3's server writes a zero-length interval at the end of -O
        if "bits_per_second" in s:
            out.append([round(s.get("start", 0), 3), round(s.get("end", 0), 3),
                        s["bits_per_second"], bool(s.get("omitted", False))])
    return out


def summarize(peer, plan, w, j, link, server_json=None):
    """The entry's numbers from a client's JSON (and, for iperf3, the server's: its
    intervals count received bytes, the client's count bytes written)."""
    e = {}
    end = j.get("end", {})
    ivs = intervals_of(plan.kind, server_json if plan.kind == "iperf3" and server_json else j)
    if plan.kind == "iperf3" and w.workload == "bulk" and w.omit > 0:
        # iperf3's server marks only part of the client's -O as omitted and does not restart
        # its clock: keep the measured intervals, placed from `omit` on.
        kept = [iv for iv in ivs if not iv[3]]
        if kept:
            shift = w.omit - kept[0][0]
            ivs = [[round(a + shift, 3), round(b + shift, 3), bps, om] for a, b, bps, om in kept]
    e["intervals"] = ivs
    if plan.kind == "perf":
        lh = end.get("longhaul", {})
        e["retransmissions"] = lh.get("retransmission", {}).get("packets_retransmitted",
                                                                 end.get("sum_sent", {}).get(
                                                                     "retransmits"))
        e["longhaul"] = {k: lh.get(k) for k in ("loss", "retransmission", "fec", "rtt",
                                               "driver", "profile", "errors")}
        params = lh.get("params", {})
        e["longhaul"]["params"] = {k: params.get(k) for k in (
            "segment", "window", "recv_window", "cc", "rate", "fec", "fec_k", "fec_m",
            "fec_interleave", "fec_flush", "pacing_burst", "tail_protect", "ack_every")}
        e["cpu_percent"] = end.get("cpu_utilization_percent")
        total = end.get("sum_received", {}).get("bits_per_second")
        if w.workload == "bulk":
            e["goodput_total_bps"] = total
            sel = [iv for iv in ivs if iv[0] >= w.omit - 1e-3 and iv[1] <= w.omit + w.time + 0.05]
            secs = sum(iv[1] - iv[0] for iv in sel)
            if w.omit > 0 and secs > 0.5 * w.time:
                e["goodput_bps"] = sum(iv[2] * (iv[1] - iv[0]) for iv in sel) / secs
                e["goodput_window_s"] = [w.omit, round(w.omit + secs, 3)]
            else:
                e["goodput_bps"] = total
        elif w.workload == "transfer":
            rtt_min = (lh.get("rtt", {}).get("min_ms") or link["rtt_s"] * 1e3) * 1e-3
            sent_s = end.get("sum_sent", {}).get("seconds", 0)
            # longhaul-perf does not time its Connect, and its receiver span starts at the
            # first *delivered* message (late when that message needed a repair), so the
            # completion is taken from the sender: the handshake is two round trips
            # (Hello/Retry, Hello+cookie/Accept; docs/udp-driver.md), then sum_sent spans
            # the first submission to the acknowledgement of the last byte, which left the
            # receiver one way earlier. All from the sender's minimum RTT, which is at least
            # the link's (so the estimate errs against longhaul by a few ms at most).
            connect = end.get("connect_s", j.get("start", {}).get("connect_s"))
            if connect is not None:
                e["completion_s"] = connect + sent_s - rtt_min / 2
                e["completion_basis"] = ("measured connect + first submission to last "
                                         "acknowledgement - one way")
            else:
                e["completion_s"] = 2 * rtt_min + sent_s - rtt_min / 2
                e["completion_basis"] = ("2 RTT handshake + first submission to last "
                                         "acknowledgement - one way (from the min RTT)")
            e["first_byte_s"] = 2.5 * rtt_min
            e["sent_span_s"] = sent_s
            e["goodput_bps"] = end.get("sum_received", {}).get("bits_per_second")
    elif plan.kind == "iperf3":
        e["goodput_bps"] = end.get("sum_received", {}).get("bits_per_second")
        e["retransmissions"] = end.get("sum_sent", {}).get("retransmits")
        st = (end.get("streams") or [{}])[0].get("sender", {})
        e["rtt_ms"] = {"min": st.get("min_rtt", 0) / 1e3, "mean": st.get("mean_rtt", 0) / 1e3,
                       "max": st.get("max_rtt", 0) / 1e3}
        e["cpu_percent"] = end.get("cpu_utilization_percent")
        e["congestion"] = end.get("sender_tcp_congestion")
        # (iperf3's client intervals count bytes written, not received: no total here.)
    else:
        e["goodput_bps"] = end.get("sum_received", {}).get("bits_per_second")
        e["retransmissions"] = end.get("sum_sent", {}).get("retransmits")
        e["goodput_total_bps"] = (end.get("sum_received", {}).get("total_bytes", 0) * 8 /
                                  max(1e-9, end.get("sum_received", {}).get("total_seconds", 0)))
        e["sender_stats"] = end.get("sender_stats")
        if w.workload == "transfer":
            e["completion_s"] = end.get("completion_s")
            e["completion_basis"] = "measured: connect() start to last byte at the receiver"
            e["first_byte_s"] = end.get("first_byte_s")
            e["connect_s"] = j.get("start", {}).get("connect_s")
    if w.workload == "messages":
        for k in ("messages", "mct_mean_s", "mct_p50_s", "mct_p99_s", "mct_p999_s",
                  "mct_max_s", "mct_ideal_s", "late_submissions", "mct_cdf"):
            if k in end:
                e[k] = end[k]
        delivered = e.get("messages", 0)
        if e.get("late_submissions") or end.get("unstable") or delivered < w.messages - 1:
            e["unstable"] = True
            e["note"] = ("could not carry the offered load: %s of %d messages delivered, "
                         "%s late submissions (the open loop backed up; completion times "
                         "grow without bound)" % (delivered, w.messages,
                                                  e.get("late_submissions", "?")))
    return e


# ---------------------------------------------------------------------------------------

class Workload:
    pass


def make_parser():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--link", required=True, help="link spec or named link (profiles/links)")
    ap.add_argument("--workload", default="bulk", choices=["bulk", "messages", "transfer"])
    ap.add_argument("--time", default="30", help="bulk: measured seconds per peer")
    ap.add_argument("--omit", default="3",
                    help="bulk: seconds sent before the measured --time (iperf3 -O)")
    ap.add_argument("--message_size", default="4MiB", help="messages: size of each message")
    ap.add_argument("--load", type=float, default=0.5, help="messages: offered load (0, 1]")
    ap.add_argument("--messages", type=int, default=300, help="messages: how many")
    ap.add_argument("--bytes", default="64MiB", help="transfer: bytes, from a cold start")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--plot", default="", help="write a plot (.svg or .png) of this run")
    cli.add_build_dir(ap, help="build tree with bin/longhaul-perf, -emu, -tune, -tcp-peer, "
                      "-udt-peer")
    ap.add_argument("--peers", default=",".join(PEERS), help="subset and order of " +
                    ",".join(PEERS) + "; also longhaul_defaults (longhaul-perf with no "
                    "profile: cc=bbr, no rate cap)")
    ap.add_argument("--profile", default="",
                    help="longhaul's profile (default: the link's tuned profile, or tune one)")
    ap.add_argument("--longhaul_flags", default="",
                    help="extra longhaul-perf flags for both longhaul runs (host settings); "
                         "default none: the profile as tuned. auto: --pacing_burst=min(20ms, "
                         "max(1ms, RTT/4)), the catch-up a user-space pacer needs on a busy "
                         "host that wakes it late (docs/comparison.md)")
    ap.add_argument("--longhaul_variant", action="append", default=[], metavar="NAME:FLAGS",
                    help="also run longhaul with these extra flags as entry longhaul_NAME, "
                         "right after longhaul (repeatable), e.g. w32:--window=32MiB")
    ap.add_argument("--security", default="insecure", choices=["insecure", "psk", "keys"],
                    help="longhaul's packet protection: insecure (plaintext, as the other "
                         "peers), psk (a pre-shared key) or keys (a key pair per side), the "
                         "files written by longhaul-keygen for the run")
    ap.add_argument("--seed", type=int, default=7, help="the emulator's loss seed")
    ap.add_argument("--emu_realtime", type=int, default=10,
                    help="longhaul-emu --realtime priority (0: off); the same for every peer")
    ap.add_argument("--nice", type=int, default=0,
                    help="run every peer's client and server at this nice value (the same for "
                         "all peers; negative values give the runs priority over other work "
                         "on a shared machine)")
    ap.add_argument("--out_dir", default="", help="keep raw outputs here (default: a temp dir)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of quiet between peers")
    ap.add_argument("--max_load", type=float, default=0.0,
                    help="wait (at most --max_load_wait s) for the 1-minute load average to "
                         "fall below this before each peer (0: do not wait, just record it)")
    ap.add_argument("--max_load_wait", type=float, default=300)
    ap.add_argument("--tune_budget", default="30s", help="longhaul-tune --check_budget")
    ap.add_argument("--lock_wait", type=float, default=1800,
                    help="seconds to wait for another wan-compare run to finish")
    return ap


def workload_from_args(ap, args):
    """The workload and the link from the flags (ap.error on a bad one)."""
    w = Workload()
    w.workload = args.workload
    try:
        w.time = parse_duration(args.time)
        w.omit = parse_duration(args.omit) if args.workload == "bulk" else 0.0
        w.message_size = parse_size(args.message_size)
        w.bytes = parse_size(args.bytes)
        link = link_params(args.link)
    except (ValueError, KeyError) as e:
        ap.error(str(e))
    if not link["rate_bps"]:
        ap.error("--link needs a rate (rate=1gbit,...)")
    w.load, w.messages = args.load, args.messages
    if not (0 < w.load <= 1):
        ap.error("--load must be in (0, 1]")
    if w.messages <= 0 or w.time <= 0 or w.bytes <= 0 or not (64 <= w.message_size <= 64 * MIB):
        ap.error("--messages, --time and --bytes must be positive, --message_size 64B..64MiB")
    if args.longhaul_flags == "auto":
        w.longhaul_flags = [auto_pacing_burst(link["rtt_s"])]
    else:
        w.longhaul_flags = shlex.split(args.longhaul_flags)
    return w, link


def auto_pacing_burst(rtt_s):
    """--longhaul_flags=auto: --pacing_burst=min(20ms, max(1ms, RTT/4))."""
    burst_ms = min(20.0, max(1.0, rtt_s * 1e3 / 4))
    return "--pacing_burst=%gms" % round(burst_ms, 1)


def peers_from_args(ap, args, w):
    """The peers in the order they run: --peers, each --longhaul_variant right after
    longhaul (kept in w.variants: name -> extra flags)."""
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in PEERS + OPTIONAL_PEERS:
            ap.error("--peers: unknown peer '%s' (%s)" % (p, ",".join(PEERS + OPTIONAL_PEERS)))
    w.variants = {}
    for v in args.longhaul_variant:
        name, sep, flags = v.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9]+", name):
            ap.error("--longhaul_variant=%s: give NAME:FLAGS (NAME letters and digits)" % v)
        if name == "defaults":
            ap.error("--longhaul_variant=%s: the name 'defaults' is taken by the "
                     "longhaul_defaults peer (--peers=...,longhaul_defaults)" % v)
        w.variants["longhaul_" + name] = shlex.split(flags)
    if w.variants:
        at = peers.index("longhaul") + 1 if "longhaul" in peers else 0
        peers[at:at] = list(w.variants)
    return peers


def preflight(args):
    """The binaries, and an exit status when a precondition is missing (each named)."""
    bins = {n: os.path.join(args.build_dir, "bin", n) for n in (
        "longhaul-perf", "longhaul-emu", "longhaul-tune", "longhaul-tcp-peer",
        "longhaul-udt-peer", "longhaul-keygen")}
    env_problems, missing = preconditions(("ip", "ss", "iperf3", "timeout"))
    problems = env_problems + missing
    if not os.access(bins["longhaul-emu"], os.X_OK):
        problems.append("%s is missing (build longhaul-emu, or give --build_dir)" %
                        bins["longhaul-emu"])
    if problems:
        return bins, cli.cannot_run(problems, args.json)
    return bins, None


def new_result(args, w, link, out_dir):
    """The result object before the runs: the link, the workload, the settings, the
    machine."""
    result = {
        "link": args.link,
        "link_params": {"rate_bps": link["rate_bps"], "rtt_s": link["rtt_s"], "mtu": link["mtu"],
                        "keys": link["keys"]},
        "workload": {"name": w.workload},
        "command": " ".join(shlex.quote(a) for a in ["tools/bench/wan-compare"] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                    "load_avg_start": loadavg()},
        "emulator_seed": args.seed,
        "emulator_realtime": args.emu_realtime,
        "nice": args.nice,
        "longhaul_flags": w.longhaul_flags,
        "longhaul_security": args.security,
        "longhaul_variants": w.variants,
        "out_dir": out_dir,
        "results": {},
    }
    if w.workload == "bulk":
        result["workload"].update(time_s=w.time, omit_s=w.omit)
    elif w.workload == "messages":
        result["workload"].update(message_size=w.message_size, load=w.load,
                                  messages=w.messages)
    else:
        result["workload"].update(bytes=w.bytes)
    return result


def run_peers(args, w, link, bins, procs, host, peers, out_dir, result):
    """longhaul's profile, the host's limits raised, then each peer in turn (--settle
    seconds apart); True when one failed."""
    failed = False
    # longhaul's profile.
    profile, profile_note = choose_profile(args, w, link, bins, out_dir)
    result["longhaul_profile"] = {"path": profile, "source": profile_note}

    # Host-wide socket-buffer limits, restored by the caller.
    result["host_sysctls"] = host.raise_limits()

    tag = "lhwc%d" % os.getpid()
    for i, peer in enumerate(peers):
        if i > 0:
            time.sleep(args.settle)
        wait_for_load(args)
        entry = run_peer(peer, procs, bins, w, link, profile, args, tag, out_dir)
        result["results"][peer] = entry
        if entry.get("error"):
            failed = True
        log("%-12s %s" % (peer, one_line(entry, w)))
    return failed


def write_output(args, w, result, out_dir, failed):
    """wan-compare.json in the output folder, the plot, the table or JSON; the exit
    status."""
    add_ratios(result, w)
    with open(os.path.join(out_dir, "wan-compare.json"), "w") as f:
        json.dump(result, f, indent=1)
    if args.plot:
        try:
            from longhaul_bench import plots
            plots.plot_run(result, args.plot)
        except Exception as e:  # plotting must not lose the measurements
            log("plot failed: %s" % e)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result, w)
    return 1 if failed else 0


def main():
    ap = make_parser()
    args = ap.parse_args()
    w, link = workload_from_args(ap, args)
    peers = peers_from_args(ap, args, w)
    w.rate_bps = link["rate_bps"]
    bins, status = preflight(args)
    if status is not None:
        return status

    # One run at a time: runs share the host-wide socket-buffer sysctls (a second run would
    # restore them under the first) and the CPU.
    lock = acquire_lock(args.lock_wait, log)  # held until main returns
    if lock is None:
        log("another wan-compare run held %s for %g s; giving up" % (LOCK_PATH, args.lock_wait))
        if args.json:
            print(json.dumps({"error": "another wan-compare run is in progress"}))
        return 1

    out_dir = args.out_dir or tempfile.mkdtemp(prefix="wan-compare-")
    os.makedirs(out_dir, exist_ok=True)
    try:
        w.server_security, w.client_security = security_flags(args.security, bins, out_dir)
    except (OSError, subprocess.SubprocessError) as e:
        log("cannot write longhaul's keys with %s: %s" % (bins["longhaul-keygen"], e))
        if args.json:
            print(json.dumps({"error": "longhaul-keygen failed: %s" % e}))
        return 1
    procs = Procs()
    result = new_result(args, w, link, out_dir)
    old_handlers = install_signal_handlers()
    host = HostBuffers()
    failed = False
    try:
        failed = run_peers(args, w, link, bins, procs, host, peers, out_dir, result)
    except Interrupted as e:
        log(str(e) + "; cleaning up")
        result["error"] = str(e)
        failed = True
    finally:
        clean_up(procs, ["lhwc%d-%s" % (os.getpid(), x) for x in ("a", "b")], host, log)
        restore_signal_handlers(old_handlers)

    result["machine"]["load_avg_end"] = loadavg()
    return write_output(args, w, result, out_dir, failed)


def choose_profile(args, w, link, bins, out_dir):
    if args.profile:
        if not os.path.exists(args.profile):
            raise SystemExit("wan-compare: --profile=%s does not exist" % args.profile)
        return os.path.abspath(args.profile), "given with --profile"
    name = named_link_for(args.link)
    if name and w.workload != "messages":
        path = os.path.join(ROOT, "profiles", name + ".profile")
        if os.path.exists(path):
            return path, "the named link's tuned profile profiles/%s.profile" % name
    # No stored profile: tune one for this link (the simulator checks are bounded).
    out = os.path.join(out_dir, "longhaul-tuned.profile")
    cmd = [bins["longhaul-tune"], "--link=" + args.link, "--out=" + out,
           "--check_budget=" + args.tune_budget]
    if w.workload == "messages":
        cmd += ["--objective=mct", "--message_size=" + fmt_size(w.message_size),
                "--load=%g" % w.load]
    log("tuning: " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=parse_duration(args.tune_budget) + 180)
    if r.returncode != 0 or not os.path.exists(out):
        raise SystemExit("wan-compare: longhaul-tune failed: " +
                         (r.stderr.strip().splitlines() or ["no output"])[-1])
    return out, "auto: " + " ".join(cmd[1:])


def wait_for_load(args):
    if args.max_load <= 0:
        return
    end = time.monotonic() + args.max_load_wait
    while loadavg()[0] > args.max_load and time.monotonic() < end:
        time.sleep(5)


def run_peer(peer, procs, bins, w, link, profile, args, tag, out_dir):
    entry = {}
    if peer.startswith("longhaul") or peer == "seed_recipe":
        needed = ["longhaul-perf"]
    elif peer == "udt":
        needed = ["longhaul-udt-peer"]
    else:
        needed = [] if w.workload == "bulk" else ["longhaul-tcp-peer"]
    for b in needed:
        if not os.access(bins[b], os.X_OK):
            entry["error"] = "%s is missing (build it, or give --build_dir)" % bins[b]
            return entry
    plan = make_plan(peer, bins, w, link, profile)
    a, b = tag + "-a", tag + "-b"
    rate = link["rate_bps"]
    pending_summary = None
    if w.workload == "bulk":
        expect = w.time + w.omit
    elif w.workload == "messages":
        # Submissions, then a backlog of up to 256 MiB drained by a slow peer.
        expect = messages_time(w) + 90
    else:
        # Loss-limited TCP can be two orders of magnitude below the link rate.
        expect = max(60.0, 300 * w.bytes * 8 / rate)
    client_bound = int(expect + 60)
    emu = Emulator(procs, bins["longhaul-emu"], args.link, a, b, args.seed, args.emu_realtime,
                   client_bound + 120, os.path.join(out_dir, peer + ".emu.log"))
    entry["emulator_command"] = " ".join(emu.cmd)
    server = None
    try:
        ready = emu.wait_event("ready", 30)
        if ready is None:
            entry["error"] = "the emulator did not start: " + tail(out_dir, peer + ".emu.log")
            return entry
        err = ns_sysctls((a, b), NS_SYSCTLS)
        if err:
            entry["error"] = err
            return entry
        entry["namespace_sysctls"] = NS_SYSCTLS
        srv_out = open(os.path.join(out_dir, peer + ".server.out"), "w")
        srv_err = open(os.path.join(out_dir, peer + ".server.err"), "w")
        prio = ["nice", "-n", str(args.nice)] if args.nice else []
        server_cmd = ns_exec(b, prio + ["timeout", "-k", "5", str(client_bound + 30)] +
                             plan.server)
        server = procs.popen(server_cmd, stdout=srv_out, stderr=srv_err)
        entry["server_command"] = " ".join(shlex.quote(x) for x in ns_exec("B", plan.server))
        if not wait_port(b, plan.proto, plan.port, 15):
            entry["error"] = "the server did not listen within 15 s: " + \
                tail(out_dir, peer + ".server.err")
            return entry
        client_cmd = ns_exec(a, prio + ["timeout", "-k", "5", str(client_bound)] + plan.client)
        entry["command"] = " ".join(shlex.quote(x) for x in ns_exec("A", plan.client))
        la0, (t0, i0), m0 = loadavg(), cpu_times(), time.monotonic()
        c = run_bounded(procs, client_cmd, client_bound + 20)
        stdout, stderr, rc = c.stdout, ("timed out" if c.timed_out else c.stderr), \
            (-1 if c.timed_out else c.returncode)
        t1, i1 = cpu_times()
        entry["wall_s"] = round(time.monotonic() - m0, 3)
        entry["load_avg"] = {"before": la0, "after": loadavg()}
        entry["host_cpu_busy"] = round(1 - (i1 - i0) / max(1, t1 - t0), 3)
        with open(os.path.join(out_dir, peer + ".client.json"), "w") as f:
            f.write(stdout)
        with open(os.path.join(out_dir, peer + ".client.err"), "w") as f:
            f.write(stderr)
        j = parse_json_output(stdout)
        if j is None or (rc != 0 and not j.get("end")):
            entry["error"] = "client failed (%s): %s" % (exit_text(rc), (j or {}).get("error") or
                                                         first_failure(stderr))
        else:
            if rc != 0:
                entry["warning"] = "client exit %d: %s" % (rc, (j.get("error") or
                                                               stderr.strip()[-300:]))
            pending_summary = (j, link)
    finally:
        if server is not None:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            procs.kill(server)
            srv_out.close()
            srv_err.close()
        final, emu_cpu = emu.stop()
        if final:
            entry["emulator"] = emu_summary(final, emu_cpu)
    if pending_summary is not None:
        server_json = None
        if plan.kind == "iperf3":
            with open(os.path.join(out_dir, peer + ".server.out")) as f:
                server_json = parse_json_output(f.read())
        entry.update(summarize(peer, plan, w, pending_summary[0], link, server_json))
    return entry


def one_line(e, w):
    if e.get("error"):
        return "ERROR " + e["error"]
    if w.workload == "bulk":
        s = "goodput %.1f Mbit/s" % ((e.get("goodput_bps") or 0) / 1e6)
    elif w.workload == "messages":
        s = "mct p50 %.1f ms p99 %.1f ms (ideal %.1f)" % (
            e.get("mct_p50_s", 0) * 1e3, e.get("mct_p99_s", 0) * 1e3,
            e.get("mct_ideal_s", 0) * 1e3)
    else:
        s = "completion %.3f s" % (e.get("completion_s") or 0)
    return s + ", retransmissions %s, load %s" % (
        e.get("retransmissions"), e.get("load_avg", {}).get("before", ["?"])[0])


def add_ratios(result, w):
    """longhaul (and each longhaul_* variant) against the peers, as the acceptance states
    them: bulk goodput / best peer's, p99 completion / a peer's and / ideal, transfer
    completion / a peer's."""
    res = result["results"]
    mine = [p for p in res if p == "longhaul" or p.startswith("longhaul_")]
    peers = {p: e for p, e in res.items() if p not in mine and not e.get("error")}
    cmp = {}
    for me in mine:
        lh = res[me]
        if w.workload == "bulk" and lh.get("goodput_bps"):
            others = {p: e["goodput_bps"] for p, e in peers.items() if e.get("goodput_bps")}
            if others:
                best = max(others, key=others.get)
                cmp[me + "_best_peer"] = best
                cmp[me + "_over_best"] = lh["goodput_bps"] / others[best]
            for p, v in others.items():
                cmp["%s_over_%s" % (me, p)] = lh["goodput_bps"] / v
            cmp[me + "_over_link"] = lh["goodput_bps"] / result["link_params"]["rate_bps"]
        elif w.workload == "messages" and lh.get("mct_p99_s"):
            for p, e in peers.items():
                if e.get("mct_p99_s"):
                    cmp["%s_p99_over_%s" % (me, p)] = lh["mct_p99_s"] / e["mct_p99_s"]
            if lh.get("mct_ideal_s"):
                cmp[me + "_p99_over_ideal"] = lh["mct_p99_s"] / lh["mct_ideal_s"]
        elif w.workload == "transfer" and lh.get("completion_s"):
            for p, e in peers.items():
                if e.get("completion_s"):
                    cmp["%s_completion_over_%s" % (me, p)] = lh["completion_s"] / e["completion_s"]
    # The plain names for longhaul itself (what docs and the acceptance refer to).
    if "longhaul_best_peer" in cmp:
        cmp["best_peer"] = cmp.pop("longhaul_best_peer")
    result["comparison"] = cmp


def print_table(result, w):
    print("link %s, workload %s" % (result["link"], json.dumps(result["workload"])))
    if w.workload == "bulk":
        print("%-12s %12s %12s %8s %8s %10s %8s" % ("peer", "goodput", "total", "retrans",
                                                    "emu-q", "emu-own", "load"))
    elif w.workload == "messages":
        print("%-12s %9s %9s %9s %9s %9s %8s %8s" % ("peer", "mean ms", "p50 ms", "p99 ms",
                                                     "p99.9 ms", "ideal ms", "retrans", "load"))
    else:
        print("%-12s %12s %12s %8s %8s" % ("peer", "completion", "first byte", "retrans",
                                           "load"))
    for p, e in result["results"].items():
        load = e.get("load_avg", {}).get("before", [float("nan")])[0]
        if e.get("error"):
            print("%-12s ERROR: %s" % (p, e["error"]))
            continue
        emu = e.get("emulator", {})
        if w.workload == "bulk":
            print("%-12s %7.1f Mb/s %7.1f Mb/s %8s %8s %10s %8.2f" % (
                p, (e.get("goodput_bps") or 0) / 1e6, (e.get("goodput_total_bps") or 0) / 1e6,
                e.get("retransmissions"), emu.get("forward", {}).get("dropped_queue"),
                emu.get("own_drops"), load))
        elif w.workload == "messages":
            print("%-12s %9.1f %9.1f %9.1f %9.1f %9.1f %8s %8.2f" % (
                p, e.get("mct_mean_s", 0) * 1e3, e.get("mct_p50_s", 0) * 1e3,
                e.get("mct_p99_s", 0) * 1e3, e.get("mct_p999_s", 0) * 1e3,
                e.get("mct_ideal_s", 0) * 1e3, e.get("retransmissions"), load))
        else:
            print("%-12s %10.3f s %10.3f s %8s %8.2f" % (
                p, e.get("completion_s") or 0, e.get("first_byte_s") or 0,
                e.get("retransmissions"), load))
    if result.get("comparison"):
        print("comparison: " + ", ".join("%s %s" % (k, ("%.3f" % v) if isinstance(v, float)
                                                    else v)
                                         for k, v in result["comparison"].items()))


def entry():
    """What tools/bench/wan-compare runs."""
    sys.exit(main())
