"""Resume never mixes settings, and odd input is reported, through the real CLI in subprocesses
(real OpenAI-compatible server on 127.0.0.1, real bubblewrap sandbox, real LeetCode problems)."""
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


def cobalt(*argv: str) -> subprocess.CompletedProcess:
    """``cobalt <argv>`` in a subprocess of this tree."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run([sys.executable, "-m", "cobalt", *map(str, argv)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def run(tmp_path_factory, leetcode_problems):
    """Two real problems, a server that answers with their reference programs, one rollout and one eval."""
    work = tmp_path_factory.mktemp("resume")
    chosen = leetcode_problems[:2]
    problems = work / "problems.jsonl"
    problems.write_text("".join(json.dumps(problem_record(p)) + "\n" for p in chosen))
    by_question = {p.question: p for p in chosen}

    def responder(messages, index):
        question = next((q for q in by_question if any(q.strip() in m["content"] for m in messages)), None)
        if question is None:  # not a rollout prompt (cobalt generate)
            return "hi"
        return f"```python\n{by_question[question].reference}\n```"

    with OpenAIServer(responder=responder) as server:
        rollout = work / "rollout.jsonl"
        args = ["rollout", "--engine", "openai", "--model", "test-model", "--base-url", server.base_url,
                "--input", problems, "--output", rollout, "--samples", "2", "--turns", "1", "--seed", "1",
                "--no-progress", "--eval-concurrency", "2"]
        first = cobalt(*args)
        assert first.returncode == 0, first.stderr[-3000:]
        evaluated = work / "eval.jsonl"
        ev = cobalt("eval", "--input", rollout, "--output", evaluated, "--profile", "paper", "--no-progress")
        assert ev.returncode == 0, ev.stderr[-3000:]
        yield dict(work=work, problems=problems, rollout=rollout, evaluated=evaluated, server=server,
                   rollout_args=args, chosen=chosen)


def _refused(proc: subprocess.CompletedProcess, flag: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and flag in lines[0], proc.stderr


@pytest.mark.parametrize("change, flag", [
    (["--seed", "2"], "--seed"),
    (["--history-max-chars", "100"], "--history-max-chars"),
    (["--template-dir", str(REPO / "src" / "cobalt" / "templates")], "--template-dir"),
])
def test_rollout_rerun_with_another_setting_is_refused(run, change, flag):
    before = run["rollout"].read_bytes()
    requests = len(run["server"].chat_requests())
    _refused(cobalt(*run["rollout_args"], *change), flag)
    assert run["rollout"].read_bytes() == before and len(run["server"].chat_requests()) == requests
    # the same settings resume (nothing left to do); concurrency and progress flags may differ
    again = cobalt(*run["rollout_args"], "--max-problems", "3", "--eval-concurrency", "1")
    assert again.returncode == 0, again.stderr[-2000:]
    assert run["rollout"].read_bytes() == before


def test_settings_saved_beside_the_output_without_addresses_or_credentials(run):
    config = json.loads((run["work"] / "rollout.jsonl.config.json").read_text())
    settings = config["settings"]
    assert settings["seed"] == 1 and settings["samples"] == 2 and settings["history_max_chars"] == 6000
    assert settings["input"] == str(run["problems"].resolve())
    for unsaved in ("no_progress", "base_url", "api_key", "eval_concurrency", "max_problems", "ray_address"):
        assert unsaved not in settings
    assert json.loads((run["work"] / "eval.jsonl.config.json").read_text())["settings"]["profile"] == "paper"


def test_eval_rerun_with_another_profile_is_refused(run):
    before = run["evaluated"].read_bytes()
    _refused(cobalt("eval", "--input", run["rollout"], "--output", run["evaluated"], "--profile", "cobalt",
                    "--no-progress"), "--profile")
    assert run["evaluated"].read_bytes() == before


@pytest.mark.parametrize("command", ["eval", "perturb", "generate"])
def test_input_as_output_is_refused(run, tmp_path, command):
    path = tmp_path / "same.jsonl"
    path.write_bytes(run["rollout"].read_bytes())
    extra = ["--engine", "openai", "--model", "test-model", "--base-url", run["server"].base_url] \
        if command == "generate" else []
    proc = cobalt(command, "--input", path, "--output", path, *extra)
    assert proc.returncode == 2 and "the output is also an input" in proc.stderr, proc.stderr
    assert path.read_bytes() == run["rollout"].read_bytes()


def test_perturb_rerun_with_another_seed_is_refused(run, tmp_path):
    out = tmp_path / "ptb.jsonl"
    assert cobalt("perturb", "--input", run["problems"], "--output", out, "--seed", "3",
                  "--no-progress").returncode == 0
    before = out.read_bytes()
    summary = (tmp_path / "ptb.jsonl.summary.json").read_text()
    _refused(cobalt("perturb", "--input", run["problems"], "--output", out, "--seed", "4", "--no-progress"),
             "--seed")
    assert out.read_bytes() == before and (tmp_path / "ptb.jsonl.summary.json").read_text() == summary


def test_generate_rerun_with_another_n_is_refused(run, tmp_path):
    convs = tmp_path / "convs.jsonl"
    convs.write_text(json.dumps({"id": "c1", "messages": [{"role": "user", "content": "say hi"}]}) + "\n")
    out = tmp_path / "gen.jsonl"
    base = ["generate", "--engine", "openai", "--model", "test-model", "--base-url", run["server"].base_url,
            "--input", convs, "--output", out]
    assert cobalt(*base, "--n", "1").returncode == 0
    _refused(cobalt(*base, "--n", "2"), "--n")
    assert len(_lines(out)) == 1 and len(_lines(out)[0]["completions"]) == 1


# -- odd input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["eval", "report", "rollout", "perturb", "generate"])
def test_empty_input_is_a_warning_and_exit_1(run, tmp_path, command):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    if command == "perturb":
        argv = ["perturb", "--input", empty, "--output", tmp_path / "out.jsonl", "--no-progress"]
    elif command == "generate":
        argv = ["generate", "--engine", "openai", "--model", "test-model", "--base-url", run["server"].base_url,
                "--input", empty, "--output", tmp_path / "out.jsonl"]
    elif command == "report":
        argv = ["report", empty, "--out-dir", tmp_path / "r"]
    elif command == "eval":
        argv = ["eval", "--input", empty, "--output", tmp_path / "out.jsonl", "--no-progress"]
    else:
        argv = ["rollout", "--engine", "openai", "--model", "test-model", "--base-url", run["server"].base_url,
                "--input", empty, "--output", tmp_path / "out.jsonl", "--no-progress"]
    proc = cobalt(*argv)
    assert proc.returncode == 1 and f"warning: {empty} holds no records" in proc.stderr, proc.stderr
    assert not (tmp_path / "out.jsonl").exists() or (tmp_path / "out.jsonl").stat().st_size == 0


@pytest.mark.parametrize("command", ["eval", "report", "rollout", "perturb"])
def test_duplicate_problem_ids_are_refused_naming_file_and_line(run, tmp_path, command):
    source = {"report": run["evaluated"], "eval": run["rollout"]}.get(command, run["problems"])
    lines = source.read_text().splitlines()
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text("\n".join([lines[0], lines[1], lines[0]]) + "\n")
    first_id = json.loads(lines[0])["id"]
    if command == "report":
        argv = ["report", doubled, "--out-dir", tmp_path / "r"]
    elif command == "eval":
        argv = ["eval", "--input", doubled, "--output", tmp_path / "out.jsonl", "--no-progress"]
    elif command == "perturb":
        argv = ["perturb", "--input", doubled, "--output", tmp_path / "out.jsonl", "--no-progress"]
    else:
        argv = ["rollout", "--engine", "openai", "--model", "test-model", "--base-url", run["server"].base_url,
                "--input", doubled, "--output", tmp_path / "out.jsonl", "--no-progress"]
    proc = cobalt(*argv)
    assert proc.returncode == 1, proc.stderr
    assert f"{doubled}:3: field 'id': duplicate problem id {first_id!r} (first at line 1)" in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_problem_without_hidden_tests_is_reported_and_left_out(run, tmp_path):
    records = _lines(run["rollout"])
    records[1]["hidden_test_cases"] = json.dumps({"inputs": [], "outputs": [], "fn_name": records[1].get("fn_name")})
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "eval.jsonl"
    proc = cobalt("eval", "--input", rollout, "--output", out, "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"without hidden tests, left out of Pass@1: {records[1]['id']}" in proc.stderr
    summary = json.loads((tmp_path / "eval.jsonl.summary.json").read_text())
    assert summary["problems"] == 1 and summary["no_hidden_tests"] == [records[1]["id"]]
    # the reference programs pass every hidden test: Pass@1 is 100, not the 50 of a problem scored 0
    assert summary["pass_at_1_percent"] == [100.0, 100.0]
    assert "| 0 | 100.00 |" in proc.stdout
    report = cobalt("report", out, "--out-dir", tmp_path / "r")
    assert report.returncode == 0 and "left out of Pass@1" in report.stderr
    assert "| 0 | 100.00 |" in report.stdout


def test_odd_sample_counts_are_named_with_the_runs_samples(run, tmp_path):
    records = _lines(run["evaluated"])
    records[1]["samples"] = records[1]["samples"][:1]
    evaluated = tmp_path / "eval.jsonl"
    evaluated.write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "eval.jsonl.config.json").write_text(json.dumps({"settings": {"input": str(run["rollout"])}}))
    proc = cobalt("report", evaluated, "--out-dir", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    # the run's samples (2) come from the rollout's config, so the 1-sample problem is the odd one
    assert f"other than the run's 2 (id, samples): ({records[1]['id']}, 1)" in proc.stderr
    assert "samples per problem: min 1, max 2" in proc.stdout


def test_exec_rerun_with_another_limit_is_refused(run, tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"id": p.task_id, "code": p.stdin_program(),
                                        "test_cases": p.stdin_tests().to_dict()}) + "\n" for p in run["chosen"]))
    out = tmp_path / "results.jsonl"
    first = cobalt("exec", "--input", jobs, "--output", out, "--test-timeout", "5", "--no-progress")
    assert first.returncode == 0, first.stderr[-2000:]
    before = out.read_bytes()
    _refused(cobalt("exec", "--input", jobs, "--output", out, "--test-timeout", "9", "--no-progress"),
             "--test-timeout")
    assert out.read_bytes() == before
    # the number of programs judged at once is not a setting of the results
    again = cobalt("exec", "--input", jobs, "--output", out, "--test-timeout", "5", "--workers", "1", "--no-progress")
    assert again.returncode == 0, again.stderr[-2000:]
