"""Runs the congestion-control acceptance scenarios of docs/congestion-control.md through
longhaul-sim (cc=bbr) and prints the measurements as markdown. Every run is seeded, so
the virtual-time results are the same on any machine; only wall time varies.

The measurements come from the --sample_interval time series (docs/simulator.md):
  reach95      first interval whose goodput is >= 95% of the link
  hold         smallest interval goodput from then to the transfer's tail
  queue        mean bottleneck queue from 25 RTTs on, as a fraction of the BDP
  jain@5s      Jain index of the connections' goodput over the second that ends 5 s
               after the last connection started (first second at >= 0.95 in brackets)

usage: tools/bench/cc-acceptance [--build_dir=build] [--seeds=8]
"""

import statistics

from longhaul_bench import cli
from longhaul_bench.sim import run_sim
from longhaul_bench.stats import jain

RTT = 0.058
LINK = 10e9


def run(build_dir, args):
    cmd, j, _ = run_sim(build_dir, ["--cc=bbr"] + args, timeout_s=3600)
    return cmd, j


def mean_goodput(series, c, t0, t1):
    xs = [(x["goodput_bps"] if c < 0 else x["connections"][c]["goodput_bps"])
          for x in series if t0 + 1e-9 < x["t_s"] <= t1 + 1e-9]
    return sum(xs) / len(xs) if xs else 0.0


def jain_over(series, n, t0, t1):
    return jain([mean_goodput(series, c, t0, t1) for c in range(n)])


def single(build_dir, link, size, label):
    cmd, j = run(build_dir, [f"--link={link}", f"--bytes={size}", "--sample_interval=58ms"])
    r, s = j["result"], j["result"]["series"]
    bdp = j["link"]["bdp_bytes"]
    reach = next((x["t_s"] for x in s if x["goodput_bps"] >= 0.95 * LINK), None)
    end = r["transfer_s"] - 2 * RTT
    hold = min((x["goodput_bps"] for x in s if reach is not None and reach < x["t_s"] <= end),
               default=0)
    q = [x["avg_queue_bytes"] for x in s if 25 * RTT < x["t_s"] <= end]
    steady = mean_goodput(s, 0, 1.5, end)
    print(f"| {label} | `{cmd}` | {reach / RTT:.0f} RTTs ({reach:.3f} s) | {hold / LINK * 100:.1f} % "
          f"| {steady / LINK * 100:.1f} % | {r['goodput_bps'] / LINK * 100:.1f} % "
          f"| {statistics.mean(q) / bdp:.3f} BDP | {r['link_forward']['dropped_queue']} "
          f"| {r['link_forward']['dropped_loss']} | {r['delivered_intact']} |")


def fairness(build_dir, n, seeds):
    last = 2.0 * (n - 1)
    rows = []
    for seed in range(1, seeds + 1):
        cmd, j = run(build_dir, ["--link=rate=10gbit,rtt=58ms", "--bytes=100GiB",
                                 f"--connections={n}", "--stagger=2s",
                                 f"--max_virtual_time={last + 8:g}s", "--sample_interval=100ms",
                                 f"--seed={seed}"])
        s = j["result"]["series"]
        at5 = jain_over(s, n, last + 4, last + 5)
        first = next((k for k in range(1, 9) if jain_over(s, n, last + k - 1, last + k) >= 0.95),
                     None)
        util = mean_goodput(s, -1, last + 1, last + 8) / LINK
        shares = [mean_goodput(s, c, last + 4, last + 5) / 1e9 for c in range(n)]
        rows.append((seed, at5, first, util, shares))
    print(f"\n`{cmd.replace(f'--seed={seeds}', '--seed=S')}`, S = 1..{seeds}:\n")
    print("| seed | jain@5s | first second >= 0.95 | link used (last start + 1..8 s) | goodput at 4-5 s, Gbit/s |")
    print("|---|---|---|---|---|")
    for seed, at5, first, util, shares in rows:
        f = f"{first} s" if first else "> 8 s"
        print(f"| {seed} | {at5:.3f} | {f} | {util * 100:.1f} % | {' '.join(f'{x:.2f}' for x in shares)} |")
    ok = sum(1 for r in rows if r[1] >= 0.95)
    print(f"\n{ok} of {len(rows)} seeds >= 0.95 at 5 s; median {statistics.median(r[1] for r in rows):.3f}.")


def step(build_dir):
    print("\n| seed | command | down: loss after 10 RTTs | down: goodput | up: >= 95 % after | up: goodput after 10 RTTs |")
    print("|---|---|---|---|---|---|")
    for seed in (1, 2, 3):
        cmd, j = run(build_dir, ["--link=rate=10gbit,rtt=58ms", "--link_schedule=2s:rate=5gbit,4s:rate=10gbit",
                                 "--bytes=100GiB", "--max_virtual_time=6s", "--sample_interval=29ms",
                                 f"--seed={seed}"])
        s = j["result"]["series"]
        win = [x for x in s if 2 + 10 * RTT < x["t_s"] <= 4]
        loss = sum(x["dropped_queue"] for x in win) / max(1, sum(x["offered"] for x in win))
        down = mean_goodput(s, 0, 2 + 10 * RTT, 4)
        up_t = next((x["t_s"] for x in s if x["t_s"] > 4 and x["goodput_bps"] >= 0.95 * LINK), None)
        up = mean_goodput(s, 0, 4 + 10 * RTT, 6)
        print(f"| {seed} | `{cmd}` | {loss * 100:.2f} % | {down / 1e9:.2f} Gbit/s "
              f"| {(up_t - 4) / RTT:.1f} RTTs | {up / 1e9:.2f} Gbit/s |")


def main():
    ap = cli.parser(__doc__)
    cli.add_build_dir(ap, default="build")
    ap.add_argument("--seeds", type=int, default=8)
    a = ap.parse_args()
    print("### One connection\n")
    print("| case | command | reach 95 % | hold (min per RTT) | steady goodput | whole transfer | queue (steady) | queue drops | random drops | intact |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    single(a.build_dir, "rate=10gbit,rtt=58ms", "3GiB", "fill")
    single(a.build_dir, "rate=10gbit,rtt=58ms,loss=1e-2", "20GiB", "1% random loss")
    single(a.build_dir, "rate=10gbit,rtt=58ms,ecn=5ms", "3GiB", "ECN at 5 ms")
    print("\n### Two connections, 2 s apart")
    fairness(a.build_dir, 2, a.seeds)
    print("\n### Four connections, 2 s apart")
    fairness(a.build_dir, 4, a.seeds)
    print("\n### Eight connections, 2 s apart")
    fairness(a.build_dir, 8, a.seeds)
    print("\n### Rate step 10 -> 5 -> 10 Gbit/s")
    step(a.build_dir)


def entry():
    """What tools/bench/cc-acceptance runs."""
    main()
