"""Perturbation of public tests: hand-built cases, invariants and the command on real problems."""
from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.cli import main as cli_main
from cobalt.data.perturbation import FEWER_THAN_TWO_UNIQUE, perturb_file, perturb_tests

REPO = Path(__file__).resolve().parents[3]
CODE_CONTESTS = REPO / ".." / "shared" / "data" / "code_contests" / "code_contests_test.json"


def test_duplicates_go_last_and_the_first_two_are_swapped():
    inputs = ["i0", "i1", "i2", "i3", "i4", "i5"]
    outputs = ["1", "2", "1 \n", "3", "2", "4"]
    p = perturb_tests(inputs, outputs, random.Random(7))
    assert p is not None and p.n_unique == 4
    stripped = [outputs[i].strip() for i in p.order]
    assert len(set(stripped[:4])) == 4  # the unique ones, each output once
    assert set(stripped[4:]) <= set(stripped[:4]) and len(stripped[4:]) == 2
    a, b = p.modified
    assert p.inputs[:2] == (inputs[a], inputs[b])
    assert p.outputs[:2] == (outputs[b], outputs[a])
    assert p.outputs[0].strip() != outputs[a].strip() and p.outputs[1].strip() != outputs[b].strip()
    assert p.outputs[2:] == tuple(outputs[i] for i in p.order[2:])


class FixedShuffle(random.Random):
    """A random source whose shuffle applies a permutation chosen by hand (position k gets item
    ``perm[k]``), so that each expected result below can be worked out on paper."""

    def __init__(self, perm: list[int]):
        super().__init__(0)
        self.perm = perm

    def shuffle(self, x) -> None:  # noqa: D102
        x[:] = [x[i] for i in self.perm]


@pytest.mark.parametrize(
    "outputs, perm, order, n_unique, new_outputs",
    [
        # visit 1 (x), 2 (y), 0 (x again: a duplicate)
        (["x", "x", "y"], [1, 2, 0], (1, 2, 0), 2, ("y", "x", "x")),
        # visit 0 (x), 1 (x: duplicate), 2 (y): the unique ones come first
        (["x", "x", "y"], [0, 1, 2], (0, 2, 1), 2, ("y", "x", "x")),
        # stripped outputs decide: " 1" and "1\n" are the same output
        (["1", " 1", "2", "3", "1\n"], [4, 3, 1, 2, 0], (4, 3, 2, 1, 0), 3, ("3", "1\n", "2", " 1", "1")),
        # the two modified tests are the first two unique ones in the shuffled order
        (["a", "b", "c", "d"], [3, 0, 2, 1], (3, 0, 2, 1), 4, ("a", "d", "c", "b")),
        # duplicates keep the order in which the shuffle visited them
        (["p", "q", "p", "q", "p"], [4, 2, 3, 0, 1], (4, 3, 2, 0, 1), 2, ("q", "p", "p", "p", "q")),
    ],
)
def test_hand_worked_orders(outputs, perm, order, n_unique, new_outputs):
    inputs = [f"in{i}" for i in range(len(outputs))]
    p = perturb_tests(inputs, outputs, FixedShuffle(perm))
    assert p.order == order and p.n_unique == n_unique
    assert p.outputs == new_outputs
    assert p.inputs == tuple(f"in{i}" for i in order)
    assert p.modified == order[:2]


@pytest.mark.parametrize(
    "outputs",
    [[], ["5"], ["5", "5"], ["5", " 5", "5\n", "\t5 "]],
)
def test_fewer_than_two_unique_outputs_is_dropped(outputs):
    assert perturb_tests([f"in{i}" for i in range(len(outputs))], outputs, random.Random(0)) is None


def test_same_seed_same_result_other_seeds_differ():
    inputs = [str(i) for i in range(10)]
    outputs = [str(i % 6) for i in range(10)]
    first = perturb_tests(inputs, outputs, random.Random(123))
    assert first == perturb_tests(inputs, outputs, random.Random(123))
    orders = {perturb_tests(inputs, outputs, random.Random(s)).order for s in range(10)}
    assert len(orders) > 1


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="2 inputs but 1 outputs"):
        perturb_tests(["a", "b"], ["1"], random.Random(0))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=3), st.sampled_from(["0", "1", "1 ", "2", "\n2", "3"])), max_size=12),
       st.integers(0, 2**32))
def test_invariants(pairs, seed):
    inputs, outputs = [p[0] for p in pairs], [p[1] for p in pairs]
    result = perturb_tests(inputs, outputs, random.Random(seed))
    n_unique = len({o.strip() for o in outputs})
    if n_unique < 2:
        assert result is None
        return
    assert result.n_unique == n_unique
    assert sorted(result.order) == list(range(len(inputs)))
    assert Counter(result.outputs) == Counter(outputs)  # a swap keeps the multiset
    a, b = result.modified
    assert result.outputs[0] == outputs[b] and result.outputs[1] == outputs[a]
    assert outputs[a].strip() != outputs[b].strip()


def write_jsonl(path: Path, rows: list) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")


def test_command_on_hand_built_records(tmp_path):
    tests = lambda outs, fn=None: json.dumps(  # noqa: E731
        {"inputs": [f"in{i}" for i in range(len(outs))], "outputs": outs, **({"fn_name": fn} if fn else {})})
    rows = [
        {"id": "ok", "question": "q", "public_test_cases": tests(["1", "2", "2", "3"]), "other": 5},
        {"id": "same", "question": "q", "public_test_cases": tests(["7", "7 ", "7"])},
        {"id": "call", "question": "q", "public_test_cases": tests(["[1]", "[2]"], fn="f")},
        {"id": "nofield", "question": "q"},
        "{not json",
        {"id": "badtype", "public_test_cases": 3},
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, rows)
    assert cli_main(["perturb", "--input_file", str(src), "--output_file", str(out), "--no-progress"]) == 0
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert list(records) == ["ok", "call"]
    ok = records["ok"]
    assert ok["other"] == 5 and ok["public_test_cases"] == rows[0]["public_test_cases"]
    modified, public = json.loads(ok["modified_test_cases"]), json.loads(ok["perturbed_public_test_cases"])
    assert modified["inputs"] == public["inputs"][:2] and modified["outputs"] == public["outputs"][:2]
    assert json.loads(records["call"]["modified_test_cases"])["fn_name"] == "f"
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())
    assert summary["kept"] == 2 and summary["total"] == 6
    assert summary["dropped"][FEWER_THAN_TWO_UNIQUE] == 1 and summary["bad_records"] == 3
    errors = summary["errors"]
    assert any(e.endswith(":4: field 'public_test_cases': missing") for e in errors)
    assert any(":5: invalid JSON" in e for e in errors)
    assert any(":6: field 'public_test_cases': expected str or dict, got int" in e for e in errors)
    # rerun: resumes, nothing duplicated
    before = out.read_text()
    assert perturb_file(src, out, progress=False).kept == 2
    assert out.read_text() == before


def test_real_problems_are_dropped_exactly_when_fewer_than_two_outputs_differ(tmp_path):
    problems = json.loads(CODE_CONTESTS.read_text(encoding="utf-8"))[:60]
    rows = []
    for i, p in enumerate(problems):
        public = {"inputs": p["tests"]["inputs"][:4], "outputs": p["tests"]["outputs"][:4]}
        rows.append({"id": f"cc-{i}", "question": p["problem"], "public_test_cases": json.dumps(public)})
    expected = [r["id"] for r in rows
                if len({o.strip() for o in json.loads(r["public_test_cases"])["outputs"]}) >= 2]
    src = tmp_path / "cc.jsonl"
    write_jsonl(src, rows)
    outs = []
    for name in ("a.jsonl", "b.jsonl"):
        summary = perturb_file(src, tmp_path / name, seed=3, progress=False)
        outs.append((tmp_path / name).read_text())
    assert outs[0] == outs[1]  # deterministic
    kept = [json.loads(line)["id"] for line in outs[0].splitlines()]
    assert kept == expected and 0 < len(kept) < len(rows)
    assert summary.dropped[FEWER_THAN_TWO_UNIQUE] == len(rows) - len(kept)


def test_paper_script_shim_runs_the_command(tmp_path):
    import subprocess
    import sys

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, [{"id": 1, "question": "q", "public_test_cases": json.dumps({"inputs": ["a", "b"], "outputs": ["1", "2"]})}])
    proc = subprocess.run([sys.executable, str(REPO / "preproc" / "run_perturbation.py"), "--input_file", str(src),
                           "--output_file", str(out), "--seed", "5", "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert json.loads(rec["modified_test_cases"]) == {"inputs": ["a", "b"], "outputs": ["2", "1"]} or \
        json.loads(rec["modified_test_cases"]) == {"inputs": ["b", "a"], "outputs": ["1", "2"]}
