#!/usr/bin/env python3
"""`cmake --install` into a DESTDIR, then a program built against the installed tree only:
examples/ configured once with find_package(longhaul) and once with pkg-config, its
receiver and sender run over loopback, and the transfer checked (count, bytes, digest).
Also what the install holds: the tools, the plugin, profiles and link specs where the
tools look, headers with no internal include path, a library exporting only the API.

  install_test.py BUILD_DIR SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = SOURCE = None
PREFIX = "/opt/longhaul"  # any prefix: nothing may depend on where it is


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="longhaul-install-")
        cls.destdir = os.path.join(cls.tmp, "root")
        env = dict(os.environ, DESTDIR=cls.destdir)
        run(["cmake", "--install", BUILD, "--prefix", PREFIX], env=env)
        cls.root = cls.destdir + PREFIX
        libdirs = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu")
                   if os.path.exists(os.path.join(cls.root, d, "pkgconfig", "longhaul.pc"))]
        assert libdirs, f"no longhaul.pc under {cls.root}"
        cls.libdir = os.path.join(cls.root, libdirs[0])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout(self):
        r = self.root
        for tool in ("longhaul-perf", "longhaul-bridge", "longhaul-keygen", "longhaul-tune",
                     "longhaul-probe", "longhaul-emu", "longhaul-sim", "longhaul-nccl-bench"):
            self.assertTrue(os.access(os.path.join(r, "bin", tool), os.X_OK), tool)
        for f in ("libnccl-net-longhaul.so", "liblonghaul.so", "liblonghaul.so.0",
                  "cmake/longhaul/longhaulConfig.cmake",
                  "cmake/longhaul/longhaulConfigVersion.cmake", "pkgconfig/longhaul.pc"):
            self.assertTrue(os.path.exists(os.path.join(self.libdir, f)), f)
        for f in ("share/longhaul/profiles/ts-1g.profile",
                  "share/longhaul/profiles/links/tokyo-singapore.link",
                  "lib/systemd/system/longhaul-bridge@.service",
                  "lib/sysctl.d/60-longhaul.conf", "include/longhaul/longhaul.h"):
            self.assertTrue(os.path.exists(os.path.join(r, f)), f)
        # The SONAME carries the ABI number.
        out = run(["objdump", "-p", os.path.join(self.libdir, "liblonghaul.so")]).stdout
        self.assertRegex(out, r"SONAME\s+liblonghaul\.so\.0\b")

    def test_headers_are_self_contained(self):
        inc = os.path.join(self.root, "include", "longhaul")
        for name in os.listdir(inc):
            with open(os.path.join(inc, name)) as f:
                text = f.read()
            self.assertNotRegex(text, r'#include\s+"transport/', name)
            self.assertNotRegex(text, r'#include\s+"tools/', name)

    def test_library_exports_only_the_api(self):
        out = run(["nm", "-D", "--defined-only", "-C",
                   os.path.join(self.libdir, "liblonghaul.so")]).stdout
        ours = [l for l in out.splitlines() if "longhaul::" in l]
        self.assertTrue(any("longhaul::api::Endpoint::Create" in l for l in ours), out)
        self.assertTrue(any("longhaul::Version()" in l for l in ours), out)
        leaked = [l for l in ours
                  if not re.search(r"longhaul::(api::|Version\(|GitRevision\(|WireVersion\(|"
                                   r"VersionLine\[?)", l)]
        self.assertEqual(leaked, [], "internal symbols exported")

    def test_installed_tool_finds_its_share(self):
        # The installed longhaul-sim resolves a named link from its own share/longhaul
        # (a link written only there), not from the checkout it was built from.
        links = os.path.join(self.root, "share", "longhaul", "profiles", "links")
        with open(os.path.join(links, "only-installed.link"), "w") as f:
            f.write("rate=1gbit,rtt=10ms\n")
        r = subprocess.run([os.path.join(self.root, "bin", "longhaul-sim"),
                            "--link=only-installed", "--bytes=1MiB", "--json"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("unknown link", r.stderr)

    def build_examples(self, name, extra):
        out = os.path.join(self.tmp, name)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.libdir, "pkgconfig"))
        run(["cmake", "-S", os.path.join(SOURCE, "examples"), "-B", out,
             f"-DCMAKE_PREFIX_PATH={self.root}", "-DCMAKE_BUILD_TYPE=Release"] + extra, env=env)
        run(["cmake", "--build", out, "-j2"], env=env)
        return out

    def transfer(self, bindir, static=False):
        recv, send = (os.path.join(bindir, f"longhaul-example-{n}") for n in ("receive", "send"))
        ldd = run(["ldd", recv]).stdout
        if static:
            self.assertNotIn("liblonghaul", ldd)
        else:
            # liblonghaul.so.0 comes from the DESTDIR tree, not from the build.
            self.assertRegex(ldd, r"liblonghaul\.so\.0 => " + re.escape(self.libdir))
        psk = os.path.join(self.tmp, "link.psk")
        if not os.path.exists(psk):
            fd = os.open(psk, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, (os.urandom(32).hex() + "\n").encode())
            os.close(fd)
        rp = subprocess.Popen([recv, psk], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        try:
            first = rp.stdout.readline()
            m = re.fullmatch(r"port (\d+)\n", first)
            if m is None:
                rp.kill()
                self.fail(f"receiver said {first!r}: {rp.communicate(timeout=60)[1]}")
            s = subprocess.run([send, "127.0.0.1", m.group(1), psk, "200", "65536"],
                               capture_output=True, text=True, timeout=120)
            if s.returncode != 0:
                rp.kill()
            r_out, r_err = rp.communicate(timeout=60)
        finally:
            if rp.poll() is None:
                rp.kill()
        self.assertEqual(s.returncode, 0, f"sender: {s.stderr}\nreceiver: {r_err}")
        self.assertEqual(rp.returncode, 0, r_err)
        sent = s.stdout.strip().splitlines()[-1]
        got = r_out.strip().splitlines()[-1]
        self.assertRegex(sent, r"^sent 200 messages, 13107200 bytes, digest [0-9a-f]{16}$")
        self.assertEqual(got.replace("received", "sent"), sent)

    def test_examples_with_the_cmake_package(self):
        self.transfer(self.build_examples("ex-cmake", []))

    def test_examples_with_the_static_library(self):
        self.transfer(self.build_examples("ex-static", ["-DLONGHAUL_EXAMPLES_STATIC=ON"]),
                      static=True)

    def test_examples_with_pkg_config(self):
        self.transfer(self.build_examples("ex-pc", ["-DLONGHAUL_EXAMPLES_PKG_CONFIG=ON"]))


if __name__ == "__main__":
    BUILD, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1], verbosity=2)
