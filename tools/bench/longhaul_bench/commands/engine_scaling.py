"""engine-scaling: longhaul-perf goodput and CPU per byte against the engine count, on loopback.

  tools/bench/engine-scaling [--build_dir=build] [--engines=1,2,4] [--rounds=3]
                             [--seconds=5] [--modes=plain,psk] [--baselines=on|off]
                             [--verify=off] [--json=FILE] [--plot=FILE.svg]
  tools/bench/engine-scaling --make_bundle=DIR [--build_dir=build]

Each run is one longhaul-perf server and one client on 127.0.0.1, both with the same
--engines=E, the client opening --parallel=P connections (P = E: one per engine), flat
out as cpu-per-byte runs it (--cc=bbr --rate=40gbit --verify=off --segment=8192
--message_size=1MiB, the client sends) for --seconds:

  configurations  (E, P=E) for each E of --engines; with --baselines=on (the default)
                  also (1, P=E) for each E > 1: one engine carrying as many connections,
                  so that the speedup of E engines is seen apart from that of P
                  connections
  modes           plain: --insecure; psk: --psk_file (a pre-shared key written for the
                  run by longhaul-keygen --psk; AES-256-GCM where the CPU has AES)

Each round runs every (mode, configuration) once, in an order that rotates from round to
round. Per run: goodput (the receiver's delivered bytes, end.sum_received.bytes, over
the sender's span end.sum_sent.seconds, as cpu-per-byte), the user + system CPU seconds
of the client and of the server process over its whole life (wait4()'s rusage, what
/usr/bin/time -f "%U %S" reports), CPU s/GB = CPU s / delivered bytes x 1e9 per process
and for both, and how the connections fell on the engines (client: in turn; server: by
the count in the connection ids, evenly; "1+1" is one on each of two engines, "2+0" would
be both on one).

Per configuration: the medians over the rounds and the speedup of the median goodput
against (E=1, P=1) and against (E=1, P=E). The floor line compares (E, P=E) with
(E=1, P=E): at least 0.9x the goodput at no more than 1.1x the CPU per byte (both
processes). Prints the CPU model and count, the load average, one line per run and a
markdown table; --json writes {"machine", "config", "runs", "summary", "floor"};
--plot draws goodput and CPU s/GB against the engine count (matplotlib, SVG or PNG by
the file name).

Runs anywhere the two binaries run: it needs no iperf3, no `timeout` and nothing but
Python's standard library (matplotlib only for --plot). --build_dir is a build tree
(bin/longhaul-perf, bin/longhaul-keygen) or a bundle made by --make_bundle=DIR: the two
binaries in DIR/bin, the shared libraries they load (all but glibc's, found with ldd)
in DIR/lib, and this script with its package, so that `DIR/engine-scaling
--build_dir=DIR` runs on a machine without the build's libraries (its glibc no older
than the build machine's).

Every process is bounded in time (the server --seconds + 60 s, the client --seconds +
45 s; then SIGTERM and SIGKILL to its process group); traffic goes to 127.0.0.1 only.
It takes the comparison lock (longhaul_bench/netns_link.py) when it can. A default run
(3 rounds x 2 modes x 5 configurations x about 7 s) takes about 4 minutes.

Exit status: 0 when every run gave numbers, 1 when one failed (or, with
--enforce_floor, the floor was missed), 2 for bad flags or missing binaries.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from longhaul_bench import cli, keys, process
from longhaul_bench.cli import log
from longhaul_bench.netns_link import (Interrupted, install_signal_handlers,
                                       restore_signal_handlers)
from longhaul_bench.process import fmt, print_machine, start
from longhaul_bench.procfs import cpu_info, loadavg
from longhaul_bench.stats import median

MODES = ("plain", "psk")
LH_FLOOD = ["--cc=bbr", "--rate=40gbit", "--segment=8192", "--message_size=1MiB"]
FLOOR_GOODPUT = 0.9  # (E, P=E) against (1, P=E): at least this fraction of the goodput
FLOOR_CPU = 1.10  # ... at no more than this times the CPU per byte
BUNDLE_MARK = "ENGINE-SCALING-BUNDLE"  # a bundle's top folder holds this file
GLIBC_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libpthread.so", "libdl.so",
              "librt.so")


# ---------------------------------------------------------------------------------------
# Parsing (pure: unit-tested without runs).

def parse_list(text, flag, lo, hi):
    """Comma-separated integers in [lo, hi], sorted, without repeats; ValueError naming
    `flag` otherwise."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            v = int(part)
        except ValueError:
            raise ValueError("%s: '%s' is not a whole number (give a comma-separated list, "
                             "e.g. 1,2,4)" % (flag, part)) from None
        if not lo <= v <= hi:
            raise ValueError("%s: %d is outside [%d, %d]" % (flag, v, lo, hi))
        if v not in out:
            out.append(v)
    return sorted(out)


def parse_modes(text):
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError("--modes: unknown '%s' (%s)" % (",".join(bad) or text, ", ".join(MODES)))
    return [m for m in MODES if m in modes]


def configurations(engines, baselines):
    """(engines, parallel) pairs: (E, E) for each E, and with baselines (1, E) for E > 1;
    in order of parallel, then engines."""
    out = {(e, e) for e in engines}
    if baselines:
        out |= {(1, e) for e in engines if e > 1}
    return sorted(out, key=lambda c: (c[1], c[0]))


def rotated(items, k):
    """`items` starting at index k mod len (each round starts one further)."""
    if not items:
        return []
    k %= len(items)
    return items[k:] + items[:k]


def json_lines(text):
    """The JSON objects of a server's output, one per line (other lines skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def server_event(text, name):
    """The first `event: name` object of a server's JSON lines, or None."""
    for j in json_lines(text):
        if j.get("event") == name:
            return j
    return None


def spread(engines):
    """"2+1+1": the connections on each engine, in engine order; "" without a list."""
    return "+".join(str(e.get("connections", 0)) for e in engines or [])


def parse_client(j):
    """What a run's client JSON says: goodput over the sender's span (as cpu-per-byte),
    the engines, the cipher; KeyError/TypeError when it lacks them."""
    e = j["end"]
    secs = e["sum_sent"]["seconds"]
    delivered = e["sum_received"]["bytes"]
    out = {"delivered_bytes": delivered, "seconds": secs,
           "goodput_bps": delivered * 8 / secs if secs > 0 else 0.0,
           "client_engines": e["longhaul"].get("engines", []),
           "cipher": j["start"]["longhaul"]["security"].get("cipher"),
           "packets_retransmitted": e["longhaul"]["retransmission"]["packets_retransmitted"]}
    out["client_spread"] = spread(out["client_engines"])
    if j.get("error"):
        out["error"] = j["error"]
    return out


def ok(rec):
    return "both_s_per_gb" in rec and "error" not in rec


def summarize(runs, modes, configs):
    """One row per (mode, engines, parallel) with runs: medians over the good runs and
    the speedups of the median goodput against (1, 1) and (1, P) of the same mode."""
    rows = []
    for mode in modes:
        for e, p in configs:
            mine = [r for r in runs if r["mode"] == mode and r["engines"] == e
                    and r["parallel"] == p]
            if not mine:
                continue
            good = [r for r in mine if ok(r)]
            row = {"mode": mode, "engines": e, "parallel": p, "runs": len(mine),
                   "ok_runs": len(good),
                   "server_spreads": sorted({r.get("server_spread", "") for r in good})}
            for k in ("goodput_bps", "client_cpu_s", "server_cpu_s", "client_s_per_gb",
                      "server_s_per_gb", "both_s_per_gb"):
                row[k] = median([r.get(k) for r in good])
            rows.append(row)
    for row in rows:
        for name, base_p in (("speedup_vs_1x1", 1), ("speedup_vs_1_same_p", row["parallel"])):
            base = next((b for b in rows if b["mode"] == row["mode"] and b["engines"] == 1
                         and b["parallel"] == base_p), None)
            row[name] = (row["goodput_bps"] / base["goodput_bps"]
                         if base and base["goodput_bps"] and row["goodput_bps"] is not None
                         else None)
    return rows


def floor_checks(rows):
    """For each (mode, E > 1) with P = E and its (1, P=E) baseline: the goodput ratio,
    the CPU-per-byte ratio (both processes) and whether both are within the floor."""
    out = []
    for row in rows:
        if row["engines"] <= 1 or row["parallel"] != row["engines"]:
            continue
        base = next((b for b in rows if b["mode"] == row["mode"] and b["engines"] == 1
                     and b["parallel"] == row["parallel"]), None)
        if (base is None or not base["goodput_bps"] or not base["both_s_per_gb"]
                or row["goodput_bps"] is None or row["both_s_per_gb"] is None):
            continue
        g = row["goodput_bps"] / base["goodput_bps"]
        c = row["both_s_per_gb"] / base["both_s_per_gb"]
        out.append({"mode": row["mode"], "engines": row["engines"], "parallel": row["parallel"],
                    "goodput_ratio": g, "cpu_per_byte_ratio": c,
                    "pass": g >= FLOOR_GOODPUT and c <= FLOOR_CPU})
    return out


# ---------------------------------------------------------------------------------------
# Output.

def run_line(rec):
    head = "%-5s E=%d P=%d" % (rec["mode"], rec["engines"], rec["parallel"])
    if not ok(rec):
        return "%s  FAILED: %s" % (head, rec.get("error", "no numbers"))
    return ("%s  %7.2f Gbit/s  cpu client %5.2f s server %5.2f s  s/GB client %.3f server "
            "%.3f both %.3f  engines client %s server %s  retx %d  load %.2f") % (
        head, rec["goodput_bps"] / 1e9, rec["client_cpu_s"], rec["server_cpu_s"],
        rec["client_s_per_gb"], rec["server_s_per_gb"], rec["both_s_per_gb"],
        rec.get("client_spread") or "-", rec.get("server_spread") or "-",
        rec.get("packets_retransmitted", 0), rec["load_average"][0])


def table(rows):
    """The summary as a markdown table (lines)."""
    head = ("| mode | engines | -P | goodput Gbit/s | vs E=1 -P 1 | vs E=1 same -P | "
            "client s/GB | server s/GB | both s/GB | server split | runs |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        lines.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["mode"], r["engines"], r["parallel"],
            fmt(None if r["goodput_bps"] is None else r["goodput_bps"] / 1e9, "%.2f"),
            fmt(r["speedup_vs_1x1"], "%.2fx"), fmt(r["speedup_vs_1_same_p"], "%.2fx"),
            fmt(r["client_s_per_gb"], "%.3f"), fmt(r["server_s_per_gb"], "%.3f"),
            fmt(r["both_s_per_gb"], "%.3f"), " ".join(s for s in r["server_spreads"] if s) or "-",
            "%d" % r["runs"] if r["ok_runs"] == r["runs"] else
            "%d of %d" % (r["ok_runs"], r["runs"])))
    return lines


def floor_lines(checks):
    return ["floor %s E=%d P=%d against E=1 P=%d: goodput %.3fx (>= %.2f), CPU/byte %.3fx "
            "(<= %.2f): %s" % (c["mode"], c["engines"], c["parallel"], c["parallel"],
                               c["goodput_ratio"], FLOOR_GOODPUT, c["cpu_per_byte_ratio"],
                               FLOOR_CPU, "pass" if c["pass"] else "MISSED") for c in checks]


def plot(rows, path):
    """Goodput and CPU s/GB (both processes) against the engine count, P = E, per mode;
    the (1, P) baselines as open markers at E = 1 joined to their E = P point."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    colors = {"plain": "#1f77b4", "psk": "#d62728"}
    for mode in MODES:
        scaled = [r for r in rows if r["mode"] == mode and r["engines"] == r["parallel"]
                  and r["goodput_bps"] is not None]
        if not scaled:
            continue
        xs = [r["engines"] for r in scaled]
        ax1.plot(xs, [r["goodput_bps"] / 1e9 for r in scaled], "o-", color=colors[mode],
                 label="%s, -P = engines" % mode)
        ax2.plot(xs, [r["both_s_per_gb"] for r in scaled], "o-", color=colors[mode],
                 label="%s, -P = engines" % mode)
        base = [r for r in rows if r["mode"] == mode and r["engines"] == 1 and r["parallel"] > 1
                and r["goodput_bps"] is not None]
        if base:
            ax1.plot([r["parallel"] for r in base], [r["goodput_bps"] / 1e9 for r in base], "s",
                     mfc="none", color=colors[mode], label="%s, 1 engine, same -P" % mode)
            ax2.plot([r["parallel"] for r in base], [r["both_s_per_gb"] for r in base], "s",
                     mfc="none", color=colors[mode], label="%s, 1 engine, same -P" % mode)
    ticks = sorted({r["parallel"] for r in rows})
    for ax, label in ((ax1, "goodput (Gbit/s)"), (ax2, "CPU s/GB (client + server)")):
        ax.set_xlabel("-P (filled: engines per side = -P; open: 1 engine)")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("longhaul-perf on loopback: engines (median over the rounds)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ---------------------------------------------------------------------------------------
# The runs.

def plan(mode, engines, parallel, seconds, perf, key_flags, verify):
    """(server argv, client argv) of one run; the client's port is filled in later."""
    common = ["--engines=%d" % engines] + key_flags[mode]
    server = [perf, "--server", "--bind=127.0.0.1", "--port=0", "--one_off", "--json",
              "--max_test_duration=%ds" % int(seconds + 60)] + common
    client = [perf, "--client=127.0.0.1", "--port={port}", "--time=%g" % seconds, "--json",
              "--parallel=%d" % parallel, "--timeout=%ds" % int(seconds + 30),
              "--verify=" + verify] + common + LH_FLOOD
    return server, client


def run_one(cfg, a, tmp, index):
    """One run of (mode, engines, parallel): a record with the numbers or an error."""
    mode, engines, parallel = cfg
    server_argv, client_t = plan(mode, engines, parallel, a.seconds, a.perf, a.key_flags,
                                 a.verify)
    rec = {"mode": mode, "engines": engines, "parallel": parallel,
           "server": " ".join(server_argv), "load_average": loadavg()}
    name = "run%03d" % index
    t0 = time.monotonic()
    server = start(server_argv, a.seconds + 60, tmp, name + "-server", a.env)
    client = None
    try:
        end = time.monotonic() + 15
        while True:
            exited = server.poll()
            listening = server_event(server.output(), "listening")
            if listening is not None or exited or time.monotonic() >= end:
                break
            time.sleep(0.02)
        if listening is None:
            rec["error"] = "the server did not start"
            return rec
        client_argv = [x.replace("{port}", str(listening["port"])) for x in client_t]
        rec["client"] = " ".join(client_argv)
        client = start(client_argv, a.seconds + 45, tmp, name + "-client", a.env)
        if process.await_pair(client, server, a.seconds + 50):  # --one_off: the server ends
            rec["server_stopped"] = True
    finally:
        process.release(client, server)
    rec["wall_s"] = time.monotonic() - t0
    return finish(rec, client, server)


def finish(rec, client, server):
    """Fills a run record from the processes' output and CPU times."""
    rec["client_status"], rec["server_status"] = client.status, server.status
    if not process.parse_client_output(rec, client, parse_client):
        return rec
    test = server_event(server.output(), "test")
    if test is not None:
        rec["server_engines"] = test.get("engines", [])
        rec["server_spread"] = spread(rec["server_engines"])
        if not test.get("intact", False) and "error" not in rec:
            rec["error"] = "the server reported the test as failed: %s" % test.get("errors")
    if client.status != 0 and "error" not in rec:
        rec["error"] = "client exit status %d" % client.status
    return process.account_cpu(rec, (("client", client), ("server", server)))


# ---------------------------------------------------------------------------------------
# The bundle: the binaries, the libraries they load (but glibc's) and this script.

def shared_libraries(binary):
    """The paths ldd resolves for `binary`, glibc's own left out."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) != 2:
            continue
        name, path = parts[0].strip(), parts[1].split("(")[0].strip()
        if path and not any(name.startswith(g) for g in GLIBC_LIBS):
            libs.append(path)
    return libs


def make_bundle(build, out_dir):
    """DIR/bin/{longhaul-perf,longhaul-keygen}, DIR/lib/*.so*, DIR/engine-scaling and
    DIR/longhaul_bench; returns the exit status."""
    bins = cli.bins(build, ["longhaul-perf", "longhaul-keygen"])
    missing = cli.missing(bins.values())
    if missing:
        log("missing: " + ", ".join(missing) + " (build longhaul-perf and longhaul-keygen)")
        return 2
    for sub in ("bin", "lib"):
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)
    libs = set()
    for name, path in bins.items():
        shutil.copy2(path, os.path.join(out_dir, "bin", name))
        libs.update(shared_libraries(path))
    for lib in sorted(libs):
        shutil.copy2(os.path.realpath(lib), os.path.join(out_dir, "lib", os.path.basename(lib)))
    shutil.copy2(os.path.join(cli.BENCH_DIR, "engine-scaling"), out_dir)
    pkg = os.path.join(out_dir, "longhaul_bench")
    if os.path.isdir(pkg):
        shutil.rmtree(pkg)
    shutil.copytree(cli.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(out_dir, BUNDLE_MARK), "w") as f:
        f.write("engine-scaling bundle from %s, %s\n" % (build, time.strftime("%Y-%m-%d %H:%M UTC",
                                                                          time.gmtime())))
    print("bundle in %s: 2 binaries, %d libraries; run %s/engine-scaling --build_dir=%s" % (
        out_dir, len(libs), out_dir, out_dir))
    return 0


# ---------------------------------------------------------------------------------------

def parse_args(argv):
    p = cli.parser(__doc__, raw=True, prog="engine-scaling")
    cli.add_build_dir(p, default="build",
                      help="build tree or bundle with bin/longhaul-perf (default: build)")
    p.add_argument("--engines", default="1,2,4", help="engine counts per side (default: 1,2,4)")
    process.add_rounds_seconds(p)
    p.add_argument("--modes", default="plain,psk", help="plain, psk or both (default)")
    p.add_argument("--baselines", default="on", choices=("on", "off"),
                   help="also run 1 engine with -P E for each E > 1 (default: on)")
    p.add_argument("--verify", default="off", choices=("on", "off"),
                   help="longhaul-perf --verify (default: off, as cpu-per-byte)")
    p.add_argument("--enforce_floor", action="store_true",
                   help="exit 1 when a configuration misses the floor")
    p.add_argument("--json", default="", metavar="FILE", help="write the results here")
    p.add_argument("--plot", default="", metavar="FILE", help="write the plot here (.svg/.png)")
    p.add_argument("--make_bundle", default="", metavar="DIR",
                   help="copy the binaries, their libraries and this script into DIR; no run")
    a = p.parse_args(argv)
    process.check_rounds_seconds(p, a)
    try:
        a.engine_list = parse_list(a.engines, "--engines", 1, 64)
        a.mode_list = parse_modes(a.modes)
    except ValueError as ex:
        p.error(str(ex))
    return a


def find_build(build_dir):
    if os.path.isabs(build_dir) or os.path.isdir(build_dir):
        return os.path.abspath(build_dir)
    return os.path.join(cli.ROOT, build_dir)


def prepare(a):
    """Binaries and environment; a list of problems (empty: ready)."""
    a.build = find_build(a.build_dir)
    a.perf = os.path.join(a.build, "bin", "longhaul-perf")
    a.keygen = os.path.join(a.build, "bin", "longhaul-keygen")
    need = [a.perf] + ([a.keygen] if "psk" in a.mode_list else [])
    problems = ["missing: " + m for m in cli.missing(need)]
    a.env = None
    lib = os.path.join(a.build, "lib")
    if os.path.isfile(os.path.join(a.build, BUNDLE_MARK)):
        # A bundle: the loader looks in its lib/ first.
        a.env = dict(os.environ, LD_LIBRARY_PATH=lib + (
            ":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else ""))
    if not problems:
        r = subprocess.run([a.perf, "--help"], capture_output=True, text=True, timeout=30,
                           env=a.env)
        if "--engines" not in r.stdout:
            problems.append(a.perf + " has no --engines flag (an older build, or it does not "
                            "start: %s)" % r.stderr.strip()[-200:])
    return problems


def run_all(a, configs, tmp):
    """Every round; the run records and how many failed."""
    runs, failed, index = [], 0, 0
    plan_list = [(m, e, p) for m in a.mode_list for e, p in configs]
    for rnd in range(a.rounds):
        for cfg in rotated(plan_list, rnd):  # the order rotates round by round
            index += 1
            rec = run_one(cfg, a, tmp, index)
            rec["round"] = rnd + 1
            runs.append(rec)
            failed += 0 if ok(rec) else 1
            print("round %d: %s" % (rnd + 1, run_line(rec)), flush=True)
    return runs, failed


def report(a, machine, configs, runs, t_start):
    rows = summarize(runs, a.mode_list, configs)
    checks = floor_checks(rows)
    print()
    print("medians over %d round(s) of %g s; CPU = user + system s of each process; s/GB = "
          "CPU s per 1e9 delivered bytes; server split = connections per server engine" % (
              a.rounds, a.seconds))
    print()
    for line in table(rows):
        print(line)
    print()
    for line in floor_lines(checks):
        print(line)
    ciphers = sorted({r["cipher"] for r in runs if r["mode"] == "psk" and r.get("cipher")})
    if ciphers:
        print("psk cipher: " + ", ".join(ciphers))
    end_load = process.print_end(t_start)
    if a.json:
        out = {"machine": machine,
               "config": {"rounds": a.rounds, "seconds": a.seconds, "engines": a.engine_list,
                          "modes": a.mode_list, "baselines": a.baselines, "verify": a.verify,
                          "longhaul_flags": LH_FLOOD, "build": a.build},
               "load_average_end": end_load, "runs": runs, "summary": rows, "floor": checks,
               "note": "CPU is user + system seconds of each process (wait4 rusage); on "
                       "loopback the receive softirq is billed mostly to the sender"}
        process.write_json(a.json, out)
    if a.plot:
        try:
            plot(rows, a.plot)
        except ImportError as ex:
            log("no plot (%s): install matplotlib" % ex)
    return checks


def main(argv):
    a = parse_args(argv)
    if a.make_bundle:
        return make_bundle(find_build(a.build_dir), os.path.abspath(a.make_bundle))
    problems = prepare(a)
    if problems:
        log("; ".join(problems))
        return 2
    machine = cpu_info()
    print_machine(machine)
    go_on, lock = process.comparison_lock(log)
    if not go_on:
        return 1
    configs = configurations(a.engine_list, a.baselines == "on")
    old = install_signal_handlers()
    runs, failed = [], 0
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="engine-scaling-")
    try:
        a.key_flags = {"plain": ["--insecure"]}
        if "psk" in a.mode_list:
            a.key_flags["psk"] = keys.perf_flags("psk", a.keygen, tmp, "engine-scaling")[0]
        runs, failed = run_all(a, configs, tmp)
    except Interrupted as ex:
        log(str(ex))
        failed += 1
    except (OSError, subprocess.SubprocessError) as ex:
        log("cannot run: %s" % (getattr(ex, "stderr", None) or ex))
        failed += 1
    finally:
        process.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        restore_signal_handlers(old)
    checks = report(a, machine, configs, runs, t_start)
    if failed:
        return 1
    return 1 if a.enforce_floor and not all(c["pass"] for c in checks) else 0


def entry():
    """What tools/bench/engine-scaling runs."""
    sys.exit(main(sys.argv[1:]))
