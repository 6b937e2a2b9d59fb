"""An infrastructure failure is never recorded as a model result (real CLI in a subprocess,
real OpenAI-compatible server on 127.0.0.1, real bubblewrap sandbox).

- before the first problem: no bwrap on PATH, a Ray address where nothing listens, a model
  server that is down or answers 500: exit 1 within the bound, one line, nothing written,
  ``<output>.config.json`` unchanged;
- during a run: a sandbox that fails for one problem leaves that problem out (exit 1) and
  never feeds the failure to the model; the rerun redoes it;
- the breaker: a model server that fails every request stops the run with one line;
- old outputs whose public feedback holds an evaluator failure are flagged by eval and report.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from support.openai_server import OpenAIServer  # noqa: E402

from cobalt.rollout.leetcode import problem_record  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FEEDBACK_OF_OLD_VERSIONS = "The evaluation of your previous program failed with an error"


def _env(**extra: str) -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO / "src"), **extra)


def _cobalt(*args: str, env: dict | None = None, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cobalt", *args], cwd=REPO, env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - start


def _problems(tmp_path: Path, chosen, copies: int = 1) -> Path:
    path = tmp_path / "problems.jsonl"
    with path.open("w") as fh:
        for k in range(copies):
            for p in chosen:
                rec = problem_record(p)
                if copies > 1:
                    rec["id"] = f"{rec['id']}-{k}"
                fh.write(json.dumps(rec) + "\n")
    return path


def _rollout_args(base_url: str, problems: Path, output: Path, *extra: str) -> list[str]:
    return ["rollout", "--engine", "openai", "--model", "test-model", "--base-url", base_url, "--input", str(problems),
            "--output", str(output), "--samples", "1", "--turns", "1", "--no-progress", "--eval-concurrency", "1",
            *extra]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _one_line(stderr: str) -> str:
    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def _solver(chosen):
    by_question = {p.question: p for p in chosen}

    def responder(messages, index):
        question = next(q for q in by_question if q.strip() in messages[1]["content"])
        return f"```python\n{by_question[question].reference}\n```"
    return responder, by_question




# -- before the first problem --------------------------------------------------------------------
def test_rollout_and_eval_without_bwrap_exit_fast_and_write_nothing(tmp_path, leetcode_problems):
    problems = _problems(tmp_path, leetcode_problems[:2])
    output = tmp_path / "out.jsonl"
    config = tmp_path / "out.jsonl.config.json"
    config.write_text('{"from": "an earlier run"}\n')
    no_bwrap = tmp_path / "empty-bin"
    no_bwrap.mkdir()
    env = _env(PATH=str(no_bwrap))
    with OpenAIServer() as server:
        proc, seconds = _cobalt(*_rollout_args(server.base_url, problems, output), env=env)
        assert server.chat_requests() == []
    assert proc.returncode == 1 and seconds < 30
    line = _one_line(proc.stderr)
    assert line.startswith("cobalt rollout: sandbox: bubblewrap (bwrap) is not installed") and "apt-get" in line
    assert not output.exists() and config.read_text() == '{"from": "an earlier run"}\n'

    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({**problem_record(leetcode_problems[0]), "samples": [
        {"turns": [{"response": "```python\nprint(1)\n```", "public": {"passing": [False], "feedback": ["x"]}}]}]})
        + "\n")
    evaluated = tmp_path / "eval.jsonl"
    proc, seconds = _cobalt("eval", "--input", str(records), "--output", str(evaluated), "--no-progress", env=env)
    assert proc.returncode == 1 and seconds < 30
    assert _one_line(proc.stderr).startswith("cobalt eval: sandbox: bubblewrap (bwrap) is not installed")
    assert not evaluated.exists() and not (tmp_path / "eval.jsonl.summary.json").exists()


def test_ray_evaluator_where_nothing_listens(tmp_path, leetcode_problems, closed_port):
    problems = _problems(tmp_path, leetcode_problems[:1])
    output = tmp_path / "out.jsonl"
    with OpenAIServer() as server:
        proc, seconds = _cobalt(*_rollout_args(server.base_url, problems, output, "--evaluator", "ray",
                                               "--ray-address", f"127.0.0.1:{closed_port}"))
        assert server.chat_requests() == []
    assert proc.returncode == 1 and seconds < 60
    line = _one_line(proc.stderr)
    assert f"no Ray cluster answers at 127.0.0.1:{closed_port}" in line and "--evaluator embedded" in line
    assert not output.exists() and not (tmp_path / "out.jsonl.config.json").exists()


def test_ray_client_that_cannot_connect_yields_an_infrastructure_error(closed_port):
    """During a run, an unreachable Ray evaluator is an infrastructure error, never a verdict (own process:
    ``ray.init`` is left trying in a daemon thread)."""
    script = (
        "import asyncio, json, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from cobalt.execution.client import EvaluatorClient\n"
        f"c = EvaluatorClient.ray('127.0.0.1:{closed_port}', timeout_s=3, retries=0)\n"
        "r = asyncio.run(c.evaluate('print(1)', {'inputs': ['1'], 'outputs': ['1']}))\n"
        "print(json.dumps([r.infrastructure_error, r.status, r.error]))\n"
        "import os; os._exit(0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True, text=True, timeout=120)
    infra, status, error = json.loads(proc.stdout.strip().splitlines()[-1])
    assert infra is True and status == ["sandbox_error"] and "evaluator call failed" in error


@pytest.mark.parametrize("kind", ["down", "500"])
def test_model_server_down_or_500_fails_before_the_first_problem(tmp_path, leetcode_problems, closed_port,
                                                                 broken_server, kind):
    problems = _problems(tmp_path, leetcode_problems[:2])
    output = tmp_path / "out.jsonl"
    url = f"http://127.0.0.1:{closed_port}/v1" if kind == "down" else broken_server
    proc, seconds = _cobalt(*_rollout_args(url, problems, output))
    assert proc.returncode == 1 and seconds < 30
    line = _one_line(proc.stderr)
    assert line.startswith("cobalt rollout: openai engine (") and "start the server or fix --base-url" in line
    assert ("cannot reach the endpoint" in line) if kind == "down" else ("HTTP 500" in line)
    assert not output.exists() and not (tmp_path / "out.jsonl.config.json").exists()

    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c1", "question": "q", "new_program": "print(1)"}) + "\n")
    proc, seconds = _cobalt("judge", "--engine", "openai", "--model", "m", "--base-url", url, "--input", str(cases),
                            "--output", str(tmp_path / "judged.jsonl"), "--no-progress")
    assert proc.returncode == 1 and seconds < 30
    assert _one_line(proc.stderr).startswith("cobalt judge: openai engine (")
    assert not (tmp_path / "judged.jsonl").exists()


# -- during a run ---------------------------------------------------------------------------------
def test_breaker_stops_a_run_against_a_failing_model_server(tmp_path, leetcode_problems):
    problems = _problems(tmp_path, leetcode_problems[:5], copies=10)  # 50 problems
    output = tmp_path / "out.jsonl"
    with OpenAIServer() as server:
        server.fail_next(500, times=1000)
        proc, seconds = _cobalt(*_rollout_args(server.base_url, problems, output, "--max-retries", "0",
                                               "--max-problems", "4"))
        requests = len(server.chat_requests())
        base_url = server.base_url
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    stop = [x for x in proc.stderr.splitlines() if "stopped:" in x]
    assert stop == ["cobalt rollout: stopped: 20 engine or evaluator failures in a row; last error: EngineError: "
                    f"openai engine ({base_url}, model test-model): HTTP 500: scripted error 500. Fix the engine or "
                    "evaluator and rerun the same command to resume"]
    assert proc.stderr.strip().splitlines()[-1] == stop[0]
    assert 20 <= requests < 30  # stopped early, not after all 50 problems
    assert _lines(output) == []


def _bwrap_that_fails_when(trigger: Path, folder: Path) -> Path:
    """A ``bwrap`` on PATH that runs the real one, except while ``trigger`` exists (then it fails to start)."""
    folder.mkdir()
    wrapper = folder / "bwrap"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"if [ -e '{trigger}' ] && [ \"$1\" != \"--version\" ]; then\n"
        "  echo 'bwrap: Creating new namespace failed: No space left on device' >&2; exit 1\n"
        "fi\n"
        f"exec {shutil.which('bwrap')} \"$@\"\n")
    wrapper.chmod(0o755)
    return folder


def test_sandbox_failure_mid_run_is_redone_on_the_next_run(tmp_path, leetcode_problems):
    chosen = leetcode_problems[:3]
    problems = _problems(tmp_path, chosen)
    output = tmp_path / "out.jsonl"
    trigger = tmp_path / "sandbox-broken"
    env = _env(PATH=f"{_bwrap_that_fails_when(trigger, tmp_path / 'bin')}:{os.environ['PATH']}")
    solve, by_question = _solver(chosen)
    broken_once: list[str] = []

    def responder(messages, index):
        # the sandbox breaks while the second problem is judged, and is fixed for the third
        if chosen[1].question.strip() in messages[1]["content"] and not broken_once:
            trigger.touch()
            broken_once.append(chosen[1].task_id)
        elif chosen[2].question.strip() in messages[1]["content"]:
            trigger.unlink(missing_ok=True)
        return solve(messages, index)

    with OpenAIServer(responder=responder) as server:
        args = _rollout_args(server.base_url, problems, output, "--max-problems", "1")
        first, _ = _cobalt(*args, env=env)
        assert first.returncode == 1, first.stderr[-2000:]
        assert "Traceback" not in first.stderr
        done = [r["id"] for r in _lines(output)]
        assert done == [chosen[0].task_id, chosen[2].task_id]
        assert f"{chosen[1].task_id}: InfrastructureError: the evaluator could not judge a program" in first.stderr
        assert "rerun the same command to retry them" in first.stderr
        stats = json.loads((tmp_path / "out.jsonl.config.json").read_text())["stats"]
        assert stats["evaluator_errors"] == 1 and stats["problems_failed"] == 1

        second, _ = _cobalt(*args, env=env)
        assert second.returncode == 0, second.stderr[-2000:]
        requests = server.chat_requests()
    records = _lines(output)
    assert [r["id"] for r in records] == [chosen[0].task_id, chosen[2].task_id, chosen[1].task_id]
    for rec in records:
        assert [t["public_pass_rate"] for t in rec["samples"][0]["turns"]] == [1.0, 1.0]
    # the failure never reached the model as feedback
    assert not any(FEEDBACK_OF_OLD_VERSIONS in json.dumps(r.body) for r in requests)
    assert not any("sandbox" in json.dumps(r.body["messages"][2:]) for r in requests if len(r.body["messages"]) > 2)


# -- old outputs --------------------------------------------------------------------------------
def _old_record(problem, feedback: str, hidden: float | None = None) -> dict:
    turn = {"response": f"```python\n{problem.reference}\n```", "code": problem.reference,
            "public": {"passing": [False], "feedback": [feedback]}, "public_pass_rate": 0.0}
    if hidden is not None:
        turn["hidden_pass_rate"] = hidden
    return {**problem_record(problem), "enable_thinking": False, "samples": [{"turns": [turn, dict(turn)]}]}


def test_eval_and_report_flag_records_fed_an_evaluator_failure(tmp_path, leetcode_problems):
    good, bad = leetcode_problems[:2]
    sandbox_text = f"{FEEDBACK_OF_OLD_VERSIONS}: SandboxUnavailable: bubblewrap (bwrap) is not installed."
    records = tmp_path / "rollout.jsonl"
    records.write_text(json.dumps(_old_record(good, "Wrong answer")) + "\n"
                       + json.dumps(_old_record(bad, sandbox_text)) + "\n")
    evaluated = tmp_path / "eval.jsonl"
    proc, _ = _cobalt("eval", "--input", str(records), "--output", str(evaluated), "--no-progress")
    assert proc.returncode == 1
    assert [r["id"] for r in _lines(evaluated)] == [good.task_id]
    assert f"problem {bad.task_id}: not scored: its rollout fed an evaluator failure to the model" in proc.stderr

    old_eval = tmp_path / "old_eval.jsonl"
    old_eval.write_text(json.dumps(_old_record(good, "Wrong answer", 1.0)) + "\n"
                        + json.dumps(_old_record(bad, sandbox_text, 0.0)) + "\n")
    proc, _ = _cobalt("report", str(old_eval), "--out-dir", str(tmp_path / "report"))
    assert proc.returncode == 1
    assert f"problem {bad.task_id}: not scored" in proc.stderr and "1 record(s) flagged" in proc.stderr
    assert "1 record(s) left out" in (tmp_path / "report" / "pass_at_1.md").read_text()
    assert "| 0 | 100.00 |" in proc.stdout  # the one scored problem passes; the flagged one is not a 0


def test_preproc_taco_and_exec_without_bwrap_exit_fast_and_write_nothing(tmp_path):
    """Verification by reference solutions runs programs: no sandbox is an error, never 'unverified'."""
    no_bwrap = tmp_path / "empty-bin"
    no_bwrap.mkdir()
    env = _env(PATH=str(no_bwrap))
    output = tmp_path / "taco.jsonl"
    proc, seconds = _cobalt("preproc-taco", "--input", str(REPO / "tests" / "fixtures" / "taco" /
                                                          "taco_verified_sample.jsonl"),
                            "--output", str(output), "--no-progress", env=env)
    assert proc.returncode == 1 and seconds < 30
    assert _one_line(proc.stderr).startswith("cobalt preproc-taco: sandbox: bubblewrap (bwrap) is not installed")
    assert not output.exists()

    code, tests = tmp_path / "p.py", tmp_path / "t.json"
    code.write_text("print(input())\n")
    tests.write_text(json.dumps({"inputs": ["1\n"], "outputs": ["1"]}))
    proc, seconds = _cobalt("exec", "--code", str(code), "--tests", str(tests), env=env)
    assert proc.returncode == 1 and seconds < 30 and proc.stdout == ""
    assert _one_line(proc.stderr).startswith("cobalt exec: sandbox: bubblewrap (bwrap) is not installed")


def _bwrap_that_works_once(tmp_path: Path) -> Path:
    """A folder with a ``bwrap`` whose first sandbox (the pre-flight check) works and every later one fails."""
    counter = tmp_path / "runs"
    folder = tmp_path / "bin"
    folder.mkdir()
    wrapper = folder / "bwrap"
    wrapper.write_text(
        "#!/bin/sh\n"
        "if [ \"$1\" != \"--version\" ]; then\n"
        f"  echo x >> '{counter}'\n"
        f"  if [ $(wc -l < '{counter}') -gt 1 ]; then echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1; fi\n"
        "fi\n"
        f"exec {shutil.which('bwrap')} \"$@\"\n")
    wrapper.chmod(0o755)
    return folder


def test_eval_sandbox_failure_mid_run_leaves_the_record_for_the_rerun(tmp_path, leetcode_problems):
    """The sandbox works for the pre-flight check, then fails: no record is scored 0, exit 1; after
    the fix the rerun evaluates every record."""
    chosen = leetcode_problems[:2]
    records = tmp_path / "rollout.jsonl"
    records.write_text("".join(json.dumps(_old_record(p, "Wrong answer")) + "\n" for p in chosen))
    folder = _bwrap_that_works_once(tmp_path)
    evaluated = tmp_path / "eval.jsonl"
    args = ("eval", "--input", str(records), "--output", str(evaluated), "--no-progress")
    first, _ = _cobalt(*args, env=_env(PATH=f"{folder}:{os.environ['PATH']}"))
    assert first.returncode == 1 and "Traceback" not in first.stderr
    assert _lines(evaluated) == []
    assert "the evaluator could not judge a program" in first.stderr and "rerun the same command" in first.stderr

    second, _ = _cobalt(*args)
    assert second.returncode == 0, second.stderr[-2000:]
    out = _lines(evaluated)
    assert sorted(r["id"] for r in out) == sorted(p.task_id for p in chosen)
    assert all(t["hidden_pass_rate"] == 1.0 for r in out for t in r["samples"][0]["turns"])


def test_demo_without_bwrap_is_one_line(tmp_path):
    no_bwrap = tmp_path / "empty-bin"
    no_bwrap.mkdir()
    proc, seconds = _cobalt("demo", "--work-dir", str(tmp_path / "demo"), env=_env(PATH=str(no_bwrap)))
    assert proc.returncode == 1 and seconds < 30
    assert _one_line(proc.stderr).startswith("cobalt demo: sandbox: bubblewrap (bwrap) is not installed")
    assert not (tmp_path / "demo").exists()


def test_exec_jobs_not_judged_by_a_failing_sandbox_are_redone(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"id": f"j{i}", "code": "print(int(input()) * 2)",
                                        "test_cases": {"inputs": [f"{i}\n"], "outputs": [str(2 * i)]}}) + "\n"
                            for i in range(3)))
    results = tmp_path / "results.jsonl"
    args = ("exec", "--input", str(jobs), "--output", str(results), "--no-progress")
    folder = _bwrap_that_works_once(tmp_path)
    first, _ = _cobalt(*args, env=_env(PATH=f"{folder}:{os.environ['PATH']}"))
    assert first.returncode == 1 and "Traceback" not in first.stderr
    assert _lines(results) == []  # no job is recorded as failing
    assert ("0 judged (0 of 3 jobs already done), 0 bad job(s), 3 not judged because the evaluator failed "
            "(rerun to retry them)") in first.stderr

    second, _ = _cobalt(*args)
    assert second.returncode == 0, second.stderr[-2000:]
    assert sorted((r["id"], r["passing"]) for r in _lines(results)) == [("j0", [True]), ("j1", [True]), ("j2", [True])]
