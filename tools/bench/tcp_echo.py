#!/usr/bin/python3
"""tcp_echo.py: a small TCP request/response latency test (for bridge-compare).

The code is longhaul_bench/commands/tcp_echo.py (--help says more).
"""

from longhaul_bench.commands import tcp_echo

if __name__ == "__main__":
    tcp_echo.entry()
