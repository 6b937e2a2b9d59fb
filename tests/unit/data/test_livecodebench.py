"""LiveCodeBench release-test6 preparation on a fixture built from ../shared/data."""
from __future__ import annotations

import ast
import asyncio
import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from cobalt import prompts
from cobalt.cli import main as cli_main
from cobalt.data import livecodebench as lcb
from cobalt.execution.client import EvaluatorClient
from cobalt.io import RecordError

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "livecodebench" / "test6_sample.jsonl"
SOURCE = REPO / ".." / "shared" / "data" / "livecodebench" / "livecodebench_public_tests.json"

SPLIT_WORDS = """class Solution:
    def splitWordsBySeparator(self, words, separator):
        # split every word and keep the non-empty pieces, in order
        return [piece for word in words for piece in word.split(separator) if piece]
"""
WINNER = """n = int(input())
s = input().strip()
t, a = s.count("T"), s.count("A")
if t != a:
    print("T" if t > a else "A")
else:
    # equal wins: whoever reached the final count first is the one who did not win the last game
    print("A" if s[-1] == "T" else "T")
"""


def source_tests(index: int) -> list[dict]:
    items = json.loads(SOURCE.read_text(encoding="utf-8"))
    tests = items[index]["tests"]
    return ast.literal_eval(tests) if isinstance(tests, str) else tests


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("lcb") / "lcb.jsonl"
    rc = cli_main(["preproc-lcb", "--input", str(FIXTURE), "--output", str(out), "--no-progress"])
    assert rc == 0
    return out, {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}


def test_good_records_kept_and_bad_ones_reported(prepared):
    out, records = prepared
    assert list(records) == ["lcb-19", "lcb-63", "lcb-71", "lcb-190", "lcb-192", "lcb-193"]
    summary = json.loads(out.with_name(out.name + ".summary.json").read_text())
    assert summary["kept"] == 6 and summary["total"] == 9 and summary["bad_records"] == 3
    errors = summary["errors"]
    assert any(e.endswith(":7: field 'question_content': missing") for e in errors)
    assert any(":8: field 'private_test_cases': cannot decode: not base64" in e for e in errors)
    assert any(":9: field 'metadata': invalid JSON" in e for e in errors)


@pytest.mark.parametrize("index", [19, 63, 71, 190, 192, 193])
def test_decoded_hidden_tests_are_the_original_tests(prepared, index):
    _, records = prepared
    rec = records[f"lcb-{index}"]
    original = source_tests(index)
    public, hidden, tests = (json.loads(rec[k]) for k in ("public_test_cases", "hidden_test_cases", "test_cases"))
    assert public["inputs"] == [t["input"] for t in original[:1]]
    assert hidden["inputs"] == [t["input"] for t in original[1:]]
    assert hidden["outputs"] == [t["output"] for t in original[1:]]
    assert tests["inputs"] == public["inputs"] + hidden["inputs"]
    functional = original[0]["testtype"] == "functional"
    assert ("fn_name" in tests) is functional


def test_instruction_is_the_template_with_the_statement_cut_before_examples(prepared):
    _, records = prepared
    for rec in records.values():
        assert "Example 1" not in rec["instruction"] and "Sample Input 1" not in rec["instruction"]
        assert rec["instruction"] == prompts.problem_prompt(rec["question"])
    assert records["lcb-190"]["question"].endswith("the overall winner is the one who reached that number of wins "
                                                   "first.\nFind the overall winner: Takahashi or Aoki.\n\nInput\n\n"
                                                   "The input is given from Standard Input in the following format:\n"
                                                   "N\nS\n\nOutput\n\nIf the overall winner is Takahashi, print T; "
                                                   "if it is Aoki, print A.\n\nConstraints\n\n\n- 1\\leq N \\leq 100\n"
                                                   "- N is an integer.\n- S is a string of length N consisting of T and A.")
    assert "splitWordsBySeparator" in records["lcb-63"]["instruction"]


def test_starter_code_can_be_omitted(tmp_path):
    out = tmp_path / "o.jsonl"
    lcb.prepare_file(str(FIXTURE), out, with_starter=False, progress=False)
    rec = json.loads(out.read_text().splitlines()[1])
    assert rec["id"] == "lcb-63" and "class Solution" not in rec["instruction"]


def test_functional_and_stdin_tests_run_in_the_sandbox(prepared):
    _, records = prepared
    client = EvaluatorClient.embedded(max_concurrency=4)
    jobs = [
        (SPLIT_WORDS, records["lcb-63"]["test_cases"]),
        (WINNER, records["lcb-190"]["test_cases"]),
        (SPLIT_WORDS.replace("if piece", ""), records["lcb-63"]["test_cases"]),
        ("print('T')", records["lcb-190"]["test_cases"]),
    ]
    good_call, good_stdin, bad_call, bad_stdin = asyncio.run(client.evaluate_many(jobs))
    assert good_call.all_passed and good_stdin.all_passed
    assert not bad_call.all_passed and not bad_stdin.all_passed


def test_rerun_resumes_without_duplicates(prepared):
    out, _ = prepared
    before = out.read_text(encoding="utf-8")
    summary = lcb.prepare_file(str(FIXTURE), out, progress=False)
    assert out.read_text(encoding="utf-8") == before
    assert summary.kept == 6


class _TouchFile:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_malicious_pickle_runs_nothing(tmp_path, protocol):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_TouchFile(marker), protocol=protocol)
    # the payload is real: an ordinary unpickler would run the command
    pickle.loads(payload)
    assert marker.exists()
    marker.unlink()
    blob = base64.b64encode(zlib.compress(payload)).decode()
    with pytest.raises(lcb.UnsafePickleError, match="refusing to load"):
        lcb.decode_private_tests(blob)
    record = json.loads(FIXTURE.read_text().splitlines()[0])
    record["private_test_cases"] = blob
    with pytest.raises(RecordError, match=r"x\.jsonl:5: field 'private_test_cases'.*refusing"):
        lcb.convert_record(record, path="x.jsonl", line=5)
    assert not marker.exists()


def test_pickle_of_anything_but_a_string_is_refused():
    blob = base64.b64encode(zlib.compress(pickle.dumps([{"input": "1", "output": "1"}]))).decode()
    with pytest.raises(lcb.UnsafePickleError, match="expected a pickled string"):
        lcb.decode_private_tests(blob)


def test_encoding_round_trip_and_size_cap():
    tests = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}] * 50
    blob = lcb.encode_private_tests(tests)
    assert lcb.decode_private_tests(blob) == tests
    with pytest.raises(ValueError, match="exceed"):
        lcb.decode_private_tests(blob, max_bytes=100)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Do X.\n\nExample 1:\nInput: 1", "Do X."),
        ("Read N.\r\n\r\nSample Input 1\r\n\r\n3", "Read N."),
        ("A\n\nSample Input 1\n\nExample 1:", "A"),
        ("No examples here.\n", "No examples here."),
    ],
)
def test_cut_statement(text, expected):
    assert lcb.cut_statement(text) == expected


def test_help_lists_flags(capsys):
    with pytest.raises(SystemExit):
        cli_main(["preproc-lcb", "--help"])
    text = capsys.readouterr().out
    for flag in ("--input", "--hub-file", "--output", "--starter-code", "--template-dir", "--max-decoded-mb"):
        assert flag in text


def test_paper_script_shim_prepares_the_file(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "o.jsonl"
    proc = subprocess.run([sys.executable, str(REPO / "preproc" / "preproc_lcb_test6.py"), "--input", str(FIXTURE),
                           "--output", str(out), "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_text().splitlines()) == 6 and "6 kept of 9" in proc.stdout
