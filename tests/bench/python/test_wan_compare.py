"""wan-compare's pure parts: the workload and the peers from the flags, the one-line
summaries, the ratios and the table."""

import pytest

from longhaul_bench.commands import wan_compare as wc


def parsed(*argv):
    ap = wc.make_parser()
    args = ap.parse_args(list(argv))
    w, link = wc.workload_from_args(ap, args)
    return w, link, wc.peers_from_args(ap, args, w)


def error(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        parsed(*argv)
    assert e.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def test_workload_defaults():
    w, link, peers = parsed("--link=rate=1gbit,rtt=58ms")
    assert (w.workload, w.time, w.omit, w.load, w.messages) == ("bulk", 30, 3, 0.5, 300)
    assert w.message_size == 4 << 20 and w.bytes == 64 << 20
    assert w.longhaul_flags == [] and w.variants == {}
    assert link["rate_bps"] == 1e9
    assert peers == wc.PEERS


def test_omit_only_for_bulk():
    w, _, _ = parsed("--link=rate=1gbit", "--workload=messages", "--omit=5")
    assert w.omit == 0.0


def test_auto_pacing_burst_is_a_quarter_rtt_within_1_to_20_ms():
    assert wc.auto_pacing_burst(0.058) == "--pacing_burst=14.5ms"
    assert wc.auto_pacing_burst(0.001) == "--pacing_burst=1ms"
    assert wc.auto_pacing_burst(0.2) == "--pacing_burst=20ms"
    w, _, _ = parsed("--link=rate=1gbit,rtt=10ms", "--longhaul_flags=auto")
    assert w.longhaul_flags == ["--pacing_burst=2.5ms"]
    w, _, _ = parsed("--link=rate=1gbit", "--longhaul_flags=--window=8MiB --x='a b'")
    assert w.longhaul_flags == ["--window=8MiB", "--x=a b"]


def test_variants_run_right_after_longhaul():
    w, _, peers = parsed("--link=rate=1gbit", "--peers=tcp_bbr,longhaul,udt",
                         "--longhaul_variant=w32:--window=32MiB", "--longhaul_variant=b:")
    assert peers == ["tcp_bbr", "longhaul", "longhaul_w32", "longhaul_b", "udt"]
    assert w.variants == {"longhaul_w32": ["--window=32MiB"], "longhaul_b": []}
    _, _, peers = parsed("--link=rate=1gbit", "--peers=udt", "--longhaul_variant=x:--a")
    assert peers == ["longhaul_x", "udt"]


def test_flag_errors(capsys):
    assert error(capsys, "--link=rtt=10ms").endswith("--link needs a rate (rate=1gbit,...)")
    assert error(capsys, "--link=rate=1gbit", "--load=1.5").endswith("--load must be in (0, 1]")
    assert "--message_size 64B..64MiB" in error(capsys, "--link=rate=1gbit", "--messages=0")
    assert "unknown peer 'quic'" in error(capsys, "--link=rate=1gbit", "--peers=quic")
    assert "give NAME:FLAGS" in error(capsys, "--link=rate=1gbit", "--longhaul_variant=a-b:x")
    assert "is taken by the longhaul_defaults peer" in error(
        capsys, "--link=rate=1gbit", "--longhaul_variant=defaults:--x")


def workload(name):
    w = wc.Workload()
    w.workload = name
    return w


def test_one_line():
    e = {"goodput_bps": 9.5e8, "retransmissions": 3, "load_avg": {"before": [0.5, 0, 0]}}
    assert wc.one_line(e, workload("bulk")) == \
        "goodput 950.0 Mbit/s, retransmissions 3, load 0.5"
    assert wc.one_line({"error": "x"}, workload("bulk")) == "ERROR x"
    assert wc.one_line({"completion_s": 1.5}, workload("transfer")) == \
        "completion 1.500 s, retransmissions None, load ?"


def test_add_ratios_bulk():
    result = {"link_params": {"rate_bps": 1e9}, "results": {
        "longhaul": {"goodput_bps": 9e8}, "longhaul_w32": {"goodput_bps": 6e8},
        "tcp_bbr": {"goodput_bps": 3e8}, "tcp_cubic": {"goodput_bps": 1e8},
        "udt": {"error": "x"}}}
    wc.add_ratios(result, workload("bulk"))
    c = result["comparison"]
    assert c["best_peer"] == "tcp_bbr"
    assert c["longhaul_over_best"] == pytest.approx(3)
    assert c["longhaul_over_tcp_cubic"] == pytest.approx(9)
    assert c["longhaul_over_link"] == pytest.approx(0.9)
    assert c["longhaul_w32_best_peer"] == "tcp_bbr"
    assert not any("udt" in k for k in c)


def test_print_table_transfer(capsys):
    result = {"link": "rate=1gbit", "workload": {"name": "transfer"}, "results": {
        "longhaul": {"completion_s": 1.25, "first_byte_s": 0.06, "retransmissions": 2,
                     "load_avg": {"before": [0.25]}},
        "udt": {"error": "missing"}}, "comparison": {"longhaul_completion_over_x": 0.5}}
    wc.print_table(result, workload("transfer"))
    assert capsys.readouterr().out.splitlines() == [
        'link rate=1gbit, workload {"name": "transfer"}',
        "peer           completion   first byte  retrans     load",
        "longhaul          1.250 s      0.060 s        2     0.25",
        "udt          ERROR: missing",
        "comparison: longhaul_completion_over_x 0.500"]
