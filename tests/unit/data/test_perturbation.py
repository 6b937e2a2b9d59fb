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


@pytest.fixture(autouse=True)
def _own_tqdm_lock(monkeypatch):
    """Each test gets a tqdm lock of its own process. tqdm's default lock holds a semaphore shared
    with forked processes; mutation testing forks one process per mutant, and a process killed
    while holding it left every later one waiting (docs/TESTING.md, "Mutation testing")."""
    import threading

    import tqdm.auto

    monkeypatch.setattr(tqdm.auto.tqdm, "_lock", threading.RLock(), raising=False)


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


# --- added after mutation testing (docs/TESTING.md, "Mutation testing") ---

from cobalt.data.perturbation import (  # noqa: E402
    BAD_RECORD,
    add_arguments,
    iter_problems_on,
    perturb_record,
    select_public_tests,
)
from cobalt.io import RecordError  # noqa: E402


def cases_json(outputs, fn_name=None):
    return json.dumps({"inputs": [f"in{i}" for i in range(len(outputs))], "outputs": list(outputs),
                       **({"fn_name": fn_name} if fn_name else {})})


EIGHT = ["a", "b", "c", "d", "e", "f", "g", "h"]


def test_record_says_which_tests_were_modified_and_where_each_came_from():
    record = {"id": "r", "question": "q", "public_test_cases": cases_json(EIGHT, "f")}
    out = perturb_record(record, seed=1, field="public_test_cases", path="p.jsonl", line=1)
    public = json.loads(out["perturbed_public_test_cases"])
    assert out["modified_public_indices"] == [0, 1]
    source = out["perturbed_public_source_indices"]
    assert sorted(source) == list(range(8))
    # input k is "in<k>": its position in the perturbed set names its source index
    assert public["inputs"] == [f"in{k}" for k in source]
    # the two modified tests have each other's expected output; the others keep their own
    assert public["outputs"][0] == EIGHT[source[1]] and public["outputs"][1] == EIGHT[source[0]]
    assert public["outputs"][2:] == [EIGHT[k] for k in source[2:]]
    assert public["fn_name"] == "f" and json.loads(out["modified_test_cases"])["fn_name"] == "f"


def orders_of(ids, seed):
    out = {}
    for pid in ids:
        record = {"id": pid, "question": "q", "public_test_cases": cases_json(EIGHT)}
        out[pid] = tuple(perturb_record(record, seed=seed, field="public_test_cases", path="p", line=1)
                         ["perturbed_public_source_indices"])
    return out


def test_shuffle_depends_on_both_the_seed_and_the_problem_id():
    # 8! orders: equal tests with other ids, or under other seeds, are shuffled differently
    ids = ["p1", "p2", "p3", "p4"]
    by_id = orders_of(ids, seed=42)
    assert len(set(by_id.values())) > 1
    other_seed = orders_of(ids, seed=43)
    assert any(by_id[i] != other_seed[i] for i in ids)
    assert orders_of(ids, seed=42) == by_id                  # and fixed by them


def test_bad_records_name_file_line_and_field():
    with pytest.raises(RecordError) as exc:
        perturb_record({"question": "q", "public_test_cases": cases_json(EIGHT)}, seed=1, field="public_test_cases",
                       path="p.jsonl", line=7)
    assert str(exc.value) == "p.jsonl:7: field 'id': missing"
    with pytest.raises(RecordError) as exc:
        perturb_record({"id": 3, "question": "q"}, seed=1, field="tests", path="p.jsonl", line=8)
    assert str(exc.value) == "p.jsonl:8: field 'tests': missing"


def test_summary_counts_bad_records_and_names_their_file(tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, [{"id": "a", "question": "q", "public_test_cases": cases_json(["1", "2"])},
                      {"id": "b", "question": "q"},
                      {"question": "q", "public_test_cases": cases_json(["1", "2"])},
                      {"id": "c", "question": "q", "public_test_cases": cases_json(["1", "1"])}])
    summary = perturb_file(src, out, progress=False)
    assert summary.total == 4 and summary.kept == 1
    assert summary.dropped == {BAD_RECORD: 2, FEWER_THAN_TWO_UNIQUE: 1}
    assert summary.errors == [f"{src}:2: field 'public_test_cases': missing", f"{src}:3: field 'id': missing"]


def test_summary_lists_every_drop_reason_even_at_zero(tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, [{"id": "a", "question": "q", "public_test_cases": cases_json(["1", "2"])}])
    summary = perturb_file(src, out, progress=False)
    assert summary.to_dict()["dropped"] == {BAD_RECORD: 0, FEWER_THAN_TWO_UNIQUE: 0}


def test_progress_bar_by_default_and_hidden_on_request(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"id": "a", "question": "q", "public_test_cases": cases_json(["1", "2"])}])
    perturb_file(src, tmp_path / "a.jsonl")
    bar = capsys.readouterr().err
    assert "perturb: 1/1 problems (100%)" in bar                      # names the step, counts problems of the total
    perturb_file(src, tmp_path / "b.jsonl", progress=False)
    assert capsys.readouterr().err == ""
    assert cli_main(["perturb", "--input", str(src), "--output", str(tmp_path / "c.jsonl")]) == 0
    assert "perturb: 1/1 problems (100%)" in capsys.readouterr().err
    assert cli_main(["perturb", "--input", str(src), "--output", str(tmp_path / "d.jsonl"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_command_passes_seed_and_field_and_reports(tmp_path, capsys):
    rows = [{"id": f"p{i}", "question": "q", "tests": cases_json(EIGHT)} for i in range(3)]
    rows += [{"id": f"bad{i}", "question": "q"} for i in range(22)]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows)
    runs = {}
    for seed in (None, 7):
        out = tmp_path / f"out-{seed}.jsonl"
        argv = ["perturb", "--input", str(src), "--output", str(out), "--field", "tests", "--no-progress"]
        assert cli_main(argv + ([] if seed is None else ["--seed", str(seed)])) == 0
        runs[seed] = out.read_text()
        summary = json.loads((tmp_path / f"out-{seed}.jsonl.summary.json").read_text())
        assert summary["seed"] == (42 if seed is None else 7) and summary["source"] == str(src)
        assert summary["kept"] == 3 and summary["bad_records"] == 22
        printed = capsys.readouterr().out.splitlines()
        assert printed[0] == f"perturbed -> {out}: 3 kept of 25"
        shown = [ln for ln in printed if ln.startswith(f"  {src}:")]
        assert len(shown) == 10                                           # the first 10 errors, not more,
        assert "  ... and 12 more" in printed                             # then a count of the rest
        assert shown[0] == f"  {src}:4: field 'tests': missing"
    # the command's default seed is 42; --seed reaches the shuffle
    in_process = tmp_path / "direct-42.jsonl"
    perturb_file(src, in_process, seed=42, field="tests", progress=False)
    assert runs[None] == in_process.read_text()
    assert runs[7] != runs[None]


def test_command_flags_input_and_output_are_required_and_have_help(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for argv in (["--output", "o.jsonl"], ["--input", "i.jsonl"]):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--input" in err and "--output" in err
    args = parser.parse_args(["--input_file", "i", "--output_file", "o"])
    assert (args.input, args.output, args.seed, args.field, args.no_progress) == ("i", "o", 42, "public_test_cases",
                                                                                 False)
    args = parser.parse_args(["--input", "i", "--output", "o", "--seed", "5"])
    assert (args.input, args.output, args.seed) == ("i", "o", 5)
    for action in parser._actions:
        if action.dest != "help":
            assert action.help and action.help.strip(), action.dest


def test_select_public_tests_errors_name_file_line_and_field():
    with pytest.raises(ValueError) as exc:
        select_public_tests({"id": 1}, "hidden")
    assert str(exc.value) == "public test set must be one of auto, public, perturbed, got 'hidden'"
    cases = [
        ([1, 2], "auto", "f.jsonl:3: expected a JSON object, got list"),
        ({"id": 1, "public_test_cases": "P", "public_test_set": "hidden"}, "auto",
         "f.jsonl:3: field 'public_test_set': expected 'public' or 'perturbed', got 'hidden'"),
        ({"id": 1, "public_test_cases": "P"}, "perturbed",
         "f.jsonl:3: field 'perturbed_public_test_cases': missing: running on perturbed public tests needs the "
         "output of `cobalt perturb`"),
        ({"id": 1, "perturbed_public_test_cases": "Q"}, "perturbed", "f.jsonl:3: field 'public_test_cases': missing"),
        ({"id": 1, "public_test_cases": "Q", "public_test_set": "perturbed"}, "public",
         "f.jsonl:3: field 'original_public_test_cases': missing"),
    ]
    for record, which, message in cases:
        with pytest.raises(RecordError) as exc:
            select_public_tests(record, which, path="f.jsonl", line=3)
        assert str(exc.value) == message


def test_iter_problems_on_runs_each_record_on_the_asked_tests(tmp_path):
    perturbed = perturb_record({"id": "a", "question": "q", "public_test_cases": cases_json(EIGHT),
                                "hidden_test_cases": cases_json(["h"])},
                               seed=1, field="public_test_cases", path="p", line=1)
    plain = {"id": "b", "question": "q", "public_test_cases": cases_json(["x", "y"]), "hidden_test_cases": cases_json(["h"])}
    src = tmp_path / "problems.jsonl"
    write_jsonl(src, [perturbed, plain])
    auto = list(iter_problems_on(src))
    assert [(line, p.id, p.perturbed) for line, p in auto] == [(1, "a", True), (2, "b", False)]
    assert list(auto[0][1].public.outputs) == json.loads(perturbed["perturbed_public_test_cases"])["outputs"]
    assert list(auto[1][1].public.outputs) == ["x", "y"]
    public = list(iter_problems_on(src, "public"))
    assert list(public[0][1].public.outputs) == EIGHT and not public[0][1].perturbed
    write_jsonl(src, [perturbed, [1]])
    with pytest.raises(RecordError, match=f"^{src}:2: expected a JSON object, got list$"):
        list(iter_problems_on(src))
    write_jsonl(src, [plain])
    with pytest.raises(RecordError, match=f"^{src}:1: field 'perturbed_public_test_cases'"):
        list(iter_problems_on(src, "perturbed"))
    no_question = {k: v for k, v in plain.items() if k != "question"}
    write_jsonl(src, [plain, no_question])                      # a record that is not a problem
    with pytest.raises(RecordError, match=f"^{src}:2: field 'question': missing "):
        list(iter_problems_on(src))
