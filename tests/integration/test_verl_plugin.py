"""The plugin's own pieces that need no verl: the extra-info schema and the override list."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cobalt.cli import main
from cobalt.reward.scoring import compute_score as cobalt_compute_score
from cobalt.reward.scoring import reset_client
from cobalt.verl_plugin.reward import REWARD_INFO_KEYS, compute_score, flatten_for_verl

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.mark.parametrize(
    "result, expected",
    [
        (0.5, {"score": 0.5, "acc": 0.5, "pass_rate": None, "reward_failed": 0}),
        ({"score": 0.2, "pass_rate": 0.5}, {"score": 0.2, "acc": 0.0, "pass_rate": 0.5, "reward_failed": 0}),
        ({"score": 1, "pass_rate": 1.0}, {"score": 1.0, "acc": 1.0, "pass_rate": 1.0, "reward_failed": 0}),
        ({"score": -1.0, "pass_rate": 0.0, "eval_failed": True}, {"score": -1.0, "acc": 0.0, "reward_failed": 1}),
        ({"score": 0.3, "components": {"correctness": 0.2, "improvement": 0.1}},
         {"correctness": 0.2, "improvement": 0.1, "format": None}),
        ({"score": 0.0, "pass_rate": float("nan"), "has_code": False, "reason": 7}, {"pass_rate": None, "has_code": 0, "reason": ""}),
    ],
)
def test_flatten_keeps_one_schema(result, expected):
    flat = flatten_for_verl(result)
    assert tuple(flat) == REWARD_INFO_KEYS
    assert {key: flat[key] for key in expected} == expected


def test_flatten_needs_a_score():
    with pytest.raises(KeyError, match="score"):
        flatten_for_verl({"pass_rate": 1.0})


async def test_adapter_gives_every_branch_the_same_keys(monkeypatch):
    """Rows through different branches of the real reward (no code, bad tests, validation) stack in verl."""
    monkeypatch.setenv("COBALT_EVALUATOR", "embedded")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(DATA / "tiktoken"))
    reset_client()
    tests = '{"inputs": ["1 2\\n"], "outputs": ["3"]}'
    good = "<think>\nadd them\n</think>\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\n"
    calls = [
        dict(solution_str=good, ground_truth=tests, extra_info={}),
        dict(solution_str="<think>\nhmm\n</think>\nno idea", ground_truth=tests, extra_info={}),
        dict(solution_str=good, ground_truth="not json", extra_info={}),
        dict(solution_str=good, ground_truth=tests, extra_info={"is_val": True}),
    ]
    results = await asyncio.gather(*(compute_score(data_source="t", **c) for c in calls))
    reset_client()
    assert all(tuple(r) == REWARD_INFO_KEYS for r in results)
    assert [r["score"] for r in results] == [1.0, -1.0, -1.0, 1.0]
    assert [r["reward_failed"] for r in results] == [0, 0, 1, 0]
    assert results[0]["score"] == (await cobalt_compute_score("t", good, tests, {}))["score"]
    reset_client()


def test_print_overrides(capsys):
    assert main(["train-config", "cobalt", "--print-overrides", "--model", "/m/x", "--nnodes", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "actor_rollout_ref.model.path=/m/x" in lines
    assert "trainer.nnodes=2" in lines
    assert "data.max_prompt_length=10240" in lines
    assert len(lines) == len(set(lines))


def test_print_overrides_with_save_checks_saves_and_lists_the_extras_last(tmp_path, capsys):
    """The launcher's one call: the config is composed, checked and saved; the run's overrides, then the extras."""
    import json

    saved = tmp_path / "train_config.json"
    assert main(["train-config", "cobalt", "data.max_prompt_length=1536", "--print-overrides", "--save", str(saved),
                 "--model", "/m/x", "--n-gpus-per-node", "1", "--rollout-tp", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "data.max_prompt_length=1536" and "data.max_prompt_length=10240" in lines[:-1]
    record = json.loads(saved.read_text())
    assert record["config"]["data"]["max_prompt_length"] == 1536 and record["overrides"] == lines
    # a config that cannot be composed prints no override, so the launcher stops before the trainer
    assert main(["train-config", "cobalt", "data.no_such_setting=1", "--print-overrides", "--save", str(tmp_path / "bad.json"), "--model", "/m/x",
                 "--n-gpus-per-node", "1", "--rollout-tp", "1"]) == 2
    assert capsys.readouterr().out == "" and not (tmp_path / "bad.json").exists()
