"""What every script's command line shares: log(), the tree's paths, the --build_dir flag
(with its older spelling --build) and a parser whose description is the script's first
docstring line."""

import argparse
import json
import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
BENCH_DIR = os.path.dirname(PACKAGE_DIR)             # tools/bench
ROOT = os.path.dirname(os.path.dirname(BENCH_DIR))   # the source tree


def prog():
    """The running script's name (wan-compare, soak, ...)."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "longhaul_bench"


def log(msg, name=None):
    """One line on stderr, prefixed with the script's name."""
    print("%s: %s" % (name or prog(), msg), file=sys.stderr, flush=True)


def cannot_run(problems, as_json):
    """Says why the run cannot start, on stderr and (as_json) as {"error": ...} on stdout;
    returns the exit status 1."""
    text = "; ".join(problems)
    log("cannot run: " + text)
    if as_json:
        print(json.dumps({"error": text}))
    return 1


def parser(doc, raw=False, **kw):
    """An ArgumentParser described by the first line of `doc` (the script's docstring);
    raw=True keeps the docstring's layout as the epilog of --help."""
    doc = doc or ""
    if raw:
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kw.setdefault("epilog", doc)
    return argparse.ArgumentParser(description=doc.strip().split("\n")[0], **kw)


def add_build_dir(ap, default=os.path.join(ROOT, "build"), help=None):
    """--build_dir=DIR (also spelled --build=DIR): the build tree with bin/longhaul-*."""
    ap.add_argument("--build_dir", "--build", dest="build_dir", default=default,
                    help=help or "build tree with bin/longhaul-* (default: %(default)s)")
    return ap


def add_defaults(ap, **defaults):
    """--NAME flags with these defaults, in order; a flag's type is its default's (str,
    int or float)."""
    for name, value in defaults.items():
        kw = {} if isinstance(value, str) else {"type": type(value)}
        ap.add_argument("--" + name, default=value, **kw)
    return ap


def bins(build_dir, names):
    """{name: build_dir/bin/name} for each name."""
    return {n: os.path.join(build_dir, "bin", n) for n in names}


def missing(paths):
    """The paths that are not executable files."""
    return [p for p in paths if not (os.path.isfile(p) and os.access(p, os.X_OK))]
