"""netns_link: what the comparison scripts share (wan-compare, bridge-compare, coexist,
flood, soak).

  - link specs (as transport/base/parse.h reads them; the units' text forms are in
    units.py), a named link's file, a spec with some keys replaced;
  - Procs: every process a script starts, in its own session (process group), killed
    with its children on exit; run_bounded(): a command run to completion within a
    time bound, killed (the whole group) past it;
  - the emulated link: longhaul-emu --tun between two network namespaces it creates
    (A = 198.18.0.1, B = 198.18.0.2), its JSON events and final counters; the TCP
    buffer sysctls inside the namespaces; the host's net.core.rmem_max / wmem_max
    raised for a run and put back (HostBuffers);
  - the lock that lets one comparison run at a time (they share those host sysctls and
    the CPU), the preconditions (root, /dev/net/tun, ip netns), signals turned into an
    exception so that `finally` cleans up, small parsers of tools' output.

Network rule (docs/comparison.md): traffic only on loopback or between the namespaces a
script creates itself, addressed from 198.18.0.0/15. Every wait here is bounded.
"""

import fcntl
import json
import os
import re
import signal
import subprocess
import threading
import time

from .cli import ROOT
from .procfs import proc_cpu_s
from .units import parse_duration, parse_rate
ADDR_A, ADDR_B = "198.18.0.1", "198.18.0.2"
HOST_BUF = 268435456  # net.core.rmem_max / wmem_max during a run
NS_SYSCTLS = ["net.ipv4.tcp_rmem=4096 131072 268435456",
              "net.ipv4.tcp_wmem=4096 65536 268435456",
              "net.ipv4.tcp_no_metrics_save=1"]
# One comparison at a time, whichever script: they share the host-wide sysctls (a second
# run would restore them under the first) and the CPU.
LOCK_PATH = "/run/lock/longhaul-wan-compare.lock"


class Interrupted(Exception):
    pass


def install_signal_handlers():
    """SIGINT, SIGTERM and SIGHUP raise Interrupted (so `finally` blocks clean up);
    returns the old handlers for restore_signal_handlers()."""

    def on_signal(signum, frame):
        raise Interrupted("stopped by signal %d" % signum)

    return {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM,
                                                     signal.SIGHUP)}


def restore_signal_handlers(old):
    for s, h in old.items():
        signal.signal(s, h)


# ---------------------------------------------------------------------------------------
# Link specs.

def read_link_file(name):
    path = os.path.join(ROOT, "profiles", "links", name + ".link")
    keys = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = line.split("=", 1)
                keys[k.strip()] = v.strip()
    return keys


def link_keys(spec):
    """The spec's keys (a named link's file, or key=value,...), in order."""
    if "=" not in spec:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", spec):
            raise ValueError("--link=%s is neither a named link nor key=value,..." % spec)
        try:
            return read_link_file(spec)
        except OSError:
            raise ValueError("--link=%s: no profiles/links/%s.link" % (spec, spec))
    keys = {}
    for kv in spec.split(","):
        if "=" not in kv:
            raise ValueError("--link: '%s' is not key=value" % kv)
        k, v = kv.split("=", 1)
        keys[k.strip()] = v.strip()
    return keys


def spec_of(keys):
    """key=value,... of `keys` (in their order)."""
    return ",".join("%s=%s" % (k, v) for k, v in keys.items())


def spec_with(spec, **replace):
    """The spec (named or key=value) with some keys replaced or added, as key=value,..."""
    keys = dict(link_keys(spec))
    for k, v in replace.items():
        keys[k] = v
    return spec_of(keys)


def link_params(spec):
    """{spec, keys, rate_bps, rtt_s, mtu} of a spec; ValueError/KeyError when malformed."""
    keys = link_keys(spec)
    return {"spec": spec, "keys": keys,
            "rate_bps": parse_rate(keys["rate"]) if "rate" in keys else None,
            "rtt_s": parse_duration(keys.get("rtt", "0")),
            "mtu": int(keys.get("mtu", 9000))}


def canonical(keys):
    """Comparable form of a spec's keys (numbers parsed) to find its named link."""
    out = {}
    for k, v in keys.items():
        try:
            if k == "rate":
                out[k] = parse_rate(v)
            elif k in ("rtt", "jitter", "delay"):
                out[k] = parse_duration(v)
            else:
                out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


def named_link_for(spec):
    """The name of profiles/links/NAME.link that means the same as `spec`, or None."""
    if "=" not in spec:
        return spec
    want = canonical(link_keys(spec))
    d = os.path.join(ROOT, "profiles", "links")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith(".link"):
            try:
                if canonical(read_link_file(f[:-5])) == want:
                    return f[:-5]
            except OSError:
                pass
    return None


# ---------------------------------------------------------------------------------------
# Processes: everything started is registered and torn down.

class Procs:
    """The processes a script started, each in its own session (so killing its group
    kills what it started too, e.g. `ip netns exec NS timeout ... CMD`)."""

    def __init__(self):
        self.live = []
        self.lock = threading.Lock()

    def popen(self, cmd, **kw):
        p = subprocess.Popen(cmd, start_new_session=True, **kw)
        with self.lock:
            self.live.append(p)
        return p

    def kill(self, p, sig=signal.SIGTERM, wait=10.0):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        else:
            # The leader is gone; children it left in its group may not be.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        with self.lock:
            if p in self.live:
                self.live.remove(p)

    def kill_all(self):
        with self.lock:
            live = list(self.live)
        for p in live:
            self.kill(p, signal.SIGTERM, 5.0)


class Finished:
    """What run_bounded() returns."""

    def __init__(self, rc, stdout, stderr, timed_out, wall_s):
        self.returncode, self.stdout, self.stderr = rc, stdout, stderr
        self.timed_out, self.wall_s = timed_out, wall_s


def run_bounded(procs, cmd, timeout_s, stdin=None, text=True):
    """Runs `cmd` to completion, capturing stdout and stderr; past timeout_s its whole
    process group is killed (SIGTERM, then SIGKILL) and timed_out is set (rc is then
    what the killed process returned). Registered in `procs` while it runs, so an
    Interrupted raised meanwhile leaves nothing behind once procs.kill_all() runs."""
    t0 = time.monotonic()
    p = procs.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL if stdin is None else stdin, text=text)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        procs.kill(p, signal.SIGTERM, 5.0)
        try:
            out, err = p.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError):
            out, err = "" if text else b"", "" if text else b""
    procs.kill(p)  # unregisters it; kills what it may have left in its group
    return Finished(p.returncode, out or ("" if text else b""), err or ("" if text else b""),
                    timed_out, time.monotonic() - t0)


def exit_text(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "killed by signal %d" % -rc
    return {124: "timed out (exit 124)"}.get(rc, "exit %d" % rc)


def first_failure(stderr):
    """The line that says why a process failed: a glog FATAL/CHECK line if there is one,
    else the last line."""
    lines = [l.strip() for l in stderr.strip().splitlines() if l.strip()]
    for l in lines:
        if "Check failed" in l or re.match(r"F\d{8} ", l):
            return l
    return lines[-1] if lines else "no output"


def tail(out_dir, name):
    """The last non-empty line of out_dir/name, or "(no output)"."""
    try:
        with open(os.path.join(out_dir, name)) as f:
            lines = [l for l in f.read().strip().splitlines() if l.strip()]
        return lines[-1] if lines else "(no output)"
    except OSError:
        return "(no output)"


def parse_json_output(text):
    """One JSON object from a tool's stdout: the whole text, or its last JSON line."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


# ---------------------------------------------------------------------------------------
# Host state: sysctls, load, CPU.

def read_sysctl(name):
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return f.read().strip()


def write_sysctl(name, value):
    with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
        f.write(str(value))


class HostBuffers:
    """net.core.rmem_max / wmem_max (host-wide, not per namespace) raised to HOST_BUF for
    a run (and, when asked, congestion controls allowed in namespaces); restore() puts
    back what was there (call it from `finally`)."""

    NAMES = ("net.core.rmem_max", "net.core.wmem_max")

    def __init__(self):
        self.saved = {}

    def raise_limits(self):
        for name in self.NAMES:
            self.saved[name] = read_sysctl(name)
            if int(self.saved[name]) < HOST_BUF:
                write_sysctl(name, HOST_BUF)
        return {"set": {k: HOST_BUF for k in self.saved}, "restored_to": dict(self.saved)}

    def allow_congestion_control(self, names):
        """Adds `names` to the host's net.ipv4.tcp_allowed_congestion_control (also put
        back by restore()): a namespace other than the host's may only make an allowed
        algorithm its default (net.ipv4.tcp_congestion_control; EPERM otherwise)."""
        key = "net.ipv4.tcp_allowed_congestion_control"
        now = read_sysctl(key).split()
        want = now + [n for n in names if n not in now]
        if want != now:
            self.saved.setdefault(key, " ".join(now))
            write_sysctl(key, " ".join(want))
        return " ".join(want)

    def restore(self, log=None):
        for name, value in self.saved.items():
            try:
                write_sysctl(name, value)
            except OSError as e:
                if log:
                    log("could not restore %s=%s: %s" % (name, value, e))


def run_quiet(cmd, timeout=20):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def ns_exec(ns, cmd):
    return ["ip", "netns", "exec", ns] + cmd


def ns_sysctl(ns, settings):
    """Sets sysctls inside namespace `ns`; None, or the error text."""
    r = run_quiet(ns_exec(ns, ["sysctl", "-q", "-w"] + list(settings)))
    return None if r.returncode == 0 else (r.stderr.strip() or "exit %d" % r.returncode)


def ns_sysctls(namespaces, settings):
    """Sets sysctls inside each namespace; None, or what failed first."""
    for ns in namespaces:
        err = ns_sysctl(ns, settings)
        if err:
            return "sysctl in %s failed: %s" % (ns, err)
    return None


def clean_up(procs, namespaces, host, log):
    """After a run between namespaces: kills every process it started, removes the
    namespaces and puts the host's buffer sysctls back."""
    procs.kill_all()
    remove_namespaces(namespaces)
    host.restore(log)


def remove_namespaces(names):
    """Deletes those of `names` that exist (only ever the script's own, named after its
    pid)."""
    for ns in names:
        if os.path.exists("/run/netns/" + ns):
            run_quiet(["ip", "netns", "del", ns])


def preconditions(tools=("ip", "ss", "timeout")):
    """What stops a namespace run on this machine, as (environment problems, missing
    tools): not root, no /dev/net/tun, `ip netns` unusable; tools not on PATH."""
    env, missing = [], []
    if os.geteuid() != 0:
        env.append("needs root (TUN devices and network namespaces)")
    if not os.path.exists("/dev/net/tun"):
        env.append("/dev/net/tun is missing")
    for tool in tools:
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode:
            missing.append("'%s' is not installed (tools/setup.sh)" % tool)
    if "'ip' is not installed (tools/setup.sh)" not in missing:
        try:
            r = run_quiet(["ip", "netns", "list"], timeout=10)
            if r.returncode != 0:
                env.append("`ip netns` does not work: " + (r.stderr.strip() or
                                                           "exit %d" % r.returncode))
        except (OSError, subprocess.SubprocessError) as e:
            env.append("`ip netns` does not work: %s" % e)
    return env, missing


# ---------------------------------------------------------------------------------------
# The emulated link.

class JsonLines:
    """The JSON objects a process prints on `stream`, one a line, read on a thread. With
    stamp, each gets "_mono": when it arrived (time.monotonic(), for rates over a window).
    `proc`, when given, is the process: a wait ends when it has exited and its output is
    read (without it, when the output is read)."""

    def __init__(self, stream, proc=None, stamp=False):
        self.events = []
        self.cond = threading.Condition()
        self.proc, self.stamp = proc, stamp
        self.reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.reader.start()

    def _read(self, stream):
        for line in stream:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            if self.stamp:
                ev["_mono"] = time.monotonic()
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()

    def wait(self, name, timeout):
        """The first {"event": name} within `timeout` seconds, or None."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for ev in self.events:
                    if ev.get("event") == name:
                        return ev
                left = end - time.monotonic()
                if left <= 0 or (not self.reader.is_alive() and
                                 (self.proc is None or self.proc.poll() is not None)):
                    return None
                self.cond.wait(min(left, 0.2))

    def all(self, name):
        """Every {"event": name} so far."""
        with self.cond:
            return [e for e in self.events if e.get("event") == name]


class Emulator:
    """longhaul-emu --tun between namespaces a and b; JSON lines read on a thread."""

    def __init__(self, procs, binary, link, a, b, seed, realtime, max_time_s, log_path):
        self.procs = procs
        self.cmd = [binary, "--link=" + link, "--tun", "--netns=%s,%s" % (a, b), "--json",
                    "--stats_interval=1s", "--seed=%d" % seed, "--max_time=%ds" % max_time_s]
        if realtime > 0:
            self.cmd.append("--realtime=%d" % realtime)
        self.a, self.b = a, b
        self.err = open(log_path, "w")
        self.p = procs.popen(self.cmd, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.lines = JsonLines(self.p.stdout, proc=self.p, stamp=True)

    def wait_event(self, name, timeout):
        return self.lines.wait(name, timeout)

    def stats_lines(self):
        return self.lines.all("stats")

    def stop(self):
        """Stops the emulator; (its final JSON line or None, its CPU seconds)."""
        cpu = proc_cpu_s(self.p.pid)
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        final = self.wait_event("final", 20)
        self.procs.kill(self.p, signal.SIGKILL, 5)
        self.err.close()
        # After a SIGKILL the namespaces stay: remove them (never someone else's: ours are
        # named after this process).
        remove_namespaces((self.a, self.b))
        return final, cpu


def emu_summary(final, cpu):
    """The emulator's final counters, per direction, and its CPU use."""
    out = {"own_drops": final.get("own_drops"), "elapsed_s": final.get("elapsed_s"),
           "cpu_s": cpu}
    for d in ("forward", "reverse"):
        m = final.get(d, {}).get("model", {})
        em = final.get(d, {}).get("emulator", {})
        out[d] = {k: m.get(k) for k in ("offered", "delivered", "delivered_bytes",
                                        "dropped_loss", "dropped_queue", "max_queue_bytes",
                                        "busy_s")}
        out[d]["own_drops"] = em.get("own_drops")
    if cpu and final.get("elapsed_s"):
        out["cpu_fraction"] = round(cpu / final["elapsed_s"], 3)
    return out


def wait_port(ns, proto, port, timeout):
    """Waits until something in namespace `ns` listens on `port` (tcp or udp)."""
    end = time.monotonic() + timeout
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    while time.monotonic() < end:
        r = run_quiet(ns_exec(ns, ["ss", flag, "sport = :%d" % port]))
        if r.returncode == 0 and r.stdout.strip():
            return True
        time.sleep(0.1)
    return False


# ---------------------------------------------------------------------------------------

def acquire_lock(wait_s, log):
    """An exclusive flock on LOCK_PATH (released when the process exits), waiting at most
    wait_s; None if it stayed taken."""
    os.makedirs(os.path.dirname(LOCK_PATH), exist_ok=True)
    f = open(LOCK_PATH, "a+")
    end = time.monotonic() + wait_s
    announced = False
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            f.truncate(0)
            f.write(str(os.getpid()))
            f.flush()
            return f
        except BlockingIOError:
            if time.monotonic() >= end:
                f.close()
                return None
            if not announced:
                log("waiting for another comparison run to finish (%s)" % LOCK_PATH)
                announced = True
            time.sleep(1)
