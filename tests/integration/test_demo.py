"""`cobalt demo`: the whole loop end to end with the tiny random model and the real sandbox."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = REPO.parent / "shared" / "data" / "qwen3_tokenizer"


def _demo(work: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), COBALT_QWEN3_TOKENIZER=str(TOKENIZER), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "cobalt", "demo", "--work-dir", str(work), "--limit", "4",
                           "--max-tokens", "24", "--turns", "2", "--samples", "2", *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_demo_whole_loop_with_the_tiny_model(tmp_path):
    work = tmp_path / "demo"
    out = _demo(work)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert "the Hugging Face hub cannot be reached" in text  # said once, in one line
    assert text.count("hub cannot be reached") == 1
    for stage in ("[0 sandbox] 6/6", "[1 problems] 4 LeetCode problems", "[2 model] tiny random Qwen3",
                  "[3 first turn]", "[4 repair turns] 2 repair turns x 2 sample(s) x 4 problems",
                  "[5 hidden eval]", "[6 Pass@1]", "[7 bandit prompts]", "[8 veRL parquet]", "[done]"):
        assert stage in text, stage
    records = [json.loads(x) for x in (work / "eval.jsonl").read_text().splitlines()]
    assert len(records) == 4
    for rec in records:
        assert len(rec["samples"]) == 2 and all(len(s["turns"]) == 3 for s in rec["samples"])
        shipped = rec["samples"][0]["turns"][0]
        assert shipped["shipped_answer"] is True and shipped["code"]
        for sample in rec["samples"]:
            for turn in sample["turns"]:
                assert 0.0 <= turn["hidden_pass_rate"] <= 1.0
    # Pass@1 at turn 0 from the records themselves: sample 0 (real answer) correct on hidden tests
    correct0 = [sum(s["turns"][0]["hidden_pass_rate"] == 1.0 for s in r["samples"]) for r in records]
    csv_lines = (work / "report" / "pass_at_1.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 3
    turn0 = float(csv_lines[1].split(",")[2])
    assert turn0 == pytest.approx(100 * sum(c / 2 for c in correct0) / 4, abs=1e-3)
    assert (work / "report" / "pass_at_1.png").stat().st_size > 1000
    assert "tiny random model" in (work / "report" / "pass_at_1.md").read_text()
    prompts = [json.loads(x) for x in (work / "prompts.jsonl").read_text().splitlines()]
    if prompts:
        import pyarrow.parquet as pq

        assert pq.ParquetFile(work / "verl" / "train.parquet").metadata.num_rows == len(prompts)

    # a rerun resumes every stage: no duplicates, same records
    again = _demo(work)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert [json.loads(x) for x in (work / "eval.jsonl").read_text().splitlines()] == records

    # one Pass@1 for one file: the demo's printed table is the one `cobalt report` and `cobalt eval` print
    demo_rows = _table_rows(out.stdout)
    assert demo_rows and demo_rows[0].startswith("| 0 |")
    report = _cobalt("report", str(work / "eval.jsonl"), "--out-dir", str(tmp_path / "r"))
    assert report.returncode == 0, report.stderr[-3000:]
    assert _table_rows(report.stdout) == demo_rows
    evaluated = _cobalt("eval", "--input", str(work / "rollout.jsonl"), "--output", str(tmp_path / "e.jsonl"),
                        "--no-progress")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert _table_rows(evaluated.stdout) == demo_rows
    # each states n and the profile the file was made with, with the min and max samples
    caption = "4 problems, n = 2 (samples per problem: min 2, max 2), profile paper"
    assert caption in out.stdout and caption in report.stdout and caption in evaluated.stdout

    # a rerun with another setting is refused with one line naming it; the output is untouched
    changed = _demo(work, "--samples", "3")
    assert changed.returncode == 2
    assert "was made with --samples 2, this run has 3" in changed.stderr
    assert [json.loads(x) for x in (work / "eval.jsonl").read_text().splitlines()] == records


def _table_rows(text: str) -> list[str]:
    """The Pass@1 rows (turn, Pass@1, change) of a printed table, wherever it is indented."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith("| ") and
            line.strip()[2:3].isdigit()]


def _cobalt(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "cobalt", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
