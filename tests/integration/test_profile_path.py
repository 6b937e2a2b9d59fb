"""The profile given to the verl reward reaches the sandbox through the reward's default client
(real embedded evaluator, real bubblewrap)."""
from __future__ import annotations

import json

import pytest

from cobalt.reward.scoring import reset_client
from cobalt.verl_plugin.reward import compute_score

# Prints the right sum followed by an ideographic space: the paper's comparison strips it
# (str.strip), cobalt's does not, so the verdict tells which profile the executor ran with.
RESPONSE = ("<think>\nadd them\n</think>\n```python\na, b = map(int, input().split())\n"
            "print(a + b, end='\\u3000\\n')\n```\nThe program prints the sum.")
TESTS = json.dumps({"inputs": ["1 2\n", "20 22\n"], "outputs": ["3", "42"]})


@pytest.fixture
def embedded(monkeypatch):
    monkeypatch.setenv("COBALT_EVALUATOR", "embedded")
    monkeypatch.delenv("COBALT_PROFILE", raising=False)
    reset_client()
    yield
    reset_client()


@pytest.mark.parametrize("how", ["keyword", "environment"])
async def test_the_rewards_profile_is_the_sandboxs(embedded, monkeypatch, how):
    got = {}
    for profile in ("paper", "cobalt", "paper"):
        kwargs = {"profile": profile}
        if how == "environment":
            monkeypatch.setenv("COBALT_PROFILE", profile)
            kwargs = {}
        out = await compute_score(data_source="t", solution_str=RESPONSE, ground_truth=TESTS,
                                  extra_info={"is_val": True}, **kwargs)
        got.setdefault(profile, []).append((out["score"], out["pass_rate"], out["reward_failed"]))
    assert got == {"paper": [(1.0, 1.0, 0), (1.0, 1.0, 0)], "cobalt": [(0.0, 0.0, 0)]}
