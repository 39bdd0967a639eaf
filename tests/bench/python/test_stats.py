"""longhaul_bench.stats: percentiles, Jain's index, medians."""

import pytest

from longhaul_bench import stats


def test_percentile_interpolates_between_order_statistics():
    v = [1.0, 2.0, 3.0, 4.0]
    assert stats.percentile(v, 0) == 1.0
    assert stats.percentile(v, 1) == 4.0
    assert stats.percentile(v, 0.5) == pytest.approx(2.5)
    assert stats.percentile(v, 0.9) == pytest.approx(3.7)


def test_percentile_of_one_and_none():
    assert stats.percentile([7], 0.99) == 7
    assert stats.percentile([], 0.5) is None


def test_jain_equal_shares_is_one():
    assert stats.jain([5, 5, 5, 5]) == pytest.approx(1.0)


def test_jain_one_has_everything_is_one_over_n():
    assert stats.jain([10, 0, 0, 0]) == pytest.approx(0.25)


def test_jain_in_between():
    # (1 + 3)^2 / (2 * (1 + 9)) = 0.8
    assert stats.jain([1, 3]) == pytest.approx(0.8)


def test_jain_empty_and_all_zero_are_one_as_the_simulator_says():
    # transport/sim's JainFairness: 1 when the sum of squares is 0.
    assert stats.jain([]) == 1.0
    assert stats.jain([0, 0]) == 1.0


def test_median_skips_missing_values():
    assert stats.median([3, None, 1, 2]) == 2
    assert stats.median([None, None]) is None
    assert stats.median([]) is None
