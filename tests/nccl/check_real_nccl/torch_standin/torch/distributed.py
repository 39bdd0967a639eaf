"""torch.distributed for the stand-in: all_reduce between the ranks through files named
after the file:// store (each call numbered; every wait bounded), and an NCCL-style log
at init (NCCL_DEBUG_FILE) naming the network NCCL_NET selects. STANDIN_CORRUPT=1 makes
every sum of more than one element wrong in its first element."""
import json
import os
import time

_state = {}


class ReduceOp:
    SUM = "sum"
    MAX = "max"


def init_process_group(backend, init_method, rank, world_size, timeout, device_id=None):
    assert backend == "nccl" and init_method.startswith("file://")
    assert device_id is not None and device_id.type == "cuda"
    _state.update(base=init_method[len("file://"):], rank=rank, world=world_size, seq=0,
                  timeout=timeout.total_seconds())
    net = os.environ["NCCL_NET"]
    pre = f"standin:{os.getpid()}:{os.getpid()} [0] NCCL INFO "
    lines = ["NCCL version 2.30.7+cuda13.0"]
    if net == "longhaul":
        assert os.path.exists(os.environ["NCCL_NET_PLUGIN"]), "the plugin must exist"
        lines += ["NET/Plugin: Loaded net plugin longhaul (v12)", "NET/longhaul: using lo"]
        if os.environ.get("NCCL_LONGHAUL_PSK_FILE"):
            lines += ["NET/longhaul: packet protection: Noise NNpsk0 (pre-shared key)"]
        elif os.environ.get("NCCL_LONGHAUL_INSECURE") == "1":
            lines += ["NET/longhaul: packet protection: insecure (plaintext, "
                      "NCCL_LONGHAUL_INSECURE=1)"]
    peer = 1 - rank
    lines += [f"Using network {net}",
              f"Channel 00/0 : {rank}[0] -> {peer}[0] [send] via NET/{net}/0",
              f"Channel 00/0 : {peer}[0] -> {rank}[0] [receive] via NET/{net}/0"]
    with open(os.environ["NCCL_DEBUG_FILE"], "w") as f:
        f.write("".join(pre + line + "\n" for line in lines))


def all_reduce(t, op=ReduceOp.SUM):
    s = _state
    s["seq"] += 1
    mine = f"{s['base']}.ar{s['seq']}.{s['rank']}"
    with open(mine + ".tmp", "w") as f:
        json.dump(t.values, f)
    os.rename(mine + ".tmp", mine)
    parts = []
    deadline = time.monotonic() + min(60, s["timeout"])
    for r in range(s["world"]):
        path = f"{s['base']}.ar{s['seq']}.{r}"
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"all_reduce {s['seq']}: rank {r} never came")
            time.sleep(0.001)
        with open(path) as f:
            parts.append(json.load(f))
    combine = max if op == ReduceOp.MAX else sum
    t.values = [t.dtype.cast(combine(vals)) for vals in zip(*parts)]
    if os.environ.get("STANDIN_CORRUPT") and len(t.values) > 1:
        t.values[0] += 1  # a wrong sum, for the test that the ranks notice


def destroy_process_group():
    pass
