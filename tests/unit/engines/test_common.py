"""Shared engine helpers: doctests plus the properties the backends rely on."""
from __future__ import annotations

import doctest

import pytest

from cobalt.engines import _common
from cobalt.engines._common import apportion, backoff_delay, redact, split_n


def test_doctests():
    result = doctest.testmod(_common)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("total,weights", [(0, [3, 4]), (7, [1, 1, 1]), (100, [0, 0]), (9, [5, 0, 2, 11])])
def test_apportion_adds_up(total, weights):
    parts = apportion(total, weights)
    assert sum(parts) == total and len(parts) == len(weights) and min(parts) >= 0


@pytest.mark.parametrize("n,per", [(1, None), (16, 4), (16, 5), (3, 8)])
def test_split_n_covers_n(n, per):
    sizes = split_n(n, per)
    assert sum(sizes) == n and max(sizes) <= (per or n)


def test_backoff_grows_and_is_capped():
    assert all(0.5 <= backoff_delay(0, 1.0, 60) <= 1.0 for _ in range(20))
    assert all(backoff_delay(10, 1.0, 5.0) <= 5.0 for _ in range(20))
    assert backoff_delay(3, 1.0, 5.0, retry_after=2.0) == 2.0
    assert backoff_delay(3, 1.0, 5.0, retry_after=90) == 5.0


def test_redact_hides_every_occurrence():
    assert redact("a sk-123456 b sk-123456", ["sk-123456"]) == "a *** b ***"
