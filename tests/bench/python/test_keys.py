"""longhaul_bench.keys, with a stand-in longhaul-keygen that records its arguments."""

import os
import subprocess
import sys

import pytest

from longhaul_bench import keys

FAKE_KEYGEN = """#!%s
import os, sys
args = sys.argv[1:]
with open(os.path.join(os.path.dirname(sys.argv[0]), "calls"), "a") as f:
    f.write(" ".join(args) + "\\n")
if os.environ.get("FAKE_KEYGEN_FAIL"):
    sys.stderr.write("cannot write\\n")
    sys.exit(1)
for a in args:
    if a.startswith("--psk="):
        open(a[6:], "w").write("psk")
    elif a.startswith("--out="):
        open(a[6:] + ".key", "w").write("key")
        open(a[6:] + ".pub", "w").write("pub")
"""


@pytest.fixture
def keygen(tmp_path):
    path = tmp_path / "longhaul-keygen"
    path.write_text(FAKE_KEYGEN % sys.executable)
    path.chmod(0o755)
    return str(path)


def calls(keygen):
    with open(os.path.join(os.path.dirname(keygen), "calls")) as f:
        return f.read().splitlines()


def test_insecure_writes_nothing(keygen, tmp_path):
    assert keys.perf_flags("insecure", keygen, str(tmp_path)) == (["--insecure"], ["--insecure"])
    assert not os.path.exists(os.path.join(os.path.dirname(keygen), "calls"))


def test_psk_is_shared(keygen, tmp_path):
    server, client = keys.perf_flags("psk", keygen, str(tmp_path), name="bridge")
    psk = str(tmp_path / "bridge.psk")
    assert server == client == ["--psk_file=" + psk]
    assert os.path.isfile(psk)
    assert calls(keygen) == ["--psk=%s --force" % psk]


@pytest.mark.parametrize("mode", ["ik", "keys"])
def test_key_pairs_name_each_other(keygen, tmp_path, mode):
    server, client = keys.perf_flags(mode, keygen, str(tmp_path))
    s, c = str(tmp_path / "longhaul-server"), str(tmp_path / "longhaul-client")
    assert server == ["--key=%s.key" % s, "--peer_key=%s.pub" % c]
    assert client == ["--key=%s.key" % c, "--peer_key=%s.pub" % s]
    for f in (s + ".key", s + ".pub", c + ".key", c + ".pub"):
        assert os.path.isfile(f)


def test_without_force(keygen, tmp_path):
    keys.write_psk(keygen, str(tmp_path / "a.psk"), force=False)
    keys.write_key_pair(keygen, str(tmp_path / "k"), force=False)
    assert calls(keygen) == ["--psk=%s" % (tmp_path / "a.psk"), "--out=%s" % (tmp_path / "k")]


def test_unknown_mode(keygen, tmp_path):
    with pytest.raises(ValueError, match="unknown key mode 'rot13'"):
        keys.perf_flags("rot13", keygen, str(tmp_path))


def test_failure_carries_stderr(keygen, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEYGEN_FAIL", "1")
    with pytest.raises(subprocess.CalledProcessError) as e:
        keys.write_psk(keygen, str(tmp_path / "x.psk"))
    assert e.value.stderr.strip() == "cannot write"
