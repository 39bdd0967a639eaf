"""coexist's pure parts: the flags (losses, cases, time and warm-up), the run order and
pauses, the summary line and the shares."""

import types

import pytest

from longhaul_bench.commands import coexist


def checked(*argv):
    ap = coexist.make_parser()
    args = ap.parse_args(list(argv))
    return args, coexist.check_args(ap, args)


def error(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        checked(*argv)
    assert e.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def test_defaults():
    args, (link, losses, cases) = checked()
    assert (args.time, args.warmup) == (40, 10)
    assert losses == ["0", "1e-3"]
    assert cases == [("bbr", 1), ("bbr", 4), ("cubic", 1), ("cubic", 4)]
    assert link["rate_bps"] == 1e9


def test_parse_cases():
    assert coexist.parse_cases("reno16,,cubic2") == [("reno", 16), ("cubic", 2)]
    for bad in ("bbr", "bbr0", "bbr17", "vegas1"):
        with pytest.raises(ValueError) as e:
            coexist.parse_cases(bad)
        assert str(e.value) == \
            "--cases: '%s' is not CCn (bbr, cubic or reno; 1..16 flows)" % bad


def test_parse_losses():
    assert coexist.parse_losses("0,,1e-2") == ["0", "1e-2"]
    with pytest.raises(ValueError) as e:
        coexist.parse_losses("0,1")
    assert str(e.value) == "loss 1 is outside [0, 1)"


def test_flag_errors(capsys):
    window = "--time must be in [10, 600] s and --warmup in [0, time - 5]"
    assert error(capsys, "--time=9").endswith(window)
    assert error(capsys, "--time=20", "--warmup=16").endswith(window)
    assert error(capsys, "--losses=0.5,2").endswith("loss 2 is outside [0, 1)")
    assert error(capsys, "--cases=bbr1,x2").endswith("--cases: 'x2' is not CCn (bbr, cubic "
                                                     "or reno; 1..16 flows)")


def test_run_cases_pauses_between_runs_and_collects_failures(monkeypatch):
    calls = []

    class FakeRun:
        def __init__(self, args, bins, spec, name, out_dir, procs, tag):
            self.name, self.spec = name, spec

        def go(self, cc, n, with_lh, mtu):
            calls.append(("go", self.name, self.spec, with_lh, mtu))
            if self.name.startswith("cubic1-loss1e-3.alone"):
                return {"error": "iperf3 failed"}
            series = [1e8] * 20
            return {"tcp_series": series, "longhaul_series": series if with_lh else [0] * 20}

    monkeypatch.setattr(coexist, "Run", FakeRun)
    monkeypatch.setattr(coexist.time, "sleep", lambda s: calls.append(("sleep", s)))
    monkeypatch.setattr(coexist, "log", lambda text: None)
    args = types.SimpleNamespace(link="rate=1gbit,rtt=58ms", no_baseline=False, settle=2.0,
                                 warmup=5, time=20)
    result = {"cases": []}
    failed = coexist.run_cases(args, {}, {"mtu": 9000}, ["0", "1e-3"], [("cubic", 1)], "/o",
                               None, "t", result)
    assert failed
    assert calls == [
        ("go", "cubic1-loss0.together", "rate=1gbit,rtt=58ms", True, 9000), ("sleep", 2.0),
        ("go", "cubic1-loss0.alone", "rate=1gbit,rtt=58ms", False, 9000), ("sleep", 2.0),
        ("go", "cubic1-loss1e-3.together", "rate=1gbit,rtt=58ms,loss=1e-3", True, 9000),
        ("sleep", 2.0),
        ("go", "cubic1-loss1e-3.alone", "rate=1gbit,rtt=58ms,loss=1e-3", False, 9000)]
    ok, bad = result["cases"]
    assert ok["share_mean"] == pytest.approx(0.5) and ok["tcp_alone_bps"] == pytest.approx(1e8)
    assert "together" in ok and "tcp_series" not in ok["together"]
    assert bad["error"] == "alone: iperf3 failed" and "share_mean" not in bad


def test_case_line():
    case = {"case": "bbr4", "longhaul_bps": 4.5e8, "tcp_bps": 5e8, "share_mean": 0.47368,
            "share_5s_min": 0.4, "share_5s_max": 0.55}
    assert coexist.case_line(case, "1e-3") == (
        "bbr4    loss 1e-3  longhaul 450 TCP 500 (alone -) Mbit/s, share 0.47 [0.40, 0.55]")
    assert coexist.case_line({"case": "cubic1", "error": "together: x"}, "0").endswith(
        "share - [-, -]  together: x")
