"""The paper's workflow through its own scripts: single-turn, multi-turn from the cached first
turns, hidden evaluation (real subprocesses, real OpenAI-compatible server, real sandbox)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

from support.openai_server import OpenAIServer  # noqa: E402

from cobalt.rollout.leetcode import problem_record  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_single_then_multi_turn_then_eval(tmp_path, leetcode_problems):
    problem = leetcode_problems[1]
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(problem_record(problem)) + "\n")
    wrong = f"class Solution:\n    def {problem.fn_name}(self, *args):\n        return -12345\n"

    def responder(messages, index):
        turn = sum(m["role"] == "assistant" for m in messages)
        # first turns: wrong programs; every repair: the reference
        return f"```python\n{wrong if turn == 0 else problem.reference}\n```"

    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    env.pop("OPENAI_API_KEY", None)
    single, multi, evaluated = tmp_path / "single.jsonl", tmp_path / "multi.jsonl", tmp_path / "eval.jsonl"
    with OpenAIServer(responder=responder, api_key="sk-from-flag") as server:
        common = ["--model_name", "test-model", "--openai_api_key", "sk-from-flag", "--engine", "openai",
                  "--base-url", server.base_url, "--samples", "2", "--no-progress"]
        run = lambda script, *args: subprocess.run(  # noqa: E731
            [sys.executable, str(REPO / script), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300)
        first = run("run_single_turn_litellm.py", "--input_file", str(problems), "--output_file", str(single), *common)
        assert first.returncode == 0, first.stderr[-2000:]
        n_single = len(server.chat_requests())
        second = run("run_multi_turn_litellm.py", "--input_file", str(single), "--output_file", str(multi),
                     "--turns", "2", *common)
        assert second.returncode == 0, second.stderr[-2000:]
        bodies = [r.body for r in server.chat_requests()]
    assert n_single == 1 and bodies[0]["n"] == 2
    # the multi-turn run generated no first turn: 2 samples x 2 repair turns, one completion each
    assert len(bodies) - n_single == 4 and all(b.get("n", 1) == 1 for b in bodies[n_single:])
    assert {b["temperature"] for b in bodies} == {1.0} and {b["top_p"] for b in bodies} == {1.0}
    (s_rec,), (m_rec,) = ([json.loads(x) for x in p.read_text().splitlines()] for p in (single, multi))
    assert [len(s["turns"]) for s in s_rec["samples"]] == [1, 1]
    for s_sample, m_sample in zip(s_rec["samples"], m_rec["samples"]):
        assert m_sample["turns"][0]["response"] == s_sample["turns"][0]["response"]
        assert m_sample["turns"][0]["public"]["passing"] == s_sample["turns"][0]["public"]["passing"]
        assert [t["public_pass_rate"] for t in m_sample["turns"]] == [0.0, 1.0, 1.0]
    ev = run("eval_multi_turn.py", "--input_file", str(multi), "--output_file", str(evaluated), "--no-progress")
    assert ev.returncode == 0, ev.stderr[-2000:]
    (e_rec,) = [json.loads(x) for x in evaluated.read_text().splitlines()]
    assert [[t["hidden_pass_rate"] for t in s["turns"]] for s in e_rec["samples"]] == [[0.0, 1.0, 1.0]] * 2
    summary = json.loads((tmp_path / "eval.jsonl.summary.json").read_text())
    # n = the 2 samples drawn for the problem (the original's fixed 16 would show 2/16)
    assert summary["pass_at_1"] == pytest.approx([0.0, 1.0, 1.0])
    assert summary["samples_min"] == summary["samples_max"] == summary["run_samples"] == 2
    assert "| 1 | 100.00 |" in ev.stdout
    config = (tmp_path / "multi.jsonl.config.json").read_text()
    assert "sk-from-flag" not in config
