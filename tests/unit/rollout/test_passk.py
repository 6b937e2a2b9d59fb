"""pass@k and Pass@1 per turn against values computed by hand."""
from __future__ import annotations

import pytest

from cobalt.evaluation.passk import format_table, pass_at_k, pass_table


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


def test_pass_table_n_is_each_problems_samples():
    table = pass_table(RECORDS)
    # A: c = 1, 2, 3 of 4; B: c = 0, 0, 1 of 2
    assert table.pass_at_1 == pytest.approx([(1 / 4 + 0) / 2, (2 / 4 + 0) / 2, (3 / 4 + 1 / 2) / 2])
    assert table.mean_hidden_pass_rate[0] == pytest.approx(((1 + 0 + 0.2 + 0) / 4 + (0 + 0.5) / 2) / 2)
    change = table.change_vs_turn0()
    assert change[0] == 0 and change[2] == pytest.approx((0.625 - 0.125) / 0.125 * 100)
    assert (table.samples_min, table.samples_max) == (2, 4)
    # a tie of counts: the larger is the run's; the other problem is reported with its count
    assert table.run_samples == 4 and table.odd_samples == [("#1", 2)]


def test_sixteen_samples_give_the_originals_numbers():
    # every problem with 16 samples: n = 16, exactly the original's estimator
    rec = _record([[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 11)
    table = pass_table([rec], run_samples=16)
    assert table.pass_at_1 == pytest.approx([pass_at_k(16, 5, 1), pass_at_k(16, 11, 1)])
    assert table.odd_samples == [] and table.notes() == []


def test_short_trajectories_are_reported_not_counted_wrong():
    recs = [dict(_record([[1.0], [1.0, 1.0]]), id="p1"), dict(_record([[None, 1.0]]), id="p2")]
    table = pass_table(recs)
    assert table.turns == 2
    # turn 1 of p1: only the trajectory that reaches it counts (1 of 1), not 1 of 2
    assert table.pass_at_1 == pytest.approx([(1.0 + 0.0) / 2, (1.0 + 1.0) / 2])
    assert table.short_trajectories == [("p1", 0, 1)]
    assert any("shorter than the table's 2 turns" in n and "(p1, sample 0, 1 turns)" in n for n in table.notes())


def test_problem_without_hidden_tests_is_left_out_and_reported():
    with_tests = dict(_record([[1.0], [0.0]]), id="a", hidden_test_cases='{"inputs": ["1"], "outputs": ["1"]}')
    without = dict(_record([[None], [None]]), id="b", hidden_test_cases='{"inputs": [], "outputs": []}')
    table = pass_table([with_tests, without])
    assert table.problems == 1 and table.no_hidden_tests == ["b"]
    assert table.pass_at_1 == pytest.approx([0.5])
    assert "without hidden tests, left out of Pass@1: b" in table.notes()[0]


def test_format_table_rows():
    a, b = pass_table(RECORDS, profile="paper"), pass_table(RECORDS[:1], profile="cobalt")
    text = format_table([("A", a), ("B", b)])
    lines = text.splitlines()
    assert lines[0] == "| turn | A Pass@1 | A vs turn 0 | B Pass@1 | B vs turn 0 |"
    assert lines[2] == "| 0 | 12.50 |  | 25.00 |  |"
    assert lines[4] == "| 2 | 62.50 | +400.0% | 75.00 | +200.0% |"
    assert lines[-2] == ("A: 2 problems, n = samples per problem (2 to 4) (samples per problem: min 2, max 4), "
                         "profile paper")
    assert lines[-1] == "B: 1 problems, n = 4 (samples per problem: min 4, max 4), profile cobalt"
