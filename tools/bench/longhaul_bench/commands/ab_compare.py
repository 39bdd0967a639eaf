"""Runs the project's four headline measurements with two builds, alternating, and prints
them side by side: a restructuring must leave them where they were.

  1. simulated 20 GiB Tokyo-Singapore (100 Gbit/s, 58 ms, loss 1e-4, --fec=off) goodput;
  2. loopback longhaul-perf vs iperf3 -u (tools/perf/bench_loopback.sh, 8 KiB datagrams);
  3. longhaul-perf through longhaul-emu, rate=1gbit,rtt=58ms,loss=1e-3, 20 s, --mtu=9000;
  4. 4-rank NCCL allreduce through longhaul-emu on the same link, 256 MiB, FEC auto.

usage: tools/bench/ab-compare --a=DIR --b=DIR [--rounds=3] [--only=sim,loopback,emu,nccl]
                              [--security_a=MODE] [--security_b=MODE] [--link=SPEC]

MODE is each side's packet protection: insecure (the default: --insecure for longhaul-perf,
NCCL_LONGHAUL_INSECURE=1 for the plugin; a build from before protection needs and knows
neither), psk (a pre-shared key from longhaul-keygen --psk) or ik (static key pairs from
longhaul-keygen --out, Noise IK). The same build on both sides with two modes compares
protected against plaintext:

  tools/bench/ab-compare --a=build --b=build --security_a=insecure --security_b=ik \
      --only=loopback,emu --link=rate=1gbit,rtt=58ms,loss=1e-2

--link is the emulated link of steps 3 and 4 (default rate=1gbit,rtt=58ms,loss=1e-3).

DIR is a build directory (DIR/bin/longhaul-perf, DIR/lib/libnccl-net-longhaul.so). Every
process stays on 127.0.0.1, runs under a timeout and is stopped by its process id. The
simulator is seeded (one run per build gives its exact number); the real-time runs vary
with the host's load, which is printed with every line.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from longhaul_bench import keys
from longhaul_bench.cli import ROOT

DEFAULT_LINK = "rate=1gbit,rtt=58ms,loss=1e-3"
LINK = DEFAULT_LINK  # --link


KEY_DIR = None  # the run's key files (entry() makes and removes it)


def has_security(build):
    """Whether this build's longhaul-perf has the packet-protection flags."""
    out = subprocess.run([f"{build}/bin/longhaul-perf", "--help"], capture_output=True,
                         text=True, timeout=30)
    return "--insecure" in out.stdout


def perf_security(build, mode, side):
    """longhaul-perf's key flags for this build in `mode` on `side` ("server" or "client");
    none for a build without protection."""
    if not has_security(build):
        return []
    if mode == "psk":
        psk = os.path.join(KEY_DIR, "ab.psk")
        if not os.path.exists(psk):
            keys.write_psk(f"{build}/bin/longhaul-keygen", psk, force=False)
        return ["--psk_file=" + psk]
    if mode == "ik":
        for who in ("server", "client"):
            if not os.path.exists(os.path.join(KEY_DIR, who + ".key")):
                keys.write_key_pair(f"{build}/bin/longhaul-keygen", os.path.join(KEY_DIR, who),
                                    force=False)
        peer = "client" if side == "server" else "server"
        return ["--key=" + os.path.join(KEY_DIR, side + ".key"),
                "--peer_key=" + os.path.join(KEY_DIR, peer + ".pub")]
    return ["--insecure"]


def nccl_security(build, mode):
    """The plugin's key variables for this build (ik: every rank holds one pair and allows
    it, as a cluster sharing one key pair would)."""
    if not has_security(build):
        return {}
    if mode == "psk":
        return {"NCCL_LONGHAUL_PSK_FILE": perf_security(build, mode, "server")[0].split("=", 1)[1]}
    if mode == "ik":
        flags = perf_security(build, mode, "server")
        return {"NCCL_LONGHAUL_KEY": flags[0].split("=", 1)[1],
                "NCCL_LONGHAUL_PEER_KEY": os.path.join(KEY_DIR, "server.pub")}
    return {"NCCL_LONGHAUL_INSECURE": "1"}


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def sim(build, mode):
    cmd = [f"{build}/bin/longhaul-sim", "--link=rate=100gbit,rtt=58ms,loss=1e-4",
           "--bytes=20GiB", "--fec=off", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    r = json.loads(out.stdout)["result"]
    return f"{r['goodput_bps'] / 1e9:.2f} Gbit/s, intact {r['delivered_intact']}"


def loopback(build, mode):
    server = perf_security(build, mode, "server")
    client = perf_security(build, mode, "client")
    env = dict(os.environ, BENCH_SECURITY=" ".join(server) or "none",
               BENCH_CLIENT_SECURITY=" ".join(client) or "none")
    out = subprocess.run([f"{ROOT}/tools/perf/bench_loopback.sh", build, "1", "10",
                          "--cc=bbr", "--rate=40gbit"],
                         capture_output=True, text=True, timeout=600, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("round 1:"):
            return line[len("round 1: "):]
    return "failed: " + out.stderr[-300:]


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def emu(build, mode):
    base = random.randint(20000, 40000)
    server = subprocess.Popen([f"{build}/bin/longhaul-perf", "--server", "--bind=127.0.0.1",
                               f"--port={base}", "--one_off"] + perf_security(build, mode, "server"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    relay = subprocess.Popen([f"{build}/bin/longhaul-emu", f"--link={LINK}",
                              f"--listen=127.0.0.1:{base + 1}", f"--forward=127.0.0.1:{base}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run([f"{build}/bin/longhaul-perf", "--client=127.0.0.1",
                              f"--port={base + 1}", "--time=20", "--rate=1gbit", "--mtu=9000",
                              "--json"] + perf_security(build, mode, "client"),
                             capture_output=True, text=True, timeout=90)
        e = json.loads(out.stdout)["end"]
        ok = e["longhaul"]["integrity"]["intact"]
        return f"{e['sum_received']['bits_per_second'] / 1e6:.1f} Mbit/s, intact {ok}"
    except (json.JSONDecodeError, KeyError, subprocess.TimeoutExpired) as err:
        return f"failed: {err}"
    finally:
        stop(relay)
        stop(server)


def nccl(build, mode):
    env = dict(os.environ, NCCL_LONGHAUL_FEC="auto", **nccl_security(build, mode))
    out = subprocess.run([f"{build}/bin/longhaul-nccl-bench", "--ranks=4", f"--link={LINK}",
                          "--min_bytes=256MiB", "--max_bytes=256MiB", "--iters=10", "--json"],
                         capture_output=True, text=True, timeout=900, env=env)
    try:
        j = json.loads(out.stdout)
        row = j["results"][-1]
        return (f"busbw {row['busbw_GBps']:.3f} GB/s, p99/p50 {row['p99_over_p50']:.3f}, "
                f"wrong {row['wrong']}")
    except (json.JSONDecodeError, KeyError, IndexError) as err:
        return f"failed: {err}: {out.stderr[-300:]}"


def main():
    global LINK
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="first build directory (before)")
    ap.add_argument("--b", required=True, help="second build directory (after)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of real-time runs")
    ap.add_argument("--only", default="sim,loopback,emu,nccl")
    for side in ("a", "b"):
        ap.add_argument(f"--security_{side}", default="insecure", choices=["insecure", "psk", "ik"],
                        help=f"packet protection of build {side.upper()} (where it has it)")
    ap.add_argument("--link", default=DEFAULT_LINK,
                    help="the emulated link of the emu and nccl steps")
    args = ap.parse_args()
    LINK = args.link
    for d in (args.a, args.b):
        if not os.access(f"{d}/bin/longhaul-perf", os.X_OK):
            sys.exit(f"ab-compare: {d}/bin/longhaul-perf is not built")
    only = args.only.split(",")
    sides = (("A", args.a, args.security_a), ("B", args.b, args.security_b))
    print(f"host: {os.cpu_count()} CPUs, load {load()}; link {LINK}; " + "; ".join(
        f"{label}={build} security {mode if has_security(build) else 'none (no protection)'}"
        for label, build, mode in sides))
    steps = [("sim", sim, 1), ("loopback", loopback, args.rounds), ("emu", emu, args.rounds),
             ("nccl", nccl, args.rounds)]
    for name, fn, rounds in steps:
        if name not in only:
            continue
        for r in range(1, rounds + 1):
            for label, build, mode in sides:
                before = load()
                result = fn(build, mode)
                print(f"{name} round {r} {label}: {result} (load {before})", flush=True)


def entry():
    """What tools/bench/ab-compare runs."""
    global KEY_DIR
    KEY_DIR = tempfile.mkdtemp(prefix="ab-compare-keys-")
    try:
        main()
    finally:
        shutil.rmtree(KEY_DIR, ignore_errors=True)
