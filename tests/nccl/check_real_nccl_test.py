#!/usr/bin/env python3
"""Tests of tools/nccl/check-real-nccl without a GPU (docs/nccl-runs.md, section 4.2).

usage: check_real_nccl_test.py SCRIPT BUNDLE_DIR

  - it skips (status 77, "skipped: no GPU") when PyTorch is missing, when CUDA has no
    device, and when PyTorch's import hangs (bounded by --probe-timeout); on this
    machine as it is (--probe-only);
  - with a stand-in interpreter (check_real_nccl/fake_python) in place of PyTorch's: a
    clean run prints nccl-tests' columns and NCCL's lines and passes; a wrong element, a
    log naming another network, a channel through P2P, a rank that crashes and one that
    hangs past --timeout each fail it, naming the cause, and the hanging ranks are gone
    afterwards, and --stall-timeout stops ranks that report nothing; --link runs the ranks behind two longhaul-emu relays with the plugin's
    NCCL_LONGHAUL_ADVERTISE and NCCL_LONGHAUL_PORT;
  - --netns --dry-run (root): the namespaces are made, used in the environment and
    removed; --acceptance runs every mode (the namespaces only as root);
  - bad usage is status 2; a bundle without the plugin is status 1;
  - the ranks' own code on a CPU stand-in for PyTorch (check_real_nccl/torch_standin):
    it runs every size and verifies the sums, and a wrong sum fails the run;
  - its parser of NCCL's log on lines in NCCL's format, which the NCCL library installed
    here (if any) holds.
"""

import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FAKES = os.path.join(HERE, "check_real_nccl")
FAKE_PYTHON = os.path.join(FAKES, "fake_python")
SCRIPT = None
BUNDLE = None


def run(args, env_extra=None, timeout=120):
    with tempfile.TemporaryDirectory(prefix="check-real-nccl-test-") as logs:
        return run_in(args + [f"--logs={logs}"], env_extra, timeout)


def run_in(args, env_extra, timeout):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("NCCL_") or k.startswith("FAKE_"):
            del env[k]
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing written into the source tree
    env.update(env_extra or {})
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True,
                       timeout=timeout, env=env)
    r.seconds = time.monotonic() - t0
    r.all = r.stdout + r.stderr
    return r


def load_script():
    loader = importlib.machinery.SourceFileLoader("check_real_nccl", SCRIPT)
    spec = importlib.util.spec_from_loader("check_real_nccl", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


SMALL = ["--min-bytes=1KiB", "--max-bytes=16KiB", f"--python={FAKE_PYTHON}"]


class SkipTest(unittest.TestCase):
    def skips(self, torch_dir, extra=()):
        r = run(["--bundle", BUNDLE, "--probe-timeout=3"] + list(extra),
                {"PYTHONPATH": os.path.join(FAKES, torch_dir)})
        self.assertEqual(r.returncode, 77, r.all)
        self.assertTrue(r.stdout.startswith("skipped: no GPU ("), r.all)
        return r

    def test_pytorch_missing(self):
        r = self.skips("torch_missing")
        self.assertIn("PyTorch is not importable: ImportError: no PyTorch in this test", r.stdout)

    def test_cuda_without_a_device(self):
        r = self.skips("torch_nocuda", ["--link=rate=1gbit,rtt=10ms"])
        self.assertIn("torch.cuda.is_available() is False", r.stdout)

    def test_a_hanging_import_is_bounded(self):
        r = self.skips("torch_hangs")
        self.assertIn("did not answer in 3 s", r.stdout)
        self.assertLess(r.seconds, 60)

    def test_this_machine(self):
        r = run(["--probe-only", "--probe-timeout=60"])
        if r.returncode == 0:
            self.skipTest(f"PyTorch sees a GPU here ({r.stdout.strip()}): run the check itself")
        self.assertEqual(r.returncode, 77, r.all)
        self.assertTrue(r.stdout.startswith("skipped: no GPU ("), r.all)

    def test_the_stand_in_gpu_is_seen(self):
        r = run(["--probe-only", f"--python={FAKE_PYTHON}"])
        self.assertEqual(r.returncode, 0, r.all)
        r = run(["--probe-only", f"--python={FAKE_PYTHON}"], {"FAKE_PROBE": "nogpu"})
        self.assertEqual(r.returncode, 77, r.all)


class RunTest(unittest.TestCase):
    def test_a_clean_run_passes_and_prints_the_table(self):
        r = run(["--bundle", BUNDLE, "--net=both"] + SMALL)
        self.assertEqual(r.returncode, 0, r.all)
        rows = [line for line in r.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s+float", line)]
        self.assertEqual(len(rows), 2 * 5, r.stdout)  # 1, 2, 4, 8, 16 KiB; two transports
        self.assertIn("#        size        count     type  redop   root         time    algbw"
                      "    busbw  #wrong  iters", r.stdout)
        self.assertIn("NCCL INFO Using network longhaul", r.stdout)
        self.assertIn("NCCL INFO NET/Plugin: Loaded net plugin longhaul (v12)", r.stdout)
        self.assertIn("via NET/longhaul/0", r.stdout)
        # Protected by default: a pre-shared key written for the run, said in NCCL's log.
        self.assertRegex(r.stdout, r"NCCL_LONGHAUL_PSK_FILE=\S+/longhaul\.psk")
        self.assertIn("NET/longhaul: packet protection: Noise NNpsk0", r.stdout)
        self.assertIn("NCCL INFO Using network Socket", r.stdout)
        self.assertEqual(r.stdout.count("# Out of bounds values : 0 OK"), 2)
        self.assertEqual(r.stdout.count("# result: OK"), 2)
        self.assertIn(f"NCCL_NET_PLUGIN={BUNDLE}/libnccl-net-longhaul.so", r.stdout)
        self.assertIn("NCCL_HOSTID=lh-check-host-0 (rank 0), lh-check-host-1 (rank 1)", r.stdout)
        self.assertIn("NCCL_P2P_DISABLE=1", r.stdout)
        self.assertIn("NCCL_SHM_DISABLE=1", r.stdout)
        self.assertIn("NCCL_NET=Socket NCCL_NET_PLUGIN=none", r.stdout)

    def test_insecure_is_chosen_explicitly(self):
        r = run(["--bundle", BUNDLE, "--security=insecure"] + SMALL)
        self.assertEqual(r.returncode, 0, r.all)
        self.assertIn("NCCL_LONGHAUL_INSECURE=1", r.stdout)
        self.assertNotIn("NCCL_LONGHAUL_PSK_FILE", r.stdout)
        self.assertIn("packet protection: insecure", r.stdout)

    def fails(self, mode, why, extra=()):
        r = run(["--bundle", BUNDLE] + SMALL + list(extra), {"FAKE_WORKER": mode})
        self.assertEqual(r.returncode, 1, r.all)
        self.assertIn("# result: FAILED", r.stdout)
        self.assertIn(why, r.stdout)
        self.assertIn("check-real-nccl: FAILED: longhaul loopback: ", r.stdout)
        return r

    def test_a_wrong_element_fails(self):
        r = self.fails("wrong", "# Out of bounds values : 1 FAILED")
        self.assertIn("wrong elements: 1", r.stdout)

    def test_another_network_fails(self):
        self.fails("othernet", "NCCL chose the network Socket, not longhaul")

    def test_a_channel_through_p2p_fails(self):
        self.fails("p2p", "a channel goes via P2P/CUMEM, not NET/longhaul")

    def test_a_crashing_rank_fails(self):
        self.fails("crash", "rank 0 exited with status 3")

    def test_hanging_ranks_are_stopped_at_the_timeout(self):
        with tempfile.TemporaryDirectory() as pids:
            t0 = time.monotonic()
            r = run(["--bundle", BUNDLE, "--timeout=10"] + SMALL,
                    {"FAKE_WORKER": "hang", "FAKE_PIDS": pids})
            self.assertEqual(r.returncode, 1, r.all)
            self.assertIn("the ranks did not finish within --timeout (10 s)", r.stdout)
            self.assertLess(time.monotonic() - t0, 60)
            for name in sorted(os.listdir(pids)):
                with open(os.path.join(pids, name)) as f:
                    pid = int(f.read())
                self.assertFalse(os.path.exists(f"/proc/{pid}"), f"{name} (pid {pid}) is alive")
            self.assertEqual(sorted(os.listdir(pids)), ["rank0", "rank1"])

    def test_a_stall_is_stopped_early(self):
        r = run(["--bundle", BUNDLE, "--timeout=600", "--stall-timeout=5"] + SMALL,
                {"FAKE_WORKER": "hang"})
        self.assertEqual(r.returncode, 1, r.all)
        self.assertIn("the ranks made no progress for 5 s (NCCL initialised; the next size did not finish)", r.stdout)
        self.assertLess(r.seconds, 60)

    def test_link_puts_a_relay_in_front_of_each_rank(self):
        r = run(["--bundle", BUNDLE, "--link=rate=1gbit,rtt=10ms", "--net=both"] + SMALL)
        self.assertEqual(r.returncode, 0, r.all)
        m = re.search(r"NCCL_LONGHAUL_ADVERTISE=127\.0\.0\.1:(\d+) \(rank 0\), "
                      r"127\.0\.0\.1:(\d+) \(rank 1\)", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertNotEqual(m.group(1), m.group(2))
        self.assertIn("NCCL_LONGHAUL_PORT=", r.stdout)
        self.assertIn("NCCL_LONGHAUL_RATE=1gbit", r.stdout)
        self.assertIn("NCCL_LONGHAUL_INITIAL_RTT=10ms", r.stdout)
        self.assertIn("longhaul-emu: relaying 127.0.0.1:", r.stdout)
        self.assertIn("Socket, relay: not run (NCCL's socket transport cannot be pointed", r.stdout)


class WorkerTest(unittest.TestCase):
    """The ranks' own code (check-real-nccl --worker) on a CPU stand-in for PyTorch."""

    ENV = {"PYTHONPATH": os.path.join(FAKES, "torch_standin")}
    ARGS = ["--net=both", "--max-bytes=16KiB", f"--python={sys.executable}"]

    def test_the_ranks_run_and_verify(self):
        r = run(["--bundle", BUNDLE] + self.ARGS, self.ENV)
        self.assertEqual(r.returncode, 0, r.all)
        self.assertEqual(r.stdout.count("# Out of bounds values : 0 OK"), 2, r.stdout)
        self.assertIn("# rank 0: Stand-in GPU, torch 0.0-standin", r.stdout)
        rows = [line for line in r.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s+float", line)]
        self.assertEqual(len(rows), 10)

    def test_the_ranks_notice_a_wrong_sum(self):
        r = run(["--bundle", BUNDLE] + self.ARGS, {**self.ENV, "STANDIN_CORRUPT": "1"})
        self.assertEqual(r.returncode, 1, r.all)
        self.assertIn("# problem: wrong elements: ", r.stdout)


class NetnsTest(unittest.TestCase):
    @unittest.skipUnless(os.geteuid() == 0 and os.path.exists("/dev/net/tun"),
                         "needs root and /dev/net/tun")
    def test_netns_dry_run_makes_and_removes_the_namespaces(self):
        r = run(["--bundle", BUNDLE, "--dry-run", "--netns", "--link=rate=1gbit,rtt=10ms",
                 "--net=both"])
        self.assertEqual(r.returncode, 0, r.all)
        self.assertEqual(r.stdout.count("NCCL_SOCKET_IFNAME=lhchk0"), 2, r.stdout)
        self.assertIn("NCCL_LONGHAUL_IFNAME=lhchk0", r.stdout)
        self.assertEqual(r.stdout.count("namespaces deleted: lh-check-a, lh-check-b"), 2)
        self.assertFalse(os.path.exists("/run/netns/lh-check-a"))


class AcceptanceTest(unittest.TestCase):
    def test_every_run_of_the_acceptance(self):
        r = run(["--bundle", BUNDLE, "--acceptance"] + SMALL, timeout=240)
        self.assertEqual(r.returncode, 0, r.all)
        summary = r.stdout[r.stdout.index("# summary"):]
        for line in ("longhaul loopback OK: busbw", "Socket   loopback OK: busbw",
                     "longhaul relay    OK: busbw"):
            self.assertIn(line, summary)
        self.assertIn("% of the link", summary)
        self.assertIn("NCCL_LONGHAUL_RATE=1gbit NCCL_LONGHAUL_RECV_WINDOW=21MiB", r.stdout)
        if os.geteuid() == 0 and os.path.exists("/dev/net/tun"):
            self.assertIn("longhaul netns    OK: busbw", summary)
            self.assertIn("Socket   netns    OK: busbw", summary)
        else:
            self.assertIn("longhaul netns    not run: network namespaces need root", summary)


class UsageTest(unittest.TestCase):
    def test_bad_usage_is_status_2(self):
        for bad in (["--min-bytes=1MiB", "--max-bytes=1KiB"], ["--min-bytes=lots"],
                    ["--netns"], ["--net=ib"], ["--step-factor=1"],
                    ["--acceptance", "--net=both"]):
            r = run(bad)
            self.assertEqual(r.returncode, 2, f"{bad}: {r.all}")

    def test_a_bundle_without_the_plugin(self):
        with tempfile.TemporaryDirectory() as empty:
            r = run(["--bundle", empty] + SMALL)
            self.assertEqual(r.returncode, 1, r.all)
            self.assertIn(f"libnccl-net-longhaul.so is not in {empty}", r.stdout)


class LogParserTest(unittest.TestCase):
    LOG = """\
gpu1:4242:4242 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
gpu1:4242:4242 [0] NCCL INFO NCCL_HOSTID set by environment to lh-check-host-0
gpu1:4242:4250 [0] NCCL INFO NET/Plugin: Loaded net plugin longhaul (v11)
gpu1:4242:4250 [0] NCCL INFO NET/longhaul: using lo (127.0.0.1); rate 40gbit, cc bbr
gpu1:4242:4250 [0] NCCL INFO NET/longhaul: packet protection: Noise NNpsk0 (pre-shared key)
gpu1:4242:4250 [0] NCCL INFO Using network longhaul
gpu1:4242:4260 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/longhaul/0
gpu1:4242:4260 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/longhaul/0
gpu1:4242:4260 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/longhaul/0/Shared
"""

    def test_a_longhaul_log(self):
        module = load_script()
        findings, problems = module.check_nccl_log(self.LOG, "longhaul")
        self.assertEqual(problems, [])
        self.assertEqual(findings["found"]["version"], [("2.28.9+cuda13.0",)])
        self.assertEqual(findings["found"]["plugin"], [("longhaul", "v11")])
        self.assertEqual(len(findings["found"]["channel"]), 3)
        _, problems = module.check_nccl_log(self.LOG, "Socket")
        self.assertIn("NCCL chose the network longhaul, not Socket", problems)
        _, problems = module.check_nccl_log("", "longhaul")
        self.assertEqual(len(problems), 3, problems)
        self.assertIn("no 'Using network' line", problems)
        # The plugin loaded but said nothing of its packet protection.
        unsaid = "\n".join(l for l in self.LOG.splitlines() if "packet protection" not in l)
        _, problems = module.check_nccl_log(unsaid, "longhaul")
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("no 'NET/longhaul: packet protection' line", problems[0])

    def test_the_lines_are_those_of_the_nccl_installed_here(self):
        # The NCCL library of this machine (CUDA 13's, if any) holds the format strings of
        # the lines the check looks for (the GPU machine's PyTorch brings its own NCCL).
        import glob
        libs = sorted(glob.glob("/usr/local/cuda*/lib*/libnccl.so.2") +
                      glob.glob("/usr/lib/x86_64-linux-gnu/libnccl.so.2"))
        if not libs:
            self.skipTest("no libnccl.so.2 here")
        with open(libs[0], "rb") as f:
            data = f.read()
        for fmt in (b"Using network %s", b"NET/Plugin: Loaded net plugin %s (v",
                    b"Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d",
                    b"Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d",
                    b"NCCL version"):
            self.assertIn(fmt, data, f"{libs[0]} has no {fmt!r}")
        self.assertIn(b"ncclNetPlugin_v11", data, "the newest table this NCCL loads")

    def test_sizes_and_rates(self):
        module = load_script()
        self.assertEqual(module.parse_size("256MiB"), 256 << 20)
        self.assertEqual(module.parse_size("4k"), 4096)
        self.assertEqual(module.format_rate(1e9), "1gbit")
        self.assertEqual(module.format_rate(2.5e9), "2500mbit")
        self.assertEqual(module.format_duration_ns(58_000_000), "58ms")
        env = module.link_env({"rate_bps": 1e9, "rtt_ns": 58_000_000, "mtu": 9000})
        self.assertEqual(env["NCCL_LONGHAUL_WINDOW"], "11MiB")     # 1.5 BDP, 7.25 MB BDP
        self.assertEqual(env["NCCL_LONGHAUL_RECV_WINDOW"], "21MiB")
        self.assertEqual(env["NCCL_LONGHAUL_CREDIT"], "18MiB")     # 2 BDP + 8 NCCL steps


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    BUNDLE = os.path.abspath(sys.argv.pop(2))
    SCRIPT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
