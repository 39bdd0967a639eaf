"""bridge-compare's workloads: the services in B, the clients in A and how their output is
read (iperf3, an HTTP fetch checked by sha256, the echo test alone and under load).

Each workload function takes the run (bridge_compare.Run: its namespaces, context, output
folder and processes) and where A's clients connect (the tunnel's entry, or B itself), and
returns the entry's measurements or raises Failed.
"""

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time

from longhaul_bench.cli import BENCH_DIR
from longhaul_bench.netns_link import (ADDR_A, ADDR_B, exit_text, first_failure, ns_exec,
                                       parse_json_output, tail)
from longhaul_bench.stats import jain, percentile as pctl
from longhaul_bench.units import MIB

TUNNELS = ("bridge", "kcptun")
WORKLOADS = ["iperf", "iperf_p16", "http", "latency", "streams"]
GOODPUT_WORKLOADS = ("iperf", "iperf_p16", "streams")
ECHO = os.path.join(BENCH_DIR, "tcp_echo.py")
PYTHON = "/usr/bin/python3"

# B's services (198.18.0.0/15 only).
IPERF_PORT = 5201      # iperf3 -s in B
HTTP_PORT = 8080       # python3 -m http.server in B
ECHO_PORT = 7007       # tcp_echo.py server in B (relays other connections to iperf3)


class Failed(Exception):
    """A run did not work; the message says why."""


def q(cmd):
    return " ".join(shlex.quote(x) for x in cmd)


def expected_s(ctx, workload):
    if workload in GOODPUT_WORKLOADS:
        return ctx.time + ctx.omit + 30
    if workload == "http":
        return ctx.http_limit + 30
    return 2 * ctx.latency_bound + ctx.omit + 40


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
    e = {"bytes": ctx.http_bytes, "bytes_received": n, "limit_s": limit, "curl_exit": rc}
    with open(err_path) as f:
        e.update(curl_write_out(f))
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
        late, projected = http_projection(samples, n, t_end, ctx.http_bytes)
        e["measured_s"] = t_end
        e["goodput_bps"] = n * 8 / t_end
        e["late_rate_bps"] = late * 8
        e["projected_completion_s"] = projected
        e["projection_rule"] = ("limit + (size - bytes) / rate over the second half of the "
                                "bounded fetch")
    e["goodput_pct"] = 100.0 * e["goodput_bps"] / run.link["rate_bps"]
    return e


def curl_write_out(lines):
    """The entry's fields from the last CURLW line of curl's stderr (-w: the HTTP code, the
    size and the connect, first-byte and total times); none without one."""
    curlw = None
    for line in lines:
        if line.startswith("CURLW "):
            curlw = line.split()[1:]
    out = {}
    if curlw and len(curlw) == 5:
        out["http_code"] = int(curlw[0])
        out["curl_time_connect_s"] = float(curlw[2])
        out["curl_time_starttransfer_s"] = float(curlw[3])
        out["curl_time_total_s"] = float(curlw[4])
    return out


def http_projection(samples, n, t_end, size):
    """A bounded fetch's rate over its second half (bytes/s, from the (seconds, bytes)
    samples) and its projected completion time t_end + (size - n) / that rate (None when
    the rate is 0)."""
    half = [s for s in samples if s[0] <= t_end / 2]
    t1, n1 = half[-1] if half else samples[0]
    late = (n - n1) / max(1e-9, t_end - t1)
    return late, (t_end + (size - n) / late) if late > 0 else None


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


