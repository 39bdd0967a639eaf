"""flood: a longhaul-perf server under spoofed-Initial and garbage floods, and with many
connections at once, between network namespaces this script creates (root).

  tools/bench/flood [--kinds=initial,garbage,conns] [--build_dir=build] [--time=10]
      [--initial_pps=20000] [--garbage_pps=0] [--legit_rate=200mbit]
      [--conns=1000 --conn_bytes=1MiB --conn_rate=1mbit --conn_procs=8
       --conn_message_size=256KiB]
      [--serve_cpu=0 --flood_cpu=1] [--rss_bound=64MiB] [--out=FILE] [--json]

Namespaces (named after this process, removed on exit, also on errors and Ctrl-C):

    F (flooder) 198.18.1.2 ==veth== 198.18.1.1  S (server)  198.18.2.1 ==veth== 198.18.2.2  C
                                   (veth MTU 9000)
                                                  route 198.18.128.0/17 via 198.18.1.2

F sends with longhaul-flood-sender (a raw socket, IP_HDRINCL) from sources drawn from
198.18.128.0/17 (random address and port per datagram); S routes its answers to those
sources back over the F link, where F drops them. Neighbours are static and IPv6 is off,
so the F link carries nothing but the flood and the server's answers to it: its counters
(S's /proc/net/dev) are the bytes on the wire to and from unvalidated addresses. C holds
the legitimate client(s).

Kinds:
  initial  valid client Initials (Hello without a cookie, 1200 bytes, made by the
           endpoint's own Connect) at --initial_pps. Checks: the server's RSS stays within
           --rss_bound of its level before; bytes it sent to the spoofed sources <= 3x
           the bytes received from them (on the wire); a legitimate client at --legit_rate
           keeps >= 90 % of its goodput without the flood (measured before and after; the
           mean is the reference), payload intact.
  garbage  random bytes of random sizes (1..1472) at --garbage_pps (0: as fast as one
           pinned core sends). Checks: the same, and nothing at all sent back.
  conns    --conns connections to one server from C: --conn_procs longhaul-perf clients
           with --parallel=conns/conn_procs each, --bytes=conn_bytes per connection at
           --conn_rate (so every connection lasts long enough for all to be open at once).
           Checks: every connection completes intact; reports the largest number of
           client connections open at once (connected UDP sockets to the server in C),
           the server's peak RSS (VmHWM) and the wall time.

CPU: the flooder is pinned to --flood_cpu; the server and the legitimate client run at
SCHED_FIFO priority --realtime (as docs/perf.md's benchmarks on this shared VM; not
pinned by default, --serve_cpu pins them), in the runs with and without the flood alike,
so the flood competes with them through the work the server and the kernel do for it,
not through other users' jobs or the flooder's own loop. (Pinning the two real-time
processes to one CPU can starve one behind the other's polling: a client was once seen
waiting 60 s for its result that way.) The load average is reported. Exit status: 0 every check passed, 1 a check or a run failed, 2 bad flags,
3 the machine cannot run it (not root, no `ip netns`, no veth).
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from longhaul_bench import cli
from longhaul_bench.cli import log
from longhaul_bench.netns_link import (Interrupted, Procs, exit_text, first_failure,
                                       install_signal_handlers, parse_json_output,
                                       preconditions, remove_namespaces,
                                       restore_signal_handlers, run_bounded, run_quiet)
from longhaul_bench.procfs import loadavg, netdev, status_kib as kib, udp_snmp
from longhaul_bench.units import parse_rate, parse_size

PORT = 5201
S_F, F_S, S_C, C_S = "198.18.1.1", "198.18.1.2", "198.18.2.1", "198.18.2.2"
SPOOF_NET = "198.18.128.0/17"
MAX_PER_PROC = 128  # longhaul-perf --parallel limit


def diff(a, b):
    return {k: b[k] - a[k] for k in a}


def sh(cmd):
    r = run_quiet(cmd)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip() or
                                       "exit %d" % r.returncode))
    return r.stdout


class Net:
    """The three namespaces and two veth pairs."""

    def __init__(self):
        pid = os.getpid()
        self.s, self.f, self.c = "lhfl%ds" % pid, "lhfl%df" % pid, "lhfl%dc" % pid
        self.sf, self.fs = "lhf%dsf" % pid, "lhf%dfs" % pid
        self.sc, self.cs = "lhf%dsc" % pid, "lhf%dcs" % pid
        self.made = []

    def up(self):
        for ns in (self.s, self.f, self.c):
            sh(["ip", "netns", "add", ns])
            self.made.append(ns)
            for k in ("all", "default"):
                sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                    "net.ipv6.conf.%s.disable_ipv6=1" % k])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        sh(["ip", "netns", "exec", self.s, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0"])
        for a, ns_a, addr_a, b, ns_b, addr_b in ((self.sf, self.s, S_F, self.fs, self.f, F_S),
                                                 (self.sc, self.s, S_C, self.cs, self.c, C_S)):
            sh(["ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b,
                "netns", ns_b])
            sh(["ip", "-n", ns_a, "addr", "add", addr_a + "/30", "dev", a])
            sh(["ip", "-n", ns_b, "addr", "add", addr_b + "/30", "dev", b])
            # 9000 as the emulator's links (longhaul-perf's 8 KiB segments fit).
            sh(["ip", "-n", ns_a, "link", "set", a, "mtu", "9000", "up"])
            sh(["ip", "-n", ns_b, "link", "set", b, "mtu", "9000", "up"])
            # Static neighbours: no ARP on the links, so their counters are the traffic.
            mac_a = json.loads(sh(["ip", "-n", ns_a, "-j", "link", "show", "dev", a]))[0]["address"]
            mac_b = json.loads(sh(["ip", "-n", ns_b, "-j", "link", "show", "dev", b]))[0]["address"]
            sh(["ip", "-n", ns_a, "neigh", "replace", addr_b, "lladdr", mac_b, "dev", a,
                "nud", "permanent"])
            sh(["ip", "-n", ns_b, "neigh", "replace", addr_a, "lladdr", mac_a, "dev", b,
                "nud", "permanent"])
        sh(["ip", "-n", self.s, "route", "add", SPOOF_NET, "via", F_S, "dev", self.sf])

    def down(self):
        remove_namespaces(self.made)
        self.made = []


class Sampler:
    """The server's RSS every 0.1 s on a thread (bounded by the run)."""

    def __init__(self, pid):
        self.pid, self.samples, self.stop_ev = pid, [], threading.Event()
        self.t0 = time.monotonic()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop_ev.is_set():
            v = kib(self.pid)
            if v is None:
                return
            self.samples.append((round(time.monotonic() - self.t0, 2), v))
            self.stop_ev.wait(0.1)

    def mark(self):
        return len(self.samples)

    def window(self, a, b=None):
        return [v for _, v in self.samples[a:b]]

    def stop(self):
        self.stop_ev.set()
        self.t.join(2)


class Bench:
    def __init__(self, a, procs, net):
        self.a, self.procs, self.net = a, procs, net
        self.perf = os.path.join(a.build_dir, "bin", "longhaul-perf")
        self.sender = os.path.join(a.build_dir, "bin", "longhaul-flood-sender")
        self.srv = None

    def ns(self, name, cpu, cmd, rt=False):
        pin = ["taskset", "-c", str(cpu)] if cpu >= 0 else []
        if rt and self.a.realtime > 0:
            pin = ["chrt", "-f", str(self.a.realtime)] + pin
        return ["ip", "netns", "exec", name] + pin + cmd

    def start_server(self, max_conns):
        cmd = self.ns(self.net.s, self.a.serve_cpu,
                      [self.perf, "--server", "--port=%d" % PORT, "--json", "--insecure",
                       "--max_connections=%d" % max_conns], rt=True)
        self.srv_log = open(os.path.join(self.a.out_dir, "server.log"), "w")
        self.srv = self.procs.popen(cmd, stdout=self.srv_log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 15
        while time.monotonic() < end:  # listening: its UDP socket is in S's table
            if self.srv.poll() is not None:
                raise RuntimeError("the server exited: %s" % exit_text(self.srv.returncode))
            try:
                with open("/proc/%d/net/udp" % self.srv.pid) as f:
                    if any(len(l.split()) > 1 and l.split()[1].endswith(":%04X" % PORT)
                           for l in f):
                        break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("the server did not listen within 15 s")
        self.sampler = Sampler(self.srv.pid)
        self.server_cmd = cmd

    def stop_server(self):
        self.sampler.stop()
        hwm = kib(self.srv.pid, "VmHWM")
        self.procs.kill(self.srv)
        self.srv_log.close()
        return hwm

    def legit(self, tag):
        """One legitimate client run; (goodput bit/s or None, problems, command)."""
        cmd = self.ns(self.net.c, self.a.serve_cpu,
                      [self.perf, "--client=" + S_C, "--port=%d" % PORT, "--json",
                       "--insecure", "--time=%g" % self.a.time, "--rate=" + self.a.legit_rate,
                       "--connect_timeout=10s"], rt=True)
        r = run_bounded(self.procs, cmd, self.a.time + 60)
        with open(os.path.join(self.a.out_dir, "legit-%s.json" % tag), "w") as f:
            f.write(r.stdout + "\n" + r.stderr)
        j = parse_json_output(r.stdout)
        problems = []
        if r.returncode != 0:
            problems.append("legit client (%s): %s: %s" % (tag, exit_text(r.returncode),
                                                           (j or {}).get("error") or
                                                           first_failure(r.stderr)))
        end = (j or {}).get("end", {})
        integ = end.get("longhaul", {}).get("integrity", {})
        if integ.get("intact") is not True:
            problems.append("legit client (%s): payload not intact" % tag)
        return end.get("sum_received", {}).get("bits_per_second"), problems, cmd

    def flood_run(self, kind, pps):
        a = self.a
        res = {"kind": kind, "problems": []}
        before_rss = kib(self.srv.pid)
        g0, p0 = self.legit("%s-before" % kind)[:2]
        res["problems"] += p0
        m0 = self.sampler.mark()
        c0, u0 = netdev(self.srv.pid, self.net.sf), udp_snmp(self.srv.pid)
        flood_cmd = self.ns(self.net.f, -1, [
            self.sender, "--mode=" + kind, "--target=%s:%d" % (S_F, PORT),
            "--src_net=" + SPOOF_NET, "--pps=%g" % pps, "--duration=%g" % (a.time + 4),
            "--cpu=%d" % a.flood_cpu])
        fl_out = open(os.path.join(a.out_dir, "flood-%s.json" % kind), "w+")
        fl = self.procs.popen(flood_cmd, stdout=fl_out, stderr=subprocess.STDOUT)
        # The flood has reached the server once S's link counts its datagrams.
        end = time.monotonic() + 10
        while netdev(self.srv.pid, self.net.sf)["rx_packets"] - c0["rx_packets"] < 100:
            if time.monotonic() > end or fl.poll() is not None:
                res["problems"].append("the flood did not reach the server")
                break
            time.sleep(0.05)
        load0 = loadavg()[0]
        g1, p1, legit_cmd = self.legit("%s-during" % kind)
        res["problems"] += p1
        try:
            fl.wait(timeout=a.time + 30)
        except subprocess.TimeoutExpired:
            res["problems"].append("the flood sender overran its duration")
        self.procs.kill(fl)
        # Answers in flight: wait until S's link stays quiet for 0.5 s (at most 5 s).
        last, quiet_since, end = None, time.monotonic(), time.monotonic() + 5
        while time.monotonic() < end:
            cur = netdev(self.srv.pid, self.net.sf)["tx_packets"]
            if cur != last:
                last, quiet_since = cur, time.monotonic()
            elif time.monotonic() - quiet_since >= 0.5:
                break
            time.sleep(0.05)
        c1, u1 = netdev(self.srv.pid, self.net.sf), udp_snmp(self.srv.pid)
        m1 = self.sampler.mark()
        after_rss = kib(self.srv.pid)
        g2, p2 = self.legit("%s-after" % kind)[:2]
        res["problems"] += p2
        fl_out.seek(0)
        fj = parse_json_output(fl_out.read()) or {}
        wire, snmp = diff(c0, c1), diff(u0, u1)
        during = self.sampler.window(m0, m1) or [before_rss]
        base = [g for g in (g0, g2) if g]
        ref = sum(base) / len(base) if base else None
        res.update({
            "flood_command": flood_cmd, "legit_command": legit_cmd,
            "flood": {k: fj.get(k) for k in ("packets", "ip_bytes", "seconds", "pps",
                                             "ip_bytes_per_s", "send_errors", "initial_size",
                                             "distinct_initials", "pps_limit")},
            "wire_from_spoofed": {"packets": wire["rx_packets"], "bytes": wire["rx_bytes"],
                                  "dropped_at_link": wire["rx_drop"]},
            "wire_to_spoofed": {"packets": wire["tx_packets"], "bytes": wire["tx_bytes"]},
            "amplification": (wire["tx_bytes"] / wire["rx_bytes"]) if wire["rx_bytes"] else None,
            "udp_snmp_delta": snmp,
            "server_rss_kib": {"before": before_rss, "peak_during": max(during),
                               "after": after_rss},
            "legit_goodput_bps": {"before": g0, "during": g1, "after": g2},
            "goodput_ratio": (g1 / ref) if (g1 and ref) else None,
            "load_avg_during": load0})
        if fj.get("packets", 0) == 0:
            res["problems"].append("the flood sender sent nothing: %s" %
                                   open(fl_out.name).read().strip()[-300:])
        if res["amplification"] is None or res["amplification"] > 3:
            res["problems"].append("amplification %s > 3" % res["amplification"])
        if kind == "garbage":
            # longhaul answers no garbage. The probe responder on the same port (0xB7 first)
            # answers only a HELLO of another probe version, within 3x: at most that many.
            magic = fj.get("first_byte_probe_magic", 0)
            res["answered"] = {"datagrams": wire["tx_packets"], "bytes": wire["tx_bytes"],
                               "garbage_with_probe_magic": magic,
                               "garbage_with_version_byte": fj.get("first_byte_version")}
            if wire["tx_packets"] > magic:
                res["problems"].append("the server answered %d garbage datagrams (%d bytes); "
                                       "only %d began with the probe magic" %
                                       (wire["tx_packets"], wire["tx_bytes"], magic))
        if max(during) - before_rss > a.rss_bound_kib:
            res["problems"].append("server RSS grew by %d KiB during the flood (bound %d)" %
                                   (max(during) - before_rss, a.rss_bound_kib))
        if res["goodput_ratio"] is None or res["goodput_ratio"] < a.min_goodput_ratio:
            res["problems"].append("legit goodput with the flood %s of without (need >= %g)" %
                                   (res["goodput_ratio"], a.min_goodput_ratio))
        fl_out.close()
        return res

    def conns_run(self):
        a = self.a
        res = {"kind": "conns", "problems": []}
        per = -(-a.conns // a.conn_procs)
        if per > MAX_PER_PROC:
            per = MAX_PER_PROC
        nprocs = -(-a.conns // per)
        before = kib(self.srv.pid)
        m0 = self.sampler.mark()
        clients, outs, left = [], [], a.conns
        t0 = time.monotonic()
        for i in range(nprocs):
            n = min(per, left)
            left -= n
            cmd = self.ns(self.net.c, -1, [
                self.perf, "--client=" + S_C, "--port=%d" % PORT, "--json", "--insecure",
                "--parallel=%d" % n, "--bytes=" + a.conn_bytes, "--rate=" + a.conn_rate,
                "--message_size=" + a.conn_message_size, "--interval=60", "--connect_timeout=60s",
                "--timeout=%ds" % a.conn_timeout])
            out = open(os.path.join(a.out_dir, "conns-%d.json" % i), "w+")
            err = open(os.path.join(a.out_dir, "conns-%d.log" % i), "w")
            clients.append((n, cmd, self.procs.popen(cmd, stdout=out, stderr=err)))
            err.close()
            outs.append(out)
        # Open connections: the clients' UDP sockets connected to the server (C's table).
        port_hex = ":%04X" % PORT
        peak, peak_t, series = 0, None, []
        end = t0 + a.conn_timeout + 30
        while time.monotonic() < end:
            alive = [p for _, _, p in clients if p.poll() is None]
            if not alive:
                break
            n_open = 0
            try:
                with open("/proc/%d/net/udp" % alive[0].pid) as f:
                    for l in f:
                        parts = l.split()
                        if len(parts) > 3 and parts[2].endswith(port_hex) and parts[3] == "01":
                            n_open += 1
            except OSError:
                pass
            series.append((round(time.monotonic() - t0, 2), n_open))
            if n_open > peak:
                peak, peak_t = n_open, round(time.monotonic() - t0, 2)
            time.sleep(0.2)
        wall = time.monotonic() - t0
        ok_conns = 0
        for (n, cmd, p), out in zip(clients, outs):
            if p.poll() is None:
                self.procs.kill(p)
                res["problems"].append("a client was still running at the bound: killed")
            out.seek(0)
            text = out.read()
            j = parse_json_output(text) or {}
            end_ = j.get("end", {})
            integ = end_.get("longhaul", {}).get("integrity", {})
            want = n * parse_size(a.conn_bytes)
            got = end_.get("sum_received", {}).get("bytes")
            if p.returncode == 0 and integ.get("intact") is True and got == want:
                ok_conns += n
            else:
                res["problems"].append("client of %d connections: %s, intact %s, %s of %d "
                                       "bytes: %s" % (n, exit_text(p.returncode),
                                                      integ.get("intact"), got, want,
                                                      j.get("error") or text.strip()[-200:]))
            out.close()
        during = self.sampler.window(m0) or [before]
        res.update({"connections": a.conns, "client_processes": nprocs, "per_process": per,
                "message_size": a.conn_message_size,
                    "client_command_example": clients[0][1], "completed_intact": ok_conns,
                    "peak_open_at_once": peak, "peak_at_s": peak_t, "wall_s": round(wall, 2),
                    "server_rss_kib": {"before": before, "peak_during": max(during),
                                       "after": kib(self.srv.pid)},
                    "open_series": series[::5], "load_avg_end": loadavg()})
        if ok_conns != a.conns:
            res["problems"].append("%d of %d connections completed intact" % (ok_conns,
                                                                               a.conns))
        if peak < a.conns:
            res["problems"].append("at most %d of %d connections were open at once" %
                                   (peak, a.conns))
        return res


def run(a, procs, net):
    for b in ("longhaul-perf", "longhaul-flood-sender"):
        if not os.access(os.path.join(a.build_dir, "bin", b), os.X_OK):
            log("%s/bin/%s is not built" % (a.build_dir, b))
            return {"error": "%s is not built" % b}, 1
    net.up()
    bench = Bench(a, procs, net)
    doc = {"what": "tools/bench/flood", "time_s": a.time, "legit_rate": a.legit_rate,
           "realtime": a.realtime,
           "serve_cpu": a.serve_cpu, "flood_cpu": a.flood_cpu, "spoofed_sources": SPOOF_NET,
           "load_avg_start": loadavg(), "results": {}}
    bench.start_server(max(a.conns + 64, 256))
    doc["server_command"] = bench.server_cmd
    for kind in a.kinds:
        log("%s ..." % kind)
        if kind == "conns":
            r = bench.conns_run()
        else:
            r = bench.flood_run(kind, a.initial_pps if kind == "initial" else a.garbage_pps)
        doc["results"][kind] = r
        log("%s: %s" % (kind, "ok" if not r["problems"] else "; ".join(r["problems"])))
    doc["server_vmhwm_kib"] = bench.stop_server()
    doc["load_avg_end"] = loadavg()
    doc["pass"] = all(not r["problems"] for r in doc["results"].values())
    return doc, 0 if doc["pass"] else 1


def summary(doc):
    for kind, r in doc.get("results", {}).items():
        if kind == "conns":
            log("conns: %d/%d intact, peak %d open at once (at %.1fs), wall %.1fs, server RSS "
                "%.1f -> peak %.1f MiB" % (r["completed_intact"], r["connections"],
                                           r["peak_open_at_once"], r["peak_at_s"] or 0,
                                           r["wall_s"], r["server_rss_kib"]["before"] / 1024,
                                           r["server_rss_kib"]["peak_during"] / 1024))
            continue
        fl, g = r["flood"], r["legit_goodput_bps"]
        log("%s: flood %s pkt/s, %.1f MB/s; wire from spoofed %s B, to spoofed %s B "
            "(ratio %s); server RSS %s -> peak %s KiB; legit %s / %s / %s Mbit/s "
            "(before/during/after), ratio %s" % (
                kind, round(fl.get("pps") or 0), (fl.get("ip_bytes_per_s") or 0) / 1e6,
                r["wire_from_spoofed"]["bytes"], r["wire_to_spoofed"]["bytes"],
                None if r["amplification"] is None else round(r["amplification"], 4),
                r["server_rss_kib"]["before"], r["server_rss_kib"]["peak_during"],
                *[None if x is None else round(x / 1e6, 1) for x in (g["before"], g["during"],
                                                                     g["after"])],
                None if r["goodput_ratio"] is None else round(r["goodput_ratio"], 3)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="initial,garbage,conns")
    cli.add_build_dir(ap)
    ap.add_argument("--time", type=float, default=10, help="seconds of each legit run")
    ap.add_argument("--initial_pps", type=float, default=20000)
    ap.add_argument("--garbage_pps", type=float, default=0)
    ap.add_argument("--legit_rate", default="200mbit")
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--conn_bytes", default="1MiB")
    ap.add_argument("--conn_rate", default="1mbit")
    ap.add_argument("--conn_procs", type=int, default=8)
    ap.add_argument("--conn_message_size", default="256KiB")
    ap.add_argument("--conn_timeout", type=int, default=120)
    ap.add_argument("--serve_cpu", type=int, default=-1)
    ap.add_argument("--flood_cpu", type=int, default=1)
    ap.add_argument("--realtime", type=int, default=10,
                    help="SCHED_FIFO priority of the server and the legit client (chrt -f; "
                         "0: off), in the runs with and without the flood alike")
    ap.add_argument("--rss_bound", default="64MiB")
    ap.add_argument("--min_goodput_ratio", type=float, default=0.9)
    ap.add_argument("--out_dir")
    ap.add_argument("--out")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        a.kinds = [k for k in a.kinds.split(",") if k]
        for k in a.kinds:
            if k not in ("initial", "garbage", "conns"):
                raise ValueError("--kinds: %s is not initial, garbage or conns" % k)
        parse_rate(a.legit_rate)
        parse_rate(a.conn_rate)
        parse_size(a.conn_bytes)
        a.rss_bound_kib = parse_size(a.rss_bound) // 1024
        if not (1 <= a.time <= 300) or not (1 <= a.conns <= 4096) or a.conn_procs < 1:
            raise ValueError("--time in [1, 300], --conns in [1, 4096], --conn_procs >= 1")
        if not (0 < a.conn_timeout <= 1800):
            raise ValueError("--conn_timeout in (0, 1800]")
    except ValueError as e:
        print("flood: %s" % e, file=sys.stderr)
        return 2
    env, missing = preconditions(("ip", "taskset", "chrt"))
    # No TUN device here: namespaces, veth pairs and a raw socket.
    env = ["needs root (network namespaces, veth pairs, raw sockets)" if e.startswith("needs root")
           else e for e in env if "/dev/net/tun" not in e]
    if env or missing:
        print("flood: cannot run here: %s" % "; ".join(env + missing), file=sys.stderr)
        return 3
    ncpu = os.cpu_count() or 1
    if a.serve_cpu >= ncpu or a.flood_cpu >= ncpu:
        a.serve_cpu = a.flood_cpu = -1
    a.build_dir = os.path.abspath(a.build_dir)
    a.out_dir = a.out_dir or "/tmp/flood.%d" % os.getpid()
    os.makedirs(a.out_dir, exist_ok=True)
    procs, net = Procs(), Net()
    old = install_signal_handlers()
    try:
        doc, rc = run(a, procs, net)
    except (Interrupted, RuntimeError, OSError) as e:
        log("failed: %s" % e)
        doc, rc = {"error": str(e)}, 1
    finally:
        procs.kill_all()
        net.down()
        restore_signal_handlers(old)
    summary(doc)
    print("flood verdict: %s" % ("PASS" if rc == 0 else "FAIL"), file=sys.stderr)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    if a.json:
        print(json.dumps(doc))
    return rc


def entry():
    """What tools/bench/flood runs."""
    sys.exit(main())
