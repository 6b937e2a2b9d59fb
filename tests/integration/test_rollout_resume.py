"""`cobalt rollout` killed with SIGKILL mid-run resumes without duplicates or loss
(real subprocess, real OpenAI-compatible server on 127.0.0.1, real sandbox)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from support.openai_server import OpenAIServer  # noqa: E402

from cobalt.rollout.leetcode import problem_record  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _cmd(server: OpenAIServer, problems: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "cobalt", "rollout", "--engine", "openai", "--model", "test-model",
            "--base-url", server.base_url, "--input", str(problems), "--output", str(output),
            "--samples", "2", "--turns", "1", "--max-problems", "1", "--no-progress", "--eval-concurrency", "1"]


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_kill_9_mid_run_then_resume(tmp_path, leetcode_problems):
    chosen = leetcode_problems[:4]
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(problem_record(p)) + "\n" for p in chosen))
    output = tmp_path / "out.jsonl"
    by_question = {p.question: p for p in chosen}

    def responder(messages, index):
        question = next(q for q in by_question if q.strip() in messages[1]["content"])
        return f"```python\n{by_question[question].reference}\n```"

    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    with OpenAIServer(responder=responder, delay=0.4) as server:
        proc = subprocess.Popen(_cmd(server, problems, output), cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(_lines(output)) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first_run = _lines(output)
        assert 1 <= len(first_run) < 4
        requests_before = len(server.chat_requests())
        done = proc.returncode
        assert done == -signal.SIGKILL

        second = subprocess.run(_cmd(server, problems, output), cwd=REPO, env=env, capture_output=True, timeout=300)
        assert second.returncode == 0, second.stderr.decode()[-2000:]
        requests_after = len(server.chat_requests())

    records = _lines(output)
    ids = [r["id"] for r in records]
    assert sorted(ids) == sorted(p.task_id for p in chosen)  # every problem exactly once
    assert records[: len(first_run)] == first_run  # what was written before the kill is kept as is
    for rec in records:
        assert [[t["public_pass_rate"] for t in s["turns"]] for s in rec["samples"]] == [[1.0, 1.0], [1.0, 1.0]]
    # the resumed run asked only for the problems that were missing: 1 + 2 requests per problem
    missing = 4 - len(first_run)
    assert requests_after - requests_before == 3 * missing
    config = json.loads((tmp_path / "out.jsonl.config.json").read_text())
    assert config["stats"]["problems_resumed"] == len(first_run)
    assert config["samples"] == 2 and config["repair_turns"] == 1 and config["profile"] == "paper"
    assert set(config["templates"]) >= {"system", "instruction", "repair", "all_public_passed"}


def test_resume_refuses_other_settings(tmp_path, leetcode_problems):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(problem_record(leetcode_problems[0])) + "\n")
    output = tmp_path / "out.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    with OpenAIServer(responder=lambda m: "no code") as server:
        cmd = _cmd(server, problems, output)
        assert subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=120).returncode == 0
        other = [*cmd[:cmd.index("--samples") + 1], "3", *cmd[cmd.index("--samples") + 2:]]
        again = subprocess.run(other, cwd=REPO, env=env, capture_output=True, timeout=120)
    assert again.returncode == 2
    assert b"was made with --samples 2, this run has 3" in again.stderr
