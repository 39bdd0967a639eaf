"""Every script in tools/bench is a thin entry point into longhaul_bench.commands that
starts (imports the package, parses its flags) and takes the build tree as --build_dir
and as --build."""

import importlib
import os
import subprocess
import sys

import pytest

from longhaul_bench import cli

SCRIPTS = ["ab-compare", "bridge-compare", "cc-acceptance", "coexist", "cpu-per-byte",
           "engine-scaling", "fec-grid", "flood", "sim-acceptance", "soak", "sweep-compare",
           "tune-grid", "wan-compare", "tcp_echo.py"]
BUILD_FLAG = set(SCRIPTS) - {"ab-compare", "tcp_echo.py"}


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(cli.BENCH_DIR, script), *args],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def test_every_script_is_listed():
    names = {n for n in os.listdir(cli.BENCH_DIR)
             if os.path.isfile(os.path.join(cli.BENCH_DIR, n)) and n != "CMakeLists.txt"}
    assert names == set(SCRIPTS) | {"compare-plots"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    r = run(script, "--help")
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout
    if script in BUILD_FLAG:
        assert "--build_dir" in r.stdout and "--build " in r.stdout


def module_of(script):
    return script.replace(".py", "").replace("-", "_")


@pytest.mark.parametrize("script", SCRIPTS)
def test_thin(script):
    with open(os.path.join(cli.BENCH_DIR, script)) as f:
        text = f.read()
    assert "sys.path" not in text
    assert len(text.splitlines()) <= 12
    assert "%s.entry()" % module_of(script) in text
    module = importlib.import_module("longhaul_bench.commands." + module_of(script))
    assert callable(module.entry)
    assert "sys.path" not in open(module.__file__).read()


def test_compare_plots_usage():
    r = run("compare-plots")
    assert r.returncode == 2
    assert "compare-plots RESULT.json OUT.svg" in r.stderr
