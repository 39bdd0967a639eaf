"""Statistics the benchmark scripts report (the same definitions as the C++ side)."""

import statistics


def percentile(sorted_v, q):
    """The q-quantile (q in [0, 1]) of an ascending list, interpolated between order
    statistics (as transport/base's percentiles); None for an empty list."""
    if not sorted_v:
        return None
    pos = q * (len(sorted_v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_v) - 1)
    return sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (pos - lo)


def jain(xs):
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one
    has everything. 1 for no values or all zero, as transport/sim's JainFairness."""
    xs = [float(x) for x in xs]
    s2 = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * s2) if s2 > 0 else 1.0


def median(values):
    """The median of the values that are not None; None when there are none."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
