"""bridge-compare's results: the ratios of the bridge to each other peer, the table and
the plot, all from the result object (what --json prints and bridge-compare.json holds).
"""

from longhaul_bench.commands.bridge_workloads import GOODPUT_WORKLOADS

NAMES = {"bridge": "longhaul-bridge", "kcptun": "kcptun", "tcp_bbr": "TCP BBR",
         "tcp_cubic": "TCP CUBIC"}
COLORS = {"bridge": "#1f77b4", "kcptun": "#ff7f0e", "tcp_bbr": "#2ca02c",
          "tcp_cubic": "#d62728"}


def http_time(entry):
    """(seconds, projected?) of an http entry, or (None, None)."""
    if not entry or entry.get("error"):
        return None, None
    if entry.get("completed"):
        return entry.get("completion_s"), False
    return entry.get("projected_completion_s"), True


def add_ratios(result):
    out = {}
    for loss, byp in result["cells"].items():
        r = {}
        b = byp.get("bridge", {})
        for w in GOODPUT_WORKLOADS:
            bv = b.get(w, {}).get("goodput_bps") if not b.get(w, {}).get("error") else None
            for p in ("kcptun", "tcp_cubic", "tcp_bbr"):
                pe = byp.get(p, {}).get(w, {})
                pv = pe.get("goodput_bps") if not pe.get("error") else None
                if bv and pv:
                    r["%s_bridge_over_%s" % (w, p)] = bv / pv
        bt, bproj = http_time(b.get("http"))
        for p in ("kcptun", "tcp_cubic", "tcp_bbr"):
            pt, pproj = http_time(byp.get(p, {}).get("http"))
            if bt and pt:
                r["http_time_bridge_over_%s" % p] = bt / pt
                r["http_time_bridge_over_%s_projected" % p] = bool(bproj or pproj)
        bl = b.get("latency", {})
        for p in ("kcptun", "tcp_cubic", "tcp_bbr"):
            pl = byp.get(p, {}).get("latency", {})
            for phase in ("alone", "loaded"):
                try:
                    r["latency_%s_p99_bridge_over_%s" % (phase, p)] = (
                        bl[phase]["rtt_ms"]["p99"] / pl[phase]["rtt_ms"]["p99"])
                except (KeyError, TypeError, ZeroDivisionError):
                    pass
        out[loss] = r
    result["ratios"] = out


def cell_text(e, w):
    if e is None:
        return "-"
    if e.get("error"):
        return "FAILED"
    if w in GOODPUT_WORKLOADS:
        s = "%.1f (%.0f%%)" % (e["goodput_bps"] / 1e6, e["goodput_pct"])
        if e.get("jain") is not None:
            s += " J=%.3f" % e["jain"]
        return s
    if w == "http":
        if e.get("completed"):
            return "%.1f s (%.0f Mb/s)" % (e["completion_s"], e["goodput_bps"] / 1e6)
        pj = e.get("projected_completion_s")
        return "PROJ %s (%.1f Mb/s)" % ("%.0f s" % pj if pj else "never", e["goodput_bps"] / 1e6)
    a, l = e["alone"]["rtt_ms"], e["loaded"]["rtt_ms"]
    return "%.1f/%.1f | %.1f/%.1f" % (a["p50"], a["p99"], l["p50"], l["p99"])


def print_table(result):
    print_grid(result)
    print("(PROJ: the fetch hit --http_limit; projected completion = limit + (size - bytes) "
          "/ rate over the second half of the fetch)")
    print_ratios(result)
    failures = result.get("failures", [])
    if failures:
        print("\nfailed runs:")
        for f in failures:
            print("  " + f)
    print_runs(result)


def print_grid(result):
    """The heading line and one row per loss and peer, a column per workload."""
    ws = result["workloads"]
    heads = {"iperf": "iperf Mbit/s (%link)", "iperf_p16": "iperf -P16 Mbit/s",
             "streams": "streams -P%d Mbit/s" % result["settings"]["streams"],
             "http": "http %s" % result["settings"]["http_bytes_text"],
             "latency": "rtt ms p50/p99 alone | loaded"}
    widths = {"iperf": 19, "iperf_p16": 19, "streams": 27, "http": 24, "latency": 30}
    print("bridge-compare: link %s with loss %s; iperf %g s after %g s omitted; http %s "
          "(limit %g s); latency %d rounds of %d B / %d B" % (
              ",".join("%s=%s" % kv for kv in result["link_params"]["keys"].items()
                       if kv[0] != "loss"), ",".join(result["losses"]),
              result["settings"]["time_s"],
              result["settings"]["omit_s"], result["settings"]["http_bytes_text"],
              result["settings"]["http_limit_s"], result["settings"]["latency_rounds"],
              result["settings"]["latency_request"], result["settings"]["latency_response"]))
    print("%-6s %-10s " % ("loss", "peer") + " ".join("%-*s" % (widths[w], heads[w])
                                                     for w in ws) + " load")
    for loss in result["losses"]:
        for p in result["peers"]:
            row = result["cells"].get(loss, {}).get(p, {})
            loads = [e["load_avg"]["before"][0] for e in row.values() if e.get("load_avg")]
            print("%-6s %-10s " % (loss, p) + " ".join(
                "%-*s" % (widths[w], cell_text(row.get(w), w)) for w in ws) +
                (" %.2f" % max(loads) if loads else " -"))


def ratio_text(r):
    """One loss's ratios as text: "name value" each, * where a projected time is involved."""
    parts = []
    for k, v in r.items():
        if k.endswith("_projected"):
            continue
        star = "*" if r.get(k + "_projected") else ""
        parts.append("%s %.3f%s" % (k, v, star))
    return ", ".join(parts) if parts else \
        "n/a (the bridge or every other peer failed or did not run)"


def print_ratios(result):
    print("\nratios (goodput: bridge / peer, higher is better for the bridge; http: bridge "
          "time / peer time, lower is better; * = a projected time is involved):")
    for loss in result["losses"]:
        print("  loss %s: %s" % (loss, ratio_text(result["ratios"].get(loss, {}))))


def print_runs(result):
    """Every run: ok or its error, its commands, the emulator's counters, the load."""
    print("\nruns (commands, emulator counters, load average):")
    for loss in result["losses"]:
        for p in result["peers"]:
            for w, e in result["cells"].get(loss, {}).get(p, {}).items():
                print("- loss %s, %s, %s: %s" % (loss, p, w, "ERROR " + e["error"]
                                                 if e.get("error") else "ok"))
                if e.get("emulator_command"):
                    print("    emulator: " + e["emulator_command"])
                for c in e.get("commands", []):
                    print("    %s: %s" % (c["role"], c["command"]))
                if w == "latency" and e.get("loaded", {}).get("link_pct_during") is not None:
                    print("    link during the loaded test: %.0f%% (emulator, A -> B)" %
                          e["loaded"]["link_pct_during"])
                emu = e.get("emulator")
                if emu:
                    print("    " + emulator_text(emu))
                if e.get("load_avg"):
                    print("    load average before %s after %s, host cpu busy %s" % (
                        e["load_avg"]["before"], e["load_avg"]["after"], e.get("host_cpu_busy")))


def emulator_text(emu):
    """The emulator's counters of one run, one line."""
    f, rv = emu.get("forward", {}), emu.get("reverse", {})
    return ("emulator: fwd %s pkts delivered, %s lost, %s queue drops; rev %s delivered, %s "
            "lost, %s queue drops; own drops %s; cpu %s" % (
                f.get("delivered"), f.get("dropped_loss"), f.get("dropped_queue"),
                rv.get("delivered"), rv.get("dropped_loss"), rv.get("dropped_queue"),
                emu.get("own_drops"), emu.get("cpu_fraction")))


def plot(result, path):
    """Grouped bars: goodput per peer per loss, one panel per goodput workload (http as
    bytes / time, hatched where the fetch was bounded)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [w for w in result["workloads"] if w in GOODPUT_WORKLOADS or w == "http"]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    losses, peers = result["losses"], result["peers"]
    width = 0.8 / max(1, len(peers))
    rate = result["link_params"]["rate_bps"]
    for ax, w in zip(axes[0], panels):
        for i, p in enumerate(peers):
            xs, ys, hatch = [], [], []
            for j, loss in enumerate(losses):
                e = result["cells"].get(loss, {}).get(p, {}).get(w)
                if e and not e.get("error") and e.get("goodput_bps"):
                    xs.append(j + (i - (len(peers) - 1) / 2) * width)
                    ys.append(e["goodput_bps"] / 1e6)
                    hatch.append("//" if e.get("projected") else "")
            bars = ax.bar(xs, ys, width, label=NAMES.get(p, p), color=COLORS.get(p))
            for b, h in zip(bars, hatch):
                b.set_hatch(h)
        ax.axhline(rate / 1e6, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(len(losses)))
        ax.set_xticklabels(["loss %s" % l for l in losses])
        ax.set_ylabel("goodput (Mbit/s)")
        ax.set_title({"iperf": "iperf3, 1 stream", "iperf_p16": "iperf3 -P 16",
                      "streams": "iperf3 -P %d" % result["settings"]["streams"],
                      "http": "HTTP fetch (hatched: bounded)"}[w], fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(peers), fontsize=8,
               frameon=False)
    fig.suptitle("bridge-compare: %s, loss per group (dotted: the link rate)" % ",".join(
        "%s=%s" % kv for kv in result["link_params"]["keys"].items() if kv[0] != "loss"),
        fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path)

