"""Units: the text forms of sizes, rates and durations, one parser each.

The grammar is the union of what the scripts and transport/base/parse.h accept:
  sizes      4096, 1.5GiB, 256MiB, 1KiB, 64KB, 1GB, 4M, 10k, 1e6 (K, M, G, T are decimal,
             Ki, Mi, Gi, Ti binary, a trailing B optional, any case); binary=True reads
             K, M, G, T (and KB, MB, ...) as powers of 1024, as nccl-tests does
  rates      1gbit, 500mbit, 2.5gbit, 10G, 100Mbps, 1e9, 64kbit (bit/s; K, M, G, T decimal)
  durations  58ms, 30s, 100us, 5m, 30 (seconds when bare)
Each parser raises ValueError naming the text and an example.
"""

import re

_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?"
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _scaled(mantissa, exponent, mult):
    """mantissa[e exponent] x mult; exact for whole numbers."""
    if "." not in mantissa and exponent is None:
        return int(mantissa) * mult
    return float(mantissa + ("e" + exponent if exponent is not None else "")) * mult


def parse_size(text, binary=False):
    """Bytes (an int) from a size's text."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*([kmgt]?)(i?)b?\s*", str(text), re.I)
    if not m:
        raise ValueError("bad size '%s' (e.g. 4096, 4MiB, 64MiB, 1GB)" % text)
    prefix, i = m.group(3).lower(), m.group(4).lower()
    if i and not prefix:
        raise ValueError("bad size '%s' (e.g. 4096, 4MiB, 64MiB, 1GB)" % text)
    if i or (binary and prefix):
        mult = _BINARY[prefix + "i"]
    else:
        mult = _DECIMAL[prefix]
    return int(_scaled(m.group(1), m.group(2), mult))


def parse_rate(text):
    """Bits per second (a float) from a rate's text."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*([kmgt]?)(bit|bps|bit/s)?\s*", str(text), re.I)
    if not m:
        raise ValueError("bad rate '%s' (e.g. 1gbit, 100mbit, 10G)" % text)
    return float(_scaled(m.group(1), m.group(2), _DECIMAL[m.group(3).lower()]))


def parse_duration(text):
    """Seconds (a float) from a duration's text."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*(ns|us|ms|s|m)?\s*", str(text))
    if not m:
        raise ValueError("bad duration '%s' (e.g. 58ms, 30s, 30)" % text)
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[m.group(3)]
    return float(_scaled(m.group(1), m.group(2), 1)) * unit


def parse_loss(text):
    """A loss probability in [0, 1) ("0", "1e-3", "0.01")."""
    try:
        v = float(text)
    except ValueError:
        raise ValueError("bad loss '%s' (e.g. 0, 1e-3, 0.01)" % text)
    if not (0 <= v < 1):
        raise ValueError("loss '%s' is not in [0, 1)" % text)
    return v


_SIZE_UNITS = (("GiB", GIB), ("MiB", MIB), ("KiB", KIB))


def fmt_size(nbytes, smallest="KiB", space=False):
    """The largest binary unit (down to `smallest`) that divides `nbytes` whole: '4MiB',
    '1536KiB'; else the plain number. space=True: '4 MiB', '1500 B'."""
    b = int(nbytes or 0)
    for unit, m in _SIZE_UNITS:
        if b >= m and b % m == 0:
            return "%d%s%s" % (b // m, " " if space else "", unit)
        if unit == smallest:
            break
    return "%d B" % b if space else str(b)
