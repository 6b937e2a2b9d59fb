"""TACO-verified cleaning on a TACO-format fixture built from ../shared/data, with the real sandbox."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cobalt.cli import main as cli_main
from cobalt.data import taco
from cobalt.data.problems import problem_rng
from cobalt.execution.client import EvaluatorClient

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "taco" / "taco_verified_sample.jsonl"

EXPECTED_DROPS = {
    "drop-too-few-tests": taco.TOO_FEW_TESTS,
    "drop-length-mismatch": taco.LENGTH_MISMATCH,
    "drop-non-string-entries": taco.NON_STRING_ENTRIES,
    "drop-mentions-image": taco.MENTIONS_IMAGE,
    "drop-short-statement": taco.SHORT_STATEMENT,
    "drop-unverified": taco.UNVERIFIED,
    "drop-no-solutions": taco.NO_SOLUTIONS,
    "bad-missing-question": taco.BAD_RECORD,
    "bad-input-output-json": taco.BAD_RECORD,
    "bad-solutions-type": taco.BAD_RECORD,
    "taco-21": taco.BAD_RECORD,  # line 22 is not JSON, so it has no id of its own
}


def fixture_records() -> dict[str, dict]:
    out = {}
    for line in FIXTURE.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[rec["id"]] = rec
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def clean(output: Path, **cfg) -> taco.DropSummary:
    client = EvaluatorClient.embedded(max_concurrency=8)
    return asyncio.run(taco.clean_file(str(FIXTURE), output, taco.TacoConfig(**cfg), client, progress=False))


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory) -> tuple[Path, taco.DropSummary]:
    output = tmp_path_factory.mktemp("taco") / "clean.jsonl"
    return output, clean(output)


def test_each_rule_drops_its_problem_and_the_rest_are_kept(cleaned):
    output, summary = cleaned
    kept = [r["id"] for r in read_jsonl(output)]
    assert kept == [pid for pid in fixture_records() if pid.startswith("keep-")]  # input order
    dropped = {r["id"]: r["rule"] for r in read_jsonl(taco.sidecar_paths(output)[0])}
    assert dropped == EXPECTED_DROPS
    assert summary.kept == 11 and summary.total == 22
    assert summary.dropped[taco.BAD_RECORD] == 4
    assert all(summary.dropped[rule] == 1 for rule in taco.RULES if rule != taco.BAD_RECORD)


def test_bad_records_name_file_line_and_field(cleaned):
    output, summary = cleaned
    errors = sorted(summary.errors)
    assert any(":19: field 'question': missing" in e for e in errors)
    assert any(":20: field 'input_output': invalid JSON" in e for e in errors)
    assert any(":21: field 'solutions': expected" in e for e in errors)
    assert any(":22: invalid JSON" in e for e in errors)
    assert all(str(FIXTURE) in e for e in errors)


def test_summary_file_matches(cleaned):
    output, summary = cleaned
    written = json.loads(taco.sidecar_paths(output)[1].read_text())
    assert written["kept"] == 11 and written["dropped"] == dict(summary.dropped)
    assert written["config"]["seed"] == 42


def test_output_records_have_four_public_tests_and_at_most_twenty(cleaned):
    output, _ = cleaned
    for rec in read_jsonl(output):
        assert set(rec) >= {"id", "difficulty", "question", "test_cases", "public_test_cases", "hidden_test_cases", "source"}
        tests, public, hidden = (json.loads(rec[k]) for k in ("test_cases", "public_test_cases", "hidden_test_cases"))
        assert len(public["inputs"]) == 4
        assert len(tests["inputs"]) <= 20
        assert tests["inputs"] == public["inputs"] + hidden["inputs"]
        assert tests["outputs"] == public["outputs"] + hidden["outputs"]
        assert all(isinstance(x, str) for x in tests["inputs"] + tests["outputs"])


def test_call_based_tests_are_json_argument_lines(cleaned):
    output, _ = cleaned
    rec = next(r for r in read_jsonl(output) if r["id"] == "keep-call-diagonal")
    tests = json.loads(rec["test_cases"])
    assert tests["fn_name"] == "areaOfMaxDiagonal"
    for text, expected in zip(tests["inputs"], tests["outputs"]):
        (dimensions,) = [json.loads(line) for line in text.splitlines()]
        assert isinstance(dimensions, list) and all(len(d) == 2 for d in dimensions)
        assert isinstance(json.loads(expected), int)  # TACO's one-element output list was unwrapped


def test_selection_keeps_five_shortest_and_fifteen_longest_of_a_real_problem(cleaned):
    output, _ = cleaned
    source = json.loads(fixture_records()["keep-stdin-cc-140"]["input_output"])
    assert len(source["inputs"]) == 138
    by_len = sorted(range(138), key=lambda i: (len(source["inputs"][i]), i))
    expected = {source["inputs"][i] for i in by_len[:5] + by_len[-15:]}
    rec = next(r for r in read_jsonl(output) if r["id"] == "keep-stdin-cc-140")
    assert set(json.loads(rec["test_cases"])["inputs"]) == expected


def test_kept_tests_pass_the_reference_and_fail_a_wrong_program(cleaned):
    output, _ = cleaned
    rec = next(r for r in read_jsonl(output) if r["id"] == "keep-stdin-cc-154")
    reference = json.loads(fixture_records()["keep-stdin-cc-154"]["solutions"])[0]
    client = EvaluatorClient.embedded(max_concurrency=4)
    good, bad = asyncio.run(client.evaluate_many([(reference, rec["test_cases"]), ("print('YES')", rec["test_cases"])]))
    assert good.all_passed
    assert not bad.all_passed


def test_rerun_is_deterministic_and_resumes_after_a_crash(cleaned, tmp_path):
    full, _ = cleaned
    # a crash after three problems, the last line torn
    partial = tmp_path / "clean.jsonl"
    lines = full.read_text(encoding="utf-8").splitlines(keepends=True)
    partial.write_text("".join(lines[:3]) + lines[3][:50], encoding="utf-8")
    rc = cli_main(["preproc-taco", "--input", str(FIXTURE), "--output", str(partial), "--no-progress"])
    assert rc == 0
    assert partial.read_text(encoding="utf-8") == full.read_text(encoding="utf-8")
    assert read_jsonl(taco.sidecar_paths(partial)[0]) == read_jsonl(taco.sidecar_paths(full)[0])


def test_verification_tries_solutions_in_seeded_order(tmp_path):
    # with one solution allowed, a problem with wrong solutions is kept only when the seed puts the right one first
    records = fixture_records()
    rec = records["keep-call-diagonal"]
    solutions = json.loads(rec["solutions"])
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    outcomes = {}
    for seed in range(6):
        first = taco.solutions_to_try(solutions, 1, problem_rng(seed, rec["id"], "solutions"))[0]
        out = tmp_path / f"out{seed}.jsonl"
        client = EvaluatorClient.embedded(max_concurrency=4)
        summary = asyncio.run(taco.clean_file(str(source), out, taco.TacoConfig(max_solutions=1, seed=seed), client,
                                              progress=False))
        outcomes[seed] = summary.kept
        assert summary.kept == (1 if first == solutions[-1] else 0)
    assert set(outcomes.values()) == {0, 1}, "the seeds tried should cover both outcomes"


def test_parquet_and_json_list_inputs_give_the_same_result(cleaned, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    good = [r for pid, r in fixture_records().items() if pid.startswith("keep-stdin-cc")]
    as_json = tmp_path / "in.json"
    as_json.write_text(json.dumps(good), encoding="utf-8")
    as_parquet = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(good), as_parquet)
    client = EvaluatorClient.embedded(max_concurrency=8)
    results = []
    for src in (as_json, as_parquet):
        out = tmp_path / (src.suffix[1:] + ".jsonl")
        asyncio.run(taco.clean_file(str(src), out, taco.TacoConfig(), client, progress=False))
        results.append(read_jsonl(out))
    full = {r["id"]: r for r in read_jsonl(cleaned[0])}
    assert results[0] == results[1] == [full[r["id"]] for r in good]


# -- pure functions ---------------------------------------------------------------

def test_select_tests_small_sets_are_kept_whole():
    assert taco.select_tests(["a"] * 7) == list(range(7))
    inputs = [str(i) * (i % 30 + 1) for i in range(40)]
    chosen = taco.select_tests(inputs, 5, 15)
    lengths = sorted(len(x) for x in inputs)
    assert len(chosen) == 20 and chosen == sorted(chosen)
    assert sorted(len(inputs[i]) for i in chosen) == lengths[:5] + lengths[-15:]


@pytest.mark.parametrize(
    "value, is_input, fn_name, mode, expected",
    [
        ("3\n1 2 3\n", True, None, "call", "3\n1 2 3\n"),
        (["1", "2"], False, None, "call", "1 2"),
        ([[1, 2], "ab"], True, "f", "call", '[1, 2]\n"ab"'),
        ([[4, 5]], False, "f", "call", "[4, 5]"),
        ([True], False, "f", "call", "true"),
        ([1, "ab", 2.5], True, "f", "lossy", "1 ab 2.5"),
        ([6], False, "f", "lossy", "6"),
    ],
)
def test_convert_entry(value, is_input, fn_name, mode, expected):
    assert taco.convert_entry(value, is_input=is_input, fn_name=fn_name, call_mode=mode) == expected


@pytest.mark.parametrize("value", [5, None, {"a": 1}, [[1, 2]], [True]])
def test_convert_entry_rejects_non_strings(value):
    with pytest.raises(taco.Dropped) as info:
        taco.convert_entry(value, is_input=True, fn_name=None, call_mode="call")
    assert info.value.rule == taco.NON_STRING_ENTRIES


@pytest.mark.parametrize(
    "text, expected",
    [
        ("See the image below.", True),
        ("<img src='x.png'>", True),
        ("![figure](fig.jpg)", True),
        ("Images are shown.", True),
        ("Imagine an array a of n integers.", False),
        ("Compute the sum.", False),
    ],
)
def test_mentions_image(text, expected):
    assert taco.mentions_image(text) is expected


def test_public_split_is_seeded_per_problem():
    a = taco.split_public_hidden(20, 4, problem_rng(42, "p1", "split"))
    b = taco.split_public_hidden(20, 4, problem_rng(42, "p1", "split"))
    c = [taco.split_public_hidden(20, 4, problem_rng(seed, "p1", "split")) for seed in range(10)]
    assert a == b and len(a[0]) == 4 and sorted(a[0] + a[1]) == list(range(20))
    assert len({tuple(pub) for pub, _ in c}) > 1


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        cli_main(["preproc-taco", "--help"])
    text = capsys.readouterr().out
    for flag in ("--input", "--output", "--min-tests", "--max-tests", "--n-shortest", "--min-alnum",
                 "--max-solutions", "--n-public", "--seed", "--call-mode", "--limit"):
        assert flag in text


def test_paper_script_shim_shows_the_command_help():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO / "preproc" / "preproc_taco.py"), "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "cobalt preproc-taco" in proc.stdout
