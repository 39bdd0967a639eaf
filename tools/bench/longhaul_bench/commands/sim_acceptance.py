"""Runs the simulator benchmarks of docs/benchmarks.md (foundation and FEC sections) and
prints them as markdown tables. Every run is seeded, so the virtual-time results
(goodput, completion times, counters) are the same on any machine; only wall time varies.

usage: tools/bench/sim-acceptance [--build_dir=build] [--quick]
"""

from longhaul_bench import cli
from longhaul_bench.sim import run_sim

BULK = [
    ("tokyo-singapore,loss=0", "off", "20GiB", []),
    ("tokyo-singapore,loss=1e-4", "off", "20GiB", []),
    ("tokyo-singapore,loss=1e-2", "off", "20GiB", []),
    ("tokyo-singapore,loss=0", "auto", "20GiB", []),
    ("tokyo-singapore,loss=1e-2", "auto", "20GiB", []),
    ("tokyo-singapore,loss=1e-4", "off", "256MiB", ["--window=1MiB"]),
]
MESSAGES = [
    ("tokyo-singapore,loss=1e-3", "auto", "64MiB", 200),
    ("tokyo-singapore,loss=1e-3", "off", "64MiB", 200),
    ("tokyo-singapore,loss=1e-3", "auto", "4MiB", 2000),
    ("tokyo-singapore,loss=1e-3", "off", "4MiB", 2000),
    ("tokyo-singapore,loss=1e-3,burst=8", "auto", "64MiB", 200),
    ("tokyo-singapore,loss=1e-3,burst=8", "auto", "4MiB", 2000),
    ("tokyo-singapore,loss=1e-3,burst=8", "off", "4MiB", 2000),
]


def run(build_dir, args):
    cmd, j, wall = run_sim(build_dir, args)
    return cmd, j["result"], wall


def main():
    ap = cli.parser(__doc__)
    cli.add_build_dir(ap, default="build")
    ap.add_argument("--quick", action="store_true", help="2 GiB bulk runs, fewer messages")
    a = ap.parse_args()
    print("### Bulk transfers\n")
    print("| command | goodput | of link | retransmitted | FEC recovered | FEC overhead | intact | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for link, fec, size, extra in BULK:
        if a.quick and size == "20GiB":
            size = "2GiB"
        cmd, r, wall = run(a.build_dir, [f"--link={link}", f"--bytes={size}", f"--fec={fec}"] + extra)
        print(f"| `{cmd}` | {r['goodput_bps']/1e9:.2f} Gbit/s | {r['goodput_bps']/r['link_rate_bps']*100:.1f} % "
              f"| {r['packets_retransmitted']} | {r['fec_recovered_packets']} | {r['fec_overhead_bytes']/1e6:.0f} MB "
              f"| {r['delivered_intact']} | {r['wall_s']:.1f} |")
    print("\n### Message completion times (open loop, load 0.5)\n")
    print("| command | ideal ms | mean ms (x ideal) | p99 ms | p99.9 ms (x ideal) | retransmitted | FEC recovered | FEC overhead | intact |")
    print("|---|---|---|---|---|---|---|---|---|")
    for link, fec, size, count in MESSAGES:
        if a.quick:
            count = count // 4
        cmd, r, wall = run(a.build_dir, [f"--link={link}", "--workload=messages", f"--message_size={size}",
                                         f"--messages={count}", f"--fec={fec}"])
        ideal = r["mct_ideal_s"]
        print(f"| `{cmd}` | {ideal*1e3:.2f} | {r['mct_mean_s']*1e3:.2f} ({r['mct_mean_s']/ideal:.3f}) "
              f"| {r['mct_p99_s']*1e3:.2f} | {r['mct_p999_s']*1e3:.2f} ({r['mct_p999_s']/ideal:.3f}) "
              f"| {r['packets_retransmitted']} | {r['fec_recovered_packets']} | {r['fec_overhead_bytes']/1e6:.0f} MB | {r['delivered_intact']} |")


def entry():
    """What tools/bench/sim-acceptance runs."""
    main()
