"""The CLI at its edges, through the real ``python -m cobalt`` in a subprocess: a user's or the
environment's mistake ends in one line and an exit status (2 usage, 1 failure, 130 Ctrl-C),
never a traceback; real local HTTP servers (down, 500, not JSON, no choices), the real
sandbox, the real shipped data and tokenizer."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.openai_server import OpenAIServer

from cobalt.rollout.leetcode import problem_record

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src"))
ENV.pop("COBALT_DEBUG", None)
ENV.pop("COBALT_ENGINE", None)


def cobalt(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``python -m cobalt ARGS`` and return the finished process (text output)."""
    return subprocess.run([sys.executable, "-m", "cobalt", *args], cwd=REPO, env=env or ENV, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The single error line of a failed command's stderr (argparse's usage lines aside)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if re.match(r"cobalt [\w-]+: ", line)]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.fixture
def problems_file(tmp_path, leetcode_problems) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(problem_record(p)) + "\n" for p in leetcode_problems[:4]))
    return path


def _rollout_args(server_url: str, problems: Path, output: Path, *extra: str) -> list[str]:
    return ["rollout", "--engine", "openai", "--model", "test-model", "--base-url", server_url, "--api-key", "k",
            "--input", str(problems), "--output", str(output), "--samples", "2", "--turns", "1",
            "--max-problems", "1", "--max-programs", "1", "--max-retries", "0", *extra]


# ---------------------------------------------------------------- item: Ctrl-C, one line, resume


def test_ctrl_c_in_rollout_flushes_exits_130_and_the_rerun_resumes(tmp_path, problems_file, leetcode_problems):
    by_question = {p.question: p for p in leetcode_problems[:4]}

    def responder(messages, index):
        question = next(q for q in by_question if q.strip() in messages[1]["content"])
        return f"```python\n{by_question[question].reference}\n```"

    output = tmp_path / "out.jsonl"
    with OpenAIServer(responder=responder, delay=0.5) as server:
        argv = _rollout_args(server.base_url, problems_file, output)
        # a terminal's Ctrl-C: SIGINT at its default even when the suite itself runs in the background
        # (a shell without job control starts background commands with SIGINT ignored, and so would
        # the child be, which then finishes the whole run)
        proc = subprocess.Popen([sys.executable, "-m", "cobalt", *argv], cwd=REPO, env=ENV, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not _lines(output) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stderr and "Error" not in stderr, stderr
        done = len(_lines(output))
        assert 1 <= done < 4
        assert stderr.rstrip().splitlines()[-1] == (
            f"cobalt rollout: interrupted: {done} of 4 problems done; rerun the same command to resume")

        again = cobalt(*argv)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{done} of 4 problems already done" in again.stderr
    records = _lines(output)
    assert sorted(r["id"] for r in records) == sorted(p.task_id for p in leetcode_problems[:4])
    # the final summary is a table on stderr and JSON in the summary file
    assert re.search(r"^  problems resumed\s+%d$" % done, again.stderr, re.M), again.stderr
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())
    assert summary["problems_resumed"] == done and summary["problems_done"] == 4 - done
    assert "\r" not in again.stderr  # no tqdm frames in a log


@pytest.mark.parametrize("argv, status, pattern", [
    (["rollout", "--input", "p", "--output", "o", "--temperature", "-1"], 2, r"--temperature: '-1': must be 0 or more"),
    (["rollout", "--input", "p", "--output", "o", "--history-max-chars", "-5"], 2, r"--history-max-chars.*at least 1"),
    (["rollout", "--input", "p", "--output", "o", "--top-p", "1.5"], 2, r"--top-p: '1.5': must be in \(0, 1\]"),
    (["exec", "--code", "x.py", "--tests", "t.json", "--test-timeout", "-1"], 2, r"--test-timeout.*more than 0"),
    (["eval", "--input", "x", "--output", "y", "--max-problems", "0"], 2, r"--max-problems: '0': must be at least 1"),
    (["build-prompts", "--input", "missing.jsonl", "--output", "o.jsonl", "--tokenizer",
      "{data}/qwen3_tokenizer"], 2, r"^cobalt build-prompts: error: missing.jsonl: no such file"),
    (["perturb", "--input", "missing.jsonl", "--output", "o.jsonl"], 2, r"--input missing.jsonl: no such file"),
    (["make-verl-data", "--kind", "single-turn", "--train", "missing.jsonl", "--output-dir", "d", "--tokenizer",
      "{data}/qwen3_tokenizer"], 2, r"missing.jsonl: no such file"),
    (["demo", "--engine", "foo"], 2, r"--engine: invalid choice: 'foo'"),
    (["demo", "--engine", "openai"], 2, r"--engine openai needs --base-url"),
    (["nosuchcommand"], 2, r"unknown command 'nosuchcommand'"),
])
def test_user_mistakes_end_in_one_line(tmp_path, shared_data, argv, status, pattern):
    argv = [a.replace("{data}", str(shared_data)) for a in argv]
    env = dict(ENV)
    env.pop("OPENAI_BASE_URL", None)
    proc = subprocess.run([sys.executable, "-m", "cobalt", *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == status, proc.stderr
    line = one_line_error(proc) if not argv[0].startswith("nosuch") else proc.stderr.strip().splitlines()[-1]
    assert re.search(pattern, line), line
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "d").exists()


def test_output_that_is_a_folder_or_under_a_file(tmp_path, problems_file, closed_port):
    folder = tmp_path / "adir"
    folder.mkdir()
    base = f"http://127.0.0.1:{closed_port}/v1"
    proc = cobalt(*_rollout_args(base, problems_file, folder, "--no-progress"))
    assert proc.returncode == 2
    assert one_line_error(proc) == f"cobalt rollout: error: {folder}: is a folder; give a file path (folders go to --output-dir)"
    afile = tmp_path / "afile"
    afile.write_text("")
    proc = cobalt("eval", "--input", str(problems_file), "--output", str(afile / "out.jsonl"), "--no-progress")
    assert proc.returncode == 2
    assert "a part of this path is a file, not a folder" in one_line_error(proc)


def test_exec_without_bubblewrap_says_how_to_install_it(tmp_path):
    (tmp_path / "p.py").write_text("print(int(input()) + 1)\n")
    (tmp_path / "t.json").write_text(json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]}))
    env = dict(ENV, PATH=str(tmp_path / "empty-bin"))
    proc = cobalt("exec", "--code", str(tmp_path / "p.py"), "--tests", str(tmp_path / "t.json"), env=env)
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert "bubblewrap (bwrap) is not installed" in line and "apt-get install bubblewrap" in line


def test_debug_shows_the_traceback_only_when_asked(tmp_path):
    plain = cobalt("perturb", "--input", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "o.jsonl"))
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    for extra_env, flag in (({"COBALT_DEBUG": "1"}, []), ({}, ["--debug"])):
        debug = cobalt("perturb", *flag, "--input", str(tmp_path / "missing.jsonl"), "--output",
                       str(tmp_path / "o.jsonl"), env=dict(ENV, **extra_env))
        assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr
        assert debug.stderr.rstrip().splitlines()[-1] == plain.stderr.rstrip().splitlines()[-1]


def test_limit_zero_runs_nothing(tmp_path, problems_file):
    output = tmp_path / "out.jsonl"
    with OpenAIServer() as server:
        proc = cobalt(*_rollout_args(server.base_url, problems_file, output, "--limit", "0", "--no-progress"))
        assert proc.returncode == 0, proc.stderr
        assert server.chat_requests() == []
    assert _lines(output) == []
    assert "rollout: 0 problems" in proc.stderr


# ---------------------------------------------------------------- servers that misbehave


class _WireServer:
    """A real HTTP server answering every request with one fixed body (wire-level faults)."""

    def __init__(self, body: bytes, content_type: str):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append(json.loads(raw) if raw else None)
                self.send_response(200)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            do_GET = do_POST

        self.body, self.content_type = body, content_type
        self.requests: list = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _generate(tmp_path: Path, base_url: str) -> subprocess.CompletedProcess:
    conv = tmp_path / "conv.jsonl"
    conv.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    return cobalt("generate", "--engine", "openai", "--model", "m", "--base-url", base_url, "--api-key", "k",
                  "--input", str(conv), "--output", str(tmp_path / "gen.jsonl"), "--max-retries", "0",
                  "--timeout", "10")


@pytest.mark.parametrize("body, content_type, pattern", [
    (b"<html>proxy error</html>", "text/html", r"the server did not answer JSON \(http://127\.0\.0\.1:\d+/v1\)"),
    (b"<html>proxy error</html>", "application/json", r"the server did not answer JSON \(http://127\.0\.0\.1:\d+/v1\)"),
    (json.dumps({"id": "x", "object": "chat.completion"}).encode(), "application/json", r"the reply has no choices"),
])
def test_a_reply_that_is_not_a_chat_completion_is_named(tmp_path, body, content_type, pattern):
    server = _WireServer(body, content_type)
    try:
        proc = _generate(tmp_path, server.base_url)
    finally:
        server.close()
    assert proc.returncode == 1, proc.stderr
    assert re.search(pattern, one_line_error(proc)), proc.stderr
    assert not _lines(tmp_path / "gen.jsonl")


def test_server_500_and_server_down_are_one_line(tmp_path, closed_port):
    with OpenAIServer() as server:
        server.fail_next(500, times=20, message="boom")
        proc = _generate(tmp_path, server.base_url)
    assert proc.returncode == 1 and re.search(r"HTTP 500", one_line_error(proc)), proc.stderr
    proc = _generate(tmp_path, f"http://127.0.0.1:{closed_port}/v1")
    assert proc.returncode == 1 and "cannot reach the endpoint" in one_line_error(proc), proc.stderr


# ---------------------------------------------------------------- offline defaults


def test_hub_tokenizer_offline_fails_fast_naming_the_flag(tmp_path, leetcode_problems):
    env = dict(ENV, HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT="http://127.0.0.1:9")
    env.pop("HF_HUB_OFFLINE", None)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(problem_record(leetcode_problems[0])) + "\n")
    for argv in (["build-prompts", "--input", str(rows), "--output", str(tmp_path / "o.jsonl")],
                 ["make-verl-data", "--kind", "single-turn", "--train", str(rows), "--output-dir", str(tmp_path / "v")]):
        started = time.monotonic()
        proc = cobalt(*argv, env=env)
        assert time.monotonic() - started < 10, proc.stderr
        assert proc.returncode == 1, proc.stderr
        line = one_line_error(proc)
        assert "tokenizer 'Qwen/Qwen3-8B' cannot be loaded" in line and "--tokenizer PATH" in line
        assert not (tmp_path / "o.jsonl").exists()
    started = time.monotonic()
    proc = cobalt("preproc-taco", "--output", str(tmp_path / "taco.jsonl"), env=env)
    assert time.monotonic() - started < 10 and proc.returncode == 1
    assert "hub name and the hub (127.0.0.1) is unreachable; pass a local copy with --input PATH" in one_line_error(proc)


def test_a_local_tokenizer_path_that_is_wrong_is_never_substituted(tmp_path, leetcode_problems):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(problem_record(leetcode_problems[0])) + "\n")
    proc = cobalt("build-prompts", "--input", str(rows), "--output", str(tmp_path / "o.jsonl"), "--tokenizer",
                  str(tmp_path / "no-such-tokenizer"))
    assert proc.returncode == 1
    assert one_line_error(proc).endswith("no-such-tokenizer: no such folder")


# ---------------------------------------------------------------- data in: preproc-leetcode


def test_preproc_leetcode_writes_problems_with_starter_code_and_resumes(tmp_path, shared_data):
    from cobalt.data.problems import iter_problems

    out = tmp_path / "problems.jsonl"
    source = shared_data / "leetcode" / "leetcode_problems.jsonl.gz"
    proc = cobalt("preproc-leetcode", "--input", str(source), "--output", str(out), "--n-public", "3")
    assert proc.returncode == 0, proc.stderr
    records = _lines(out)
    assert len(records) == 286 and len({r["id"] for r in records}) == 286
    for rec in records:
        assert "class Solution:" in rec["starter_code"] and f"def {rec['fn_name']}(" in rec["starter_code"]
        public, hidden = json.loads(rec["public_test_cases"]), json.loads(rec["hidden_test_cases"])
        assert public["fn_name"] == rec["fn_name"] and len(public["inputs"]) == min(3, len(json.loads(
            rec["test_cases"])["inputs"]) // 2) and hidden["inputs"]
    assert len(list(iter_problems(out))) == 286  # what rollout reads
    again = cobalt("preproc-leetcode", "--input", str(source), "--output", str(out), "--n-public", "3")
    assert again.returncode == 0 and "286 of 286 already done" in again.stderr
    assert len(_lines(out)) == 286

    contests = tmp_path / "contests.jsonl"
    proc = cobalt("preproc-leetcode", "--input", str(shared_data / "code_contests" / "code_contests_test.json"),
                  "--output", str(contests))
    assert proc.returncode == 0, proc.stderr
    cc = _lines(contests)
    assert len(cc) == 125 and all(r["source"] == "codecontests" and "fn_name" not in json.loads(r["test_cases"])
                                  for r in cc)
    assert "40 with fewer than 2 tests left out" in proc.stderr


def test_preproc_leetcode_bad_record_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "x", "tests": "{'inputs': ['1'"}) + "\n")
    proc = cobalt("preproc-leetcode", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{bad}:1: field 'tests': not a Python literal" in proc.stderr


# ---------------------------------------------------------------- doctor


def test_doctor_one_line_per_check_with_the_fix(tmp_path, shared_data, closed_port):
    with OpenAIServer() as server:
        proc = cobalt("doctor", "--tokenizer", str(shared_data / "qwen3_tokenizer"), "--base-url", server.base_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    states = {line[:20].strip(): line[21:28].strip() for line in proc.stdout.splitlines()}
    assert states["sandbox"] == "ok" and states["tokenizer"] == "ok" and states["server"] == "ok"
    assert {"seccomp", "cgroups", "engine openai", "engine vllm", "ray", "hub"} <= set(states)
    bad = cobalt("doctor", "--base-url", f"http://127.0.0.1:{closed_port}/v1", "--timeout", "2",
                 env=dict(ENV, PATH=str(tmp_path / "empty-bin")))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    lines = {line[:20].strip(): line for line in bad.stdout.splitlines()}
    assert "FAIL" in lines["sandbox"] and "fix: sudo apt-get install bubblewrap" in lines["sandbox"]
    assert "FAIL" in lines["server"] and "fix: start the server or fix --base-url" in lines["server"]


# ---------------------------------------------------------------- one vocabulary


def test_old_flag_spellings_work_hidden_and_first_turns_are_checked(tmp_path, problems_file):
    help_text = cobalt("rollout", "--help").stdout
    for new in ("--max-new-tokens", "--thinking {on,off,auto}", "--max-programs"):
        assert new in help_text
    for old in ("--max-tokens", "--enable-thinking", "--eval-concurrency"):
        assert old not in help_text
    output = tmp_path / "out.jsonl"
    cached = tmp_path / "cached.jsonl"
    with OpenAIServer(responder=lambda messages, index: "no code here") as server:
        # old spellings, engine from $COBALT_ENGINE (no --engine)
        argv = _rollout_args(server.base_url, problems_file, cached, "--no-progress", "--turns", "0",
                             "--max-tokens", "64", "--enable-thinking", "--eval-concurrency", "1", "--limit", "1")
        argv.remove("--engine"), argv.remove("openai")
        proc = cobalt(*argv, env=dict(ENV, COBALT_ENGINE="openai"))
        assert proc.returncode == 0, proc.stderr
        config = json.loads((tmp_path / "cached.jsonl.config.json").read_text())
        assert config["engine"] == "openai" and config["max_new_tokens"] == 64 and config["enable_thinking"] is True
        requests = len(server.chat_requests())
        proc = cobalt(*_rollout_args(server.base_url, problems_file, output, "--samples", "4", "--limit", "1",
                                     "--first-turn-from", str(cached)))
        assert proc.returncode == 2 and len(server.chat_requests()) == requests
    line = one_line_error(proc)
    assert "has 2 first-turn samples but --samples is 4" in line
    assert not output.exists()


# ---------------------------------------------------------------- progress in logs


def test_progress_in_a_log_is_plain_lines_with_totals(tmp_path, shared_data):
    problems = tmp_path / "problems.jsonl"
    assert cobalt("preproc-leetcode", "--input", str(shared_data / "leetcode" / "leetcode_problems.jsonl.gz"),
                  "--output", str(problems), "--limit", "40").returncode == 0
    proc = cobalt("perturb", "--input", str(problems), "--output", str(tmp_path / "perturbed.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("perturb: ")]
    assert lines and lines[-1].startswith("perturb: 40/40 problems (100%)"), proc.stderr
    assert len(lines) <= 21


# ---------------------------------------------------------------- bounds on responses


def test_responses_beyond_max_tokens_or_one_mib_are_cut_marked_and_counted(tmp_path, problems_file):
    words = " ".join(f"w{i}" for i in range(1000))
    reply = {"id": "c", "object": "chat.completion", "model": "m", "created": 0,
             "choices": [{"index": 0, "message": {"role": "assistant", "content": words}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 5, "completion_tokens": 1000, "total_tokens": 1005}}
    server = _WireServer(json.dumps(reply).encode(), "application/json")  # a server that ignores max_tokens
    output = tmp_path / "out.jsonl"
    try:
        proc = cobalt(*_rollout_args(server.base_url, problems_file, output, "--samples", "1", "--limit", "1",
                                     "--max-new-tokens", "100", "--no-progress"))
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    turns = _lines(output)[0]["samples"][0]["turns"]
    assert [t["cut"] for t in turns] == ["max_tokens", "max_tokens"]
    assert turns[0]["response"] == words[: len(words) // 10] and turns[0]["finish_reason"] == "length"
    assert turns[0]["completion_tokens"] == 100
    chats = [r for r in server.requests if r and "messages" in r]  # the pre-flight's GET /models aside
    assert len(chats) == 2
    resent = [m["content"] for m in chats[1]["messages"] if m["role"] == "assistant"]
    assert resent == [turns[0]["response"]]  # the next turn carries the cut response, not the whole one
    assert json.loads((tmp_path / "out.jsonl.summary.json").read_text())["responses_cut"] == 2
    assert re.search(r"^  responses cut\s+2$", proc.stderr, re.M)

    huge = "x" * (3 << 20)  # one 3 MiB "token" for the test server: within max_tokens, beyond 1 MiB
    big_out = tmp_path / "big.jsonl"
    with OpenAIServer(responder=lambda messages, index: huge) as big:
        proc = cobalt(*_rollout_args(big.base_url, problems_file, big_out, "--samples", "1", "--limit", "1",
                                     "--turns", "0", "--no-progress"))
    assert proc.returncode == 0, proc.stderr
    turn = _lines(big_out)[0]["samples"][0]["turns"][0]
    assert turn["cut"] == "bytes" and turn["response"] == "x" * (1 << 20)
    small_out = tmp_path / "small.jsonl"
    with OpenAIServer(responder=lambda messages, index: "short answer") as small:
        assert cobalt(*_rollout_args(small.base_url, problems_file, small_out, "--samples", "1", "--limit", "1",
                                     "--turns", "0", "--no-progress")).returncode == 0
    turn = _lines(small_out)[0]["samples"][0]["turns"][0]
    assert "cut" not in turn and turn["response"] == "short answer"


def test_exec_rerun_says_how_much_was_already_done(tmp_path):
    jobs, results = tmp_path / "jobs.jsonl", tmp_path / "results.jsonl"
    jobs.write_text("".join(json.dumps({"id": f"j{i}", "code": "print(int(input()) + 1)",
                                        "test_cases": {"inputs": [f"{i}\n"], "outputs": [f"{i + 1}\n"]}}) + "\n"
                            for i in range(2)))
    first = cobalt("exec", "--input", str(jobs), "--output", str(results))
    assert first.returncode == 0, first.stderr
    assert "cobalt exec: 2 judged (0 of 2 jobs already done)" in first.stderr
    assert "exec: 2/2 programs (100%)" in first.stderr and "\r" not in first.stderr
    again = cobalt("exec", "--input", str(jobs), "--output", str(results))
    assert again.returncode == 0 and "cobalt exec: 0 judged (2 of 2 jobs already done)" in again.stderr
    assert len(_lines(results)) == 2
