"""pass@k and Pass@1 per turn against values computed by hand."""
from __future__ import annotations

import pytest

from cobalt.evaluation.passk import PAPER_N, estimator_n, format_table, pass_at_k, pass_table


@pytest.mark.parametrize("n,c,k,expected", [
    (16, 0, 1, 0.0),
    (16, 16, 1, 1.0),
    (16, 3, 1, 3 / 16),
    (10, 2, 3, 1 - (8 * 7 * 6) / (10 * 9 * 8)),   # 1 - C(8,3)/C(10,3) = 1 - 56/120
    (5, 2, 2, 1 - 3 / 10),                           # C(3,2)=3, C(5,2)=10
    (4, 3, 2, 1.0),                                  # n - c < k
    (1, 1, 1, 1.0),
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (4, 5, 1), (4, 1, 5), (4, -1, 1), (4, 1, 0)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def _record(rates):
    return {"samples": [{"turns": [{"hidden_pass_rate": r} for r in sample]} for sample in rates]}


RECORDS = [
    # problem A: 4 trajectories, 3 turns
    _record([[1.0, 1.0, 1.0], [0.0, 0.5, 1.0], [0.2, 0.0, 0.0], [0.0, 1.0, 1.0]]),
    # problem B: 2 trajectories, 3 turns
    _record([[0.0, 0.0, 1.0], [0.5, 0.5, 0.5]]),
]


def test_pass_table_own_n_hand_values():
    table = pass_table(RECORDS, n=None)
    # A: c = 1, 2, 3 of 4; B: c = 0, 0, 1 of 2
    assert table.pass_at_1 == pytest.approx([(1 / 4 + 0) / 2, (2 / 4 + 0) / 2, (3 / 4 + 1 / 2) / 2])
    assert table.mean_hidden_pass_rate[0] == pytest.approx(((1 + 0 + 0.2 + 0) / 4 + (0 + 0.5) / 2) / 2)
    change = table.change_vs_turn0()
    assert change[0] == 0 and change[2] == pytest.approx((0.625 - 0.125) / 0.125 * 100)


def test_pass_table_paper_n_is_fixed_at_16():
    assert estimator_n("paper") == PAPER_N == 16 and estimator_n("cobalt") is None and estimator_n("paper", 4) == 4
    table = pass_table(RECORDS, n=16)
    assert table.pass_at_1 == pytest.approx([(1 / 16 + 0) / 2, (2 / 16) / 2, (3 / 16 + 1 / 16) / 2])


def test_missing_turns_and_rates_count_as_wrong():
    table = pass_table([_record([[1.0], [1.0, 1.0]]), _record([[None, 1.0]])], n=None)
    assert table.turns == 2
    assert table.pass_at_1 == pytest.approx([(1.0 + 0.0) / 2, (0.5 + 1.0) / 2])


def test_format_table_rows():
    a, b = pass_table(RECORDS, n=None), pass_table(RECORDS[:1], n=None)
    text = format_table([("A", a), ("B", b)])
    lines = text.splitlines()
    assert lines[0] == "| turn | A Pass@1 | A vs turn 0 | B Pass@1 | B vs turn 0 |"
    assert lines[2] == "| 0 | 12.50 |  | 25.00 |  |"
    assert lines[4] == "| 2 | 62.50 | +400.0% | 75.00 | +200.0% |"
