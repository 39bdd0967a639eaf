"""bridge-compare's pure parts: the flag checks, the grid of runs, the kcptun settings, the
metrics page, the HTTP projection and the report (ratios, cells, table)."""

import argparse
import types

import pytest

from longhaul_bench.commands import bridge_compare as bc
from longhaul_bench.commands import bridge_report as report
from longhaul_bench.commands import bridge_workloads as wl


def checked(*argv):
    """The flags as parsed and checked, and the context check_args fills."""
    args = bc.make_parser().parse_args(list(argv))
    ctx = bc.Ctx()
    bc.check_args(args, ctx)
    return args, ctx


def problem(*argv):
    with pytest.raises(ValueError) as e:
        checked(*argv)
    return str(e.value)


def test_defaults_check_and_give_the_grid():
    args, ctx = checked()
    assert ctx.losses == ["0", "1e-3", "1e-2"]
    assert ctx.peers == bc.PEERS and ctx.workloads == wl.WORKLOADS
    assert (ctx.time, ctx.omit, ctx.http_limit) == (30, 3, 120)
    assert ctx.http_bytes == 2 << 30
    assert args.kcptun_fec == (10, 3)
    assert ctx.base["rate_bps"] == 1e9


def test_flag_problems_say_which_flag():
    assert problem("--link=rtt=10ms") == "--link needs a rate (rate=1gbit,...)"
    assert problem("--losses= ,") == "--losses is empty"
    assert problem("--losses=0,0") == "--losses repeats a value"
    assert problem("--time=0").startswith("--time must be in (0, 3600] s")
    assert problem("--http_limit=7201").startswith("--http_bytes must be positive")
    assert problem("--latency_rounds=0") == "--latency_rounds must be 1..100000"
    assert problem("--latency_response=7").startswith("--latency_request/")
    assert problem("--streams=129") == "--streams must be 2..128 (iperf3 -P)"
    assert problem("--kcptun_fec=10,0").startswith("--kcptun_fec: FEC stays on")
    assert problem("--kcptun_window=-1") == "--kcptun_window must be >= 0"
    assert problem("--peers=bridge,quic") == \
        "--peers: unknown peer 'quic' (bridge,kcptun,tcp_bbr,tcp_cubic)"
    assert problem("--workloads=iperf,ftp").startswith("--workloads: unknown workload 'ftp'")
    assert problem("--peers=bridge,bridge") == \
        "--peers and --workloads must be non-empty, without repeats"
    assert problem("--workloads=,") == \
        "--peers and --workloads must be non-empty, without repeats"
    assert problem("--bridge_profile=/nonexistent/x.profile") == \
        "--bridge_profile=/nonexistent/x.profile does not exist"


def test_parse_losses_strips_and_keeps_the_text():
    assert bc.parse_losses(" 0, 1e-3 ,,") == ["0", "1e-3"]
    with pytest.raises(ValueError):
        bc.parse_losses("lots")


def test_keep_settings_bounds_the_echo_test():
    args, ctx = checked("--latency_rounds=1000", "--bridge_flags=--window=8MiB --x='a b'")
    bc.keep_settings(args, ctx)
    assert ctx.bridge_extra == ["--window=8MiB", "--x=a b"]
    assert ctx.latency_bound == pytest.approx(1000 * (10 * 0.058 + 0.01) + 10)
    assert bc.latency_bound_s(1, 0.001) == 30.0
    assert ctx.specs == {"0": "rate=1gbit,rtt=58ms,loss=0",
                         "1e-3": "rate=1gbit,rtt=58ms,loss=1e-3",
                         "1e-2": "rate=1gbit,rtt=58ms,loss=1e-2"}


def test_plan_cells_runs_workloads_innermost():
    assert bc.plan_cells(["0", "1e-2"], ["bridge", "tcp_bbr"], ["iperf", "http"]) == [
        ("0", "bridge", "iperf"), ("0", "bridge", "http"), ("0", "tcp_bbr", "iperf"),
        ("0", "tcp_bbr", "http"), ("1e-2", "bridge", "iperf"), ("1e-2", "bridge", "http"),
        ("1e-2", "tcp_bbr", "iperf"), ("1e-2", "tcp_bbr", "http")]


def test_namespace_ccs():
    assert bc.namespace_ccs(["tcp_bbr"]) == ["bbr"]
    assert bc.namespace_ccs(["kcptun", "tcp_bbr"]) == ["bbr", "cubic"]
    assert bc.namespace_ccs(["bridge"]) == ["cubic"]
    assert bc.tcp_settings("tcp_cubic")["congestion_control"] == "cubic"


def test_kcptun_settings_window_is_twice_the_bdp():
    args = argparse.Namespace(kcptun_window=0, kcptun_fec=(10, 3), kcptun_mode="normal")
    s = bc.kcptun_settings(args, {"rate_bps": 1e9, "rtt_s": 0.058})
    bdp = 1e9 * 0.058 / 8
    assert s["bdp_bytes"] == int(bdp)
    assert s["window_packets"] * bc.KCP_MSS >= 2 * bdp
    assert (s["window_packets"] - 1) * bc.KCP_MSS < 2 * bdp
    assert "--datashard=10" in s["flags"] and "--parityshard=3" in s["flags"]
    assert "--mtu=1500" in s["flags"] and "--mode=normal" in s["flags"]
    args.kcptun_window = 512
    assert bc.kcptun_settings(args, {"rate_bps": 1e9, "rtt_s": 0.058})["window_packets"] == 512


def test_parse_metrics():
    text = ("# HELP x\n# TYPE x counter\nlonghaul_bytes_sent 1234\n"
            'longhaul_streams{state="open"} 3\nbroken line\n\nlonghaul_rtt_seconds 0.058\n')
    assert bc.parse_metrics(text) == {"longhaul_bytes_sent": 1234.0,
                                      'longhaul_streams{state="open"}': 3.0,
                                      "longhaul_rtt_seconds": 0.058}
    assert len(bc.parse_metrics("".join("m%d 1\n" % i for i in range(600)))) == 500


def test_curl_write_out_takes_the_last_line():
    lines = ["curl: (28) timeout\n", "CURLW 200 10 0.1 0.2 9.5\n", "CURLW 200 99 0.1 0.3 12\n"]
    assert wl.curl_write_out(lines) == {"http_code": 200, "curl_time_connect_s": 0.1,
                                        "curl_time_starttransfer_s": 0.3,
                                        "curl_time_total_s": 12.0}
    assert wl.curl_write_out(["CURLW 200 1\n"]) == {}
    assert wl.curl_write_out([]) == {}


def test_http_projection_uses_the_second_half():
    # 100 bytes by 5 s, 600 by 10 s: 100 bytes/s over the second half.
    samples = [(0.0, 0), (2.5, 50), (5.0, 100), (7.5, 350), (10.0, 600)]
    late, done = wl.http_projection(samples, 600, 10.0, 1600)
    assert late == pytest.approx(100)
    assert done == pytest.approx(20.0)
    assert wl.http_projection([(0.0, 0), (10.0, 0)], 0, 10.0, 100) == (0.0, None)


def test_expected_s():
    ctx = types.SimpleNamespace(time=30, omit=3, http_limit=120, latency_bound=40)
    assert wl.expected_s(ctx, "streams") == 63
    assert wl.expected_s(ctx, "http") == 150
    assert wl.expected_s(ctx, "latency") == 123


def goodput(bps, **kw):
    return dict(goodput_bps=bps, goodput_pct=bps / 1e7, **kw)


def latency(p50, p99, lp50, lp99):
    return {"alone": {"rtt_ms": {"p50": p50, "p99": p99}},
            "loaded": {"rtt_ms": {"p50": lp50, "p99": lp99}}}


def small_result():
    cells = {"0": {
        "bridge": {"iperf": goodput(9e8), "http": {"completed": True, "completion_s": 20.0,
                                                   "goodput_bps": 8e8},
                   "latency": latency(58.5, 60.0, 70.0, 80.0)},
        "tcp_cubic": {"iperf": goodput(3e8), "http": {"completed": False,
                                                      "projected_completion_s": 400.0,
                                                      "goodput_bps": 1e8, "projected": True},
                      "latency": latency(58.4, 59.0, 150.0, 160.0)},
        "kcptun": {"iperf": {"error": "kcptun-client exited"}, "http": {"error": "x"},
                   "latency": {"error": "x"}}}}
    return {"workloads": ["iperf", "http", "latency"], "losses": ["0"],
            "peers": ["bridge", "kcptun", "tcp_cubic"], "cells": cells,
            "link_params": {"rate_bps": 1e9, "keys": {"rate": "1gbit", "rtt": "58ms",
                                                      "loss": "0"}},
            "settings": {"streams": 100, "http_bytes_text": "2GiB", "time_s": 20.0,
                         "omit_s": 3.0, "http_limit_s": 120.0, "latency_rounds": 200,
                         "latency_request": 100, "latency_response": 100},
            "failures": ["loss 0, kcptun, iperf: kcptun-client exited"]}


def test_add_ratios_skips_failed_peers_and_marks_projections():
    r = small_result()
    report.add_ratios(r)
    assert r["ratios"]["0"] == pytest.approx({
        "iperf_bridge_over_tcp_cubic": 3.0,
        "http_time_bridge_over_tcp_cubic": 0.05,
        "http_time_bridge_over_tcp_cubic_projected": True,
        "latency_alone_p99_bridge_over_tcp_cubic": 60.0 / 59.0,
        "latency_loaded_p99_bridge_over_tcp_cubic": 0.5})


def test_http_time():
    assert report.http_time(None) == (None, None)
    assert report.http_time({"error": "x"}) == (None, None)
    assert report.http_time({"completed": True, "completion_s": 3.0}) == (3.0, False)
    assert report.http_time({"projected_completion_s": 9.0}) == (9.0, True)


def test_cell_text():
    assert report.cell_text(None, "iperf") == "-"
    assert report.cell_text({"error": "x"}, "http") == "FAILED"
    assert report.cell_text(goodput(9e8), "iperf") == "900.0 (90%)"
    assert report.cell_text(goodput(9e8, jain=0.9876), "streams") == "900.0 (90%) J=0.988"
    assert report.cell_text({"completed": True, "completion_s": 20.04, "goodput_bps": 8e8},
                            "http") == "20.0 s (800 Mb/s)"
    assert report.cell_text({"projected_completion_s": 400.2, "goodput_bps": 1e8},
                            "http") == "PROJ 400 s (100.0 Mb/s)"
    assert report.cell_text({"projected_completion_s": None, "goodput_bps": 0},
                            "http") == "PROJ never (0.0 Mb/s)"
    assert report.cell_text(latency(1, 2, 3, 4.25), "latency") == "1.0/2.0 | 3.0/4.2"


def test_ratio_text():
    assert report.ratio_text({}) == "n/a (the bridge or every other peer failed or did not run)"
    assert report.ratio_text({"a": 1.5, "b": 0.25, "b_projected": True,
                              "c": 2.0, "c_projected": False}) == "a 1.500, b 0.250*, c 2.000"


def test_emulator_text():
    emu = {"forward": {"delivered": 10, "dropped_loss": 1, "dropped_queue": 0},
           "reverse": {"delivered": 5}, "own_drops": 0, "cpu_fraction": 0.1}
    assert report.emulator_text(emu) == (
        "emulator: fwd 10 pkts delivered, 1 lost, 0 queue drops; rev 5 delivered, None "
        "lost, None queue drops; own drops 0; cpu 0.1")


def test_print_table(capsys):
    r = small_result()
    report.add_ratios(r)
    report.print_table(r)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("bridge-compare: link rate=1gbit,rtt=58ms with loss 0; iperf 20 s after "
                      "3 s omitted; http 2GiB (limit 120 s); latency 200 rounds of 100 B / "
                      "100 B")
    assert out[1].split() == ["loss", "peer", "iperf", "Mbit/s", "(%link)", "http", "2GiB",
                              "rtt", "ms", "p50/p99", "alone", "|", "loaded", "load"]
    assert out[2].split() == ["0", "bridge", "900.0", "(90%)", "20.0", "s", "(800", "Mb/s)",
                              "58.5/60.0", "|", "70.0/80.0", "-"]
    assert out[3].split() == ["0", "kcptun", "FAILED", "FAILED", "FAILED", "-"]
    assert "  loss 0: iperf_bridge_over_tcp_cubic 3.000, http_time_bridge_over_tcp_cubic " \
        "0.050*, latency_alone_p99_bridge_over_tcp_cubic 1.017, " \
        "latency_loaded_p99_bridge_over_tcp_cubic 0.500" in out
    assert "  loss 0, kcptun, iperf: kcptun-client exited" in out
    assert "- loss 0, kcptun, iperf: ERROR kcptun-client exited" in out
    assert "- loss 0, bridge, iperf: ok" in out
