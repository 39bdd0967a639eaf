"""soak: longhaul-perf for a long time through a lossy, reordering link with blackouts.

  tools/bench/soak [--duration=30m] [--build_dir=build] [--link=SPEC]
      [--blackout_every=180s] [--blackout_len=2s] [--sample=5s] [--warmup=5m]
      [--rss_growth=0.10] [--bulk_rate=100mbit] [--msg_rate=100mbit --load=0.5
       --message_size=256KiB] [--security=psk|insecure] [--out=soak.json] [--svg=soak.svg]
      [--out_dir=DIR] [--json]

Runs, on 127.0.0.1 only:

  longhaul-perf --server                         (one server)
  longhaul-emu  --listen --forward               (UDP relay: --link, plus a --link_schedule
                                                  of loss=1 blackouts of --blackout_len
                                                  every --blackout_every, each shorter than
                                                  the idle timeout)
  longhaul-perf --client (bulk, --time=D)        two clients through the relay at the
  longhaul-perf --client (messages, --time=D)    same time

Every --sample it reads the resident set (VmRSS) of each of the four processes. At the
end it checks:

  - both clients exited 0, their payload is intact (longhaul-perf verifies every byte of
    every message: corrupt, misplaced, duplicated or truncated messages fail), the bytes
    the receiver verified equal the bytes the sender submitted, and the server reported
    every test intact;
  - memory: for each process, its RSS level at the end of the run (the median of the
    last 2 minutes of the clients' --time) is within --rss_growth of its RSS at --warmup
    (the level reached once the windows and pools are full). The peak after --warmup
    (transients included) is reported next to it.

longhaul-perf's receiver keeps one completion time (8 bytes) per message, up to 4 Mi per
connection (tools/perf/perf_stream.cc): a server receiving messages grows by design with
the number of messages (a vector that doubles). The default 256 KiB messages at 50 Mbit/s
(24 a second, 43 k in 30 minutes, 0.5 MiB of capacity) keep that well below the bound;
with 64 KiB messages the first 30-minute run grew 2 MiB from it alone.

Output: a summary on stderr, the verdict line, and with --out a JSON document (the
samples, the blackouts, the clients' end sections, the verdict); with --svg a plot of
RSS over time (and the bulk goodput per interval) with the blackouts shaded (matplotlib,
as tools/bench/longhaul_bench/plots.py). --json prints the document on stdout.

Every process is bounded in time (--max_time / --time / --timeout) and killed on exit,
also on Ctrl-C. Exit status: 0 the verdict passed, 1 it failed or a process failed, 2
bad flags.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import types

from longhaul_bench import cli
from longhaul_bench.cli import log
from longhaul_bench.netns_link import (Interrupted, JsonLines, Procs, exit_text,
                                       first_failure, install_signal_handlers,
                                       parse_json_output, restore_signal_handlers)
from longhaul_bench.procfs import loadavg, rss_kib
from longhaul_bench.units import parse_duration, parse_rate

DEFAULT_LINK = "rate=300mbit,rtt=20ms,loss=1e-3,reorder=0.01,reorder_delay=3ms"


def blackout_schedule(link_loss, duration_s, every_s, length_s):
    """The --link_schedule text and the [start, end) windows of the blackouts: loss=1 at
    every_s, 2*every_s, ... and back to the link's loss after length_s, all before the
    end of the run."""
    steps, windows = [], []
    t = every_s
    while t + length_s < duration_s - 5:
        steps.append("%gs:loss=1" % t)
        steps.append("%gs:loss=%s" % (t + length_s, link_loss))
        windows.append([t, t + length_s])
        t += every_s
    return ",".join(steps), windows


def start_json(procs, cmd, out_dir, what, event, log_name=None):
    """Starts `cmd` (JSON lines on stdout, stderr in OUT_DIR/LOG_NAME.log); (the process,
    its JsonLines, its first `event` within 20 s or None, said on stderr)."""
    log_path = os.path.join(out_dir, (log_name or what) + ".log")
    p = procs.popen(cmd, stdout=subprocess.PIPE, text=True, stderr=open(log_path, "w"))
    lines = JsonLines(p.stdout)
    ev = lines.wait(event, 20)
    if not ev:
        log("the %s did not start: %s" % (what, first_failure(open(log_path).read())))
    return p, lines, ev


def client_check(name, rc, j):
    """Problems with one client's run (empty when it is clean) and its numbers."""
    problems, nums = [], {"exit": rc}
    if rc != 0:
        problems.append("%s client: %s" % (name, exit_text(rc)))
    if not isinstance(j, dict) or "end" not in j:
        problems.append("%s client: no JSON result" % name)
        return problems, nums
    end = j["end"]
    lh = end.get("longhaul", {})
    integ = lh.get("integrity", {})
    sent = end.get("sum_sent", {}).get("bytes")
    recv = end.get("sum_received", {}).get("bytes")
    nums.update({"bytes_sent": sent, "bytes_verified": integ.get("verified_bytes"),
                 "bytes_received": recv, "corrupt_messages": integ.get("corrupt_messages"),
                 "intact": integ.get("intact"),
                 "goodput_bps": end.get("sum_received", {}).get("bits_per_second"),
                 "packets_lost": lh.get("loss", {}).get("packets_lost"),
                 "packets_retransmitted":
                     lh.get("retransmission", {}).get("packets_retransmitted"),
                 "pto_count": lh.get("retransmission", {}).get("pto_count"),
                 "errors": lh.get("errors", [])})
    for k in ("messages", "mct_p50_s", "mct_p99_s", "mct_max_s"):
        if k in end:
            nums[k] = end[k]
    if j.get("error"):
        problems.append("%s client: %s" % (name, j["error"]))
    if integ.get("intact") is not True:
        problems.append("%s client: payload not intact" % name)
    if integ.get("corrupt_messages", 1) != 0:
        problems.append("%s client: %s corrupt message(s)" % (name,
                                                            integ.get("corrupt_messages")))
    if not sent or sent != integ.get("verified_bytes"):
        problems.append("%s client: sent %s bytes, receiver verified %s" %
                        (name, sent, integ.get("verified_bytes")))
    return problems, nums


def rss_verdict(samples, names, warmup_s, growth, end_s):
    """Per process, over the steady part of the run (warmup_s .. end_s, the clients' --time):
    RSS at warmup (the first sample at or after it), its level at the end (the median of
    the samples of the last 2 minutes, or of the last fifth of the window if shorter), the
    largest sample (transients included) and the last sample of the whole run. The
    verdict is the level: a leak raises it, a transient (a burst after a blackout, a
    buffer freed a moment later) does not. The peak is reported next to it, and checked
    against the same bound as `peak_within_bound` (informational)."""
    out, ok = {}, True
    for n in names:
        pts = [(s["t"], s["rss_kib"].get(n)) for s in samples if s["rss_kib"].get(n)]
        win = [(t, v) for t, v in pts if warmup_s <= t <= end_s]
        if not win:
            out[n] = {"error": "no sample between %gs and %gs" % (warmup_s, end_s)}
            ok = False
            continue
        base = win[0][1]
        tail_from = max(win[0][0], end_s - max(min(120.0, (end_s - warmup_s) / 5), 1e-9))
        tail = sorted(v for t, v in win if t >= tail_from)
        level = tail[len(tail) // 2]
        peak = max(v for _, v in win)
        good = level <= base * (1 + growth)
        ok = ok and good
        out[n] = {"rss_at_warmup_kib": base, "rss_level_at_end_kib": level,
                  "rss_peak_after_warmup_kib": peak, "rss_end_kib": pts[-1][1],
                  "rss_peak_kib": max(v for _, v in pts),
                  "growth_after_warmup": round(level / base - 1, 4),
                  "peak_growth_after_warmup": round(peak / base - 1, 4),
                  "within_bound": good, "peak_within_bound": peak <= base * (1 + growth)}
    return ok, out


def plot(doc, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    colors = {"server": "#1f77b4", "bulk_client": "#2ca02c", "msg_client": "#d62728",
              "emulator": "#7f7f7f"}
    for n in doc["processes"]:
        pts = [(s["t"] / 60, s["rss_kib"][n] / 1024) for s in doc["samples"]
               if s["rss_kib"].get(n)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=n.replace("_", " "),
                    color=colors.get(n))
    for a in (ax, ax2):
        for w0, w1 in doc["blackouts"]:
            a.axvspan(w0 / 60, w1 / 60, color="#ffbb78", alpha=0.5, lw=0)
    wu = doc["warmup_s"] / 60
    ax.axvline(wu, color="black", ls=":", lw=1)
    ax.text(wu, ax.get_ylim()[1] * 0.97, " warm-up end", va="top", fontsize=8)
    ax.set_ylabel("RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="center right", fontsize=8)
    v = doc["verdict"]
    ax.set_title("soak %s, %s\n%s (blackouts of %gs every %gs shaded)" %
                 (doc["duration_text"], "PASS" if v["pass"] else "FAIL", doc["link"],
                  doc["blackout_len_s"], doc["blackout_every_s"]), fontsize=9)
    iv = doc.get("bulk_intervals", [])
    if iv:
        ax2.plot([(a + b) / 2 / 60 for a, b, _ in iv], [g / 1e6 for _, _, g in iv],
                 color=colors["bulk_client"], lw=0.8, label="bulk client goodput")
    iv = doc.get("msg_intervals", [])
    if iv:
        ax2.plot([(a + b) / 2 / 60 for a, b, _ in iv], [g / 1e6 for _, _, g in iv],
                 color=colors["msg_client"], lw=0.8, label="messages client goodput")
    ax2.set_ylabel("Mbit/s per interval")
    ax2.set_xlabel("minutes")
    ax2.set_ylim(bottom=0)
    ax2.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def intervals(j):
    """[(start_s, end_s, bits_per_second)] of a client's JSON intervals."""
    out = []
    for iv in (j or {}).get("intervals", []):
        s = iv.get("sum", {})
        if "start" in s and "end" in s:
            out.append((s["start"], s["end"], s.get("bits_per_second", 0)))
    return out


def start_link(a, procs):
    """The keys, the blackout schedule, the server and the emulator in front of it; the
    run's state (a namespace), or None when something did not start (said on stderr)."""
    bindir = os.path.join(a.build_dir, "bin")
    perf, emu = os.path.join(bindir, "longhaul-perf"), os.path.join(bindir, "longhaul-emu")
    for b in (perf, emu):
        if not os.access(b, os.X_OK):
            log("%s is not built (cmake --build %s --target longhaul-perf longhaul-emu)" %
                (b, a.build_dir))
            return None
    st = types.SimpleNamespace(perf=perf, dur=a.duration_s, bound=a.duration_s + 120)
    st.out_dir = out_dir = a.out_dir or tempfile.mkdtemp(prefix="soak.")
    os.makedirs(out_dir, exist_ok=True)
    st.keys = ["--insecure"]
    if a.security == "psk":
        psk = os.path.join(out_dir, "soak.psk")
        fd = os.open(psk, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.close(fd)
        st.keys = ["--psk_file=" + psk]
    link_keys = dict(kv.split("=", 1) for kv in a.link.split(","))
    st.sched, st.windows = blackout_schedule(link_keys.get("loss", "0"), st.dur,
                                             a.blackout_every_s, a.blackout_len_s)
    st.srv_cmd = [perf, "--server", "--bind=127.0.0.1", "--port=0", "--json",
                  "--max_test_duration=%ds" % (st.dur + 120)] + st.keys
    st.srv, st.srv_ev, ev = start_json(procs, st.srv_cmd, out_dir, "server", "listening")
    if not ev:
        return None
    st.emu_cmd = [emu, "--link=" + a.link, "--listen=127.0.0.1:0",
                  "--forward=127.0.0.1:%d" % ev["port"], "--json", "--stats_interval=5s",
                  "--seed=%d" % a.seed, "--max_time=%ds" % st.bound]
    if st.sched:
        st.emu_cmd.append("--link_schedule=" + st.sched)
    st.em, st.em_ev, st.ready = start_json(procs, st.emu_cmd, out_dir, "emulator", "ready",
                                           log_name="emu")
    if not st.ready:
        return None
    st.t0 = time.monotonic()  # the schedule's clock starts with the emulator (close enough)
    return st


def client_cmds(a, st):
    """The bulk and the messages client's commands, through the emulator."""
    common = ["--client=127.0.0.1", "--port=%d" % st.ready["listen_port"], "--json",
              "--time=%ds" % st.dur, "--timeout=%ds" % (st.dur + 90),
              "--interval=%g" % a.sample_s, "--connect_timeout=10s"] + st.keys
    bulk_cmd = [st.perf] + common + ["--rate=" + a.bulk_rate, "--message_size=1MiB"]
    msg_cmd = [st.perf] + common + ["--workload=messages", "--rate=" + a.msg_rate,
                                    "--load=%g" % a.load, "--message_size=" + a.message_size]
    return bulk_cmd, msg_cmd


def start_clients(a, procs, st):
    """Both clients, their outputs in the output folder; every process's pid in st.pids."""
    st.bulk_cmd, st.msg_cmd = client_cmds(a, st)
    st.outs, st.clients = {}, {}
    for name, cmd in (("bulk_client", st.bulk_cmd), ("msg_client", st.msg_cmd)):
        st.outs[name] = open(os.path.join(st.out_dir, name + ".json"), "w+")
        st.clients[name] = procs.popen(cmd, stdout=st.outs[name],
                                       stderr=open(os.path.join(st.out_dir, name + ".log"), "w"))
    st.pids = {"server": st.srv.pid, "bulk_client": st.clients["bulk_client"].pid,
               "msg_client": st.clients["msg_client"].pid, "emulator": st.em.pid}
    log("running %s: server pid %d, emulator pid %d (port %d), clients %d / %d; logs in %s" %
        (a.duration_text, st.srv.pid, st.em.pid, st.ready["listen_port"],
         st.pids["bulk_client"], st.pids["msg_client"], st.out_dir))


def sample_until_done(a, st):
    """Every process's RSS and the load every --sample seconds until both clients ended
    (or the bound); a note on stderr each minute."""
    samples = []
    next_t = 0.0
    next_note = 60.0
    hard_end = st.t0 + st.bound
    while time.monotonic() < hard_end:
        now = time.monotonic() - st.t0
        if now >= next_t:
            samples.append({"t": round(now, 2), "rss_kib": {n: rss_kib(p) for n, p in
                                                            st.pids.items()},
                            "load": loadavg()[0]})
            next_t += a.sample_s
        if all(c.poll() is not None for c in st.clients.values()):
            break
        if now >= next_note:
            s = samples[-1]["rss_kib"]
            log("%4.0fs RSS MiB: %s" % (now, ", ".join(
                "%s %.1f" % (n, v / 1024) for n, v in s.items() if v)))
            next_note += 60
        time.sleep(min(0.5, max(0.01, next_t - (time.monotonic() - st.t0))))
    return samples


def stop(procs, st, samples):
    """Stops the clients (if still running), waits for the server's test lines, takes a
    last sample of the server and the emulator and stops them; (the clients' exit
    statuses, the emulator's final line or None)."""
    rcs = {}
    for name, c in st.clients.items():
        if c.poll() is None:
            log("%s still running at the bound: killed" % name)
            procs.kill(c)
        rcs[name] = c.returncode
    # The server prints a test line once the streams of each test have ended.
    tests_end = time.monotonic() + 15
    while len(st.srv_ev.all("test")) < 2 and time.monotonic() < tests_end:
        time.sleep(0.1)
    samples.append({"t": round(time.monotonic() - st.t0, 2),
                    "rss_kib": {n: rss_kib(st.pids[n]) for n in ("server", "emulator")},
                    "load": loadavg()[0]})
    procs.kill(st.em)
    final = st.em_ev.wait("final", 5)
    procs.kill(st.srv)
    return rcs, final


def client_results(st, rcs):
    """(problems, numbers per client, parsed JSON per client) of the clients' outputs."""
    problems, numbers, parsed = [], {}, {}
    for name in st.clients:
        st.outs[name].seek(0)
        j = parse_json_output(st.outs[name].read())
        parsed[name] = j
        p, nums = client_check(name, rcs[name], j)
        problems += p
        numbers[name] = nums
    return problems, numbers, parsed


def server_problems(tests):
    """What is wrong with the server's finished-test lines (two, each intact)."""
    problems = []
    if len(tests) != 2:
        problems.append("the server reported %d finished tests, expected 2" % len(tests))
    for t in tests:
        if not t.get("intact"):
            problems.append("server: test %s not intact: %s" % (t.get("test_id"),
                                                               t.get("errors")))
    return problems


def emulator_info(final):
    """The emulator's own drops and its model's counters each way, from its final line."""
    if not final:
        return {}
    return {"own_drops": final.get("own_drops"),
            "forward": final.get("forward", {}).get("model"),
            "reverse": final.get("reverse", {}).get("model")}


def run(a, procs):
    st = start_link(a, procs)
    if st is None:
        return None, 1
    start_clients(a, procs, st)
    samples = sample_until_done(a, st)
    rcs, final = stop(procs, st, samples)
    problems, numbers, parsed = client_results(st, rcs)
    tests = st.srv_ev.all("test")
    problems += server_problems(tests)
    rss_ok, rss = rss_verdict(samples, list(st.pids), a.warmup_s, a.rss_growth, st.dur)
    if not rss_ok:
        problems.append("RSS grew more than %g%% after %gs (or was not sampled)" %
                        (a.rss_growth * 100, a.warmup_s))
    doc = {"what": "tools/bench/soak", "duration_s": st.dur, "duration_text": a.duration_text,
           "link": a.link, "link_schedule": st.sched, "blackouts": st.windows,
           "blackout_every_s": a.blackout_every_s, "blackout_len_s": a.blackout_len_s,
           "sample_s": a.sample_s, "warmup_s": a.warmup_s, "rss_growth_bound": a.rss_growth,
           "security": a.security, "commands": {"server": st.srv_cmd, "emulator": st.emu_cmd,
                                                "bulk_client": st.bulk_cmd,
                                                "msg_client": st.msg_cmd},
           "processes": list(st.pids), "samples": samples, "clients": numbers,
           "server_tests": tests, "emulator": emulator_info(final), "rss": rss,
           "bulk_intervals": intervals(parsed.get("bulk_client")),
           "msg_intervals": intervals(parsed.get("msg_client")),
           "load_avg_end": loadavg(),
           "verdict": {"pass": not problems, "problems": problems,
                       "lost_or_corrupt_messages": sum(
                           (n.get("corrupt_messages") or 0) for n in numbers.values()),
                       "rss_within_bound": rss_ok}}
    return doc, 0 if not problems else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_defaults(ap, duration="30m")
    cli.add_build_dir(ap)
    cli.add_defaults(ap, link=DEFAULT_LINK, blackout_every="180s", blackout_len="2s",
                     sample="5s", warmup="5m", rss_growth=0.10, bulk_rate="100mbit",
                     msg_rate="100mbit", load=0.5, message_size="256KiB")
    ap.add_argument("--security", choices=("psk", "insecure"), default="psk")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="the JSON document")
    ap.add_argument("--svg", help="the RSS plot (.svg or .png)")
    ap.add_argument("--out_dir", help="logs and client outputs (default: a new temp dir)")
    ap.add_argument("--json", action="store_true", help="print the JSON document on stdout")
    a = ap.parse_args()
    try:
        a.duration_s = parse_duration(a.duration)
        a.blackout_every_s = parse_duration(a.blackout_every)
        a.blackout_len_s = parse_duration(a.blackout_len)
        a.sample_s = parse_duration(a.sample)
        a.warmup_s = parse_duration(a.warmup)
        parse_rate(a.bulk_rate)
        parse_rate(a.msg_rate)
        if "=" not in a.link:
            raise ValueError("--link: key=value,... expected")
    except ValueError as e:
        print("soak: %s" % e, file=sys.stderr)
        return 2
    if a.duration_s < 10 or a.duration_s > 6 * 3600:
        print("soak: --duration must be within [10s, 6h]", file=sys.stderr)
        return 2
    if a.blackout_len_s >= 25:
        print("soak: --blackout_len must stay below the idle timeout (30s)", file=sys.stderr)
        return 2
    if not (0 < a.sample_s <= 60) or a.warmup_s >= a.duration_s:
        print("soak: --sample must be in (0, 60s] and --warmup shorter than --duration",
              file=sys.stderr)
        return 2
    a.duration_text = a.duration
    a.build_dir = os.path.abspath(a.build_dir)
    procs = Procs()
    old = install_signal_handlers()
    try:
        doc, rc = run(a, procs)
    except Interrupted as e:
        log(str(e))
        return 1
    finally:
        procs.kill_all()
        restore_signal_handlers(old)
    if doc is None:
        return rc
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    if a.svg:
        try:
            plot(doc, a.svg)
        except ImportError:
            log("matplotlib is missing (python3-matplotlib, tools/setup.sh): no plot")
    for n, r in doc["rss"].items():
        if "error" in r:
            log("%-12s RSS: %s" % (n, r["error"]))
        else:
            log("%-12s RSS at %gs %.1f MiB, level at the end %.1f MiB (%+.1f%%), peak %.1f MiB "
                "(%+.1f%%), last %.1f MiB" %
                (n, a.warmup_s, r["rss_at_warmup_kib"] / 1024, r["rss_level_at_end_kib"] / 1024,
                 r["growth_after_warmup"] * 100, r["rss_peak_after_warmup_kib"] / 1024,
                 r["peak_growth_after_warmup"] * 100, r["rss_end_kib"] / 1024))
    for n, c in doc["clients"].items():
        log("%-12s exit %s, sent %s, verified %s, corrupt %s, goodput %.1f Mbit/s, lost %s, "
            "retransmitted %s%s" % (n, c.get("exit"), c.get("bytes_sent"),
                                    c.get("bytes_verified"), c.get("corrupt_messages"),
                                    (c.get("goodput_bps") or 0) / 1e6, c.get("packets_lost"),
                                    c.get("packets_retransmitted"),
                                    ", messages %s" % c["messages"] if "messages" in c else ""))
    v = doc["verdict"]
    print("soak verdict: %s%s" % ("PASS" if v["pass"] else "FAIL",
                                  "" if v["pass"] else ": " + "; ".join(v["problems"])),
          file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps(doc))
    return rc


def entry():
    """What tools/bench/soak runs."""
    sys.exit(main())
