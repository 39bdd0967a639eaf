"""longhaul_bench.procfs, against a /proc tree written for the test (and the real one for
the calling process)."""

import os

import pytest

from longhaul_bench import procfs

STAT = ("1234 (a name) with) S 1 1234 1234 0 -1 4194304 100 0 0 0 "
        "250 150 0 0 20 0 4 0 12345 1000000 500 18446744073709551615\n")


@pytest.fixture
def proc(tmp_path):
    p = tmp_path / "1234"
    p.mkdir()
    (p / "status").write_text("Name:\tfake\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
    (p / "stat").write_text(STAT)
    (p / "comm").write_text("ksoftirqd/0\n")
    (p / "net").mkdir()
    (p / "net" / "dev").write_text(
        "Inter-|   Receive                            |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes packets errs drop\n"
        "    lo: 10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0\n"
        "  veth0: 1000 10 0 3 0 0 0 0 2000 20 0 4 0 0 0 0\n")
    (p / "net" / "snmp").write_text(
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\n"
        "Udp: 5 6 7 8 9\n")
    q = tmp_path / "99"
    q.mkdir()
    (q / "comm").write_text("bash\n")
    (q / "stat").write_text("99 (bash) S 1 99 99 0 -1 0 0 0 0 0 10 10 0 0 20 0 1 0 1 1 1 1\n")
    (tmp_path / "self").mkdir()
    (tmp_path / "stat").write_text("cpu  100 5 50 800 45 0 0 0 0 0\ncpu0 1 1 1 1 1\n")
    (tmp_path / "loadavg").write_text("0.52 1.10 2.00 1/123 4567\n")
    (tmp_path / "cpuinfo").write_text("model name\t: Fake CPU\nflags\t\t: fpu aes avx512f\n"
                                      "model name\t: Other\n")
    return str(tmp_path)


def test_status_fields(proc):
    assert procfs.rss_kib(1234, proc=proc) == 1024
    assert procfs.status_kib(1234, "VmHWM", proc=proc) == 2048
    assert procfs.status_kib(1234, "VmSwap", proc=proc) is None


def test_gone_process_reads_none(proc):
    assert procfs.rss_kib(4321, proc=proc) is None
    assert procfs.proc_cpu_s(4321, proc=proc) is None


def test_cpu_seconds_after_a_name_with_parentheses(proc):
    assert procfs.proc_cpu_s(1234, proc=proc) == pytest.approx(400 / procfs.CLK_TCK)
    assert procfs.threads_cpu_s([1234, 99, 4321], proc=proc) == pytest.approx(
        420 / procfs.CLK_TCK)


def test_machine(proc):
    assert procfs.cpu_times(proc=proc) == (1000, 845)
    assert procfs.loadavg(proc=proc) == [0.52, 1.10, 2.00]
    info = procfs.cpu_info(proc=proc)
    assert info["model"] == "Fake CPU"
    assert info["flags"] == {"aes": True, "vaes": False, "avx512f": True}


def test_pids_named(proc):
    assert procfs.pids_named("ksoftirqd/", proc=proc) == [1234]


def test_network_counters(proc):
    assert procfs.netdev(1234, "veth0", proc=proc) == {
        "rx_bytes": 1000, "rx_packets": 10, "rx_drop": 3,
        "tx_bytes": 2000, "tx_packets": 20, "tx_drop": 4}
    with pytest.raises(RuntimeError, match="no device eth9"):
        procfs.netdev(1234, "eth9", proc=proc)
    assert procfs.udp_snmp(1234, proc=proc)["RcvbufErrors"] == 9


def test_this_process_on_the_real_proc():
    assert procfs.rss_kib(os.getpid()) > 0
    assert procfs.proc_cpu_s(os.getpid()) >= 0
    total, idle = procfs.cpu_times()
    assert 0 <= idle <= total
