"""tune-grid's pure parts: the grid of one spec, the FEC flush deadline, the best run,
the verdict and the Markdown table."""

import math

import pytest

from longhaul_bench.commands import tune_grid as tg

SPEC = "rate=1gbit,rtt=58ms,loss=1e-3"


def test_fec_flush_lets_a_group_fill():
    # 1.25 x 8 x 32 packets of 9000 bytes at 1 Gbit/s: 23.04 ms, rounded up to 100 us.
    assert tg.fec_flush_us("32,4", 8, 9000 - 106, 1e9) == 23100
    assert tg.fec_flush_us("32,2", 1, 1394, 100e9) == 1000  # at least 1 ms


def test_grid_plan_full():
    plan = tg.grid_plan(SPEC, [1500, 9000], quick=False)
    # 2 MTUs x windows {1 MiB, 0.5, 1, 2, 4 BDP} (BDP 7.25 MB: 4, 7, 14, 28 MiB) x 5 FEC.
    assert len(plan) == 2 * 5 * 5
    assert plan[0] == (["--mtu=1500", "--window=1MiB", "--fec=off", "--fec_interleave=1"],
                       "mtu=1500 window=1MiB fec=off/1")
    windows = sorted({f[1] for f, _ in plan}, key=lambda w: int(w.split("=")[1][:-3]))
    assert windows == ["--window=%dMiB" % w for w in (1, 4, 7, 14, 28)]
    flags, label = plan[-1]
    assert label == "mtu=9000 window=28MiB fec=32,4/8"
    assert flags[-1] == "--fec_flush=%dus" % tg.fec_flush_us("32,4", 8, tg.segment_for_mtu(9000),
                                                              1e9)


def test_grid_plan_quick_and_the_links_mtu():
    plan = tg.grid_plan(SPEC + ",mtu=4096", [1500, 4096, 9000], quick=True)
    assert [label for _, label in plan] == [
        "mtu=4096 window=7MiB fec=off/1", "mtu=4096 window=7MiB fec=32,4/1",
        "mtu=4096 window=14MiB fec=off/1", "mtu=4096 window=14MiB fec=32,4/1"]
    assert {m for f, _ in tg.grid_plan(SPEC + ",mtu=4096", [1500, 4096, 9000], False)
            for m in f if m.startswith("--mtu")} == {"--mtu=1500", "--mtu=4096"}


class FakeRunner:
    def __init__(self, goodputs, budget=100):
        self.goodputs, self.budget, self.runs = goodputs, budget, []

    def out_of_time(self):
        return len(self.runs) >= self.budget

    def sim(self, spec, nbytes, flags, label):
        g, intact = self.goodputs[label]
        rec = {"spec": spec, "label": label, "goodput_bps": g, "intact": intact}
        self.runs.append(rec)
        return rec


def test_grid_best_takes_the_best_intact_run_within_the_time():
    plan = [([], "a"), ([], "b"), ([], "c"), ([], "d")]
    r = FakeRunner({"a": (1e9, True), "b": (5e9, False), "c": (2e9, True), "d": (9e9, True)})
    assert tg.grid_best(r, SPEC, 1, plan)["label"] == "d"
    r = FakeRunner({"a": (1e9, True), "b": (5e9, False), "c": (2e9, True), "d": (9e9, True)},
                   budget=3)
    assert tg.grid_best(r, SPEC, 1, plan)["label"] == "c"
    assert len(r.runs) == 3
    assert tg.grid_best(FakeRunner({}, budget=0), SPEC, 1, plan) is None


def test_verdict():
    assert tg.verdict(10, 9.6, 1.0, 0.058) == (pytest.approx(0.96), pytest.approx(9.6), True)
    assert tg.verdict(10, 9.6, 2.0, 0.058)[2] is False       # < 5 x the seed at RTT 58 ms
    assert tg.verdict(10, 9.6, 2.0, 0.010)[2] is True        # short RTT: no seed bound
    assert tg.verdict(10, 9.0, 1.0, 0.010)[2] is False       # < 95 % of the best
    assert tg.verdict(0, 1.0, 0, 0.1) == (0, math.inf, False)


def test_spec_row_when_tune_fails(capsys, tmp_path):
    r = FakeRunner({"seed recipe": (1e8, False)})

    def tune(spec, out):
        raise RuntimeError("longhaul-tune failed: no")
    r.tune = tune
    best = {"spec": SPEC, "label": "mtu=9000 window=14MiB fec=off/1", "goodput_bps": 9e8,
            "intact": True}
    row = tg.spec_row(r, SPEC, 1 << 30, best, str(tmp_path / "p"), "/seed.profile")
    assert row["tuned"] == "tune failed" and row["tuned_gbps"] == 0
    assert row["seed_gbps"] == pytest.approx(0.1) and row["seed_note"] == " (partial: failed)"
    assert row["pass"] is False and row["grid_runs"] == -1
    assert capsys.readouterr().err.splitlines() == [
        "tune-grid: longhaul-tune failed: no",
        "tune-grid:   best 0.9, tuned 0 (0.0%), seed 0.1 Gbit/s (x0.0) FAIL"]


def test_markdown_table():
    rows = [{"spec": SPEC, "bytes": "1GiB", "grid_runs": 50, "best": "mtu=9000 w",
             "best_gbps": 0.93, "tuned": "auto", "tuned_gbps": 0.9, "tuned_vs_best": 0.9677,
             "seed_gbps": 0.01, "seed_note": " (partial: bound)", "tuned_vs_seed": 90.0,
             "pass": True},
            {"spec": "rate=2gbit,rtt=1ms", "bytes": "1GiB", "grid_runs": 2, "best": "-",
             "best_gbps": 0, "tuned": "tune failed", "tuned_gbps": 0, "tuned_vs_best": 0,
             "seed_gbps": 0, "tuned_vs_seed": math.inf, "pass": False}]
    lines = tg.markdown_table(rows).split("\n")
    assert lines[0].startswith("| # | link spec | bytes/run | grid runs |")
    assert lines[2] == ("| 1 | `rate=1gbit,rtt=58ms,loss=1e-3` | 1GiB | 50 | mtu=9000 w | 0.93 | "
                        "auto | 0.9 | 96.8 % | 0.01 (partial: bound) | x90.0 | yes |")
    assert lines[3] == ("| 2 | `rate=2gbit,rtt=1ms` | 1GiB | 2 | - | 0 | tune failed | 0 | "
                        "0.0 % | 0 | - | **no** |")
    assert lines[4:] == [""]
    assert tg.markdown_table([]).count("\n") == 2


def test_parser_flags():
    a = tg.make_parser().parse_args(["--quick", "--run-wall=5", "--max-minutes=1.5"])
    assert (a.quick, a.run_wall, a.max_minutes, a.tune_budget) == (True, 5, 1.5, 60)
    assert a.specs == "" and a.out == "" and a.reuse == ""
