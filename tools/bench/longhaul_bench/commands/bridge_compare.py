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
import hashlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from longhaul_bench import cli, keys
from longhaul_bench.cli import BENCH_DIR, ROOT, log
from longhaul_bench.netns_link import (ADDR_A, ADDR_B, Emulator, HostBuffers, Interrupted,
                                       NS_SYSCTLS, Procs, acquire_lock, clean_up, emu_summary,
                                       exit_text, first_failure, install_signal_handlers,
                                       link_params, named_link_for, ns_exec, ns_sysctls,
                                       parse_json_output, preconditions,
                                       restore_signal_handlers, run_bounded, spec_with, tail,
                                       wait_port)
from longhaul_bench.procfs import cpu_times, loadavg
from longhaul_bench.stats import jain, percentile as pctl
from longhaul_bench.units import MIB, parse_duration, parse_loss, parse_size

PEERS = ["bridge", "kcptun", "tcp_bbr", "tcp_cubic"]
TUNNELS = ("bridge", "kcptun")
WORKLOADS = ["iperf", "iperf_p16", "http", "latency", "streams"]
GOODPUT_WORKLOADS = ("iperf", "iperf_p16", "streams")
ECHO = os.path.join(BENCH_DIR, "tcp_echo.py")
PYTHON = "/usr/bin/python3"

# Ports, all inside the namespaces (198.18.0.0/15 and loopback only).
IPERF_PORT = 5201      # iperf3 -s in B
HTTP_PORT = 8080       # python3 -m http.server in B
ECHO_PORT = 7007       # tcp_echo.py server in B (relays other connections to iperf3)
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
NAMES = {"bridge": "longhaul-bridge", "kcptun": "kcptun", "tcp_bbr": "TCP BBR",
         "tcp_cubic": "TCP CUBIC"}
COLORS = {"bridge": "#1f77b4", "kcptun": "#ff7f0e", "tcp_bbr": "#2ca02c",
          "tcp_cubic": "#d62728"}


class Failed(Exception):
    """A run did not work; the message says why."""


def q(cmd):
    return " ".join(shlex.quote(x) for x in cmd)


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


def expected_s(ctx, workload):
    if workload in GOODPUT_WORKLOADS:
        return ctx.time + ctx.omit + 30
    if workload == "http":
        return ctx.http_limit + 30
    return 2 * ctx.latency_bound + ctx.omit + 40


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


def start_services(run, workload, bound):
    """Starts B's services for the workload; returns the port the tunnel targets."""
    if workload in GOODPUT_WORKLOADS:
        run.start("iperf3-server", "B", ["iperf3", "-s", "-1", "-B", ADDR_B, "-p",
                                         str(IPERF_PORT), "-J"], bound + 20)
        run.wait_listen("iperf3 -s", "B", "tcp", IPERF_PORT)
        return IPERF_PORT
    if workload == "http":
        run.start("http-server", "B", [PYTHON, "-m", "http.server", "--bind", ADDR_B,
                                       "--directory", run.ctx.http_dir, str(HTTP_PORT)],
                  bound + 20)
        run.wait_listen("the web server", "B", "tcp", HTTP_PORT)
        return HTTP_PORT
    run.start("iperf3-server", "B", ["iperf3", "-s", "-1", "-B", ADDR_B, "-p",
                                     str(IPERF_PORT), "-J"], bound + 20)
    run.start("echo-server", "B", [PYTHON, ECHO, "server", "--listen=%s:%d" % (ADDR_B, ECHO_PORT),
                                   "--relay=%s:%d" % (ADDR_B, IPERF_PORT),
                                   "--max_time=%d" % int(bound + 20)], bound + 30)
    run.wait_listen("iperf3 -s", "B", "tcp", IPERF_PORT)
    run.wait_listen("the echo server", "B", "tcp", ECHO_PORT)
    return ECHO_PORT


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
        samples = {}
        for line in r.stdout.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            try:
                samples[name] = float(value)
            except ValueError:
                continue
            if len(samples) >= 500:
                break
        out[side] = {"file": path, "samples": samples}
    return out


# ---------------------------------------------------------------------------------------
# Workloads.

def iperf_client(run, host, port, parallel, time_s, omit_s):
    cmd = ["iperf3", "-c", host, "-p", str(port), "-t", "%g" % time_s, "-O", "%g" % omit_s,
           "-J"]
    if parallel > 1:
        cmd += ["-P", str(parallel)]
    if run.peer not in TUNNELS:
        cmd += ["-B", ADDR_A, "-C", run.cc]
    return cmd


def wl_iperf(run, host, port, parallel):
    ctx = run.ctx
    cmd = iperf_client(run, host, port, parallel, ctx.time, ctx.omit)
    r = run.run("iperf3-client", "A", cmd, ctx.time + ctx.omit + 30)
    j = parse_json_output(r.stdout)
    if j is None:
        raise Failed("iperf3 client (%s): %s" % (exit_text(r.returncode), first_failure(r.stderr)))
    if j.get("error"):
        raise Failed("iperf3: %s" % j["error"])
    end = j.get("end", {})
    recv = end.get("sum_received", {})
    bps = recv.get("bits_per_second")
    if not bps:
        raise Failed("iperf3 reported no bytes received (%s)" % exit_text(r.returncode))
    e = {"goodput_bps": bps, "goodput_pct": 100.0 * bps / run.link["rate_bps"],
         "bytes_received": recv.get("bytes"), "receiver_seconds": recv.get("seconds"),
         "streams": len(end.get("streams", []))}
    per = [s.get("receiver", {}).get("bits_per_second", 0) for s in end.get("streams", [])]
    if parallel > 1:
        if len(per) != parallel:
            raise Failed("iperf3 reported %d of %d streams" % (len(per), parallel))
        e["jain"] = jain(per)
        v = sorted(per)
        e["per_stream_bps"] = {"min": v[0], "p50": pctl(v, 0.5), "max": v[-1]}
        e["per_stream_bps_all"] = [round(x) for x in per]
    if run.peer not in TUNNELS:
        e["retransmissions"] = end.get("sum_sent", {}).get("retransmits")
        e["congestion"] = end.get("sender_tcp_congestion")
    return e


def wl_http(run, host, port):
    ctx = run.ctx
    url = "http://%s:%d/%s" % (host, port, ctx.http_name)
    limit = ctx.http_limit
    cmd = ["curl", "-sS", "--max-time", "%g" % limit, "-o", "-", "-w",
           "%{stderr}CURLW %{http_code} %{size_download} %{time_connect} "
           "%{time_starttransfer} %{time_total}\\n", url]
    run.commands.append({"role": "curl", "command": q(ns_exec("A", cmd)) +
                         "   (stdout read and hashed with sha256 by bridge-compare)"})
    err_path = os.path.join(run.dir, "curl.err")
    err = open(err_path, "w")
    full = ns_exec(run.a, ["timeout", "-k", "5", str(int(limit + 20))] + cmd)
    p = ctx.procs.popen(full, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    watchdog = threading.Timer(limit + 40, lambda: ctx.procs.kill(p, signal.SIGKILL, 5))
    watchdog.daemon = True
    watchdog.start()
    h = hashlib.sha256()
    n = 0
    t0 = time.monotonic()
    samples = [(0.0, 0)]
    try:
        while True:
            chunk = p.stdout.read1(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
            t = time.monotonic() - t0
            if t - samples[-1][0] >= 0.2:
                samples.append((t, n))
        p.wait(timeout=60)
    finally:
        watchdog.cancel()
        ctx.procs.kill(p)
        err.close()
    elapsed = time.monotonic() - t0
    samples.append((elapsed, n))
    rc = p.returncode
    curlw = None
    with open(err_path) as f:
        for line in f:
            if line.startswith("CURLW "):
                curlw = line.split()[1:]
    e = {"bytes": ctx.http_bytes, "bytes_received": n, "limit_s": limit, "curl_exit": rc}
    if curlw and len(curlw) == 5:
        e["http_code"] = int(curlw[0])
        e["curl_time_connect_s"] = float(curlw[2])
        e["curl_time_starttransfer_s"] = float(curlw[3])
        e["curl_time_total_s"] = float(curlw[4])
    total_s = e.get("curl_time_total_s") or elapsed
    if n == ctx.http_bytes and rc == 0:
        if e.get("http_code") != 200:
            raise Failed("HTTP status %s" % e.get("http_code"))
        e["sha256"] = h.hexdigest()
        e["sha256_ok"] = e["sha256"] == ctx.http_sha256
        if not e["sha256_ok"]:
            raise Failed("the fetched file's sha256 %s differs from the source's %s" % (
                e["sha256"], ctx.http_sha256))
        e["completed"] = True
        e["projected"] = False
        e["completion_s"] = total_s
        e["goodput_bps"] = n * 8 / total_s
    else:
        timed_out = rc == 28 or (rc == 124 and elapsed >= limit)
        if not timed_out or n == 0:
            raise Failed("curl %s after %d of %d bytes: %s" % (
                "exit %s" % rc, n, ctx.http_bytes, first_failure(
                    "\n".join(l for l in open(err_path) if not l.startswith("CURLW")))))
        # Bounded by --http_limit: check the prefix, project the rest.
        e["completed"] = False
        e["projected"] = True
        e["sha256_prefix_ok"] = sha256_prefix(ctx.http_path, n) == h.hexdigest()
        if not e["sha256_prefix_ok"]:
            raise Failed("the first %d fetched bytes differ from the source's" % n)
        t_end = min(total_s, elapsed)
        half = [s for s in samples if s[0] <= t_end / 2]
        t1, n1 = half[-1] if half else samples[0]
        late = (n - n1) / max(1e-9, t_end - t1)
        e["measured_s"] = t_end
        e["goodput_bps"] = n * 8 / t_end
        e["late_rate_bps"] = late * 8
        e["projected_completion_s"] = (t_end + (ctx.http_bytes - n) / late) if late > 0 \
            else None
        e["projection_rule"] = ("limit + (size - bytes) / rate over the second half of the "
                                "bounded fetch")
    e["goodput_pct"] = 100.0 * e["goodput_bps"] / run.link["rate_bps"]
    return e


def sha256_prefix(path, n):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        left = n
        while left > 0:
            b = f.read(min(left, 4 * MIB))
            if not b:
                break
            h.update(b)
            left -= len(b)
    return h.hexdigest()


def echo_client(run, host, port):
    ctx = run.ctx
    cmd = [PYTHON, ECHO, "client", "--connect=%s:%d" % (host, port),
           "--rounds=%d" % ctx.latency_rounds, "--request=%d" % ctx.latency_request,
           "--response=%d" % ctx.latency_response, "--max_time=%g" % ctx.latency_bound]
    if run.peer not in TUNNELS:
        cmd.append("--cc=" + run.cc)
    return cmd


def echo_result(r, what):
    j = parse_json_output(r.stdout)
    if j is None:
        raise Failed("%s: echo client %s: %s" % (what, exit_text(r.returncode),
                                                 first_failure(r.stderr)))
    if j.get("error") or not j.get("rtt_ms"):
        raise Failed("%s: %s after %s rounds" % (what, j.get("error", "no rounds"),
                                                 j.get("rounds")))
    return j


def wl_latency(run, host, port):
    ctx = run.ctx
    e = {}
    r = run.run("echo-alone", "A", echo_client(run, host, port), ctx.latency_bound + 10)
    e["alone"] = echo_result(r, "alone")
    time.sleep(1.0)
    # Loaded: a bulk stream A -> B through the same path (the echo server relays it to
    # iperf3), given --omit seconds to fill the link first.
    bulk_t = ctx.omit + ctx.latency_bound + 10
    bulk_cmd = iperf_client(run, host, port, 1, bulk_t, 0)
    bulk = run.start("bulk-iperf3-client", "A", bulk_cmd, bulk_t + 20)
    end = time.monotonic() + ctx.omit
    while time.monotonic() < end and bulk.poll() is None:
        time.sleep(0.1)
    if bulk.poll() is not None:
        raise Failed("the bulk stream ended before the loaded test: %s" % (
            tail(run.dir, "bulk-iperf3-client.err") if bulk.returncode else
            tail(run.dir, "bulk-iperf3-client.out")))
    t0 = time.monotonic()
    r = run.run("echo-loaded", "A", echo_client(run, host, port), ctx.latency_bound + 10)
    t1 = time.monotonic()
    bulk_alive = bulk.poll() is None
    run.stop(bulk)
    e["loaded"] = echo_result(r, "loaded")
    if not bulk_alive:
        raise Failed("the bulk stream ended during the loaded test: " +
                     tail(run.dir, "bulk-iperf3-client.out"))
    rate = run.link_rate(t0, t1)
    e["loaded"]["link_bps_during"] = rate
    e["loaded"]["link_pct_during"] = 100.0 * rate / run.link["rate_bps"] if rate else None
    e["loaded"]["bulk_command"] = q(ns_exec("A", bulk_cmd))
    return e


# ---------------------------------------------------------------------------------------
# Results: ratios, table, plot.

def http_time(entry):
    """(seconds, projected?) of an http entry, or (None, None)."""
    if not entry or entry.get("error"):
        return None, None
    if entry.get("completed"):
        return entry.get("completion_s"), False
    return entry.get("projected_completion_s"), True


def add_ratios(result):
    out = {}
    for loss, byp in result["cells"].items():
        r = {}
        b = byp.get("bridge", {})
        for w in GOODPUT_WORKLOADS:
            bv = b.get(w, {}).get("goodput_bps") if not b.get(w, {}).get("error") else None
            for p in ("kcptun", "tcp_cubic", "tcp_bbr"):
                pe = byp.get(p, {}).get(w, {})
                pv = pe.get("goodput_bps") if not pe.get("error") else None
                if bv and pv:
                    r["%s_bridge_over_%s" % (w, p)] = bv / pv
        bt, bproj = http_time(b.get("http"))
        for p in ("kcptun", "tcp_cubic", "tcp_bbr"):
            pt, pproj = http_time(byp.get(p, {}).get("http"))
            if bt and pt:
                r["http_time_bridge_over_%s" % p] = bt / pt
                r["http_time_bridge_over_%s_projected" % p] = bool(bproj or pproj)
        bl = b.get("latency", {})
        for p in ("kcptun", "tcp_cubic", "tcp_bbr"):
            pl = byp.get(p, {}).get("latency", {})
            for phase in ("alone", "loaded"):
                try:
                    r["latency_%s_p99_bridge_over_%s" % (phase, p)] = (
                        bl[phase]["rtt_ms"]["p99"] / pl[phase]["rtt_ms"]["p99"])
                except (KeyError, TypeError, ZeroDivisionError):
                    pass
        out[loss] = r
    result["ratios"] = out


def cell_text(e, w):
    if e is None:
        return "-"
    if e.get("error"):
        return "FAILED"
    if w in GOODPUT_WORKLOADS:
        s = "%.1f (%.0f%%)" % (e["goodput_bps"] / 1e6, e["goodput_pct"])
        if e.get("jain") is not None:
            s += " J=%.3f" % e["jain"]
        return s
    if w == "http":
        if e.get("completed"):
            return "%.1f s (%.0f Mb/s)" % (e["completion_s"], e["goodput_bps"] / 1e6)
        pj = e.get("projected_completion_s")
        return "PROJ %s (%.1f Mb/s)" % ("%.0f s" % pj if pj else "never", e["goodput_bps"] / 1e6)
    a, l = e["alone"]["rtt_ms"], e["loaded"]["rtt_ms"]
    return "%.1f/%.1f | %.1f/%.1f" % (a["p50"], a["p99"], l["p50"], l["p99"])


def print_table(result):
    ws = result["workloads"]
    heads = {"iperf": "iperf Mbit/s (%link)", "iperf_p16": "iperf -P16 Mbit/s",
             "streams": "streams -P%d Mbit/s" % result["settings"]["streams"],
             "http": "http %s" % result["settings"]["http_bytes_text"],
             "latency": "rtt ms p50/p99 alone | loaded"}
    widths = {"iperf": 19, "iperf_p16": 19, "streams": 27, "http": 24, "latency": 30}
    print("bridge-compare: link %s with loss %s; iperf %g s after %g s omitted; http %s "
          "(limit %g s); latency %d rounds of %d B / %d B" % (
              ",".join("%s=%s" % kv for kv in result["link_params"]["keys"].items()
                       if kv[0] != "loss"), ",".join(result["losses"]),
              result["settings"]["time_s"],
              result["settings"]["omit_s"], result["settings"]["http_bytes_text"],
              result["settings"]["http_limit_s"], result["settings"]["latency_rounds"],
              result["settings"]["latency_request"], result["settings"]["latency_response"]))
    print("%-6s %-10s " % ("loss", "peer") + " ".join("%-*s" % (widths[w], heads[w])
                                                     for w in ws) + " load")
    for loss in result["losses"]:
        for p in result["peers"]:
            row = result["cells"].get(loss, {}).get(p, {})
            loads = [e["load_avg"]["before"][0] for e in row.values() if e.get("load_avg")]
            print("%-6s %-10s " % (loss, p) + " ".join(
                "%-*s" % (widths[w], cell_text(row.get(w), w)) for w in ws) +
                (" %.2f" % max(loads) if loads else " -"))
    print("(PROJ: the fetch hit --http_limit; projected completion = limit + (size - bytes) "
          "/ rate over the second half of the fetch)")
    print("\nratios (goodput: bridge / peer, higher is better for the bridge; http: bridge "
          "time / peer time, lower is better; * = a projected time is involved):")
    for loss in result["losses"]:
        r = result["ratios"].get(loss, {})
        parts = []
        for k, v in r.items():
            if k.endswith("_projected"):
                continue
            star = "*" if r.get(k + "_projected") else ""
            parts.append("%s %.3f%s" % (k, v, star))
        print("  loss %s: %s" % (loss, ", ".join(parts) if parts else
                                 "n/a (the bridge or every other peer failed or did not run)"))
    failures = result.get("failures", [])
    if failures:
        print("\nfailed runs:")
        for f in failures:
            print("  " + f)
    print("\nruns (commands, emulator counters, load average):")
    for loss in result["losses"]:
        for p in result["peers"]:
            for w, e in result["cells"].get(loss, {}).get(p, {}).items():
                print("- loss %s, %s, %s: %s" % (loss, p, w, "ERROR " + e["error"]
                                                 if e.get("error") else "ok"))
                if e.get("emulator_command"):
                    print("    emulator: " + e["emulator_command"])
                for c in e.get("commands", []):
                    print("    %s: %s" % (c["role"], c["command"]))
                if w == "latency" and e.get("loaded", {}).get("link_pct_during") is not None:
                    print("    link during the loaded test: %.0f%% (emulator, A -> B)" %
                          e["loaded"]["link_pct_during"])
                emu = e.get("emulator")
                if emu:
                    f, rv = emu.get("forward", {}), emu.get("reverse", {})
                    print("    emulator: fwd %s pkts delivered, %s lost, %s queue drops; rev %s "
                          "delivered, %s lost, %s queue drops; own drops %s; cpu %s" % (
                              f.get("delivered"), f.get("dropped_loss"), f.get("dropped_queue"),
                              rv.get("delivered"), rv.get("dropped_loss"),
                              rv.get("dropped_queue"), emu.get("own_drops"),
                              emu.get("cpu_fraction")))
                if e.get("load_avg"):
                    print("    load average before %s after %s, host cpu busy %s" % (
                        e["load_avg"]["before"], e["load_avg"]["after"], e.get("host_cpu_busy")))


def plot(result, path):
    """Grouped bars: goodput per peer per loss, one panel per goodput workload (http as
    bytes / time, hatched where the fetch was bounded)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [w for w in result["workloads"] if w in GOODPUT_WORKLOADS or w == "http"]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    losses, peers = result["losses"], result["peers"]
    width = 0.8 / max(1, len(peers))
    rate = result["link_params"]["rate_bps"]
    for ax, w in zip(axes[0], panels):
        for i, p in enumerate(peers):
            xs, ys, hatch = [], [], []
            for j, loss in enumerate(losses):
                e = result["cells"].get(loss, {}).get(p, {}).get(w)
                if e and not e.get("error") and e.get("goodput_bps"):
                    xs.append(j + (i - (len(peers) - 1) / 2) * width)
                    ys.append(e["goodput_bps"] / 1e6)
                    hatch.append("//" if e.get("projected") else "")
            bars = ax.bar(xs, ys, width, label=NAMES.get(p, p), color=COLORS.get(p))
            for b, h in zip(bars, hatch):
                b.set_hatch(h)
        ax.axhline(rate / 1e6, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(len(losses)))
        ax.set_xticklabels(["loss %s" % l for l in losses])
        ax.set_ylabel("goodput (Mbit/s)")
        ax.set_title({"iperf": "iperf3, 1 stream", "iperf_p16": "iperf3 -P 16",
                      "streams": "iperf3 -P %d" % result["settings"]["streams"],
                      "http": "HTTP fetch (hatched: bounded)"}[w], fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(peers), fontsize=8,
               frameon=False)
    fig.suptitle("bridge-compare: %s, loss per group (dotted: the link rate)" % ",".join(
        "%s=%s" % kv for kv in result["link_params"]["keys"].items() if kv[0] != "loss"),
        fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path)


# ---------------------------------------------------------------------------------------

class Ctx:
    pass


def make_http_file(ctx, log):
    """A file of random bytes for the web server, and its sha256."""
    os.makedirs(ctx.http_dir, exist_ok=True)
    free = shutil.disk_usage(ctx.http_dir).free
    if free < ctx.http_bytes + 256 * MIB:
        raise OSError("%s has %d MiB free, the HTTP file needs %d MiB" % (
            ctx.http_dir, free // MIB, ctx.http_bytes // MIB))
    log("writing the %d-byte HTTP file %s" % (ctx.http_bytes, ctx.http_path))
    h = hashlib.sha256()
    with open(ctx.http_path, "wb") as f:
        left = ctx.http_bytes
        while left > 0:
            b = os.urandom(min(left, 4 * MIB))
            f.write(b)
            h.update(b)
            left -= len(b)
    return h.hexdigest()


def main():
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
    args = ap.parse_args()

    ctx = Ctx()
    ctx.args = args
    try:
        base = link_params(args.link)
        if not base["rate_bps"]:
            raise ValueError("--link needs a rate (rate=1gbit,...)")
        losses = [x.strip() for x in args.losses.split(",") if x.strip()]
        if not losses:
            raise ValueError("--losses is empty")
        for x in losses:
            parse_loss(x)
        if len(set(losses)) != len(losses):
            raise ValueError("--losses repeats a value")
        ctx.time = parse_duration(args.time)
        ctx.omit = parse_duration(args.omit)
        ctx.http_bytes = parse_size(args.http_bytes)
        ctx.http_limit = parse_duration(args.http_limit)
        ds, ps = (int(v) for v in args.kcptun_fec.split(","))
    except (ValueError, KeyError) as e:
        ap.error(str(e))
    if not (0 < ctx.time <= 3600) or not (0 <= ctx.omit <= 600):
        ap.error("--time must be in (0, 3600] s, --omit in [0, 600] s")
    if not (0 < ctx.http_bytes <= 1 << 40) or not (0 < ctx.http_limit <= 7200):
        ap.error("--http_bytes must be positive (at most 1TiB), --http_limit in (0, 7200] s")
    if not (1 <= args.latency_rounds <= 100000):
        ap.error("--latency_rounds must be 1..100000")
    if not (8 <= args.latency_request <= MIB and 8 <= args.latency_response <= MIB):
        ap.error("--latency_request/--latency_response must be 8 B..1 MiB")
    if not (2 <= args.streams <= 128):
        ap.error("--streams must be 2..128 (iperf3 -P)")
    if not (ds > 0 and ps > 0):
        ap.error("--kcptun_fec: FEC stays on: give DATA,PARITY both > 0")
    if args.kcptun_window < 0:
        ap.error("--kcptun_window must be >= 0")
    args.kcptun_fec = (ds, ps)
    peers = [p for p in args.peers.split(",") if p]
    workloads = [w for w in args.workloads.split(",") if w]
    for p in peers:
        if p not in PEERS:
            ap.error("--peers: unknown peer '%s' (%s)" % (p, ",".join(PEERS)))
    for w in workloads:
        if w not in WORKLOADS:
            ap.error("--workloads: unknown workload '%s' (%s)" % (w, ",".join(WORKLOADS)))
    if not peers or not workloads or len(set(peers)) != len(peers) or \
            len(set(workloads)) != len(workloads):
        ap.error("--peers and --workloads must be non-empty, without repeats")
    if args.bridge_profile not in ("auto", "none") and not os.path.exists(args.bridge_profile):
        ap.error("--bridge_profile=%s does not exist" % args.bridge_profile)
    ctx.bridge_extra = shlex.split(args.bridge_flags)
    ctx.latency_rounds = args.latency_rounds
    ctx.latency_request, ctx.latency_response = args.latency_request, args.latency_response
    # A round trip is at least the link's RTT; allow a loaded queue and a slow peer.
    ctx.latency_bound = max(30.0, args.latency_rounds * (10 * base["rtt_s"] + 0.01) + 10)
    ctx.streams = args.streams
    specs = {x: spec_with(args.link, loss=x) for x in losses}

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

    lock = acquire_lock(args.lock_wait, log)
    if lock is None:
        log("another comparison held the lock for %g s; giving up" % args.lock_wait)
        if args.json:
            print(json.dumps({"error": "another comparison run is in progress"}))
        return 1

    ctx.out_dir = os.path.abspath(args.out_dir or tempfile.mkdtemp(prefix="bridge-compare-"))
    os.makedirs(ctx.out_dir, exist_ok=True)
    ctx.tag = "lhbc%d" % os.getpid()
    ctx.procs = Procs()
    ctx.http_dir = os.path.join(ctx.out_dir, "http")
    ctx.http_name = "payload.bin"
    ctx.http_path = os.path.join(ctx.http_dir, ctx.http_name)
    ctx.bridge_profiles = {}
    ctx.bridge_sec, ctx.bridge_security_error = [], None
    result = {
        "tool": "bridge-compare",
        "link": args.link,
        "link_params": {"rate_bps": base["rate_bps"], "rtt_s": base["rtt_s"], "mtu": base["mtu"],
                        "keys": base["keys"]},
        "losses": losses,
        "specs": specs,
        "peers": peers,
        "workloads": workloads,
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
    old_handlers = install_signal_handlers()
    host = HostBuffers()
    failed = False
    try:
        if "bridge" in peers:
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
                for loss, spec in specs.items():
                    flags, note = bridge_profile(args, spec, ctx.bins, ctx.out_dir,
                                                 ctx.bridge_profiles)
                    ps_["profiles"][loss] = {"flags": flags, "source": note}
            else:
                for spec in specs.values():
                    ctx.bridge_profiles[spec] = ([], "not run")
            result["peer_settings"]["bridge"] = ps_
        if "kcptun" in peers:
            ks = kcptun_settings(args, base)
            try:
                ks["package_version"] = subprocess.run(
                    ["dpkg-query", "-W", "-f=${Version}", "kcptun"], capture_output=True,
                    text=True, timeout=10).stdout.strip() or None
            except (OSError, subprocess.SubprocessError):
                ks["package_version"] = None
            result["peer_settings"]["kcptun"] = ks
        for p in ("tcp_bbr", "tcp_cubic"):
            if p in peers:
                result["peer_settings"][p] = {
                    "congestion_control": p[4:],
                    "how": "iperf3 -C %s; net.ipv4.tcp_congestion_control=%s in both "
                           "namespaces (curl, the web server, the echo test)" % (p[4:], p[4:])}
        if "http" in workloads:
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
        ccs = sorted({p[4:] for p in peers if p.startswith("tcp_")} |
                     ({"cubic"} if set(peers) & set(TUNNELS) else set()))
        result["host_sysctls"]["tcp_allowed_congestion_control"] = \
            host.allow_congestion_control(ccs)
        result["host_sysctls"]["restored_to"] = dict(host.saved)
        first = True
        for loss in losses:
            spec = specs[loss]
            link = link_params(spec)
            result["cells"][loss] = {}
            for peer in peers:
                result["cells"][loss][peer] = {}
                for w in workloads:
                    if not first:
                        time.sleep(args.settle)
                    first = False
                    log("loss %s, %s, %s ..." % (loss, peer, w))
                    e = run_cell(ctx, loss, spec, link, peer, w)
                    result["cells"][loss][peer][w] = e
                    if e.get("error"):
                        failed = True
                        result["failures"].append("loss %s, %s, %s: %s" % (loss, peer, w,
                                                                           e["error"]))
                        log("  FAILED: " + e["error"])
                    else:
                        log("  " + cell_text(e, w))
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


def entry():
    """What tools/bench/bridge-compare runs."""
    sys.exit(main())
