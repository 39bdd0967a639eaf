"""longhaul_bench: what the benchmark scripts of tools/bench share.

  units       the text forms of sizes, rates and durations (one parser each)
  stats       percentiles, Jain's fairness index, medians
  procfs      /proc readers: resident set, CPU times, load, network counters
  keys        longhaul-keygen runs and the key flags they give longhaul-perf
  cli         log(), the shared command-line flags (--build_dir), paths of the tree
  netns_link  the emulated link between two network namespaces, processes, the lock
  process     the bounded processes of the loopback benchmarks (cpu-per-byte, engine-scaling),
              their CPU from wait4, and the steps their runs share
  plots       plots of wan-compare results (matplotlib)
  sim         longhaul-sim runs for the simulated benchmarks
  commands    each script's code (tools/bench/wan-compare: commands/wan_compare.py)

Each script in tools/bench is a thin entry point that calls its commands module's entry():
Python puts the script's own folder (tools/bench) first on sys.path, so
`import longhaul_bench` works without a path set-up. Standard library only (plots:
matplotlib).
"""
