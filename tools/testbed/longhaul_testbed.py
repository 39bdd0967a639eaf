#!/usr/bin/env python3
"""Soft-RoCE testbed: two qemu guests joined by one Ethernet segment, each with rdma_rxe.

The guests run Debian's kernel package (downloaded with apt-get and unpacked into a
cache folder; the host's /boot is never touched) and see the host's root read-only over
9p with a tmpfs overlay, so the project's build and Debian's rdma-core tools run in them
unchanged. Their NICs are joined by a qemu socket netdev on 127.0.0.1; each guest gets
198.18.1.1 or 198.18.1.2 on eth0 (MTU 9000), loads rdma_rxe, sch_netem and tcp_bbr, and
brings rxe0 up on eth0 (active MTU 4096). A small agent in each guest runs commands sent
over a second serial port (a unix socket on the host) and returns their output and exit
status. Everything is bounded in time; qemu processes are killed by pid on every exit.

As a library (tests/rdma):

    with Testbed(work_dir) as tb:        # boots both guests once
        tb.netem("a", "delay 29ms")      # egress qdisc of guest a (a -> b)
        rc, out = tb.run("b", "ibv_devinfo", timeout=30)

As a tool (docs/rdma.md):

    longhaul_testbed.py prepare                    # kernel, modules, initramfs into the cache
    longhaul_testbed.py check                      # exit 0 if a testbed can be had, 77 if not
    longhaul_testbed.py run --a=CMD --b=CMD [--netem_a=SPEC] [--netem_b=SPEC]

Exit statuses of the tool: 0 ok, 1 a command failed, 77 no testbed here (the reason is
printed), 2 bad arguments.
"""

import argparse
import errno
import gzip
import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

SKIP = 77
PROJECT_ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GUEST_TMPFS = ("/tmp", "/run")  # folders each guest covers with its own tmpfs
GUESTS = ("a", "b")
ADDRESSES = {"a": "198.18.1.1", "b": "198.18.1.2"}
MACS = {"a": "52:54:00:4c:48:01", "b": "52:54:00:4c:48:02"}
# Modules the initramfs loads before mounting the host root (dependency order).
INITRD_MODULES = [
    "kernel/drivers/virtio/virtio_ring.ko",
    "kernel/drivers/virtio/virtio.ko",
    "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
    "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
    "kernel/drivers/virtio/virtio_pci.ko",
    "kernel/net/9p/9pnet.ko",
    "kernel/net/9p/9pnet_virtio.ko",
    "kernel/fs/netfs/netfs.ko",
    "kernel/fs/fscache/fscache.ko",
    "kernel/fs/9p/9p.ko",
    "kernel/fs/overlayfs/overlay.ko",
    "kernel/net/core/failover.ko",
    "kernel/drivers/net/net_failover.ko",
    "kernel/drivers/net/virtio_net.ko",
]
BOOT_DEADLINE_S = 120  # from qemu start to the agent answering (TCG on a busy host)
KVM_PROBE_DEADLINE_S = 25


def _die_with_parent():
    """In the qemu child: SIGKILL when the process that started it dies (even by SIGKILL,
    e.g. a ctest timeout), so no guest outlives its testbed."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _exit_on_sigterm():
    """SIGTERM and SIGHUP unwind (running Testbed.close) instead of ending the process."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


class Unavailable(Exception):
    """No testbed can be had on this machine (qemu, the kernel package, ...)."""


def log(msg):
    print("testbed: " + msg, file=sys.stderr, flush=True)


def default_cache():
    base = os.environ.get("LONGHAUL_TESTBED_CACHE")
    if base:
        return base
    return os.path.join(os.path.expanduser("~"), ".cache", "longhaul-testbed")


def run_quiet(cmd, timeout, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout


# ---- the kernel and the initramfs ----

def kernel_package():
    """The linux-image-X-amd64 package that linux-image-amd64 depends on."""
    if shutil.which("apt-cache") is None:
        raise Unavailable("apt-cache not found (the guest kernel comes from Debian's package)")
    rc, out = run_quiet(["apt-cache", "depends", "linux-image-amd64"], 60)
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split()[-1]
    raise Unavailable("apt-cache knows no linux-image-amd64 (run apt-get update)")


def write_cpio(path, root):
    """A gzip'd newc cpio archive of `root` (no cpio binary needed)."""
    ino = [1]

    def entry(out, name, mode, data=b"", nlink=1):
        hdr = "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X" % (
            ino[0], mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
        ino[0] += 1
        out.write(hdr.encode() + name.encode() + b"\0")
        out.write(b"\0" * ((4 - (110 + len(name) + 1) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))

    with gzip.open(path, "wb", compresslevel=6) as out:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            if rel != ".":
                entry(out, rel, stat.S_IFDIR | 0o755, nlink=2)
            for f in sorted(filenames):
                full = os.path.join(dirpath, f)
                name = os.path.normpath(os.path.join(rel, f))
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):
                    entry(out, name, stat.S_IFLNK | 0o777, os.readlink(full).encode())
                else:
                    with open(full, "rb") as fh:
                        entry(out, name, stat.S_IFREG | (st.st_mode & 0o777), fh.read())
        entry(out, "TRAILER!!!", 0)


INIT = r"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /lower /upper /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /modules.list); do /bin/busybox insmod /modules/$m || echo "init: insmod $m failed"; done
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /lower || echo "init: no hostroot"
/bin/busybox mount -t tmpfs -o size=512m tmpfs /upper
/bin/busybox mkdir -p /upper/u /upper/w
/bin/busybox mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || echo "init: overlay failed"
/bin/busybox mkdir -p /newroot/testbed
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 work /newroot/testbed || echo "init: no work share"
/bin/busybox mount --move /proc /newroot/proc
/bin/busybox mount --move /sys /newroot/sys
/bin/busybox mount --move /dev /newroot/dev
exec /bin/busybox switch_root /newroot /bin/sh /testbed/guest-init.sh
echo "init: switch_root failed"
echo o > /proc/sysrq-trigger
"""

# Runs in the guest after switch_root (the host's /bin/sh, iproute2, rdma-core).
GUEST_INIT = r"""#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
G=$(cat /proc/cmdline | tr ' ' '\n' | sed -n 's/^lh.guest=//p')
KVER=$(uname -r)
# Host folders the guest must see at their own path although it covers /tmp and /run
# with its own tmpfs (a checkout or build under /tmp): held aside, then moved back.
@KEEP_ASIDE@
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
@KEEP_BACK@
mkdir -p /dev/pts /lib/modules && mount -t devpts devpts /dev/pts
# The package's modules, from the cache (the host has none for this kernel).
ln -sfn "@MODULES@" /lib/modules/$KVER
ip link set lo up
ip link set eth0 mtu 9000 up
case "$G" in a) ADDR=@ADDR_a@ ;; *) ADDR=@ADDR_b@ ;; esac
ip addr add $ADDR/24 dev eth0
modprobe rdma_rxe && modprobe sch_netem && modprobe tcp_bbr || echo "guest-init: modprobe failed"
rdma link add rxe0 type rxe netdev eth0 || echo "guest-init: rdma link add failed"
ulimit -l unlimited
hostname "guest-$G"
echo "guest-init: $G ready, $(ip -4 -o addr show dev eth0 | awk '{print $4}')"
python3 /testbed/agent.py /dev/ttyS1
echo "guest-init: agent ended"
echo o > /proc/sysrq-trigger
"""

# The guest's agent: one JSON request per line on the serial port, one JSON reply.
AGENT = r"""
import json, os, subprocess, sys, termios, tty
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
tty.setraw(fd)
attrs = termios.tcgetattr(fd)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(fd, termios.TCSANOW, attrs)
r = os.fdopen(fd, "rb", buffering=0)
w = os.fdopen(os.dup(fd), "wb", buffering=0)
procs = {}
def reply(obj):
    w.write((json.dumps(obj) + "\n").encode())
reply({"ready": True})
buf = b""
while True:
    chunk = r.read(4096)
    if not chunk:
        break
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError:
            continue
        op = req.get("op", "run")
        if op == "run":
            try:
                p = subprocess.run(["/bin/sh", "-c", req["cmd"]], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=req.get("timeout", 60))
                reply({"id": req["id"], "rc": p.returncode, "out": p.stdout.decode(errors="replace")})
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode(errors="replace")
                reply({"id": req["id"], "rc": 124, "out": out + "\n[timed out]"})
        elif op == "spawn":
            out = open(req["log"], "wb")
            p = subprocess.Popen(["/bin/sh", "-c", "exec " + req["cmd"]], stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            procs[p.pid] = p
            reply({"id": req["id"], "pid": p.pid})
        elif op == "wait":
            p = procs.get(req["pid"])
            if p is None:
                reply({"id": req["id"], "rc": -1})
                continue
            try:
                rc = p.wait(timeout=req.get("timeout", 60))
            except subprocess.TimeoutExpired:
                rc = None
            reply({"id": req["id"], "rc": rc})
        elif op == "kill":
            p = procs.get(req["pid"])
            if p is not None and p.poll() is None:
                os.killpg(p.pid, req.get("signal", 9))
            rc = p.wait(timeout=10) if p is not None else -1
            reply({"id": req["id"], "rc": rc})
        elif op == "poweroff":
            reply({"id": req["id"], "rc": 0})
            with open("/proc/sysrq-trigger", "w") as f:
                f.write("o")
"""


def prepare(cache, quiet=False):
    """Kernel, modules (depmod'ed) and initramfs in `cache`; reused when present.
    Returns (kernel_path, initrd_path, modules_dir)."""
    for tool in ("qemu-system-x86_64",):
        if shutil.which(tool) is None:
            raise Unavailable(tool + " not found (Debian: qemu-system-x86; tools/setup.sh)")
    busybox = "/bin/busybox"
    if not os.path.exists(busybox):
        raise Unavailable("a static /bin/busybox is needed (Debian: busybox-static)")
    pkg = kernel_package()
    kver = pkg[len("linux-image-"):]
    root = os.path.join(cache, pkg)
    kernel = os.path.join(root, "boot", "vmlinuz-" + kver)
    moddir = os.path.join(root, "lib", "modules", kver)
    initrd = os.path.join(root, "initrd-testbed.gz")
    os.makedirs(cache, exist_ok=True)
    if not os.path.exists(os.path.join(moddir, "modules.dep")):
        debs = [f for f in os.listdir(cache) if f.startswith(pkg + "_") and f.endswith(".deb")]
        if not debs:
            if not quiet:
                log("downloading " + pkg + " into " + cache)
            rc, out = run_quiet(["apt-get", "download", pkg], 600, cwd=cache)
            debs = [f for f in os.listdir(cache) if f.startswith(pkg + "_") and f.endswith(".deb")]
            if not debs:
                raise Unavailable("apt-get download %s failed: %s" % (pkg, out.strip()[-400:]))
        tmp = root + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        rc, out = run_quiet(["dpkg-deb", "-x", os.path.join(cache, sorted(debs)[-1]), tmp], 600)
        if rc != 0:
            raise Unavailable("dpkg-deb -x failed: " + out.strip()[-400:])
        rc, out = run_quiet(["depmod", "-b", tmp, kver], 300)
        if rc != 0:
            raise Unavailable("depmod failed: " + out.strip()[-400:])
        shutil.rmtree(root, ignore_errors=True)
        os.rename(tmp, root)
    if not os.path.exists(kernel):
        raise Unavailable("the package has no " + kernel)
    if not os.path.exists(initrd):
        d = tempfile.mkdtemp(prefix="initrd-", dir=cache)
        try:
            os.makedirs(os.path.join(d, "bin"))
            shutil.copy(busybox, os.path.join(d, "bin", "busybox"))
            os.makedirs(os.path.join(d, "modules"))
            names = []
            for m in INITRD_MODULES:
                src = os.path.join(moddir, m)
                if not os.path.exists(src):
                    raise Unavailable("the kernel package lacks " + m)
                shutil.copy(src, os.path.join(d, "modules", os.path.basename(m)))
                names.append(os.path.basename(m))
            with open(os.path.join(d, "modules.list"), "w") as f:
                f.write("\n".join(names) + "\n")
            with open(os.path.join(d, "init"), "w") as f:
                f.write(INIT)
            os.chmod(os.path.join(d, "init"), 0o755)
            write_cpio(initrd + ".tmp", d)
            os.rename(initrd + ".tmp", initrd)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return kernel, initrd, moddir


# ---- the guests ----

class Guest:
    def __init__(self, name, proc, ctl_path, console_path):
        self.name = name
        self.proc = proc
        self.ctl_path = ctl_path
        self.console_path = console_path
        self.sock = None
        self.buf = b""
        self.next_id = 1

    def connect(self, deadline):
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("guest %s: qemu exited (%s)" % (self.name, self.proc.returncode))
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.ctl_path)
                self.sock = s
                return
            except OSError:
                s.close()
                time.sleep(0.1)  # qemu creates the socket shortly after starting
        raise TimeoutError("guest %s: no control socket" % self.name)

    def read_reply(self, deadline):
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                # The serial line may carry junk from before the agent took it over.
                start = line.find(b"{")
                if start < 0:
                    continue
                try:
                    return json.loads(line[start:])
                except ValueError:
                    continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("guest %s: no reply from the agent" % self.name)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError("guest %s: no reply from the agent" % self.name)
            if not chunk:
                raise RuntimeError("guest %s: control socket closed" % self.name)
            self.buf += chunk

    def request(self, req, timeout):
        req = dict(req)
        req["id"] = self.next_id
        self.next_id += 1
        self.sock.sendall((json.dumps(req) + "\n").encode())
        deadline = time.monotonic() + timeout
        while True:
            rep = self.read_reply(deadline)
            if rep.get("id") == req["id"]:
                return rep

    def console(self):
        try:
            with open(self.console_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


class Testbed:
    """Two booted guests. Use as a context manager; close() kills qemu by pid."""

    def __init__(self, work_dir, cache=None, accel=None, memory_mb=1536, keep=()):
        """`keep`: host folders (a build, a checkout) the guests run things from. The
        guests see the host's root read-only, but mount their own tmpfs on /tmp and /run;
        a kept folder under either is carried over that mount, so a checkout under /tmp
        works. The checkout holding this file is always kept."""
        self.work_dir = os.path.abspath(work_dir)
        self.keep = _kept_folders([PROJECT_ROOT] + list(keep))
        self.cache = cache or default_cache()
        self.accel = accel or os.environ.get("LONGHAUL_TESTBED_ACCEL", "auto")
        self.memory_mb = memory_mb
        self.guests = {}
        self.boot_s = 0.0

    # -- lifecycle --

    def __enter__(self):
        _exit_on_sigterm()
        try:
            self.boot()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _write_share(self, moddir):
        os.makedirs(self.work_dir, exist_ok=True)
        aside, back = _keep_commands(self.keep)
        gi = GUEST_INIT.replace("@MODULES@", moddir)
        gi = gi.replace("@KEEP_ASIDE@", aside).replace("@KEEP_BACK@", back)
        for g in GUESTS:
            gi = gi.replace("@ADDR_%s@" % g, ADDRESSES[g])
        with open(os.path.join(self.work_dir, "guest-init.sh"), "w") as f:
            f.write(gi)
        with open(os.path.join(self.work_dir, "agent.py"), "w") as f:
            f.write(AGENT)

    def _free_port(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port

    def _start(self, name, kernel, initrd, accel, port):
        ctl = os.path.join(self.work_dir, name + ".ctl")
        con = os.path.join(self.work_dir, name + ".console")
        for p in (ctl, con):
            if os.path.exists(p):
                os.unlink(p)
        net = ("socket,id=n0,listen=127.0.0.1:%d" % port if name == "a"
               else "socket,id=n0,connect=127.0.0.1:%d" % port)
        accel_args = (["-accel", "kvm", "-cpu", "host,-arch-capabilities"] if accel == "kvm"
                      else ["-accel", "tcg", "-cpu", "max"])
        cmd = ["qemu-system-x86_64"] + accel_args + [
            "-m", str(self.memory_mb), "-smp", "1", "-display", "none", "-no-reboot",
            "-monitor", "none", "-nodefaults",
            "-kernel", kernel, "-initrd", initrd,
            "-append", "console=ttyS0 quiet panic=-1 lh.guest=%s" % name,
            "-chardev", "file,id=con,path=" + con, "-serial", "chardev:con",
            "-chardev", "socket,id=ctl,path=%s,server=on,wait=off" % ctl,
            "-serial", "chardev:ctl",
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", "local,path=%s,mount_tag=work,security_model=none" % self.work_dir,
            "-netdev", net,
            "-device", "virtio-net-pci,netdev=n0,mac=%s,host_mtu=9000" % MACS[name],
        ]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(self.work_dir, name + ".qemu.log"), "wb"),
                                start_new_session=True, preexec_fn=_die_with_parent)
        return Guest(name, proc, ctl, con)

    def _boot_pair(self, kernel, initrd, accel, deadline_s):
        port = self._free_port()
        start = time.monotonic()
        deadline = start + deadline_s
        self.guests["a"] = self._start("a", kernel, initrd, accel, port)
        time.sleep(0.3)  # a's listening socket must exist before b connects to it
        self.guests["b"] = self._start("b", kernel, initrd, accel, port)
        for g in self.guests.values():
            g.connect(deadline)
        for g in self.guests.values():
            rep = g.read_reply(deadline)
            if not rep.get("ready"):
                raise RuntimeError("guest %s: unexpected first line %r" % (g.name, rep))
        self.boot_s = time.monotonic() - start

    def _kvm_verdict_path(self):
        return os.path.join(self.cache, "kvm-verdict-" + os.uname().release)

    def boot(self):
        kernel, initrd, moddir = prepare(self.cache)
        self._write_share(moddir)
        accel = self.accel
        if accel == "auto":
            verdict = None
            if os.path.exists(self._kvm_verdict_path()):
                with open(self._kvm_verdict_path()) as f:
                    verdict = f.read().strip()
            if not os.access("/dev/kvm", os.R_OK | os.W_OK):
                accel = "tcg"
            elif verdict in ("kvm", "tcg"):
                accel = verdict
            else:
                # Detect, don't assume: KVM guests hang on some hosts. Try once, remember.
                try:
                    self._boot_pair(kernel, initrd, "kvm", KVM_PROBE_DEADLINE_S)
                    accel = "kvm"
                except (TimeoutError, RuntimeError) as e:
                    log("KVM guests did not boot within %ds (%s): software emulation" % (
                        KVM_PROBE_DEADLINE_S, e))
                    self.close()
                    accel = "tcg"
                with open(self._kvm_verdict_path(), "w") as f:
                    f.write(accel + "\n")
                if accel == "kvm":
                    self.accel = accel
                    return
        self.accel = accel
        try:
            self._boot_pair(kernel, initrd, accel, BOOT_DEADLINE_S)
        except (TimeoutError, RuntimeError) as e:
            msg = str(e)
            for g in self.guests.values():
                msg += "\n--- console of guest %s ---\n%s" % (g.name, g.console()[-3000:])
            raise RuntimeError("guests did not boot: " + msg)

    def close(self):
        for g in self.guests.values():
            if g.proc.poll() is None and g.sock is not None:
                try:
                    g.request({"op": "poweroff"}, 3)
                except (OSError, TimeoutError, RuntimeError):
                    pass
        for g in self.guests.values():
            try:
                g.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(g.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                g.proc.wait(timeout=10)
            if g.sock is not None:
                g.sock.close()
        self.guests = {}

    # -- commands --

    def run(self, guest, cmd, timeout=60):
        """Runs `cmd` with /bin/sh in `guest`; returns (exit status, output). 124: timed out."""
        rep = self.guests[guest].request({"op": "run", "cmd": cmd, "timeout": timeout},
                                         timeout + 15)
        return rep["rc"], rep["out"]

    def spawn(self, guest, cmd, log_path):
        """Starts `cmd` in the background in `guest`, output to `log_path` (a guest path)."""
        return self.guests[guest].request({"op": "spawn", "cmd": cmd, "log": log_path}, 30)["pid"]

    def wait(self, guest, pid, timeout=60):
        """Exit status of a spawned command, or None if it still runs after `timeout`."""
        return self.guests[guest].request({"op": "wait", "pid": pid, "timeout": timeout},
                                          timeout + 15)["rc"]

    def kill(self, guest, pid, sig=9):
        return self.guests[guest].request({"op": "kill", "pid": pid, "signal": sig}, 30)["rc"]

    def require(self, paths):
        """Raises RuntimeError at once, naming them, if any of `paths` (host paths of
        programs and files the caller will run) is missing in a guest."""
        quoted = " ".join(shlex.quote(p) for p in paths)
        for g in GUESTS:
            rc, out = self.run(g, "for p in %s; do [ -e \"$p\" ] || echo \"$p\"; done" % quoted, 30)
            missing = [line for line in out.splitlines() if line.strip()]
            if rc != 0 or missing:
                raise RuntimeError(
                    "guest %s cannot see %s (the guests see the host's root read-only and "
                    "their own /tmp and /run; pass the folder as Testbed(keep=...))"
                    % (g, ", ".join(missing) or "the required files: " + out.strip()))

    def netem(self, guest, spec):
        """Sets the egress netem of `guest`'s eth0 ("delay 29ms loss 1%"); "" removes it."""
        self.run(guest, "tc qdisc del dev eth0 root 2>/dev/null", 20)
        if not spec:
            return
        rc, out = self.run(guest, "tc qdisc add dev eth0 root netem %s" % spec, 20)
        if rc != 0:
            raise RuntimeError("netem %r on guest %s: %s" % (spec, guest, out))


class Keys:
    """Packet-protection flags for longhaul processes in the guests: key pairs for a
    server and a client and a pre-shared key, written by longhaul-keygen into `folder`
    (under the build folder, which the guests see at the same path). mode "ik" gives
    static keys, "psk" the pre-shared key, "insecure" plaintext."""

    def __init__(self, build, folder):
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        keygen = os.path.join(build, "bin", "longhaul-keygen")
        for args in (["--out=" + os.path.join(folder, "server")],
                     ["--out=" + os.path.join(folder, "client")],
                     ["--psk=" + self.psk]):
            subprocess.run([keygen] + args, check=True, capture_output=True, timeout=30)

    @property
    def psk(self):
        return os.path.join(self.folder, "link.psk")

    def flags(self, mode, side):
        """longhaul-perf's flags for `side` ("server" or "client") in `mode`."""
        if mode == "insecure":
            return "--insecure"
        if mode == "psk":
            return "--psk_file=" + self.psk
        peer = "client" if side == "server" else "server"
        return "--key=%s/%s.key --peer_key=%s/%s.pub" % (self.folder, side, self.folder, peer)


def _kept_folders(paths):
    """The folders of `paths` under /tmp or /run (the rest the guests see anyway), real
    paths, without one inside another."""
    real = sorted({os.path.realpath(p) for p in paths})
    covered = [p for p in real if any(p == t or p.startswith(t + "/") for t in GUEST_TMPFS)]
    out = []
    for p in covered:
        if not any(p.startswith(o + "/") for o in out):
            out.append(p)
    return out


def _keep_commands(folders):
    """Guest shell lines that bind `folders` aside before /tmp and /run get their tmpfs,
    and move them back to their own paths after."""
    aside, back = [], []
    for i, f in enumerate(folders):
        hold = "/.lh-keep/%d" % i
        aside.append("mkdir -p %s && mount --bind %s %s || echo \"guest-init: cannot keep %s\""
                     % (hold, shlex.quote(f), hold, f))
        back.append("mkdir -p %s && mount --move %s %s || echo \"guest-init: cannot keep %s\""
                    % (shlex.quote(f), hold, shlex.quote(f), f))
    return "\n".join(aside), "\n".join(back)


def skipped():
    """True, after printing "skipped: <reason>", when no testbed can be had here."""
    why = check_available(default_cache())
    if why:
        print("skipped: " + why)
    return why is not None


def check_available(cache):
    """None when a testbed can be had, else the reason."""
    try:
        prepare(cache, quiet=True)
    except Unavailable as e:
        return str(e)
    return None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["prepare", "check", "run"])
    ap.add_argument("--cache", default=default_cache())
    ap.add_argument("--work_dir", default=None, help="the guests' writable share")
    ap.add_argument("--a", default="true", help="command for guest a (198.18.1.1)")
    ap.add_argument("--b", default="true", help="command for guest b (198.18.1.2)")
    ap.add_argument("--netem_a", default="", help="netem on a's egress (a -> b)")
    ap.add_argument("--netem_b", default="", help="netem on b's egress (b -> a)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per command")
    args = ap.parse_args(argv)
    try:
        if args.command == "prepare":
            k, i, m = prepare(args.cache)
            print("kernel %s\ninitrd %s\nmodules %s" % (k, i, m))
            return 0
        if args.command == "check":
            why = check_available(args.cache)
            if why:
                print("skipped: " + why)
                return SKIP
            print("testbed available")
            return 0
        work = args.work_dir or tempfile.mkdtemp(prefix="testbed-", dir=args.cache)
        with Testbed(work, cache=args.cache) as tb:
            log("booted in %.1f s (%s)" % (tb.boot_s, tb.accel))
            tb.netem("a", args.netem_a)
            tb.netem("b", args.netem_b)
            pa = tb.spawn("a", args.a, "/testbed/a.out")
            rb, ob = tb.run("b", args.b, args.timeout)
            ra = tb.wait("a", pa, args.timeout)
            if ra is None:
                tb.kill("a", pa)
            with open(os.path.join(work, "a.out")) as f:
                oa = f.read()
            print("=== a (rc %s) ===\n%s=== b (rc %s) ===\n%s" % (ra, oa, rb, ob))
            return 0 if ra == 0 and rb == 0 else 1
    except Unavailable as e:
        print("skipped: " + str(e))
        return SKIP


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
