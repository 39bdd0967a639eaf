"""The scripts' code: one module per script in tools/bench (wan-compare is
commands/wan_compare.py), each with entry(), what the script runs; a long command's parts
are modules of their own named after it (bridge_compare: bridge_workloads, bridge_report)."""
