"""longhaul_bench.units: every spelling a bench script accepted before the package."""

import pytest

from longhaul_bench import units

GIB, MIB, KIB = 1 << 30, 1 << 20, 1 << 10


@pytest.mark.parametrize("text,bps", [
    ("1gbit", 1e9), ("500mbit", 500e6), ("2.5gbit", 2.5e9), ("64kbit", 64e3),
    ("100bit", 100.0), ("10G", 10e9), ("10g", 10e9), ("1Gbit", 1e9), ("100Mbps", 100e6),
    ("1e9", 1e9), ("400", 400.0), (" 1gbit ", 1e9), ("1 gbit", 1e9), ("1tbit", 1e12),
    ("40gbit/s", 40e9), (".5gbit", 0.5e9),
])
def test_rate(text, bps):
    assert units.parse_rate(text) == pytest.approx(bps, rel=1e-12)
    assert isinstance(units.parse_rate(text), float)


@pytest.mark.parametrize("text", ["", "gbit", "1xbit", "1gbitx", "1.2.3gbit", "-1gbit", "1 g bit"])
def test_rate_rejects(text):
    with pytest.raises(ValueError, match="bad rate"):
        units.parse_rate(text)


@pytest.mark.parametrize("text,nbytes", [
    ("4096", 4096), ("1KiB", KIB), ("256MiB", 256 * MIB), ("1.5GiB", 3 * GIB // 2),
    ("4MiB", 4 * MIB), ("1GB", 10**9), ("64KB", 64000), ("4M", 4 * 10**6), ("10k", 10**4),
    ("1e6", 10**6), ("2TiB", 2 << 40), ("4096B", 4096), ("4096b", 4096), ("1kib", KIB),
    (" 64MiB ", 64 * MIB),
])
def test_size(text, nbytes):
    assert units.parse_size(text) == nbytes
    assert isinstance(units.parse_size(text), int)


def test_size_exact_for_large_whole_numbers():
    # 2^53 + 1 is not a double; a whole number of bytes must not go through one.
    assert units.parse_size(str(2**53 + 1)) == 2**53 + 1


@pytest.mark.parametrize("text,nbytes", [
    # nccl-tests' reading (check-real-nccl): K, M, G are powers of 1024.
    ("256M", 256 * MIB), ("1K", KIB), ("1kb", KIB), ("2G", 2 * GIB), ("1KiB", KIB),
    ("4096", 4096), ("1b", 1),
])
def test_size_binary(text, nbytes):
    assert units.parse_size(text, binary=True) == nbytes


@pytest.mark.parametrize("text", ["", "MiB", "1i", "1iB", "1XiB", "1 MiB x", "1..5MiB"])
def test_size_rejects(text):
    with pytest.raises(ValueError, match="bad size"):
        units.parse_size(text)


@pytest.mark.parametrize("text,seconds", [
    ("58ms", 0.058), ("30s", 30.0), ("30", 30.0), ("100us", 1e-4), ("5ns", 5e-9),
    ("5m", 300.0), ("0", 0.0), ("1.5s", 1.5), ("1e-3s", 1e-3),
])
def test_duration(text, seconds):
    assert units.parse_duration(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["", "ms", "58 min", "58MS", "1h"])
def test_duration_rejects(text):
    with pytest.raises(ValueError, match="bad duration"):
        units.parse_duration(text)


def test_loss():
    assert units.parse_loss("1e-3") == 1e-3
    assert units.parse_loss("0") == 0.0
    with pytest.raises(ValueError, match="not in"):
        units.parse_loss("1")
    with pytest.raises(ValueError, match="bad loss"):
        units.parse_loss("lots")


@pytest.mark.parametrize("nbytes,kw,text", [
    (4 * MIB, {}, "4MiB"), (GIB, {}, "1GiB"), (1536 * KIB, {}, "1536KiB"), (1500, {}, "1500"),
    (0, {}, "0"), (1536 * KIB, {"smallest": "MiB"}, "1572864"), (3 * MIB, {"smallest": "MiB"}, "3MiB"),
    (4 * MIB, {"space": True}, "4 MiB"), (1500, {"space": True}, "1500 B"), (None, {"space": True}, "0 B"),
])
def test_fmt_size(nbytes, kw, text):
    assert units.fmt_size(nbytes, **kw) == text


@pytest.mark.parametrize("nbytes", [1, 4096, 1500, 64 * MIB, 3 * GIB, 1536 * KIB])
def test_fmt_size_round_trips(nbytes):
    assert units.parse_size(units.fmt_size(nbytes)) == nbytes
