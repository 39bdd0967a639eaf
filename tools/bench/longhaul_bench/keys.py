"""Keys for a run: files longhaul-keygen writes, and the longhaul-perf flags (or NCCL
plugin variables) that name them. Modes: insecure (no protection), psk (a pre-shared key,
longhaul-keygen --psk) and ik (a static key pair per side, longhaul-keygen --out, Noise IK).
A failed or hung longhaul-keygen raises subprocess.CalledProcessError or TimeoutExpired
(stderr as text)."""

import os
import subprocess

MODES = ("insecure", "psk", "ik")
KEYGEN_TIMEOUT_S = 30


def keygen(keygen_bin, *args):
    """Runs longhaul-keygen with `args`, bounded in time."""
    subprocess.run([keygen_bin, *args], check=True, capture_output=True, text=True,
                   timeout=KEYGEN_TIMEOUT_S)


def write_psk(keygen_bin, path, force=True):
    """A pre-shared key at `path` (--force: replaces an older one); returns `path`."""
    keygen(keygen_bin, "--psk=" + path, *(["--force"] if force else []))
    return path


def write_key_pair(keygen_bin, prefix, force=True):
    """A static key pair PREFIX.key / PREFIX.pub; returns `prefix`."""
    keygen(keygen_bin, "--out=" + prefix, *(["--force"] if force else []))
    return prefix


def perf_flags(mode, keygen_bin, out_dir, name="longhaul"):
    """longhaul-perf's key flags for (server, client) in `mode`: --insecure, or files
    written into out_dir for this run (NAME.psk; NAME-server.*, NAME-client.*)."""
    if mode == "insecure":
        return ["--insecure"], ["--insecure"]
    if mode == "psk":
        psk = write_psk(keygen_bin, os.path.join(out_dir, name + ".psk"))
        return ["--psk_file=" + psk], ["--psk_file=" + psk]
    if mode not in ("ik", "keys"):  # wan-compare spells ik "keys"
        raise ValueError("unknown key mode '%s' (one of %s)" % (mode, ", ".join(MODES)))
    pre = {side: write_key_pair(keygen_bin, os.path.join(out_dir, name + "-" + side))
           for side in ("server", "client")}
    return (["--key=%s.key" % pre["server"], "--peer_key=%s.pub" % pre["client"]],
            ["--key=%s.key" % pre["client"], "--peer_key=%s.pub" % pre["server"]])
