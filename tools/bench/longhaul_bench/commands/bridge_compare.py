"""bridge-compare: longhaul-bridge, kcptun and direct TCP (BBR, CUBIC) carrying the same real
TCP clients over one emulated link.

  tools/bench/bridge-compare [--link=SPEC] [--losses=0,1e-3,1e-2]
      [--peers=bridge,kcptun,tcp_bbr,tcp_cubic]
      [--workloads=iperf,iperf_p16,http,latency,streams]
      [--time=SEC] [--omit=SEC] [--http_bytes=SIZE] [--http_limit=SEC]
      [--latency_rounds=N] [--streams=N] [--security=insecure|psk]
      [--build_dir=build] [--out_dir=DIR] [--json] [--plot=FILE.svg|.png]

For every loss in --losses (the --link spec with its loss replaced), every peer and every
workload, one run on a fresh longhaul-emu in TUN mode between two network namespaces it
creates (A = 198.18.0.1, B = 198.18.0.2; tools/bench/longhaul_bench/netns_link.py, shared
with wan-compare): the services in B, the peer's tunnel if it has one, the clients in A.

  bridge     longhaul-bridge client in A (TCP listen 127.0.0.1:10000, --peer=198.18.0.2:4433)
             and server in B (--listen=198.18.0.2:4433 UDP, --target=the workload's
             service): every TCP connection is a stream over one longhaul connection.
             Plaintext (--insecure) by default, as every other peer; --security=psk writes
             a pre-shared key with longhaul-keygen. Profile: --bridge_profile (auto: the
             link's tuned profile, or longhaul-tune writes one per loss).
  kcptun     Debian's kcptun-client in A / kcptun-server in B, the same listen and target
             addresses: FEC 10+3, no encryption or compression, MTU 1500 (kcp-go's limit),
             send/receive windows 2 x BDP in packets, socket and smux buffers past the BDP,
             mode --kcptun_mode (docs/bridge-compare.md says which and why).
  tcp_bbr    the clients straight to B's services over the link, congestion control BBR
  tcp_cubic  ... CUBIC (iperf3 -C, and net.ipv4.tcp_congestion_control in both namespaces
             for curl, the web server and the echo test)

Workloads (clients in A, services in B):
  iperf      iperf3 -c ... -t TIME -O OMIT -J, one stream, data A -> B; goodput is the
             receiver's (end.sum_received)
  iperf_p16  the same with -P 16 (aggregate; Jain's index of the per-stream goodputs)
  http       curl fetches a --http_bytes file of random bytes from python3 -m http.server
             in B (data B -> A), its sha256 checked against the source; each fetch is bounded
             by --http_limit: a fetch that does not finish reports bytes / time and a
             PROJECTED completion time: limit + (size - bytes) / (rate over the second half
             of the bounded run), clearly marked
  latency    tools/bench/tcp_echo.py: --latency_rounds rounds of a 100 B request and a
             100 B response on one connection, p50 / p99 round trip; once alone, once while
             an iperf3 bulk stream (A -> B) fills the link through the same path (the echo
             server relays non-echo connections to iperf3, so a one-target tunnel carries
             both)
  streams    iperf3 -P --streams (100): aggregate goodput and Jain's fairness index
             (sum x)^2 / (n sum x^2) of the per-stream goodputs

Inside both namespaces: net.ipv4.tcp_rmem/tcp_wmem max 256 MiB, tcp_no_metrics_save=1,
tcp_congestion_control (the peer's; cubic for the tunnels' local legs). On the host,
for the run and restored after, also on errors and Ctrl-C: net.core.rmem_max/wmem_max
raised to 256 MiB, and the algorithms added to net.ipv4.tcp_allowed_congestion_control
(a namespace may only make an allowed algorithm its default). Every process is bounded
in time and killed on exit; the namespaces are removed. Only one comparison (this or
wan-compare) runs at a time.

Output: a table (goodput in Mbit/s and % of the link rate, HTTP times, latency
percentiles, the ratios bridge / kcptun, bridge / CUBIC, bridge / BBR per loss, HTTP time
ratios, every run's exact commands, emulator counters and load average), or with --json
the same as one object. docs/bridge-compare.md.

Exit status: 0 every run worked, 1 one failed (the output says which and why), 2 bad
flags, 77 not root, or network namespaces or TUN devices unavailable.
"""

import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from longhaul_bench import cli, keys
from longhaul_bench.cli import ROOT, log
from longhaul_bench.commands.bridge_report import NAMES, add_ratios, cell_text, print_table, plot
from longhaul_bench.commands.bridge_workloads import (GOODPUT_WORKLOADS, PYTHON, TUNNELS,
                                                      WORKLOADS, Failed, expected_s,
                                                      make_http_file, q, start_services,
                                                      wl_http, wl_iperf, wl_latency)
from longhaul_bench.netns_link import (ADDR_B, Emulator, HostBuffers, Interrupted,
                                       NS_SYSCTLS, Procs, acquire_lock, clean_up, emu_summary,
                                       exit_text, first_failure, install_signal_handlers,
                                       link_params, named_link_for, ns_exec, ns_sysctls,
                                       preconditions, restore_signal_handlers, run_bounded,
                                       spec_with, tail, wait_port)
from longhaul_bench.procfs import cpu_times, loadavg
from longhaul_bench.units import MIB, parse_duration, parse_loss, parse_size

PEERS = ["bridge", "kcptun", "tcp_bbr", "tcp_cubic"]

# The tunnels' ports, inside the namespaces (198.18.0.0/15 and loopback only); B's
# services' ports are in bridge_workloads.
LOCAL_PORT = 10000     # the tunnel's TCP entry in A (127.0.0.1)
BRIDGE_PORT = 4433     # longhaul-bridge server, UDP, B
KCP_PORT = 29900       # kcptun-server, UDP, B
METRICS_A, METRICS_B = 9100, 9101  # longhaul-bridge --metrics, 127.0.0.1 in A / B

# kcptun: kcp-go refuses an MTU above 1500 (mtuLimit); a segment carries mtu - 24 (KCP
# header) - 20 (the nonce and CRC kept even with --crypt=none) - 8 (FEC header) bytes.
KCP_MTU = 1500
KCP_MSS = KCP_MTU - 24 - 20 - 8
KCP_DEFAULT_MODE = "normal"  # the mode trial: docs/bridge-compare.md section 2
KCP_MODES = ("fast", "fast2", "fast3", "normal")


def show_path(path):
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


# ---------------------------------------------------------------------------------------
# Peer settings.

def kcptun_settings(args, link):
    """kcptun's flags for this link (the same on both sides) and why."""
    bdp = link["rate_bps"] * link["rtt_s"] / 8
    window = args.kcptun_window or int(math.ceil(2 * bdp / KCP_MSS))
    ds, ps = args.kcptun_fec
    sockbuf = int(max(4 * MIB, 2 * bdp))
    smuxbuf = int(max(4 * MIB, 4 * bdp))
    streambuf = int(max(2 * MIB, 2 * bdp))
    flags = ["--mode=" + args.kcptun_mode, "--crypt=none", "--nocomp", "--mtu=%d" % KCP_MTU,
             "--sndwnd=%d" % window, "--rcvwnd=%d" % window, "--datashard=%d" % ds,
             "--parityshard=%d" % ps, "--sockbuf=%d" % sockbuf, "--smuxver=2",
             "--smuxbuf=%d" % smuxbuf, "--streambuf=%d" % streambuf, "--keepalive=10",
             "--quiet", "--key=longhaul-bench"]
    return {"flags": flags, "bdp_bytes": int(bdp), "segment_payload_bytes": KCP_MSS,
            "window_packets": window, "window_bytes": window * KCP_MSS,
            "window_over_bdp": round(window * KCP_MSS / bdp, 2) if bdp else None}


def bridge_security(args, bins, out_dir):
    if args.security == "insecure":
        return ["--insecure"]
    return keys.perf_flags("psk", bins["longhaul-keygen"], out_dir, name="bridge")[0]


def bridge_profile(args, spec, bins, out_dir, cache):
    """The bridge's profile flags for this link: (flags, note)."""
    if spec in cache:
        return cache[spec]
    if args.bridge_profile == "none":
        out = ([], "none: the bridge's defaults (BBR)")
    elif args.bridge_profile != "auto":
        out = (["--profile=" + os.path.abspath(args.bridge_profile)], "given with --bridge_profile")
    else:
        name = named_link_for(spec)
        path = os.path.join(ROOT, "profiles", (name or "") + ".profile")
        if name and os.path.exists(path):
            out = (["--profile=" + path], "the named link's tuned profile profiles/%s.profile"
                   % name)
        elif os.access(bins["longhaul-tune"], os.X_OK):
            dest = os.path.join(out_dir, "bridge-%d.profile" % len(cache))
            cmd = [bins["longhaul-tune"], "--link=" + spec, "--out=" + dest,
                   "--check_budget=" + args.tune_budget]
            log("tuning for the bridge: " + q(cmd))
            r = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=parse_duration(args.tune_budget) + 180)
            if r.returncode == 0 and os.path.exists(dest):
                out = (["--profile=" + dest], "auto: " + q(cmd[1:]))
            else:
                out = ([], "longhaul-tune failed (%s); the bridge's defaults (BBR)" %
                       first_failure(r.stderr))
        else:
            out = ([], "no tuned profile and no longhaul-tune; the bridge's defaults (BBR)")
    cache[spec] = out
    return out


# ---------------------------------------------------------------------------------------
# One run: an emulator, the services, the tunnel, the clients.

class Run:
    def __init__(self, ctx, loss, spec, link, peer, workload):
        self.ctx, self.loss, self.spec, self.link = ctx, loss, spec, link
        self.peer, self.workload = peer, workload
        self.dir = os.path.join(ctx.out_dir, "%s-%s-%s" % (loss, peer, workload))
        os.makedirs(self.dir, exist_ok=True)
        self.a, self.b = ctx.tag + "-a", ctx.tag + "-b"
        self.commands = []
        self.started = []  # (name, Popen, files)
        self.emu = None
        self.cc = peer[4:] if peer.startswith("tcp_") else "cubic"

    def ns(self, side):
        return self.a if side == "A" else self.b

    def _full(self, side, cmd, bound_s):
        return ns_exec(self.ns(side), ["timeout", "-k", "5", str(int(math.ceil(bound_s)))] + cmd)

    def start(self, name, side, cmd, bound_s):
        """Starts a background process in namespace `side` (bounded by `timeout`)."""
        out = open(os.path.join(self.dir, name + ".out"), "w")
        err = open(os.path.join(self.dir, name + ".err"), "w")
        self.commands.append({"role": name, "command": q(ns_exec(side, cmd))})
        p = self.ctx.procs.popen(self._full(side, cmd, bound_s), stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL)
        self.started.append((name, p, (out, err)))
        return p

    def run(self, name, side, cmd, bound_s):
        """Runs a client in namespace `side` to completion (bounded); its output is kept."""
        self.commands.append({"role": name, "command": q(ns_exec(side, cmd))})
        r = run_bounded(self.ctx.procs, self._full(side, cmd, bound_s), bound_s + 15)
        with open(os.path.join(self.dir, name + ".out"), "w") as f:
            f.write(r.stdout)
        with open(os.path.join(self.dir, name + ".err"), "w") as f:
            f.write(r.stderr)
        return r

    def stop(self, p):
        for entry in self.started:
            if entry[1] is p:
                self.ctx.procs.kill(p)
                for f in entry[2]:
                    f.close()
                self.started.remove(entry)
                return

    def dead(self):
        """(name, why) of the first background process that exited early, or None."""
        for name, p, _ in self.started:
            if p.poll() is not None:
                return name, "%s: %s" % (exit_text(p.returncode), tail(self.dir, name + ".err"))
        return None

    def stop_all(self):
        for entry in reversed(list(self.started)):
            self.stop(entry[1])

    def wait_listen(self, name, side, proto, port, timeout=20):
        if not wait_port(self.ns(side), proto, port, timeout):
            d = self.dead()
            raise Failed("%s did not listen on %s port %d within %d s%s" % (
                name, proto, port, timeout, (" (%s exited, %s)" % d) if d else ""))

    def link_rate(self, t0, t1):
        """IP bits/s the emulator delivered A -> B between monotonic times t0 and t1 (from
        its 1 s stats lines), or None."""
        lines = [e for e in self.emu.stats_lines() if "_mono" in e]
        a = [e for e in lines if e["_mono"] >= t0]
        b = [e for e in lines if e["_mono"] <= t1]
        if not a or not b or b[-1]["elapsed_s"] - a[0]["elapsed_s"] < 0.5:
            return None
        d = (b[-1]["forward"]["model"]["delivered_bytes"] -
             a[0]["forward"]["model"]["delivered_bytes"])
        return d * 8 / (b[-1]["elapsed_s"] - a[0]["elapsed_s"])


def run_cell(ctx, loss, spec, link, peer, workload):
    """One run; returns its entry (with "error" when it did not work)."""
    entry = {"peer": peer, "workload": workload, "loss": loss}
    # What this peer needs, named.
    if peer == "bridge" and not os.access(ctx.bins["longhaul-bridge"], os.X_OK):
        entry["error"] = "%s not found" % show_path(ctx.bins["longhaul-bridge"])
        return entry
    if peer == "bridge" and ctx.bridge_security_error:
        entry["error"] = ctx.bridge_security_error
        return entry
    if peer == "kcptun":
        for b in ("kcptun-client", "kcptun-server"):
            if not shutil.which(b):
                entry["error"] = "%s not found (Debian package kcptun)" % b
                return entry
    run = Run(ctx, loss, spec, link, peer, workload)
    bound = expected_s(ctx, workload)
    la0, (c0, i0), m0 = loadavg(), cpu_times(), time.monotonic()
    try:
        run.emu = Emulator(ctx.procs, ctx.bins["longhaul-emu"], spec, run.a, run.b,
                           ctx.args.seed, ctx.args.emu_realtime, int(bound + 120),
                           os.path.join(run.dir, "emu.log"))
    except OSError as e:
        entry["error"] = "cannot start %s: %s" % (show_path(ctx.bins["longhaul-emu"]), e)
        return entry
    entry["emulator_command"] = q(run.emu.cmd)
    try:
        if run.emu.wait_event("ready", 30) is None:
            raise Failed("the emulator did not start: " + tail(run.dir, "emu.log"))
        sysctls = NS_SYSCTLS + ["net.ipv4.tcp_congestion_control=" + run.cc]
        err = ns_sysctls((run.a, run.b), sysctls)
        if err:
            raise Failed(err)
        entry["namespace_sysctls"] = sysctls
        target = start_services(run, workload, bound)
        host, port = start_tunnel(run, peer, target, bound)
        entry["client_connects_to"] = "%s:%d" % (host, port)
        if workload in GOODPUT_WORKLOADS:
            n = {"iperf": 1, "iperf_p16": 16, "streams": ctx.streams}[workload]
            entry.update(wl_iperf(run, host, port, n))
        elif workload == "http":
            entry.update(wl_http(run, host, port))
        else:
            entry.update(wl_latency(run, host, port))
        d = run.dead()
        if d and d[0] in ("tunnel-server", "tunnel-client"):
            raise Failed("the %s exited during the run: %s" % d)
        if peer == "bridge":
            entry["bridge_metrics"] = scrape_metrics(run)
    except Failed as e:
        entry["error"] = str(e)
    except (OSError, subprocess.SubprocessError) as e:
        entry["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        run.stop_all()
        final, cpu = run.emu.stop()
        if final:
            entry["emulator"] = emu_summary(final, cpu)
        c1, i1 = cpu_times()
        entry["wall_s"] = round(time.monotonic() - m0, 3)
        entry["load_avg"] = {"before": la0, "after": loadavg()}
        entry["host_cpu_busy"] = round(1 - (i1 - i0) / max(1, c1 - c0), 3)
        entry["commands"] = run.commands
        entry["out_dir"] = run.dir
    return entry


def start_tunnel(run, peer, target, bound):
    """Starts the peer's tunnel (if any); returns where A's clients connect."""
    ctx = run.ctx
    if peer not in TUNNELS:
        return ADDR_B, target
    if peer == "bridge":
        prof, _ = ctx.bridge_profiles[run.spec]
        common = list(ctx.bridge_sec) + prof + ctx.bridge_extra
        server = [ctx.bins["longhaul-bridge"], "server",
                  "--listen=%s:%d" % (ADDR_B, BRIDGE_PORT),
                  "--target=%s:%d" % (ADDR_B, target)] + common + \
            ["--metrics=127.0.0.1:%d" % METRICS_B]
        client = [ctx.bins["longhaul-bridge"], "client",
                  "--listen=127.0.0.1:%d" % LOCAL_PORT,
                  "--peer=%s:%d" % (ADDR_B, BRIDGE_PORT)] + common + \
            ["--metrics=127.0.0.1:%d" % METRICS_A]
        proto, port = "udp", BRIDGE_PORT
    else:
        flags = kcptun_settings(ctx.args, run.link)["flags"]
        server = ["kcptun-server", "--listen=%s:%d" % (ADDR_B, KCP_PORT),
                  "--target=%s:%d" % (ADDR_B, target)] + flags
        client = ["kcptun-client", "--localaddr=127.0.0.1:%d" % LOCAL_PORT,
                  "--remoteaddr=%s:%d" % (ADDR_B, KCP_PORT), "--conn=1", "--autoexpire=0"] + \
            flags
        proto, port = "udp", KCP_PORT
    run.start("tunnel-server", "B", server, bound + 20)
    run.wait_listen(NAMES[peer] + " server", "B", proto, port)
    run.start("tunnel-client", "A", client, bound + 20)
    run.wait_listen(NAMES[peer] + " client", "A", "tcp", LOCAL_PORT)
    return "127.0.0.1", LOCAL_PORT


def scrape_metrics(run):
    """GET /metrics from both bridges (Prometheus text): the files, and the samples."""
    out = {}
    for side, port in (("client", METRICS_A), ("server", METRICS_B)):
        ns = run.a if side == "client" else run.b
        try:
            r = subprocess.run(ns_exec(ns, ["curl", "-sS", "-m", "5",
                                            "http://127.0.0.1:%d/metrics" % port]),
                               capture_output=True, text=True, timeout=15)
        except subprocess.TimeoutExpired:
            out[side] = {"error": "no answer within 15 s"}
            continue
        if r.returncode != 0:
            out[side] = {"error": first_failure(r.stderr)}
            continue
        path = os.path.join(run.dir, "metrics-%s.txt" % side)
        with open(path, "w") as f:
            f.write(r.stdout)
        out[side] = {"file": path, "samples": parse_metrics(r.stdout)}
    return out


def parse_metrics(text, limit=500):
    """The samples of a Prometheus text page, {name with labels: value}, at most `limit`."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            samples[name] = float(value)
        except ValueError:
            continue
        if len(samples) >= limit:
            break
    return samples



# ---------------------------------------------------------------------------------------
# The command: its flags and their checks, the set-up, the runs, the output.

class Ctx:
    pass


def make_parser():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--link", default="rate=1gbit,rtt=58ms,loss=1e-3",
                    help="link spec or named link (profiles/links); its loss is replaced by "
                         "each of --losses")
    ap.add_argument("--losses", default="0,1e-3,1e-2", help="the loss grid")
    ap.add_argument("--peers", default=",".join(PEERS), help="subset and order of " +
                    ",".join(PEERS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="subset and order of " + ",".join(WORKLOADS))
    ap.add_argument("--time", default="30", help="iperf workloads: measured seconds")
    ap.add_argument("--omit", default="3", help="iperf workloads: seconds sent before --time "
                    "(iperf3 -O); latency: seconds the bulk stream runs before the test")
    ap.add_argument("--http_bytes", default="2GiB", help="http: the file's size")
    ap.add_argument("--http_limit", default="120",
                    help="http: time limit of one fetch (then bytes / time and a projection)")
    ap.add_argument("--latency_rounds", type=int, default=200)
    ap.add_argument("--latency_request", type=int, default=100, help="bytes")
    ap.add_argument("--latency_response", type=int, default=100, help="bytes")
    ap.add_argument("--streams", type=int, default=100, help="streams: how many (iperf3 -P)")
    ap.add_argument("--security", default="insecure", choices=["insecure", "psk"],
                    help="the bridge's packet protection: insecure (plaintext, as every "
                         "other peer) or psk (a key written by longhaul-keygen --psk)")
    ap.add_argument("--bridge_profile", default="auto",
                    help="auto (the link's tuned profile, else longhaul-tune writes one per "
                         "loss), none (no profile: the bridge's defaults, BBR) or a profile FILE")
    ap.add_argument("--bridge_flags", default="", help="more longhaul-bridge flags, both sides")
    ap.add_argument("--kcptun_mode", default=KCP_DEFAULT_MODE, choices=list(KCP_MODES))
    ap.add_argument("--kcptun_fec", default="10,3",
                    help="kcptun --datashard,--parityshard (FEC on: both > 0)")
    ap.add_argument("--kcptun_window", type=int, default=0,
                    help="kcptun --sndwnd/--rcvwnd in packets (0: 2 x BDP)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--plot", default="", help="write grouped bars of goodput (.svg or .png)")
    cli.add_build_dir(ap, help="build tree with bin/longhaul-bridge, -emu, -keygen, -tune")
    ap.add_argument("--out_dir", default="", help="keep raw outputs here (default: a temp dir)")
    ap.add_argument("--keep_http_file", action="store_true",
                    help="keep the HTTP source file in --out_dir (default: removed at exit)")
    ap.add_argument("--seed", type=int, default=7, help="the emulator's loss seed")
    ap.add_argument("--emu_realtime", type=int, default=10,
                    help="longhaul-emu --realtime priority (0: off)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of quiet between runs")
    ap.add_argument("--tune_budget", default="30s", help="longhaul-tune --check_budget")
    ap.add_argument("--lock_wait", type=float, default=1800,
                    help="seconds to wait for another comparison run to finish")
    return ap


def parse_losses(text):
    """The loss grid of --losses: a list of the values as given (each a loss)."""
    losses = [x.strip() for x in text.split(",") if x.strip()]
    if not losses:
        raise ValueError("--losses is empty")
    for x in losses:
        parse_loss(x)
    if len(set(losses)) != len(losses):
        raise ValueError("--losses repeats a value")
    return losses


def pick(text, known, flag, what):
    """The names of a comma-separated flag, each one of `known`."""
    names = [x for x in text.split(",") if x]
    for x in names:
        if x not in known:
            raise ValueError("%s: unknown %s '%s' (%s)" % (flag, what, x, ",".join(known)))
    return names


def check_args(args, ctx):
    """Checks the flags; keeps the link, the grid and the parsed values in ctx, and
    --kcptun_fec as (data, parity). Raises ValueError (or KeyError) with what ap.error says."""
    ctx.base = link_params(args.link)
    if not ctx.base["rate_bps"]:
        raise ValueError("--link needs a rate (rate=1gbit,...)")
    ctx.losses = parse_losses(args.losses)
    ctx.time = parse_duration(args.time)
    ctx.omit = parse_duration(args.omit)
    ctx.http_bytes = parse_size(args.http_bytes)
    ctx.http_limit = parse_duration(args.http_limit)
    ds, ps = (int(v) for v in args.kcptun_fec.split(","))
    if not (0 < ctx.time <= 3600) or not (0 <= ctx.omit <= 600):
        raise ValueError("--time must be in (0, 3600] s, --omit in [0, 600] s")
    if not (0 < ctx.http_bytes <= 1 << 40) or not (0 < ctx.http_limit <= 7200):
        raise ValueError("--http_bytes must be positive (at most 1TiB), --http_limit in "
                         "(0, 7200] s")
    if not (1 <= args.latency_rounds <= 100000):
        raise ValueError("--latency_rounds must be 1..100000")
    if not (8 <= args.latency_request <= MIB and 8 <= args.latency_response <= MIB):
        raise ValueError("--latency_request/--latency_response must be 8 B..1 MiB")
    if not (2 <= args.streams <= 128):
        raise ValueError("--streams must be 2..128 (iperf3 -P)")
    if not (ds > 0 and ps > 0):
        raise ValueError("--kcptun_fec: FEC stays on: give DATA,PARITY both > 0")
    if args.kcptun_window < 0:
        raise ValueError("--kcptun_window must be >= 0")
    args.kcptun_fec = (ds, ps)
    ctx.peers = pick(args.peers, PEERS, "--peers", "peer")
    ctx.workloads = pick(args.workloads, WORKLOADS, "--workloads", "workload")
    if not ctx.peers or not ctx.workloads or len(set(ctx.peers)) != len(ctx.peers) or \
            len(set(ctx.workloads)) != len(ctx.workloads):
        raise ValueError("--peers and --workloads must be non-empty, without repeats")
    if args.bridge_profile not in ("auto", "none") and not os.path.exists(args.bridge_profile):
        raise ValueError("--bridge_profile=%s does not exist" % args.bridge_profile)


def latency_bound_s(rounds, rtt_s):
    """The echo test's time limit: a round trip is at least the link's RTT; this allows a
    loaded queue and a slow peer."""
    return max(30.0, rounds * (10 * rtt_s + 0.01) + 10)


def keep_settings(args, ctx):
    """The settings the runs read, from the checked flags."""
    ctx.bridge_extra = shlex.split(args.bridge_flags)
    ctx.latency_rounds = args.latency_rounds
    ctx.latency_request, ctx.latency_response = args.latency_request, args.latency_response
    ctx.latency_bound = latency_bound_s(args.latency_rounds, ctx.base["rtt_s"])
    ctx.streams = args.streams
    ctx.specs = {x: spec_with(args.link, loss=x) for x in ctx.losses}


def preflight(args, ctx):
    """The binaries and what the host must have; an exit status when it cannot run."""
    ctx.bins = {n: os.path.join(args.build_dir, "bin", n) for n in (
        "longhaul-bridge", "longhaul-emu", "longhaul-keygen", "longhaul-tune")}
    env_problems, missing = preconditions(("ip", "ss", "iperf3", "curl", "timeout"))
    if env_problems:
        log("cannot run here: " + "; ".join(env_problems))
        if args.json:
            print(json.dumps({"error": "; ".join(env_problems), "skipped": True}))
        return 77
    problems = list(missing)
    if not os.access(ctx.bins["longhaul-emu"], os.X_OK):
        problems.append("%s not found (build longhaul-emu, or give --build_dir)" %
                        show_path(ctx.bins["longhaul-emu"]))
    if not os.access(PYTHON, os.X_OK):
        problems.append("%s not found (Debian python3)" % PYTHON)
    if problems:
        return cli.cannot_run(problems, args.json)
    return None


def set_up(args, ctx):
    """The output folder, the namespaces' tag, the processes and the HTTP file's path."""
    ctx.out_dir = os.path.abspath(args.out_dir or tempfile.mkdtemp(prefix="bridge-compare-"))
    os.makedirs(ctx.out_dir, exist_ok=True)
    ctx.tag = "lhbc%d" % os.getpid()
    ctx.procs = Procs()
    ctx.http_dir = os.path.join(ctx.out_dir, "http")
    ctx.http_name = "payload.bin"
    ctx.http_path = os.path.join(ctx.http_dir, ctx.http_name)
    ctx.bridge_profiles = {}
    ctx.bridge_sec, ctx.bridge_security_error = [], None


def new_result(args, ctx):
    """The result object before the runs: the link, the grid, the settings, the machine."""
    base = ctx.base
    return {
        "tool": "bridge-compare",
        "link": args.link,
        "link_params": {"rate_bps": base["rate_bps"], "rtt_s": base["rtt_s"], "mtu": base["mtu"],
                        "keys": base["keys"]},
        "losses": ctx.losses,
        "specs": ctx.specs,
        "peers": ctx.peers,
        "workloads": ctx.workloads,
        "settings": {"time_s": ctx.time, "omit_s": ctx.omit, "http_bytes": ctx.http_bytes,
                     "http_bytes_text": args.http_bytes, "http_limit_s": ctx.http_limit,
                     "latency_rounds": ctx.latency_rounds,
                     "latency_request": ctx.latency_request,
                     "latency_response": ctx.latency_response,
                     "latency_bound_s": ctx.latency_bound, "streams": ctx.streams,
                     "emulator_seed": args.seed, "emulator_realtime": args.emu_realtime},
        "command": q(["tools/bench/bridge-compare"] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                    "load_avg_start": loadavg()},
        "out_dir": ctx.out_dir,
        "peer_settings": {},
        "cells": {},
        "failures": [],
    }


def bridge_settings(args, ctx):
    """The bridge's key (psk) and profile per loss, kept in ctx; its peer settings."""
    ps_ = {"binary": ctx.bins["longhaul-bridge"], "security": args.security,
           "extra_flags": ctx.bridge_extra, "profiles": {}}
    if args.security == "psk":
        try:
            ctx.bridge_sec = bridge_security(args, ctx.bins, ctx.out_dir)
        except (OSError, subprocess.SubprocessError) as e:
            ctx.bridge_security_error = "cannot write a pre-shared key with %s: %s" % (
                show_path(ctx.bins["longhaul-keygen"]), e)
    else:
        ctx.bridge_sec = ["--insecure"]
    if os.access(ctx.bins["longhaul-bridge"], os.X_OK):
        for loss, spec in ctx.specs.items():
            flags, note = bridge_profile(args, spec, ctx.bins, ctx.out_dir, ctx.bridge_profiles)
            ps_["profiles"][loss] = {"flags": flags, "source": note}
    else:
        for spec in ctx.specs.values():
            ctx.bridge_profiles[spec] = ([], "not run")
    return ps_


def tcp_settings(peer):
    """A direct TCP peer's settings: its congestion control and how it is set."""
    return {"congestion_control": peer[4:],
            "how": "iperf3 -C %s; net.ipv4.tcp_congestion_control=%s in both "
                   "namespaces (curl, the web server, the echo test)" % (peer[4:], peer[4:])}


def peer_settings(args, ctx, result):
    """Each peer's settings into result["peer_settings"] (the bridge's also into ctx)."""
    peers = ctx.peers
    if "bridge" in peers:
        result["peer_settings"]["bridge"] = bridge_settings(args, ctx)
    if "kcptun" in peers:
        ks = kcptun_settings(args, ctx.base)
        try:
            ks["package_version"] = subprocess.run(
                ["dpkg-query", "-W", "-f=${Version}", "kcptun"], capture_output=True,
                text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            ks["package_version"] = None
        result["peer_settings"]["kcptun"] = ks
    for p in ("tcp_bbr", "tcp_cubic"):
        if p in peers:
            result["peer_settings"][p] = tcp_settings(p)


def namespace_ccs(peers):
    """The congestion controls the namespaces' default is set to: each direct TCP peer's,
    and cubic for the tunnels' local legs."""
    return sorted({p[4:] for p in peers if p.startswith("tcp_")} |
                  ({"cubic"} if set(peers) & set(TUNNELS) else set()))


def prepare_host(ctx, result, host):
    """The HTTP file (when the http workload runs) and the host's sysctls, raised."""
    if "http" in ctx.workloads:
        try:
            ctx.http_sha256 = make_http_file(ctx, log)
            result["http_file"] = {"path": ctx.http_path, "bytes": ctx.http_bytes,
                                   "sha256": ctx.http_sha256,
                                   "server": "%s -m http.server (Debian python3)" % PYTHON}
        except OSError as e:
            raise Failed("cannot write the HTTP file: %s" % e)
    result["host_sysctls"] = host.raise_limits()
    # The namespaces' default congestion control (curl and the web server have no
    # per-socket setting) must be in the host's allowed list.
    result["host_sysctls"]["tcp_allowed_congestion_control"] = \
        host.allow_congestion_control(namespace_ccs(ctx.peers))
    result["host_sysctls"]["restored_to"] = dict(host.saved)


def plan_cells(losses, peers, workloads):
    """The runs in order: (loss, peer, workload), the workloads innermost."""
    return [(loss, peer, w) for loss in losses for peer in peers for w in workloads]


def run_cells(args, ctx, result):
    """Every run of the grid, with --settle seconds between runs; True when one failed."""
    failed = False
    for i, (loss, peer, w) in enumerate(plan_cells(ctx.losses, ctx.peers, ctx.workloads)):
        spec = ctx.specs[loss]
        cells = result["cells"].setdefault(loss, {}).setdefault(peer, {})
        if i > 0:
            time.sleep(args.settle)
        log("loss %s, %s, %s ..." % (loss, peer, w))
        e = run_cell(ctx, loss, spec, link_params(spec), peer, w)
        cells[w] = e
        if e.get("error"):
            failed = True
            result["failures"].append("loss %s, %s, %s: %s" % (loss, peer, w, e["error"]))
            log("  FAILED: " + e["error"])
        else:
            log("  " + cell_text(e, w))
    return failed


def write_output(args, ctx, result, failed):
    """bridge-compare.json in the output folder, the plot, the table or JSON; the exit
    status."""
    add_ratios(result)
    with open(os.path.join(ctx.out_dir, "bridge-compare.json"), "w") as f:
        json.dump(result, f, indent=1)
    if args.plot:
        try:
            plot(result, args.plot)
        except Exception as e:  # plotting must not lose the measurements
            log("plot failed: %s" % e)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    if failed:
        log("%d run(s) failed: %s" % (len(result["failures"]), "; ".join(result["failures"])))
    return 1 if failed else 0


def main():
    ap = make_parser()
    args = ap.parse_args()
    ctx = Ctx()
    ctx.args = args
    try:
        check_args(args, ctx)
    except (ValueError, KeyError) as e:
        ap.error(str(e))
    keep_settings(args, ctx)
    status = preflight(args, ctx)
    if status is not None:
        return status
    lock = acquire_lock(args.lock_wait, log)  # held until main returns
    if lock is None:
        log("another comparison held the lock for %g s; giving up" % args.lock_wait)
        if args.json:
            print(json.dumps({"error": "another comparison run is in progress"}))
        return 1
    set_up(args, ctx)
    result = new_result(args, ctx)
    old_handlers = install_signal_handlers()
    host = HostBuffers()
    failed = False
    try:
        peer_settings(args, ctx, result)
        prepare_host(ctx, result, host)
        failed = run_cells(args, ctx, result)
    except (Interrupted, Failed) as e:
        log(str(e) + "; cleaning up")
        result["error"] = str(e)
        result["failures"].append(str(e))
        failed = True
    finally:
        clean_up(ctx.procs, [ctx.tag + "-a", ctx.tag + "-b"], host, log)
        if os.path.exists(ctx.http_path) and not args.keep_http_file:
            try:
                os.remove(ctx.http_path)
            except OSError:
                pass
        restore_signal_handlers(old_handlers)
    result["machine"]["load_avg_end"] = loadavg()
    return write_output(args, ctx, result, failed)


def entry():
    """What tools/bench/bridge-compare runs."""
    sys.exit(main())
