#!/usr/bin/env python3
"""Every program in build/bin answers --version: exit status 0 and one line
"NAME MAJOR.MINOR.PATCH (git REV, wire protocol N)" naming itself.

  tools_version_test.py BIN_DIR PROJECT_VERSION
"""
import os
import re
import subprocess
import sys
import unittest

BIN_DIR = None
PROJECT_VERSION = None

# The tools the README lists: each must be there (a missing one is a failure, not a pass).
EXPECTED = {"longhaul-perf", "longhaul-bridge", "longhaul-keygen", "longhaul-emu",
            "longhaul-sim", "longhaul-probe", "longhaul-tune", "longhaul-nccl-bench",
            "longhaul-tcp-peer", "longhaul-udt-peer"}


class ToolsVersionTest(unittest.TestCase):
    def programs(self):
        out = []
        for name in sorted(os.listdir(BIN_DIR)):
            path = os.path.join(BIN_DIR, name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                out.append((name, path))
        return out

    def test_every_program_answers_version(self):
        programs = self.programs()
        names = {n for n, _ in programs}
        self.assertTrue(EXPECTED <= names, f"missing from {BIN_DIR}: {sorted(EXPECTED - names)}")
        for name, path in programs:
            with self.subTest(program=name):
                r = subprocess.run([path, "--version"], capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(r.returncode, 0, f"{name} --version: {r.stderr}")
                lines = r.stdout.splitlines()
                self.assertEqual(len(lines), 1, f"{name} --version printed {r.stdout!r}")
                m = re.fullmatch(r"(\S+) (\d+\.\d+\.\d+) \(git (\S+), wire protocol (\d+)\)",
                                 lines[0])
                self.assertIsNotNone(m, f"{name} --version printed {lines[0]!r}")
                self.assertEqual(m.group(1), name)
                self.assertEqual(m.group(2), PROJECT_VERSION)
                self.assertEqual(m.group(4), "1")

    def test_version_wins_over_other_flags(self):
        # --version with other flags (even ones that would be refused) still prints the
        # version: what a bug report asks for must always work.
        path = os.path.join(BIN_DIR, "longhaul-perf")
        r = subprocess.run([path, "--client=198.18.0.1", "--version"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("longhaul-perf "), r.stdout)


if __name__ == "__main__":
    BIN_DIR, PROJECT_VERSION = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
