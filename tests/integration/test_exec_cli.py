"""``cobalt exec`` end to end: job files with bad records, resume without duplicates, one program."""
from __future__ import annotations

import json
import subprocess
import sys

from cobalt.io import iter_jsonl


def _cobalt(*args, **kw):
    return subprocess.run([sys.executable, "-m", "cobalt", *args], capture_output=True, text=True, timeout=300, **kw)


def _write_jobs(path, leetcode_problems):
    good = [{"id": p.task_id, "code": p.stdin_program(), "test_cases": p.stdin_tests().to_dict()} for p in leetcode_problems[:6]]
    lines = [json.dumps(j) for j in good[:3]]
    lines.append(json.dumps({"id": "no-code", "test_cases": {"inputs": ["1"], "outputs": ["1"]}}))
    lines.append(json.dumps({"id": "non-string", "code": "print(1)", "test_cases": {"inputs": [1], "outputs": ["1"]}}))
    lines.append(json.dumps({"id": "mismatch", "code": "print(1)", "test_cases": {"inputs": ["1", "2"], "outputs": ["1"]}}))
    lines.append(json.dumps({"code": "print(1)", "test_cases": {"inputs": [], "outputs": []}}))
    lines.append("{not json")
    lines += [json.dumps(j) for j in good[3:]]
    data = "\n".join(lines).encode() + b"\n"
    data += b'{"id": "bad-utf8", "code": "print(1)", "test_cases": {"inputs": [""], "outputs": ["\xff"]}}\n'
    path.write_bytes(data)
    return [j["id"] for j in good]


def test_bad_jobs_get_named_errors_and_the_batch_goes_on(tmp_path, leetcode_problems):
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "results.jsonl"
    good_ids = _write_jobs(jobs, leetcode_problems)
    proc = _cobalt("exec", "--input", str(jobs), "--output", str(out), "--workers", "2", "--no-progress", "--allow-packages")
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert f"{jobs}:4: field 'code': job 'no-code': missing" in err
    assert "field 'test_cases.inputs[0]': job 'non-string': expected a string" in err
    assert "job 'mismatch'" in err and "2 inputs but 1 outputs" in err
    assert f"{jobs}:7: field 'id': missing" in err
    assert f"{jobs}:8: invalid JSON" in err
    assert "not valid UTF-8" in err
    results = {r["id"]: r for _, r in iter_jsonl(out)}
    for job_id in good_ids:
        assert results[job_id]["passing"] and all(results[job_id]["passing"]), job_id
    for job_id in ("no-code", "non-string", "mismatch"):
        assert "error" in results[job_id]
    assert len(results) == len(good_ids) + 6  # every job has a line: none lost


def test_rerun_resumes_without_duplicates(tmp_path, leetcode_problems):
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "results.jsonl"
    good_ids = _write_jobs(jobs, leetcode_problems)
    first = [json.dumps({"id": good_ids[0], "passing": [True], "feedback": [""], "status": ["passed"]})]
    out.write_text(first[0] + "\n" + '{"id": "torn", "pass')  # a crash mid-line
    _cobalt("exec", "--input", str(jobs), "--output", str(out), "--no-progress", "--allow-packages")
    _cobalt("exec", "--input", str(jobs), "--output", str(out), "--no-progress", "--allow-packages")
    ids = [r["id"] for _, r in iter_jsonl(out)]
    assert len(ids) == len(set(ids)) == len(good_ids) + 6
    assert ids[0] == good_ids[0]  # kept, not re-run


def test_single_program_form(tmp_path):
    code, tests = tmp_path / "prog.py", tmp_path / "tests.json"
    code.write_text("print(sum(map(int, input().split())))\n")
    tests.write_text(json.dumps({"inputs": ["1 2", "2 2"], "outputs": ["3", "5"]}))
    proc = _cobalt("exec", "--code", str(code), "--tests", str(tests))
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["passing"] == [True, False]


def test_help_explains_every_flag():
    proc = _cobalt("exec", "--help")
    assert proc.returncode == 0
    for flag in ("--input", "--output", "--max-programs", "--code", "--tests", "--no-sandbox", "--call-mode",
                 "--compare", "--test-timeout", "--memory-mb", "--output-mb", "--max-processes"):
        assert flag in proc.stdout
