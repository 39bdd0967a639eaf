"""The processes of the loopback benchmarks (cpu-per-byte, engine-scaling) and the steps
their runs share.

Each process runs in its own session (its own process group), bounded by a deadline of
its own (no `timeout` binary): past it, SIGTERM to its group, and SIGKILL to the group
KILL_AFTER_S later. It is reaped with wait4(), whose rusage gives the user and system CPU
seconds of the process itself over its whole life (every thread; what /usr/bin/time -f
"%U %S" reports). start() keeps each process in LIVE until release(), so that
stop_all() can end what a stopped run left.
"""

import json
import os
import signal
import subprocess
import time

from longhaul_bench.netns_link import acquire_lock
from longhaul_bench.procfs import loadavg

KILL_AFTER_S = 5.0  # from SIGTERM at the deadline to SIGKILL (as `timeout -k 5`)
LOCK_WAIT_S = 600


class Proc:
    """`argv` with stdout and stderr in files, in its own session, bounded by limit_s."""

    def __init__(self, argv, limit_s, out_path, err_path, env=None, kill_after_s=KILL_AFTER_S):
        self.argv = argv
        self.out_path = out_path
        self.deadline = time.monotonic() + limit_s
        self.kill_at = self.deadline + kill_after_s
        self.termed = False
        with open(out_path, "w") as out, open(err_path, "w") as err:
            self.p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                      start_new_session=True, env=env)
        self.status = None
        self.cpu = None  # (user_s, system_s)

    def poll(self):
        """True when it has ended (status and cpu set); past the deadline, signals it."""
        if self.status is not None:
            return True
        try:
            pid, st, ru = os.wait4(self.p.pid, os.WNOHANG)
        except ChildProcessError:
            self.status, self.cpu = -1, None
            self.p.returncode = -1
            return True
        if pid == 0:
            now = time.monotonic()
            if now >= self.kill_at:
                self.kill_group(signal.SIGKILL)
            elif now >= self.deadline and not self.termed:
                self.kill_group(signal.SIGTERM)
                self.termed = True
            return False
        self.status = os.waitstatus_to_exitcode(st)
        self.cpu = (ru.ru_utime, ru.ru_stime)
        self.p.returncode = self.status  # reaped here; Popen must not wait again
        return True

    def kill_group(self, sig):
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, wait_s):
        """True when it ended within wait_s."""
        end = time.monotonic() + wait_s
        while not self.poll():
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)
        return True

    def stop(self, wait_s=8.0):
        """SIGTERM to its group, SIGKILL if it stays."""
        if self.poll():
            return
        for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 5.0)):
            self.kill_group(sig)
            if self.wait(wait):
                return

    def output(self):
        try:
            with open(self.out_path) as f:
                return f.read()
        except OSError:
            return ""


LIVE = []


def start(argv, limit_s, tmp, name, env=None):
    """A Proc writing tmp/name.out and tmp/name.err, kept in LIVE."""
    p = Proc(argv, limit_s, os.path.join(tmp, name + ".out"), os.path.join(tmp, name + ".err"),
             env)
    LIVE.append(p)
    return p


def release(*procs):
    """Stops each of `procs` that is not None and drops it from LIVE."""
    for p in procs:
        if p is not None:
            p.stop()
            LIVE.remove(p)


def stop_all(wait_s=3.0):
    """Stops every process still in LIVE (after an interrupted run)."""
    for p in list(LIVE):
        p.stop(wait_s)


def await_pair(client, server, client_wait_s, server_wait_s=15.0):
    """Waits for the client (stopped after client_wait_s), then for the server, which ends
    after the test (stopped after server_wait_s); True when the server had to be stopped."""
    if not client.wait(client_wait_s):
        client.stop()
    if not server.wait(server_wait_s):
        server.stop()
        return True
    return False


# ---------------------------------------------------------------------------------------
# A run's record.

def parse_client_output(rec, client, parse):
    """rec updated with parse(the client's JSON output); False, with rec["error"], when
    the output is not the JSON `parse` wants."""
    text = client.output()
    try:
        rec.update(parse(json.loads(text)))
    except (ValueError, KeyError, TypeError) as ex:
        rec["error"] = "no usable JSON from the client (%s): %s" % (
            ex.__class__.__name__, text.strip()[-300:] or "(empty)")
        return False
    return True


def cpu_per_gb(rec, names=("client", "server")):
    """Adds NAME_s_per_gb for both names and both_s_per_gb (CPU s per 1e9 delivered bytes)
    to a record that has delivered_bytes and NAME_cpu_s."""
    gb = rec.get("delivered_bytes", 0) / 1e9
    if gb <= 0 or names[0] + "_cpu_s" not in rec:
        return rec
    for n in names:
        rec[n + "_s_per_gb"] = rec[n + "_cpu_s"] / gb
    rec["both_s_per_gb"] = (rec[names[0] + "_cpu_s"] + rec[names[1] + "_cpu_s"]) / gb
    return rec


def account_cpu(rec, roles):
    """rec with the CPU seconds of each (name, Proc) of `roles` (two: NAME_cpu_s, then
    NAME_user_s and NAME_system_s) and the CPU per GB; an error when a CPU time is missing
    or nothing was delivered."""
    if any(p.cpu is None for _, p in roles):
        rec["error"] = rec.get("error", "CPU times unavailable")
        return rec
    for name, p in roles:
        rec[name + "_cpu_s"] = sum(p.cpu)
    for name, p in roles:
        rec[name + "_user_s"], rec[name + "_system_s"] = p.cpu
    cpu_per_gb(rec, [name for name, _ in roles])
    if "both_s_per_gb" not in rec and "error" not in rec:
        rec["error"] = "nothing delivered"
    return rec


# ---------------------------------------------------------------------------------------
# Flags, lock and output.

def add_rounds_seconds(p):
    """--rounds and --seconds (per run)."""
    p.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    p.add_argument("--seconds", type=float, default=5, help="seconds per run (default: 5)")


def check_rounds_seconds(p, a):
    if not 1 <= a.rounds <= 20:
        p.error("--rounds must be in [1, 20]")
    if not 1 <= a.seconds <= 60:
        p.error("--seconds must be in [1, 60]")


def comparison_lock(log):
    """(go on, the lock) for netns_link's comparison lock, waited for LOCK_WAIT_S: go on is
    False when another run kept it (said); the lock is None when it could not be taken
    (said; the run goes on without it). Keep the lock until the run ends."""
    try:
        lock = acquire_lock(LOCK_WAIT_S, log)
        if lock is None:
            log("another comparison run holds the lock; stopping")
            return False, None
        return True, lock
    except OSError as ex:
        log("running without the comparison lock (%s)" % ex)
        return True, None


def fmt(v, spec):
    """spec % v, or "-" for None."""
    return "-" if v is None else spec % v


def print_machine(machine):
    """The CPU model and count, the kernel, the flags and the load average."""
    print("cpu: %s, %d CPUs, kernel %s" % (machine["model"], machine["cpus"], machine["kernel"]))
    print("cpu flags: " + ", ".join("%s %s" % (f, "yes" if v else "no")
                                    for f, v in machine["flags"].items()))
    print("load average at start: %s" % " ".join("%.2f" % x for x in loadavg()), flush=True)


def print_end(t_start):
    """The wall time since t_start and the load average; returns the load average."""
    end_load = loadavg()
    print("wall time %.0f s, load average at end: %s" % (
        time.monotonic() - t_start, " ".join("%.2f" % x for x in end_load)))
    return end_load


def write_json(path, out):
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
