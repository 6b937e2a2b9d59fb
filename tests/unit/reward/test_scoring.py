"""compute_score end to end: real LeetCode problems, the real embedded (bubblewrap) evaluator."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest

from cobalt.execution.client import EvaluatorClient
from cobalt.reward import compute_score, is_validation_row
from cobalt.reward import scoring
from reward_data import call_tests, stdin_program, with_code

COLLECT = 198  # minimum-operations-to-collect-elements: outputs 4, 5, 4
PAIRS = 206  # minimum-array-length-after-pair-removals: outputs 0, 0, 1
F95 = 0.006938113982152284  # 0.075 * tanh(95 / 1024): think length of row 198's answer
F175 = 0.012694040882648994  # 0.075 * tanh(175 / 1024): row 206


@pytest.fixture(scope="module")
def client() -> EvaluatorClient:
    return EvaluatorClient.embedded(max_concurrency=4)


def _wrong(row: dict, body: str) -> str:
    method = row["entry_point"].rsplit(".", 1)[-1]
    return f"class Solution:\n    def {method}(self, *args):\n        {body}\n"


async def _score(client, response, tests, **extra):
    gt = tests if isinstance(tests, str) else json.dumps(tests)
    return await compute_score("leetcode", response, gt, extra_info=extra or None, client=client)


async def test_reference_solution_scores_one(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    out = await _score(client, with_code(row, row["prompt"] + row["completion"]), call_tests(row))
    assert out["score"] == 1.0 and out["pass_rate"] == 1.0 and out["acc"] == 1.0
    assert (out["correctness"], out["improvement"], out["format"]) == (1.0, 0.0, 0.0)
    assert out["n_tests"] == 3 and out["has_code"] and not out["eval_failed"]


async def test_real_model_answer_scores_one(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    response = with_code(row, row["response"].split("```python\n")[1].split("\n```")[0])
    out = await _score(client, response, call_tests(row))
    assert out["score"] == 1.0 and out["think_tokens"] == 95


async def test_stdin_program(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    tests = {k: v for k, v in call_tests(row).items() if k != "fn_name"}
    right = await _score(client, with_code(row, stdin_program(row, row["completion"])), tests)
    wrong = await _score(client, with_code(row, stdin_program(row, _wrong(row, "return -1"))), tests)
    assert right["score"] == 1.0
    assert wrong["pass_rate"] == 0.0 and wrong["score"] == pytest.approx(-0.1 + F95, abs=1e-12)


@pytest.mark.parametrize(
    "extra,expected",
    [
        ({}, 0.2),  # p = 2/3 (two of the three answers are 0)
        ({"prev_best_pass_rate": 0.5}, 0.2 + 0.1 * (1 / 6) / 0.5),
        ({"prev_best_pass_rate": 0.8}, -0.1 + 0.1 * (2 / 3 - 0.8) / 0.8 + F175),
        ({"is_val": True}, 0.0),
        ({"split": "test", "prev_best_pass_rate": 0.8}, 0.0),
    ],
)
async def test_wrong_program_partial_pass(client, leetcode_rows, extra, expected):
    row = leetcode_rows[PAIRS]
    out = await _score(client, with_code(row, _wrong(row, "return 0")), call_tests(row), **extra)
    assert out["pass_rate"] == pytest.approx(2 / 3)
    assert out["score"] == pytest.approx(expected, abs=1e-12)


async def test_validation_reference_and_wrong(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    tests = call_tests(row)
    right = await _score(client, with_code(row, row["prompt"] + row["completion"]), tests, is_val=True, prev_best_pass_rate=0.5)
    wrong = await _score(client, with_code(row, _wrong(row, "return -1")), tests, is_val=True)
    assert (right["score"], wrong["score"]) == (1.0, 0.0)


@pytest.mark.parametrize("extra,expected", [({}, -1.0), ({"is_val": True}, 0.0)])
async def test_no_code(client, leetcode_rows, extra, expected):
    row = leetcode_rows[COLLECT]
    response = row["response"].split("```python")[0]  # the real reasoning, no block
    out = await _score(client, response, call_tests(row), **extra)
    assert out["score"] == expected and not out["has_code"] and out["reason"] == "no code block"


@pytest.mark.parametrize(
    "ground_truth",
    [
        "not json at all",
        json.dumps({"inputs": ["1\n"]}),
        json.dumps({"inputs": ["1\n"], "outputs": []}),
        json.dumps({"inputs": [1], "outputs": ["1"]}),
        json.dumps({"inputs": [], "outputs": []}),
        json.dumps(["1", "1"]),
    ],
)
async def test_malformed_ground_truth(client, leetcode_rows, caplog, ground_truth):
    row = leetcode_rows[COLLECT]
    response = with_code(row, row["prompt"] + row["completion"])
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        out = await _score(client, response, ground_truth, index=17)
        val = await _score(client, response, ground_truth, is_val=True)
    assert out["score"] == -1.0 and val["score"] == 0.0
    assert out["eval_failed"] and out["reason"].startswith("malformed ground truth")
    assert "row 17 of 'leetcode'" in caplog.text and "malformed ground truth" in caplog.text


async def test_timeout_scores_as_failed(leetcode_rows):
    row = leetcode_rows[COLLECT]
    impatient = EvaluatorClient.embedded(timeout_s=1.0)
    response = with_code(row, "class Solution:\n    def minOperations(self, nums, k):\n        while True:\n            pass\n")
    out = await _score(impatient, response, call_tests(row))
    val = await _score(impatient, response, call_tests(row), is_val=True)
    assert out["score"] == -1.0 and out["eval_failed"] and "timed out" in out["reason"]
    assert val["score"] == 0.0


async def test_bad_extra_info_and_response_do_not_raise(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    tests = json.dumps(call_tests(row))
    bad_prev = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]), tests, {"prev_best_pass_rate": 3}, client=client)
    bad_type = await compute_score("lc", None, tests, None, client=client)
    assert bad_prev["score"] == -1.0 and "prev_best_pass_rate" in bad_prev["reason"]
    assert bad_type["score"] == -1.0


async def test_batch_keeps_going_and_keys_are_uniform(leetcode_rows, monkeypatch):
    monkeypatch.setenv("COBALT_REWARD_CONCURRENCY", "2")
    monkeypatch.setattr(scoring, "_state", {"client": None, "sem": None, "loop": None})
    monkeypatch.setenv("COBALT_EVALUATOR", "embedded")
    rows = [leetcode_rows[i] for i in (198, 199, 200, 201, 203, 205)]
    jobs = []
    for row in rows:
        tests = json.dumps(call_tests(row))
        jobs.append((with_code(row, row["prompt"] + row["completion"]), tests, {"index": row["task_id"]}))
        jobs.append((with_code(row, _wrong(row, "return None")), tests, {"prev_best_pass_rate": 0.5}))
    jobs.append((with_code(rows[0], rows[0]["prompt"] + rows[0]["completion"]), "{broken", {}))
    results = await asyncio.gather(
        *(compute_score("leetcode", r, gt, extra_info=extra) for r, gt, extra in jobs)  # default client
    )
    assert [r["score"] for r in results[:-1:2]] == [1.0] * len(rows)
    assert all(r["pass_rate"] == 0.0 and r["score"] < -0.1 for r in results[1:-1:2])
    assert results[-1]["score"] == -1.0
    keys = list(results[0])
    assert all(list(r) == keys for r in results)
    for key in keys:
        assert len({type(r[key]) for r in results}) == 1, key
    assert scoring._state["client"] is not None and scoring._state["client"].mode == "embedded"


@pytest.mark.parametrize(
    "extra,expected",
    [
        (None, False),
        ({}, False),
        ({"is_val": True}, True),
        ({"is_val": 0, "split": "val"}, False),
        ({"split": "validation"}, True),
        ({"split": "TEST"}, True),
        ({"split": "train"}, False),
    ],
)
def test_validation_flag(extra, expected):
    assert is_validation_row(extra) is expected
