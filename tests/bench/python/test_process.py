"""longhaul_bench.process: the bounded processes of the loopback benchmarks (deadline,
SIGTERM then SIGKILL to the group, CPU from wait4 of the process itself), the run-record
steps, and cpu-per-byte's run of one tool against a stand-in longhaul-perf."""

import json
import os
import signal
import sys
import time

import pytest

from longhaul_bench import process
from longhaul_bench.commands import cpu_per_byte as cpb


def py(code):
    return [sys.executable, "-c", code]


def test_cpu_is_the_process_own_from_wait4(tmp_path):
    # The child burns at least 0.05 s of its own CPU, says so, and exits 3.
    code = ("import time\nwhile time.process_time() < 0.05: pass\n"
            "print('burned', flush=True)\nraise SystemExit(3)")
    p = process.Proc(py(code), 30, str(tmp_path / "o"), str(tmp_path / "e"))
    assert p.wait(30)
    assert p.status == 3
    assert p.output() == "burned\n"
    assert sum(p.cpu) >= 0.05


def test_env_is_passed(tmp_path):
    p = process.Proc(py("import os; print(os.environ['LH_TEST_X'])"), 30, str(tmp_path / "o"),
                     str(tmp_path / "e"), env=dict(os.environ, LH_TEST_X="bundle"))
    assert p.wait(30) and p.status == 0
    assert p.output() == "bundle\n"


def test_deadline_sends_sigterm_to_the_group(tmp_path):
    p = process.Proc(["sleep", "60"], 0.1, str(tmp_path / "o"), str(tmp_path / "e"))
    assert p.wait(30)
    assert p.status == -signal.SIGTERM


def test_sigkill_follows_when_sigterm_is_ignored(tmp_path):
    code = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\nend = time.monotonic() + 60\n"
            "while time.monotonic() < end: time.sleep(0.01)")
    p = process.Proc(py(code), 60, str(tmp_path / "o"), str(tmp_path / "e"))
    for _ in range(600):  # bounded: until it ignores SIGTERM
        if p.output() == "ready\n":
            break
        assert not p.wait(0.05)
    p.deadline = time.monotonic()  # its deadline now, SIGKILL 0.3 s after
    p.kill_at = p.deadline + 0.3
    assert p.wait(30)
    assert p.termed
    assert p.status == -signal.SIGKILL


def test_stop_and_release_end_the_group(tmp_path):
    # The child starts a grandchild in its group; stopping the group ends both.
    code = ("import subprocess, time\np = subprocess.Popen(['sleep', '60'])\n"
            "print(p.pid, flush=True)\ntime.sleep(60)")
    p = process.start(py(code), 60, str(tmp_path), "grp")
    assert p in process.LIVE
    end_wait = 300
    while not p.output().strip() and end_wait:
        assert not p.wait(0.05)
        end_wait -= 1
    grandchild = int(p.output())
    process.release(p)
    assert p not in process.LIVE and p.status == -signal.SIGTERM
    for _ in range(500):  # the grandchild, reparented, goes within a bounded wait
        try:
            with open("/proc/%d/stat" % grandchild) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        p.wait(0.01)
    else:
        pytest.fail("the grandchild %d outlived its group's stop" % grandchild)


class FakeProc:
    def __init__(self, cpu, text=""):
        self.cpu, self.text = cpu, text

    def output(self):
        return self.text


def test_record_steps():
    rec = {}
    assert not process.parse_client_output(rec, FakeProc(None, "oops"), json.loads)
    assert rec["error"].startswith("no usable JSON from the client (JSONDecodeError): oops")
    rec = {}
    assert process.parse_client_output(rec, FakeProc(None, '{"delivered_bytes": 2e9}'),
                                       lambda j: j)
    process.account_cpu(rec, (("sender", FakeProc((1.0, 3.0))),
                              ("receiver", FakeProc((0.5, 1.5)))))
    assert list(rec)[1:] == ["sender_cpu_s", "receiver_cpu_s", "sender_user_s",
                             "sender_system_s", "receiver_user_s", "receiver_system_s",
                             "sender_s_per_gb", "receiver_s_per_gb", "both_s_per_gb"]
    assert (rec["sender_s_per_gb"], rec["receiver_s_per_gb"], rec["both_s_per_gb"]) == \
        (2.0, 1.0, 3.0)
    rec = process.account_cpu({"delivered_bytes": 0}, (("client", FakeProc((1, 1))),
                                                        ("server", FakeProc((1, 1)))))
    assert rec["error"] == "nothing delivered"
    rec = process.account_cpu({"delivered_bytes": 1}, (("client", FakeProc(None)),
                                                        ("server", FakeProc((1, 1)))))
    assert rec["error"] == "CPU times unavailable" and "client_cpu_s" not in rec
    assert process.fmt(None, "%.2f") == "-" and process.fmt(1.5, "%.2f") == "1.50"


FAKE_PERF = """#!%s
import json, sys
args = sys.argv[1:]
if "--server" in args:
    print("listening", json.dumps("listening"), flush=True)
    sys.exit(0)
print(json.dumps({"start": {"longhaul": {"security": {"cipher": None}}},
                  "end": {"sum_sent": {"seconds": 1.0},
                          "sum_received": {"bytes": 10**9, "bits_per_second": 7e9},
                          "longhaul": {"loss": {"packets_lost": 1, "loss_rate": 0.001},
                                       "retransmission": {"packets_retransmitted": 2},
                                       "integrity": {}}}}))
"""


def test_cpu_per_byte_run_against_a_stand_in(tmp_path):
    perf = tmp_path / "longhaul-perf"
    perf.write_text(FAKE_PERF % sys.executable)
    perf.chmod(0o755)
    rec = cpb.run_one("lh-plain", 5, 1, str(perf), "unused", str(tmp_path), 1)
    assert "error" not in rec, rec
    assert rec["goodput_bps"] == pytest.approx(8e9)
    assert rec["loss_text"] == "0.100% (2 retx)"
    assert rec["client_status"] == 0 and rec["server_status"] == 0
    assert rec["sender_cpu_s"] > 0 and rec["receiver_cpu_s"] > 0
    assert rec["both_s_per_gb"] == pytest.approx(rec["sender_cpu_s"] + rec["receiver_cpu_s"])
    assert "--rate=5gbit" in rec["client"] and "--insecure" in rec["server"]
    assert process.LIVE == []
    assert cpb.run_line(rec).startswith(
        "5 Gbit/s   lh-plain      8.00 Gbit/s  loss 0.100% (2 retx)")
