"""tools/bench/engine-scaling (longhaul_bench.commands.engine_scaling) without real runs:
the flag lists, the configurations and their rotation, the parsing of the client's JSON
and the server's JSON lines, the medians, speedups and floor, the markdown table, and
the run loop against a stand-in longhaul-perf."""

import argparse
import json
import os
import sys

import pytest

from longhaul_bench import process
from longhaul_bench.commands import engine_scaling as es


def test_lists_are_checked_and_name_the_flag():
    assert es.parse_list("4,1,2,2", "--engines", 1, 64) == [1, 2, 4]
    with pytest.raises(ValueError, match="--engines: 'x' is not a whole number"):
        es.parse_list("1,x", "--engines", 1, 64)
    with pytest.raises(ValueError, match=r"--engines: 65 is outside \[1, 64\]"):
        es.parse_list("65", "--engines", 1, 64)
    assert es.parse_modes("psk,plain") == ["plain", "psk"]
    with pytest.raises(ValueError, match="--modes: unknown 'tls'"):
        es.parse_modes("plain,tls")


def test_configurations_with_and_without_baselines():
    assert es.configurations([1, 2, 4], True) == [(1, 1), (1, 2), (2, 2), (1, 4), (4, 4)]
    assert es.configurations([1, 2, 4], False) == [(1, 1), (2, 2), (4, 4)]
    assert es.configurations([2], True) == [(1, 2), (2, 2)]
    assert es.rotated([1, 2, 3], 1) == [2, 3, 1]
    assert es.rotated([1, 2, 3], 4) == [2, 3, 1]
    assert es.rotated([], 2) == []


def test_bad_flags_exit_2(capsys):
    for argv in (["--engines=0"], ["--rounds=0"], ["--seconds=100"], ["--modes=x"]):
        with pytest.raises(SystemExit) as e:
            es.parse_args(argv)
        assert e.value.code == 2
    assert "--seconds must be in [1, 60]" in capsys.readouterr().err


def engines(*conns, sent=1000):
    return [{"index": i, "connections": c, "bytes_sent": sent, "bytes_received": 10,
             "datagrams_sent": 1, "datagrams_received": 1, "cpu_s": 0.5}
            for i, c in enumerate(conns)]


def client_json(delivered=5_000_000_000, secs=5.0, conns=(1, 1)):
    return {"start": {"longhaul": {"security": {"cipher": "aes-256-gcm"}}},
            "end": {"sum_sent": {"seconds": secs, "bytes": delivered},
                    "sum_received": {"bytes": delivered, "seconds": secs - 0.1},
                    "longhaul": {"engines": engines(*conns),
                                 "retransmission": {"packets_retransmitted": 7}}}}


def test_client_json_and_server_lines():
    r = es.parse_client(client_json())
    assert r["goodput_bps"] == pytest.approx(8e9)
    assert r["client_spread"] == "1+1"
    assert r["cipher"] == "aes-256-gcm"
    assert r["packets_retransmitted"] == 7
    with pytest.raises(KeyError):
        es.parse_client({"end": {}})
    text = ("not json\n" + json.dumps({"event": "listening", "port": 4242}) + "\n{broken\n" +
            json.dumps({"event": "test", "intact": True, "engines": engines(2, 0)}) + "\n")
    assert es.server_event(text, "listening")["port"] == 4242
    assert es.spread(es.server_event(text, "test")["engines"]) == "2+0"
    assert es.server_event(text, "refused") is None
    assert es.spread(None) == ""


def run(mode, e, p, goodput_gbps, client_cpu, server_cpu, rnd=1, error=None):
    delivered = goodput_gbps * 1e9 / 8 * 5
    rec = {"mode": mode, "engines": e, "parallel": p, "round": rnd, "goodput_bps":
           goodput_gbps * 1e9, "delivered_bytes": delivered, "client_cpu_s": client_cpu,
           "server_cpu_s": server_cpu, "server_spread": "1+1" if e == 2 else str(p),
           "load_average": [1.0, 1.0, 1.0]}
    if error:
        rec["error"] = error
    return process.cpu_per_gb(rec)


def test_medians_speedups_and_floor():
    runs = []
    for rnd, scale in ((1, 1.0), (2, 1.2), (3, 0.5)):  # the median is the 1.0 round
        runs.append(run("plain", 1, 1, 10 * scale, 5, 5, rnd))
        runs.append(run("plain", 1, 2, 12 * scale, 6, 6, rnd))
        runs.append(run("plain", 2, 2, 18 * scale, 9.9, 9.9, rnd))  # 1.5x, CPU/byte 1.1x
    runs.append(run("plain", 2, 2, 0.1, 1, 1, 4, error="client exit status 1"))  # not counted
    runs.append(run("psk", 1, 2, 10, 6, 6))
    runs.append(run("psk", 2, 2, 8, 6, 6))  # 0.8x: below the floor
    rows = es.summarize(runs, ["plain", "psk"], es.configurations([1, 2], True))
    by = {(r["mode"], r["engines"], r["parallel"]): r for r in rows}
    assert len(rows) == 5  # psk has no (1, 1)
    r = by[("plain", 2, 2)]
    assert (r["runs"], r["ok_runs"]) == (4, 3)
    assert r["goodput_bps"] == pytest.approx(18e9)
    assert r["speedup_vs_1x1"] == pytest.approx(1.8)
    assert r["speedup_vs_1_same_p"] == pytest.approx(1.5)
    assert r["server_spreads"] == ["1+1"]
    assert by[("psk", 2, 2)]["speedup_vs_1x1"] is None
    assert by[("plain", 1, 1)]["both_s_per_gb"] == pytest.approx(10 / (10e9 / 8 * 5 / 1e9))
    checks = {c["mode"]: c for c in es.floor_checks(rows)}
    assert checks["plain"]["goodput_ratio"] == pytest.approx(1.5)
    assert checks["plain"]["cpu_per_byte_ratio"] == pytest.approx(19.8 / 12 / 1.5)
    assert checks["plain"]["pass"]
    assert not checks["psk"]["pass"]
    lines = es.floor_lines(es.floor_checks(rows))
    assert any("MISSED" in x and x.startswith("floor psk E=2 P=2") for x in lines)

    table = es.table(rows)
    assert table[0].startswith("| mode | engines | -P | goodput Gbit/s |")
    assert table[1].count("---") == table[0].count("|") - 1
    assert len(table) == 2 + len(rows)
    assert "| plain | 2 | 2 | 18.00 | 1.80x | 1.50x |" in table[4]
    assert table[4].endswith("| 1+1 | 3 of 4 |")
    assert "| psk | 2 | 2 | 8.00 | - | 0.80x |" in table[6]


FAKE_PERF = """#!%s
import json, sys
args = sys.argv[1:]
if "--help" in args:
    print("--engines=N")
    sys.exit(0)
e = int([a for a in args if a.startswith("--engines=")][0].split("=")[1])
spread = [{"index": i, "connections": 1, "bytes_sent": 1, "bytes_received": 1,
           "datagrams_sent": 1, "datagrams_received": 1, "cpu_s": 0.1} for i in range(e)]
if "--server" in args:
    print(json.dumps({"event": "listening", "port": 4242}), flush=True)
    print(json.dumps({"event": "test", "intact": True, "engines": spread}), flush=True)
    sys.exit(0)
assert "--port=4242" in args, args
print(json.dumps({"start": {"longhaul": {"security": {"cipher": None}}},
                  "end": {"sum_sent": {"seconds": 1.0}, "sum_received": {"bytes": 10**9},
                          "longhaul": {"engines": spread,
                                       "retransmission": {"packets_retransmitted": 0}}}}))
"""


def test_run_loop_against_a_stand_in(tmp_path, capsys):
    perf = tmp_path / "longhaul-perf"
    perf.write_text(FAKE_PERF % sys.executable)
    perf.chmod(0o755)
    a = argparse.Namespace(seconds=1, perf=str(perf), verify="off", env=None, rounds=2,
                           mode_list=["plain"], key_flags={"plain": ["--insecure"]})
    runs, failed = es.run_all(a, es.configurations([1, 2], True), str(tmp_path))
    assert failed == 0, [r.get("error") for r in runs]
    assert len(runs) == 6
    assert [r["round"] for r in runs] == [1, 1, 1, 2, 2, 2]
    # The second round starts one configuration further.
    assert [(r["engines"], r["parallel"]) for r in runs[3:]] == [(1, 2), (2, 2), (1, 1)]
    r = runs[5]
    assert r["goodput_bps"] == pytest.approx(8e9)
    assert r["server_spread"] == "1"
    assert r["both_s_per_gb"] >= 0
    assert "--engines=2" in runs[4]["client"] and "--parallel=2" in runs[4]["client"]
    assert "--insecure" in runs[4]["server"] and "--port=0" in runs[4]["server"]
    assert "round 2: plain E=1 P=1" in capsys.readouterr().out


def test_missing_binaries_are_named(tmp_path, capsys):
    assert es.main(["--build_dir=%s" % tmp_path]) == 2
    assert "missing: %s" % os.path.join(str(tmp_path), "bin", "longhaul-perf") in \
        capsys.readouterr().err
    assert es.main(["--build_dir=%s" % tmp_path, "--make_bundle=%s" % (tmp_path / "b")]) == 2
