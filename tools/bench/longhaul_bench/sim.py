"""longhaul-sim runs for the simulated benchmarks (cc-acceptance, sim-acceptance)."""

import json
import subprocess
import sys
import time


def run_sim(build_dir, args, timeout_s=1800):
    """Runs BUILD/bin/longhaul-sim ARGS --json. Returns (the command as the tables show it,
    the JSON document, wall seconds); exits naming the command when the simulator fails
    (an exit status other than 0, or 1 for a run that missed its bounds)."""
    cmd = [f"{build_dir}/bin/longhaul-sim"] + list(args) + ["--json"]
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode not in (0, 1):
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    return "longhaul-sim " + " ".join(args), json.loads(out.stdout), time.time() - t0
