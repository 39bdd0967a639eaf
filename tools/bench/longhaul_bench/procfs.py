"""Readers of /proc: a process's resident set and CPU time, the machine's CPU times and
load, a namespace's network counters. `proc` names the /proc tree (tests pass a copy).
Readers of a process return None when it is gone."""

import os

PROC = "/proc"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def status_kib(pid, key="VmRSS", proc=PROC):
    """A KiB field of /proc/PID/status (VmRSS, VmHWM, ...), or None."""
    try:
        with open("%s/%d/status" % (proc, pid)) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_kib(pid, proc=PROC):
    """VmRSS of `pid` in KiB, or None when it is gone."""
    return status_kib(pid, "VmRSS", proc)


def _cpu_ticks(pid, proc):
    with open("%s/%d/stat" % (proc, pid)) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def proc_cpu_s(pid, proc=PROC):
    """User + system CPU seconds of `pid` (its threads; not its children), or None."""
    try:
        return _cpu_ticks(pid, proc) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def threads_cpu_s(pids, proc=PROC):
    """User + system CPU seconds of the processes (or threads) `pids` together; those that
    are gone count 0."""
    total = 0
    for pid in pids:
        try:
            total += _cpu_ticks(pid, proc)
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def cpu_times(proc=PROC):
    """(all, idle) jiffies of the machine since boot (idle includes iowait)."""
    with open(proc + "/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v), idle


def loadavg(proc=PROC):
    """The 1, 5 and 15 minute load averages."""
    with open(proc + "/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def cpu_info(proc=PROC):
    """The CPU model, count and the flags that matter for packet protection."""
    model, flags = "unknown", set()
    try:
        with open(proc + "/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"model": model, "cpus": os.cpu_count(),
            "flags": {f: f in flags for f in ("aes", "vaes", "avx512f")},
            "kernel": os.uname().release}


def pids_named(prefix, proc=PROC):
    """The pids whose command name (/proc/PID/comm) starts with `prefix`."""
    pids = []
    for d in os.listdir(proc):
        if not d.isdigit():
            continue
        try:
            with open("%s/%s/comm" % (proc, d)) as f:
                if f.read().startswith(prefix):
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def netdev(pid, dev, proc=PROC):
    """rx/tx bytes, packets and drops of `dev` in the network namespace of `pid`."""
    with open("%s/%d/net/dev" % (proc, pid)) as f:
        for line in f:
            if ":" in line and line.split(":", 1)[0].strip() == dev:
                v = [int(x) for x in line.split(":", 1)[1].split()]
                return {"rx_bytes": v[0], "rx_packets": v[1], "rx_drop": v[3],
                        "tx_bytes": v[8], "tx_packets": v[9], "tx_drop": v[11]}
    raise RuntimeError("no device %s in the namespace of pid %d" % (dev, pid))


def udp_snmp(pid, proc=PROC):
    """The Udp: counters of /proc/PID/net/snmp (InDatagrams, RcvbufErrors, ...)."""
    with open("%s/%d/net/snmp" % (proc, pid)) as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return dict(zip(rows[0][1:], [int(x) for x in rows[1][1:]]))
