"""The scripts' code: one module per script in tools/bench (wan-compare is
commands/wan_compare.py), each with entry(), what the script runs."""
