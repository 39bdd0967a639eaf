#!/usr/bin/env python3
"""The Debian packages: `cmake --build BUILD --target packages` builds them into
BUILD/packages; this checks their names, contents and dependencies, runs lintian (no
errors; warnings printed), and where it runs as root installs them with apt-get, runs
longhaul-perf --version from PATH and the example API's library from the system, then
removes them again, leaving the machine as it was (the sysctl limits the package's
postinst applies are put back).

  packages_test.py BUILD_DIR
"""
import glob
import os
import shutil
import subprocess
import sys
import unittest

BUILD = None
PACKAGES = ["liblonghaul0", "liblonghaul-dev", "longhaul", "libnccl-net-longhaul"]
SYSCTLS = ["net.core.rmem_max", "net.core.wmem_max"]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 900), **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and "install ok installed" in r.stdout


@unittest.skipIf(shutil.which("dpkg-deb") is None or shutil.which("dpkg-shlibdeps") is None,
                 "dpkg-dev is not installed (tools/setup.sh installs it)")
class PackagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        run(["cmake", "--build", BUILD, "--target", "packages"])
        cls.debs = {}
        for path in sorted(glob.glob(os.path.join(BUILD, "packages", "*.deb"))):
            name = run(["dpkg-deb", "-f", path, "Package"]).stdout.strip()
            cls.debs[name] = path

    def contents(self, pkg):
        out = run(["dpkg-deb", "-c", self.debs[pkg]]).stdout
        return [line.split()[5].lstrip(".") for line in out.splitlines()]

    def test_the_four_packages(self):
        self.assertEqual(sorted(self.debs), sorted(PACKAGES))
        for pkg, path in self.debs.items():
            self.assertRegex(os.path.basename(path), rf"^{pkg}_0\.1\.0-1_amd64\.deb$")

    def test_contents(self):
        lib = self.contents("liblonghaul0")
        self.assertTrue(any(f.endswith("/liblonghaul.so.0.1.0") for f in lib), lib)
        self.assertFalse(any(f.startswith("/usr/include") for f in lib), lib)
        dev = self.contents("liblonghaul-dev")
        for want in ("/usr/include/longhaul/longhaul.h", "/usr/include/longhaul/endpoint.h",
                     "/usr/lib/pkgconfig/longhaul.pc", "/usr/lib/cmake/longhaul/longhaulConfig.cmake",
                     "/usr/lib/cmake/longhaul/longhaulTargets.cmake"):
            self.assertIn(want, dev)
        tools = self.contents("longhaul")
        for want in ("/usr/bin/longhaul-perf", "/usr/bin/longhaul-bridge", "/usr/bin/longhaul-keygen",
                     "/usr/lib/systemd/system/longhaul-bridge@.service",
                     "/usr/lib/sysctl.d/60-longhaul.conf",
                     "/usr/share/man/man1/longhaul-perf.1.gz",
                     "/usr/share/longhaul/profiles/links/tokyo-singapore.link",
                     "/usr/share/doc/longhaul/copyright",
                     "/usr/share/doc/longhaul/changelog.Debian.gz"):
            self.assertIn(want, tools)
        nccl = self.contents("libnccl-net-longhaul")
        # NCCL dlopens libnccl-net-<NCCL_NET_PLUGIN>.so through the loader's path.
        self.assertIn("/usr/lib/libnccl-net-longhaul.so", nccl)

    def test_dependencies_are_debian_packages(self):
        deps = run(["dpkg-deb", "-f", self.debs["longhaul"], "Depends"]).stdout
        for want in ("libc6", "libssl3", "libgoogle-glog", "libisal2"):
            self.assertIn(want, deps)
        dev = run(["dpkg-deb", "-f", self.debs["liblonghaul-dev"], "Depends"]).stdout
        self.assertIn("liblonghaul0 (= 0.1.0-1)", dev)
        self.assertIn("libabsl-dev", dev)

    def test_binaries_are_stripped(self):
        tmp = os.path.join(BUILD, "packages-check")
        shutil.rmtree(tmp, ignore_errors=True)
        run(["dpkg-deb", "-x", self.debs["longhaul"], tmp])
        out = run(["file", os.path.join(tmp, "usr/bin/longhaul-perf")]).stdout
        shutil.rmtree(tmp, ignore_errors=True)
        self.assertIn("stripped", out)
        self.assertNotIn("not stripped", out)

    @unittest.skipIf(shutil.which("lintian") is None, "lintian is not installed")
    def test_lintian_finds_no_errors(self):
        r = subprocess.run(["lintian", "--no-tag-display-limit"] + list(self.debs.values()),
                           capture_output=True, text=True, timeout=900)
        lines = (r.stdout + r.stderr).splitlines()
        print("\n".join(["lintian:"] + lines), file=sys.stderr)
        errors = [l for l in lines if l.startswith("E:")]
        self.assertEqual(errors, [], "lintian errors")

    @unittest.skipIf(os.geteuid() != 0 or shutil.which("apt-get") is None,
                     "installing packages needs root and apt-get")
    def test_install_run_remove(self):
        already = [p for p in PACKAGES if installed(p)]
        if already:
            self.skipTest(f"already installed here, not touched: {already}")
        before = {k: run(["sysctl", "-n", k]).stdout.strip() for k in SYSCTLS}
        try:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"]
                + list(self.debs.values()), env=env)
            perf = shutil.which("longhaul-perf", path="/usr/bin")
            self.assertEqual(perf, "/usr/bin/longhaul-perf")
            out = run(["longhaul-perf", "--version"], env=dict(env, PATH="/usr/bin:/bin")).stdout
            self.assertRegex(out, r"^longhaul-perf 0\.1\.0 \(git \S+, wire protocol 1\)\n$")
            # The installed plugin is where the loader finds it by name.
            out = run(["ldconfig", "-p"]).stdout
            self.assertIn("liblonghaul.so.0", out)
            self.assertTrue(os.path.exists("/usr/lib/libnccl-net-longhaul.so"))
        finally:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "remove", "--purge", "-y", "-qq"] + PACKAGES, env=env,
                           capture_output=True, timeout=600)
            for k, v in before.items():
                subprocess.run(["sysctl", "-q", "-w", f"{k}={v}"], capture_output=True)
        for p in PACKAGES:
            self.assertFalse(installed(p), f"{p} still installed")
        self.assertFalse(os.path.exists("/usr/bin/longhaul-perf"))
        after = {k: run(["sysctl", "-n", k]).stdout.strip() for k in SYSCTLS}
        self.assertEqual(after, before)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1], verbosity=2)
