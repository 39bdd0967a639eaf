#!/usr/bin/env python3
"""Checks the NCCL plugin bundle (tools/nccl/CMakeLists.txt, docs/nccl-runs.md section 4.1).

usage: bundle_test.py BUNDLE_DIR

What a machine without the project's libraries needs from it, checked on a copy of the
bundle in a fresh directory, under an empty environment (env -i):
  - every ELF file's DT_NEEDED is a glibc library or a file of the bundle;
  - the plugin and the emulator have RUNPATH $ORIGIN and name every bundled library they
    load, directly or through another bundled one, in their own DT_NEEDED (the loader
    looks a library's dependencies up by name, without the plugin's RUNPATH);
  - ldd resolves every library that is not glibc's into the copy;
  - symbol versions: the plugin and the emulator need GLIBC_2.35 at most, the shipped
    libraries (Debian 12's libstdc++) GLIBC_2.36 at most; nothing needs GLIBC_PRIVATE;
  - the plugin exports the five ncclNetPlugin tables and nothing else;
  - the copied emulator runs (--help), and the copied plugin loads in a python3 process
    (no libstdc++ of its own) whose maps then show the bundle's libraries, and reports a
    device after init.
Uses readelf and ldd (binutils, libc-bin). Exit status 0 when every check passes.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

GLIBC_LIBS = {
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
    "ld-linux-x86-64.so.2",
}
PLUGIN = "libnccl-net-longhaul.so"
EMU = "longhaul-emu"
MAX_BYTES = 64 << 20
TIMEOUT_S = 60

BUNDLE = None  # set from argv


def run(args, env=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def dynamic(path):
    """(needed, runpath) of an ELF file."""
    out = run(["readelf", "-dW", path]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]+)\]", out)
    return needed, runpath


def glibc_versions(path):
    """Versions of glibc that `path` requires (readelf's .gnu.version_r)."""
    out = run(["readelf", "-VW", path]).stdout
    return sorted(set(re.findall(r"Name: (GLIBC_[0-9A-Z_.]+)", out)))


def version_key(v):
    nums = re.findall(r"\d+", v)
    return tuple(int(n) for n in nums) if nums else (10**9,)


class BundleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lh-nccl-bundle-test-")
        cls.copy = os.path.join(cls.tmp, "somewhere", "else")
        shutil.copytree(BUNDLE, cls.copy, symlinks=False)
        cls.files = sorted(os.listdir(cls.copy))
        cls.elves = [f for f in cls.files if is_elf(os.path.join(cls.copy, f))]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.copy, name)

    def test_contents_and_size(self):
        for name in (PLUGIN, EMU, "check-real-nccl"):
            self.assertIn(name, self.files)
        self.assertTrue(os.access(self.path("check-real-nccl"), os.X_OK))
        total = sum(os.path.getsize(self.path(f)) for f in self.files)
        self.assertLess(total, MAX_BYTES, "the bundle must stay well under 64 MiB")
        print(f"bundle: {len(self.files)} files, {total / (1 << 20):.1f} MiB")

    def test_needed_libraries_are_glibc_or_bundled(self):
        for name in self.elves:
            needed, _ = dynamic(self.path(name))
            for lib in needed:
                self.assertTrue(lib in GLIBC_LIBS or lib in self.files,
                                f"{name} needs {lib}, neither glibc's nor in the bundle")

    def test_binaries_name_every_bundled_library_they_load(self):
        for name in (PLUGIN, EMU):
            needed, runpath = dynamic(self.path(name))
            self.assertEqual(runpath, ["$ORIGIN"], name)
            closure, todo = set(), [lib for lib in needed if lib in self.files]
            while todo:
                lib = todo.pop()
                if lib in closure:
                    continue
                closure.add(lib)
                todo += [d for d in dynamic(self.path(lib))[0] if d in self.files]
            missing = sorted(closure - set(needed))
            self.assertEqual(missing, [], f"{name} loads these without naming them")

    def test_ldd_in_an_empty_environment_resolves_into_the_bundle(self):
        for name in (PLUGIN, EMU):
            r = run(["ldd", self.path(name)], env={})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("not found", r.stdout)
            for line in r.stdout.splitlines():
                m = re.match(r"\s*(\S+) => (\S+)", line)
                if not m or m.group(1) in GLIBC_LIBS:
                    continue
                self.assertTrue(os.path.realpath(m.group(2)).startswith(
                    os.path.realpath(self.copy) + os.sep),
                    f"{name}: {m.group(1)} resolved outside the bundle: {m.group(2)}")
            print(f"ldd {name}:\n{r.stdout}")

    def test_symbol_versions(self):
        for name in self.elves:
            versions = glibc_versions(self.path(name))
            self.assertNotIn("GLIBC_PRIVATE", versions, name)
            newest = max(versions, key=version_key) if versions else "none"
            limit = "GLIBC_2.35" if name in (PLUGIN, EMU) else "GLIBC_2.36"
            if versions:
                self.assertLessEqual(version_key(newest), version_key(limit),
                                     f"{name} needs {newest}")
            if name in (PLUGIN, EMU):
                print(f"{name}: newest glibc version needed {newest}")

    def test_plugin_exports_only_the_tables(self):
        out = run(["readelf", "--dyn-syms", "-W", self.path(PLUGIN)]).stdout
        exported = set()
        for line in out.splitlines():
            f = line.split()
            # Num: Value Size Type Bind Vis Ndx Name
            if len(f) >= 8 and f[4] in ("GLOBAL", "WEAK") and f[6] != "UND":
                exported.add(f[7].split("@")[0])
        self.assertEqual(exported, {f"ncclNetPlugin_v{v}" for v in range(8, 13)})

    def test_emulator_runs_from_the_copy(self):
        r = run([self.path(EMU), "--help"], env={})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--link", r.stdout + r.stderr)

    def test_plugin_loads_without_the_system_libraries(self):
        # A process with no C++ runtime loaded: every library comes from the bundle.
        code = r"""
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_LOCAL)
table = ctypes.cast(ctypes.addressof(ctypes.c_char.in_dll(lib, "ncclNetPlugin_v12")),
                    ctypes.POINTER(ctypes.c_void_p))
INIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
DEVICES = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))
FINALIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
ctx = ctypes.c_void_p()
config = ctypes.c_int(-1)
assert INIT(table[1])(ctypes.byref(ctx), 1, ctypes.addressof(config), None, None) == 0
n = ctypes.c_int(0)
assert DEVICES(table[2])(ctypes.byref(n)) == 0
assert FINALIZE(table[20])(ctx) == 0
print("devices", n.value)
with open("/proc/self/maps") as f:
    for line in f:
        if ".so" in line:
            print("map", line.split()[-1])
"""
        env = {"NCCL_LONGHAUL_IFNAME": "lo", "NCCL_LONGHAUL_RATE": "1gbit",
               "NCCL_LONGHAUL_INSECURE": "1"}
        r = run([sys.executable, "-c", code, self.path(PLUGIN)], env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("devices 1", r.stdout)
        maps = {os.path.basename(p): p for p in
                (line[4:] for line in r.stdout.splitlines() if line.startswith("map "))}
        bundled = [f for f in self.elves if f != EMU]
        for lib in bundled:
            if lib in maps:
                self.assertTrue(maps[lib].startswith(os.path.realpath(self.copy)),
                                f"{lib} was loaded from {maps[lib]}")
        for lib in ("libglog.so.1", "libisal.so.2", "libstdc++.so.6", "libabsl_status.so.20220623"):
            self.assertIn(lib, maps, "the plugin's libraries were loaded")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    BUNDLE = sys.argv.pop(1)
    unittest.main(verbosity=2)
