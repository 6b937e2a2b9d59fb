"""`cobalt compare-runs`: Pass@1 per turn, the paired bootstrap interval and the repair rate,
against values computed by hand on small evaluated records."""
from __future__ import annotations

import json

import pytest

from cobalt.analysis.compare_runs import compare, load_run
from cobalt.cli import main
from cobalt.io import RecordError


def record(pid, samples):
    """An evaluated record: one list of per-turn hidden pass rates per sample."""
    return {"id": pid, "samples": [{"turns": [{"hidden_pass_rate": r} for r in rates]} for rates in samples]}


A = [record("p1", [[0, 1, 1], [0, 0.5, 1]]), record("p2", [[0, 0, 0], [0.2, 0, 0]])]
B = [record("p1", [[1, 1, 1], [0, 1, 1]]), record("p2", [[0, 0, 1], [0, 0, 0]])]


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def as_run(records):
    return {r["id"]: r for r in records}


def test_pass_at_1_difference_and_interval_by_hand():
    rows = compare(as_run(A), as_run(B), resamples=10_000, seed=0)
    assert [r.pass_a for r in rows] == [0.0, 0.25, 0.5]
    assert [r.pass_b for r in rows] == [0.25, 0.5, 0.75]
    # per-problem differences at turn 0 are 0.5 and 0: the resampled means are 0, 0.25 or 0.5
    assert (rows[0].diff.value, rows[0].diff.low, rows[0].diff.high) == (0.25, 0.0, 0.5)
    assert not rows[0].diff.excludes_zero
    # turn 1: differences 0.5 and 0 again; turn 2: 0 and 0.5
    assert (rows[2].diff.low, rows[2].diff.high) == (0.0, 0.5)


def test_repair_rate_by_hand():
    rows = compare(as_run(A), as_run(B))
    assert rows[0].repair_a is None
    # A, turn 1: 4 failures at turn 0, one passes at turn 1; turn 2: 3 failures at turn 1, one fixed
    assert rows[1].repair_a.value == pytest.approx(1 / 4) and rows[2].repair_a.value == pytest.approx(1 / 3)
    # B, turn 1: 3 failures, 1 fixed; turn 2: 2 failures, 1 fixed
    assert rows[1].repair_b.value == pytest.approx(1 / 3) and rows[2].repair_b.value == pytest.approx(1 / 2)
    assert rows[2].repair_diff.value == pytest.approx(1 / 2 - 1 / 3)


def test_a_constant_gain_is_beyond_noise():
    a = as_run([record(f"p{i}", [[0], [0]]) for i in range(5)])
    b = as_run([record(f"p{i}", [[1], [0]]) for i in range(5)])
    (row,) = compare(a, b, resamples=500)
    assert (row.diff.value, row.diff.low, row.diff.high) == (0.5, 0.5, 0.5) and row.diff.excludes_zero


def test_same_seed_same_interval_and_runs_must_pair():
    one, two = compare(as_run(A), as_run(B), seed=3), compare(as_run(A), as_run(B), seed=3)
    assert one == two
    with pytest.raises(ValueError, match="different problems"):
        compare(as_run(A), as_run(B[:1]))


def test_cli_tables_noise_floor_and_json(tmp_path, capsys):
    a, b, noise = write(tmp_path / "a.jsonl", A), write(tmp_path / "b.jsonl", B), write(tmp_path / "n.jsonl", A)
    assert main(["compare-runs", str(a), str(b), "--noise", str(noise), "--resamples", "1000",
                 "--out", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert "| 0 | 0.0 | 25.0 | +25.0 [+0.0, +50.0] |" in out
    assert "noise floor" in out and "| 2 | 50.0 | 50.0 | +0.0 [+0.0, +0.0] |" in out
    saved = json.loads((tmp_path / "cmp.json").read_text())
    assert saved["rows"][2]["pass_b"] == 0.75 and saved["noise"][1]["diff"]["value"] == 0.0


def test_unevaluated_records_name_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(A[0]) + "\n" + json.dumps({"id": "p2", "samples": [{"turns": [{"public": {}}]}]}) + "\n")
    with pytest.raises(RecordError, match=r"bad.jsonl.*2.*hidden_pass_rate"):
        load_run(bad)
