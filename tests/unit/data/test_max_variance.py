"""max_variance_subset against hand-worked cases and a brute force over every allowed set."""
from __future__ import annotations

import itertools
import statistics
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.training_data.trajectories import max_variance_subset


def brute_force(diffs: list[float], m: int, n: int) -> list[int]:
    """Enumerate every m-subset of the pool, keep those of the form 'j smallest + m-j largest'
    (j = 1..m), and pick the largest exact variance, larger j first on ties."""
    if len(diffs) <= m:
        return list(range(len(diffs)))
    ranked = sorted(range(len(diffs)), key=lambda i: (diffs[i], i))
    pool_size = min(n, len(diffs))
    pool = ranked[:pool_size]
    allowed = {}
    for positions in itertools.combinations(range(pool_size), m):
        chosen = set(positions)
        for j in range(1, m + 1):
            if chosen == set(range(j)) | set(range(pool_size - (m - j), pool_size)):
                allowed[j] = [pool[p] for p in positions]
    best_j = max(allowed, key=lambda j: (statistics.pvariance([Fraction(diffs[i]) for i in allowed[j]]), j))
    return allowed[best_j]


def test_hand_worked_six_distinct_values():
    # sorted d: .1 .2 .4 .6 .8 1.0; variances: j=4 .036875, j=3 .121875, j=2 .146875, j=1 .111875
    diffs = [0.4, 1.0, 0.1, 0.8, 0.2, 0.6]
    assert max_variance_subset(diffs) == [2, 4, 3, 1]


def test_four_or_fewer_are_all_kept_in_input_order():
    assert max_variance_subset([0.3, 0.1, 0.2]) == [0, 1, 2]
    assert max_variance_subset([0.3, 0.1, 0.2, 0.9]) == [0, 1, 2, 3]
    assert max_variance_subset([]) == []


def test_all_equal_values_tie_and_the_four_smallest_win():
    # every set has variance 0: j = 4 (the four smallest, i.e. the first four by stable order) wins
    assert max_variance_subset([0.5] * 7) == [0, 1, 2, 3]


def test_tie_between_j_values_goes_to_the_larger_j():
    # stable order: indices 1 3 4 (d=.1) then 0 2 (d=.9). n=16, pool of 5:
    #   j=4 [1,3,4,0] var .12; j=3 [1,3,4,2] var .12; j=2 [1,3,0,2] var .16; j=1 [1,4,0,2] var .16
    #   -> j=2 and j=1 tie, the earlier (j=2) wins.
    # n=4, pool [1,3,4,0]: every allowed set is the whole pool (var .12), so j=4 wins.
    diffs = [0.9, 0.1, 0.9, 0.1, 0.1]
    assert max_variance_subset(diffs, m=4, n=16) == [1, 3, 0, 2]
    assert max_variance_subset(diffs, m=4, n=4) == [1, 3, 4, 0]


def test_pool_is_the_n_smallest():
    # n = 5: the pool is the five smallest (.0 .1 .2 .3 .4); the 0.95 and 1.0 are never considered
    diffs = [1.0, 0.0, 0.1, 0.2, 0.3, 0.4, 0.95]
    chosen = max_variance_subset(diffs, m=2, n=5)
    assert chosen == [1, 5]


def test_bad_arguments():
    with pytest.raises(ValueError) as info:
        max_variance_subset([0.1] * 6, m=0)
    assert str(info.value) == "need 1 <= m <= n, got m=0, n=16"
    with pytest.raises(ValueError) as info:
        max_variance_subset([0.1] * 6, m=5, n=4)
    assert str(info.value) == "need 1 <= m <= n, got m=5, n=4"
    with pytest.raises(ValueError) as info:
        max_variance_subset([0.1, float("nan"), 0.2, 0.3, 0.4, 0.5])
    assert str(info.value) == "diffs must not contain NaN"


tie_prone = st.sampled_from([0.05, 0.1, 0.25, 0.5, 0.75, 0.8, 1.0])
any_rate = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(
    diffs=st.lists(st.one_of(tie_prone, any_rate), max_size=24),
    m=st.integers(min_value=1, max_value=6),
    extra=st.integers(min_value=0, max_value=14),
)
def test_matches_brute_force(diffs, m, extra):
    n = m + extra
    assert max_variance_subset(diffs, m=m, n=n) == brute_force(diffs, m, n)


@settings(max_examples=100, deadline=None)
@given(diffs=st.lists(tie_prone, min_size=5, max_size=20))
def test_matches_brute_force_with_heavy_ties_at_paper_defaults(diffs):
    chosen = max_variance_subset(diffs)
    assert chosen == brute_force(diffs, 4, 16)
    assert len(chosen) == 4 and len(set(chosen)) == 4
