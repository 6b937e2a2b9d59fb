"""Builders of hand-made turns and inference records for the reward-hacking tests."""
from __future__ import annotations

from cobalt.data.problems import tests_json
from cobalt.execution.base import TestCases
from cobalt.execution.feedback import test_feedback as feedback_text


def make_turn(code, passing, tests: TestCases, *, hidden=0.5, feedback=None):
    """A turn whose public result has the given verdicts and the executor's feedback layout."""
    texts = []
    for ok, inp, out in zip(passing, tests.inputs, tests.outputs):
        texts.append(feedback_text(inp, out if ok else "-1", out))
    if feedback is not None:
        texts = list(feedback)
    response = "Fixed.\n```python\n" + code + "\n```" if code is not None else "I give up."
    return {
        "response": response,
        "code": code,
        "public": {"passing": list(passing), "feedback": texts},
        "hidden_pass_rate": hidden,
    }


def run_record(data, public: TestCases, samples):
    """An inference record of a run on ``public`` (docs/TRAJECTORIES.md)."""
    return {
        "id": data["id"],
        "question": data["question"],
        "public_test_cases": tests_json(public),
        "hidden_test_cases": data["hidden_test_cases"],
        "samples": [{"turns": turns} for turns in samples],
    }
