"""compute_score end to end: real LeetCode problems, the real embedded (bubblewrap) evaluator."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging

import pytest

from cobalt.execution.client import EvaluatorClient
from cobalt.reward import compute_score, is_validation_row
from cobalt.reward import scoring
from reward_data import call_tests, stdin_program, with_code

COLLECT = 198  # minimum-operations-to-collect-elements: outputs 4, 5, 4
PAIRS = 206  # minimum-array-length-after-pair-removals: outputs 0, 0, 1
# 0.075 * tanh(T / 1024), T the o200k_base length of the think part as the paper
# profile counts it (the "<think>" tag included: 3 tokens more than the reasoning alone).
F98 = 0.007155900528844939  # row 198's answer: 98 tokens (95 without the tag)
F178 = 0.012907366575483836  # row 206: 178 tokens
F95 = 0.006938113982152284  # row 198 in the cobalt profile: 95 tokens


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
    assert out["score"] == 1.0 and out["think_tokens"] == 98


async def test_stdin_program(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    tests = {k: v for k, v in call_tests(row).items() if k != "fn_name"}
    right = await _score(client, with_code(row, stdin_program(row, row["completion"])), tests)
    wrong = await _score(client, with_code(row, stdin_program(row, _wrong(row, "return -1"))), tests)
    assert right["score"] == 1.0
    assert wrong["pass_rate"] == 0.0 and wrong["score"] == pytest.approx(-0.1 + F98, abs=1e-12)


@pytest.mark.parametrize(
    "extra,expected",
    [
        ({}, 0.2),  # p = 2/3 (two of the three answers are 0)
        ({"prev_best_pass_rate": 0.5}, 0.2 + 0.1 * (1 / 6) / 0.5),
        ({"prev_best_pass_rate": 0.8}, -0.1 + 0.1 * (2 / 3 - 0.8) / 0.8 + F178),
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
    """The reward function itself cannot score the row: -1, in paper also in validation."""
    row = leetcode_rows[COLLECT]
    response = with_code(row, row["prompt"] + row["completion"])
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        out = await _score(client, response, ground_truth, index=17)
        val = await _score(client, response, ground_truth, is_val=True)
        val_cobalt = await compute_score("leetcode", response, ground_truth, {"is_val": True},
                                         client=client, profile="cobalt")
    assert (out["score"], val["score"], val_cobalt["score"]) == (-1.0, -1.0, 0.0)
    assert out["eval_failed"] and out["reason"].startswith("malformed ground truth")
    assert (out["improvement"], out["format"], out["acc"], out["pass_rate"]) == (0.0, 0.0, 0.0, 0.0)
    assert "reward: row 17 of 'leetcode' scores as failed: malformed ground truth" in caplog.text


LOOP = "class Solution:\n    def minOperations(self, nums, k):\n        while True:\n            pass\n"


THINK_TERM = {"paper": F98, "cobalt": F95}  # cobalt counts the reasoning without the <think> tag


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
@pytest.mark.parametrize(
    "extra,base",
    [
        ({}, -0.1),  # pass rate 0: -0.1, plus the failing answer's think term
        ({"prev_best_pass_rate": 0.5}, -0.1 + 0.1 * (0.0 - 0.5) / 0.5),  # -0.2
        ({"is_val": True}, None),  # validation: 0
    ],
)
async def test_timed_out_evaluation_is_pass_rate_zero(leetcode_rows, profile, extra, base):
    """Regression, METHOD §9: an evaluation that times out is shaped as pass rate 0, not -1."""
    row = leetcode_rows[COLLECT]
    impatient = EvaluatorClient.embedded(timeout_s=1.0)
    out = await compute_score("leetcode", with_code(row, LOOP), json.dumps(call_tests(row)), extra or None,
                              client=impatient, profile=profile)
    expected = 0.0 if base is None else base + THINK_TERM[profile]
    assert out["score"] == pytest.approx(expected, abs=1e-12)
    assert out["pass_rate"] == 0.0 and out["eval_failed"] and "timed out" in out["reason"]


class _Broken:
    """An evaluator whose transport fails: what a dead Ray Serve replica looks like to the caller."""

    timeout_s = 5.0

    async def evaluate(self, code, tests):
        raise ConnectionError("replica died")


async def test_raising_evaluator_is_pass_rate_zero(leetcode_rows):
    row = leetcode_rows[COLLECT]
    out = await compute_score("leetcode", with_code(row, row["prompt"] + row["completion"]),
                              json.dumps(call_tests(row)), None, client=_Broken())
    assert out["score"] == pytest.approx(-0.1 + F98, abs=1e-12) and "replica died" in out["reason"]


class _Partial:
    """The real embedded evaluator whose result loses its last verdict and says so in ``error``:
    the shape of a program cut off by its whole-program budget after some tests finished."""

    def __init__(self, inner):
        self.inner, self.timeout_s = inner, inner.timeout_s

    async def evaluate(self, code, tests):
        res = await self.inner.evaluate(code, tests)
        return dataclasses.replace(res, passing=res.passing[:-1], error="the program ran out of its budget")


async def test_partial_verdicts_count_only_in_cobalt(client, leetcode_rows):
    row = leetcode_rows[COLLECT]  # the reference passes all 3 tests; the wrapper keeps 2 verdicts
    response = with_code(row, row["prompt"] + row["completion"])
    tests = json.dumps(call_tests(row))
    paper = await compute_score("leetcode", response, tests, None, client=_Partial(client), profile="paper")
    cobalt = await compute_score("leetcode", response, tests, None, client=_Partial(client), profile="cobalt")
    assert paper["pass_rate"] == 0.0 and paper["score"] == pytest.approx(-0.1 + F98, abs=1e-12)
    # 2 of 3: tier 0.2, r >= 0 so the format term is 0
    assert cobalt["pass_rate"] == pytest.approx(2 / 3) and cobalt["score"] == pytest.approx(0.2, abs=1e-12)


@pytest.mark.parametrize("profile,val_score", [("paper", -1.0), ("cobalt", 0.0)])
async def test_bad_extra_info_and_response_do_not_raise(client, leetcode_rows, profile, val_score):
    row = leetcode_rows[COLLECT]
    tests = json.dumps(call_tests(row))
    good = with_code(row, row["prompt"] + row["completion"])
    bad_prev = await compute_score("lc", good, tests, {"prev_best_pass_rate": 3}, client=client, profile=profile)
    bad_type = await compute_score("lc", None, tests, None, client=client, profile=profile)
    bad_val = await compute_score("lc", None, tests, {"is_val": True}, client=client, profile=profile)
    assert bad_prev["score"] == -1.0 and "prev_best_pass_rate" in bad_prev["reason"]
    assert bad_type["score"] == -1.0 and bad_val["score"] == val_score


class _Counting:
    """The real embedded evaluator, counting the evaluations in flight (instrumentation only)."""

    def __init__(self, inner):
        self.inner, self.timeout_s = inner, inner.timeout_s
        self.now = self.peak = self.calls = 0

    async def evaluate(self, code, tests):
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            return await self.inner.evaluate(code, tests)
        finally:
            self.now -= 1


@pytest.mark.parametrize("setting,bound", [("2", 2), ("0", 1)])  # at least one row runs
async def test_concurrency_bound_holds(leetcode_rows, monkeypatch, setting, bound):
    """Mutation testing: COBALT_REWARD_CONCURRENCY bounds the rows in flight (removing the semaphore fails this)."""
    monkeypatch.setenv("COBALT_REWARD_CONCURRENCY", setting)
    monkeypatch.setattr(scoring, "_state", {"client": None, "sem": None, "loop": None})
    row = leetcode_rows[COLLECT]
    slow = row["prompt"] + row["completion"] + "\nimport time\ntime.sleep(0.3)\n"
    counting = _Counting(EvaluatorClient.embedded(max_concurrency=8))
    tests = json.dumps(call_tests(row))
    outs = await asyncio.gather(
        *(compute_score("leetcode", with_code(row, slow), tests, None, client=counting) for _ in range(6))
    )
    assert [o["score"] for o in outs] == [1.0] * 6
    assert counting.calls == 6 and counting.peak == bound


def test_a_new_event_loop_gets_a_new_semaphore(leetcode_rows, monkeypatch):
    """Two asyncio.run batches in a row (as two verl steps in one worker may be): the bound is
    rebuilt in each loop, so the second batch neither fails nor waits on the first loop's semaphore."""
    monkeypatch.setenv("COBALT_REWARD_CONCURRENCY", "1")
    monkeypatch.setattr(scoring, "_state", {"client": None, "sem": None, "loop": None})
    row = leetcode_rows[COLLECT]
    response = with_code(row, row["prompt"] + row["completion"])
    tests = json.dumps(call_tests(row))

    async def batch():
        client = EvaluatorClient.embedded(max_concurrency=2)
        outs = await asyncio.gather(*(compute_score("lc", response, tests, None, client=client) for _ in range(3)))
        return [o["score"] for o in outs]

    assert asyncio.run(batch()) == [1.0] * 3
    assert asyncio.run(batch()) == [1.0] * 3


def test_evaluated_pass_rate_by_hand():
    from cobalt.execution.base import ExecutionResult

    def res(passing, error=None):
        n = len(passing)
        return ExecutionResult(tuple(passing), ("",) * n, ("passed",) * n, (0.0,) * n, (0.0,) * n, error=error)

    T, F = True, False
    cases = [
        # result, n_tests, paper, cobalt
        (res([T, F, T, T]), 4, 0.75, 0.75),
        (res([T, T, F], error="the program ran out of its budget"), 3, 0.0, 2 / 3),
        (res([T, T]), 3, 0.0, 2 / 3),  # a verdict missing, no error text
        (res([T, T, T, T]), 3, 0.0, 1.0),  # one verdict too many: only the first n count
        (None, 3, 0.0, 0.0),  # the evaluation raised or timed out
        (res([]), 0, 0.0, 0.0),
    ]
    for result, n, paper, cobalt in cases:
        assert scoring.evaluated_pass_rate(result, n, "paper") == paper
        assert scoring.evaluated_pass_rate(result, n, "cobalt") == pytest.approx(cobalt)


@pytest.mark.parametrize("prev,ok", [(0.0, True), (1.0, True), (1.5, False), (-0.1, False)])
async def test_prev_best_bounds(client, leetcode_rows, prev, ok):
    response = leetcode_rows[COLLECT]["response"].split("```python")[0]  # no code: nothing runs
    out = await compute_score("lc", response, json.dumps(call_tests(leetcode_rows[COLLECT])),
                              {"prev_best_pass_rate": prev}, client=client)
    assert out["reason"] == ("no code block" if ok else f"bad extra_info: extra_info.prev_best_pass_rate must be in [0, 1], got {prev!r}")


async def test_result_dicts_by_hand(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    tests = json.dumps(call_tests(row))
    no_code = await compute_score("lc", row["response"].split("```python")[0], tests, None, client=client)
    assert no_code == {
        "score": -1.0, "pass_rate": 0.0, "prev_best_pass_rate": 0.0, "correctness": -1.0, "improvement": 0.0,
        "format": 0.0, "format_violation": "no code block", "think_tokens": -1, "answer_tokens": -1,
        "explanation_tokens": -1, "keyword_bonus": 0.0, "is_val": False, "acc": 0.0, "has_code": False,
        "n_tests": 3, "eval_failed": False, "infra_failed": False, "reason": "no code block",
    }
    broken = await compute_score("lc", with_code(row, "print(1)"), "[1, 2]", {"prev_best_pass_rate": 0.5}, client=client)
    assert broken == {
        "score": -1.0, "pass_rate": 0.0, "prev_best_pass_rate": 0.5, "correctness": -1.0, "improvement": 0.0,
        "format": 0.0, "format_violation": "", "think_tokens": -1, "answer_tokens": -1,
        "explanation_tokens": -1, "keyword_bonus": 0.0, "is_val": False, "acc": 0.0, "has_code": False,
        "n_tests": 0, "eval_failed": True, "infra_failed": False,
        "reason": "malformed ground truth: ground_truth: expected an object with 'inputs' and 'outputs', got list",
    }
    wrong = await compute_score("lc", with_code(row, _wrong(row, "return -1")), tests, None, client=client)
    assert {k: wrong[k] for k in ("pass_rate", "acc", "has_code", "n_tests", "eval_failed", "reason",
                                  "format_violation", "think_tokens", "correctness", "improvement")} == {
        "pass_rate": 0.0, "acc": 0.0, "has_code": True, "n_tests": 3, "eval_failed": False, "reason": "",
        "format_violation": "", "think_tokens": 98, "correctness": -0.1, "improvement": 0.0,
    }


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


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
async def test_no_code_is_judged_before_the_ground_truth(client, leetcode_rows, profile):
    """The original looks for code first: no code scores -1 / 0 even when the tests are unreadable."""
    row = leetcode_rows[COLLECT]
    response = row["response"].split("```python")[0]
    train = await compute_score("lc", response, "{broken", None, client=client, profile=profile)
    val = await compute_score("lc", response, "{broken", {"is_val": True}, client=client, profile=profile)
    assert (train["score"], val["score"]) == (-1.0, 0.0) and train["reason"] == "no code block"


async def test_unknown_profile_scores_as_paper_and_says_so(client, leetcode_rows, caplog):
    """A misspelt profile must not fail the batch: the row is scored under ``paper`` and one
    warning names the bad value; a call without a profile is ``paper`` with no warning."""
    row = leetcode_rows[COLLECT]
    tests = json.dumps(call_tests(row))
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        right = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]), tests, None,
                                    client=client, profile="papr")
        broken_val = await compute_score("lc", None, tests, {"is_val": True}, client=client, profile="papr")
    assert right["score"] == 1.0 and not right["eval_failed"]
    assert broken_val["score"] == -1.0  # paper's score for a row the reward cannot score, also in validation
    said = [r.getMessage() for r in caplog.records if "scoring with the paper profile" in r.getMessage()]
    assert len(said) == 2 and all(m.startswith("reward: ") and "papr" in m for m in said)
    # a row without extra_info["index"] is named by its data source alone
    assert "reward: a row of 'lc' scores as failed: response is NoneType, not str" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        default = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]), tests, None,
                                      client=client)
    assert default["score"] == 1.0 and caplog.records == []


async def test_bad_extra_info_result_dict_by_hand(client, leetcode_rows, caplog):
    """A validation row whose prev_best_pass_rate is not a number: cobalt's failure score 0 in
    validation, every logged field written by hand (prev best unknown: 0; nothing ran: no code, 0 tests)."""
    row = leetcode_rows[COLLECT]
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        out = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]),
                                  json.dumps(call_tests(row)), {"is_val": True, "prev_best_pass_rate": "high"},
                                  client=client, profile="cobalt")
    assert "reward: a row of 'lc' scores as failed: bad extra_info: could not convert" in caplog.text
    assert out == {
        "score": 0.0, "pass_rate": 0.0, "prev_best_pass_rate": 0.0, "correctness": 0.0, "improvement": 0.0,
        "format": 0.0, "format_violation": "", "think_tokens": -1, "answer_tokens": -1,
        "explanation_tokens": -1, "keyword_bonus": 0.0, "is_val": True, "acc": 0.0, "has_code": False,
        "n_tests": 0, "eval_failed": True, "infra_failed": False,
        "reason": "bad extra_info: could not convert string to float: 'high'",
    }


class _FailingCounter:
    """A tokenizer that breaks: trouble inside the reward function after the evaluation ran."""

    name = "failing"

    def count(self, text: str) -> int:
        raise RuntimeError("tokenizer gone")


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
async def test_unexpected_error_result_dict_by_hand(client, leetcode_rows, caplog, profile):
    """A training row (the failing answer's format term needs the tokenizer): -1 in both profiles."""
    score = -1.0
    row = leetcode_rows[COLLECT]
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        out = await compute_score("lc", with_code(row, _wrong(row, "return -1")), json.dumps(call_tests(row)),
                                  {"prev_best_pass_rate": 0.25, "index": 4}, client=client,
                                  token_counter=_FailingCounter(), profile=profile)
    assert out == {
        "score": score, "pass_rate": 0.0, "prev_best_pass_rate": 0.25, "correctness": score, "improvement": 0.0,
        "format": 0.0, "format_violation": "", "think_tokens": -1, "answer_tokens": -1,
        "explanation_tokens": -1, "keyword_bonus": 0.0, "is_val": False, "acc": 0.0, "has_code": False,
        "n_tests": 0, "eval_failed": True, "infra_failed": False, "reason": "unexpected RuntimeError: tokenizer gone",
    }
    assert "reward: row 4 of 'lc' scores as failed: unexpected RuntimeError: tokenizer gone" in caplog.text


class _BadTimeout:
    """The real embedded evaluator, misconfigured with a timeout that is not a number."""

    def __init__(self, inner):
        self.inner, self.timeout_s = inner, "soon"

    async def evaluate(self, code, tests):
        return await self.inner.evaluate(code, tests)


@pytest.mark.parametrize("profile,score", [("paper", -1.0), ("cobalt", 0.0)])
async def test_unexpected_error_in_validation_scores_by_profile(client, leetcode_rows, profile, score):
    row = leetcode_rows[COLLECT]
    out = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]), json.dumps(call_tests(row)),
                              {"split": "test"}, client=_BadTimeout(client), profile=profile)
    assert (out["score"], out["correctness"], out["is_val"], out["eval_failed"]) == (score, score, True, True)
    assert out["reason"] == "unexpected ValueError: could not convert string to float: 'soon'"


def test_failure_score_and_pass_rate_default_to_the_paper_profile():
    """Called without a profile, both helpers follow ``paper``: -1 for a failed row in validation
    too, and a failed evaluation counts as pass rate 0 even when verdicts came back."""
    from cobalt.execution.base import ExecutionResult

    assert (scoring.failure_score(False), scoring.failure_score(True)) == (-1.0, -1.0)
    cut = ExecutionResult((True, True), ("", ""), ("passed", "passed"), (0.0, 0.0), (0.0, 0.0),
                          error="the program ran out of its budget")
    assert scoring.evaluated_pass_rate(cut, 3) == 0.0
    assert scoring.evaluated_pass_rate(cut, 3, "cobalt") == pytest.approx(2 / 3)


@pytest.mark.parametrize("passing,expected", [((True,), 1.0), ((False,), 0.0)])
def test_evaluated_pass_rate_of_a_single_test(passing, expected):
    from cobalt.execution.base import ExecutionResult

    one = ExecutionResult(passing, ("",), ("passed",), (0.0,), (0.0,))
    assert scoring.evaluated_pass_rate(one, 1, "paper") == expected
    assert scoring.evaluated_pass_rate(one, 1, "cobalt") == expected


async def test_response_that_is_not_text_is_named_by_its_type(client, leetcode_rows, caplog):
    tests = json.dumps(call_tests(leetcode_rows[COLLECT]))
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        out = await compute_score("lc", 42, tests, {"index": 3}, client=client)
    assert out["score"] == -1.0 and out["reason"] == "response is int, not str"
    # the whole log line, as written: nothing before "reward:" and nothing after the reason
    assert [r.getMessage() for r in caplog.records] == ["reward: row 3 of 'lc' scores as failed: response is int, not str"]


def test_reset_client_forgets_the_cached_client(monkeypatch):
    monkeypatch.setattr(scoring, "_state", {"client": EvaluatorClient.embedded(max_concurrency=1), "sem": None,
                                            "loop": None})
    monkeypatch.setenv("COBALT_EVALUATOR", "embedded")
    monkeypatch.setenv("COBALT_EVAL_CONCURRENCY", "3")
    scoring.reset_client()
    assert scoring._state == {"client": None, "sem": None, "loop": None}
    rebuilt = scoring._default_client()  # built again from the settings
    assert (rebuilt.mode, rebuilt.max_concurrency) == ("embedded", 3) and scoring._state["client"] is rebuilt


@pytest.mark.parametrize("profile,score,has_code", [("paper", -1.0, False), ("cobalt", 1.0, True)])
async def test_code_extraction_follows_the_profile(client, leetcode_rows, profile, score, has_code):
    """A fence line "```python " (a space before the newline): the paper's regex finds no block
    there; cobalt's fence rule reads the block, and the reference solution in it passes."""
    row = leetcode_rows[COLLECT]
    response = with_code(row, row["prompt"] + row["completion"]).replace("```python\n", "```python \n", 1)
    out = await compute_score("lc", response, json.dumps(call_tests(row)), None, client=client, profile=profile)
    assert (out["score"], out["has_code"]) == (score, has_code)


async def test_no_code_row_logs_its_previous_best(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    out = await compute_score("lc", row["response"].split("```python")[0], json.dumps(call_tests(row)),
                              {"prev_best_pass_rate": 0.5}, client=client)
    assert (out["score"], out["prev_best_pass_rate"], out["reason"]) == (-1.0, 0.5, "no code block")


class _NoTimeout:
    """The real embedded evaluator behind an object that has no ``timeout_s`` attribute."""

    def __init__(self, inner):
        self.inner = inner

    async def evaluate(self, code, tests):
        return await self.inner.evaluate(code, tests)


async def test_client_without_a_timeout_setting_is_waited_for(client, leetcode_rows):
    row = leetcode_rows[COLLECT]
    out = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]), json.dumps(call_tests(row)),
                              None, client=_NoTimeout(client))
    assert (out["score"], out["eval_failed"], out["reason"]) == (1.0, False, "")


class _Silent:
    """An evaluator that never answers (a replica that hangs): only the row's own wait ends it."""

    timeout_s = 0.25

    async def evaluate(self, code, tests):
        await asyncio.Event().wait()


async def test_evaluator_that_never_answers_is_given_up(leetcode_rows, monkeypatch, caplog):
    """cobalt: the row waits the client's timeout plus the grace (here set to 0), then scores pass rate 0
    and says so in one log line."""
    monkeypatch.setattr(scoring, "CLIENT_GRACE_S", 0.0)
    row = leetcode_rows[COLLECT]
    with caplog.at_level(logging.WARNING, logger="cobalt.reward.scoring"):
        out = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]),
                                  json.dumps(call_tests(row)), {"index": 5}, client=_Silent(), profile="cobalt")
    assert [r.getMessage() for r in caplog.records] == [
        "reward: row 5 of 'lc': evaluation failed (evaluation did not return within 0.25 s); scored with pass rate 0"
    ]
    assert out["reason"] == "evaluation failed: evaluation did not return within 0.25 s"
    assert out["eval_failed"] and out["pass_rate"] == 0.0
    assert out["score"] == pytest.approx(-0.1 + F95, abs=1e-12)


async def test_raising_evaluator_reason_names_the_exception(leetcode_rows):
    row = leetcode_rows[COLLECT]
    out = await compute_score("lc", with_code(row, row["prompt"] + row["completion"]),
                              json.dumps(call_tests(row)), None, client=_Broken())
    assert out["reason"] == "evaluation failed: evaluation raised ConnectionError: replica died"


@pytest.mark.parametrize("token,paper_train,paper_val", [
    # The original's format checks pass (one </think>, one ```python block closed by
    # "\n```", no backtick in the code), so it reaches enc.encode(response); with
    # o200k_base's special-token text in it encode raises, compute_score raises and
    # the reward manager gives the row -1, in validation too.
    ("<|endoftext|>", -1.0, -1.0),
    ("<|endofprompt|>", -1.0, -1.0),
    # <|im_end|> is Qwen's token, ordinary text for o200k_base: a correct answer scores 1.
    ("<|im_end|>", 1.0, 1.0),
])
async def test_special_token_text_raises_as_the_original_under_paper(client, leetcode_rows, token, paper_train,
                                                                      paper_val):
    row = leetcode_rows[COLLECT]
    tests = json.dumps(call_tests(row))
    response = with_code(row, row["prompt"] + row["completion"]) + f"\nDone. {token}"
    train = await compute_score("leetcode", response, tests, None, client=client)
    val = await compute_score("leetcode", response, tests, {"is_val": True}, client=client)
    assert (train["score"], val["score"]) == (paper_train, paper_val)
    # cobalt counts special-token text as plain text: the correct answer scores 1 (1 + 0 format).
    cob = await compute_score("leetcode", response, tests, None, client=client, profile="cobalt")
    assert cob["score"] == 1.0


def test_evaluator_wait_follows_the_original_under_paper():
    # code_reward_func_think.py: asyncio.wait_for(EVAL_HANDLE.remote(...), timeout=30), whatever
    # the evaluator's own timeout; cobalt waits for the client's timeout plus a grace.
    slow = EvaluatorClient.embedded(timeout_s=300.0)
    assert scoring.evaluator_wait_s(slow, "paper") == 30.0
    assert scoring.evaluator_wait_s(slow, "cobalt") == 300.0 + scoring.CLIENT_GRACE_S


async def test_indented_block_is_stripped_and_passes_end_to_end(client):
    # The original: extract_code_from_model returns code_blocks[-1].strip() = "print(1)", which
    # prints 1: pass rate 1 -> 1.0; the format checks pass (one </think>, one ```python block
    # closed by "\n```", no backtick in the code) and every length is tiny -> + 0.0. Score 1.0.
    response = "<think>x</think>\n```python\n  print(1)\n```"
    tests = json.dumps({"inputs": [""], "outputs": ["1\n"]})
    out = await compute_score("taco", response, tests, None, client=client)
    assert (out["score"], out["pass_rate"]) == (1.0, 1.0)
