"""longhaul_bench.cli: the shared flags, log() and the tree's paths."""

import os

import pytest

from longhaul_bench import cli


def make(default="build"):
    ap = cli.parser("first line of the doc\n\nmore text\n")
    cli.add_build_dir(ap, default=default)
    return ap


def test_parser_description_is_the_first_line():
    assert make().description == "first line of the doc"


def test_build_dir_and_its_old_spelling():
    assert make().parse_args([]).build_dir == "build"
    assert make().parse_args(["--build_dir=b1"]).build_dir == "b1"
    assert make().parse_args(["--build=b2"]).build_dir == "b2"
    assert make().parse_args(["--build", "b3"]).build_dir == "b3"


def test_default_build_dir_is_the_trees():
    ap = cli.parser("x")
    cli.add_build_dir(ap)
    assert ap.parse_args([]).build_dir == os.path.join(cli.ROOT, "build")


def test_unknown_flag_exits_2():
    with pytest.raises(SystemExit) as e:
        make().parse_args(["--buld=x"])
    assert e.value.code == 2


def test_paths():
    assert os.path.isfile(os.path.join(cli.BENCH_DIR, "wan-compare"))
    assert os.path.isfile(os.path.join(cli.ROOT, "docs", "layers.txt"))
    assert cli.PACKAGE_DIR == os.path.join(cli.BENCH_DIR, "longhaul_bench")


def test_log_prefixes_the_name(capsys):
    cli.log("hello", name="soak")
    assert capsys.readouterr().err == "soak: hello\n"


def test_bins_and_missing(tmp_path):
    b = cli.bins(str(tmp_path), ["longhaul-perf", "longhaul-emu"])
    assert b["longhaul-perf"] == str(tmp_path / "bin" / "longhaul-perf")
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "longhaul-perf"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert cli.missing(b.values()) == [b["longhaul-emu"]]


def test_cannot_run(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["tools/bench/wan-compare"])
    assert cli.cannot_run(["not root", "no iperf3"], as_json=True) == 1
    out, err = capsys.readouterr()
    assert err == "wan-compare: cannot run: not root; no iperf3\n"
    assert out == '{"error": "not root; no iperf3"}\n'
    assert cli.cannot_run(["x"], as_json=False) == 1
    assert capsys.readouterr().out == ""


def test_add_defaults_types_follow_the_defaults():
    ap = cli.add_defaults(cli.parser("x"), rtts="10ms,58ms", jobs=2, max_minutes=60.0)
    a = ap.parse_args([])
    assert (a.rtts, a.jobs, a.max_minutes) == ("10ms,58ms", 2, 60.0)
    a = ap.parse_args(["--jobs=3", "--max_minutes=1.5", "--rtts=1ms"])
    assert (a.rtts, a.jobs, a.max_minutes) == ("1ms", 3, 1.5)
    with pytest.raises(SystemExit):
        ap.parse_args(["--jobs=two"])
