"""`cobalt build-prompts` and the paper's shim on the trajectory fixture, with hand-derived outcomes.

The fixture (tests/fixtures/trajectories) has 4 public and 8 hidden tests per
problem, so a turn passing p public tests with hidden rate h has pass rate
(p + 8h) / 12. Expected outcomes, worked out by hand from PATTERNS in
build_trajectory_fixture.py:

- too-easy: every first turn passes the public tests -> dropped.
- many-improving: d = 1, .75, 5/12, .5, .25, 1, 0 -> six kept; max variance picks
  the two smallest (s4 .25, s2 5/12) and the two largest (s0, s5: 1) -> 4 x 3 prompts.
  Evaluation: smallest d is s4 -> 3 prompts.
- never-correct: no training trajectory; evaluation keeps s0 (d = 5/12 < .5) -> 3.
- two-paths: s0 (.75, 1, 1, 1) stops before t = 3 (turns 1 and 2 correct) -> 2;
  s1 -> 3; s2 has d = 0. Evaluation keeps s0 (d = .25) -> 2 and one early stop.
- regress-then-fix: s0 and s1 -> 3 + 3; evaluation keeps s0 (d = 2/3) -> 3.
- slow-climb: s0 never correct; s1, s2 -> 3 + 3; evaluation keeps s0 (d = 2/3) -> 3.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.cli import main

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "trajectories" / "inference_records.jsonl"
TOKENIZER = REPO.parent / "shared" / "data" / "qwen3_tokenizer"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_training_prompts_from_the_fixture(tmp_path):
    out = tmp_path / "train.jsonl"
    rc = main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--model-name", str(TOKENIZER), "--no-progress"])
    assert rc == 0
    rows = read_jsonl(out)
    summary = json.loads((tmp_path / "train.jsonl.summary.json").read_text())["summary"]
    assert {k: summary[k] for k in ("records_read", "problems_too_easy", "problems_considered", "problems_kept",
                                    "trajectories_kept", "first_turn_prompts", "partial_prompts", "prompts",
                                    "early_stops", "prompts_cut_by_length")} == {
        "records_read": 6, "problems_too_easy": 1, "problems_considered": 5, "problems_kept": 4,
        "trajectories_kept": 10, "first_turn_prompts": 5, "partial_prompts": 29, "prompts": 34,
        "early_stops": 1, "prompts_cut_by_length": 0,
    }
    chosen = {(r["problem_id"].split("/")[0], r["sample_index"]) for r in rows if r["sample_index"] is not None}
    assert chosen == {("many-improving", 4), ("many-improving", 2), ("many-improving", 0), ("many-improving", 5),
                      ("two-paths", 0), ("two-paths", 1), ("regress-then-fix", 0), ("regress-then-fix", 1),
                      ("slow-climb", 1), ("slow-climb", 2)}
    assert sorted(r["turn"] for r in rows if r["problem_id"].startswith("two-paths/") and r["sample_index"] == 0) == [1, 2]
    best = {(r["problem_id"].split("/")[0], r["sample_index"], r["turn"]): r["prev_best_pass_rate"] for r in rows}
    assert best[("regress-then-fix", 0, 2)] == pytest.approx(1.0)  # 1 then 1/3: the best so far stays 1
    assert best[("regress-then-fix", 1, 3)] == pytest.approx(7 / 12)
    assert best[("slow-climb", 2, 1)] == pytest.approx(1 / 6)
    assert all(best[k] == 0.0 for k in best if k[1] is None)
    assert len({r["id"] for r in rows}) == len(rows)


def test_evaluation_prompts_through_the_paper_shim(tmp_path):
    out = tmp_path / "val.parquet"
    cmd = [sys.executable, str(REPO / "preproc" / "process_multi_turn_taco.py"), "--input_file", str(FIXTURE),
           "--output_file", str(out), "--model_name", str(TOKENIZER), "--is_test", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=os.environ | {"PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert "prompts:                   19" in proc.stdout
    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    chosen = {r["problem_id"].split("/")[0]: r["sample_index"] for r in rows if r["sample_index"] is not None}
    assert chosen == {"many-improving": 4, "never-correct": 0, "two-paths": 0, "regress-then-fix": 0, "slow-climb": 0}
    assert max(r["turn"] for r in rows) == 3
    assert sum(r["turn"] == 0 for r in rows) == 5
    summary = json.loads((tmp_path / "val.parquet.summary.json").read_text())
    assert summary["config"]["is_test"] is True and summary["summary"]["early_stops"] == 1


def test_bad_lines_are_reported_and_the_rest_processed(tmp_path, capsys):
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[1])
    broken["samples"][2]["turns"][0]["public"]["passing"] = "yes"
    bad = tmp_path / "in.jsonl"
    bad.write_text("\n".join([lines[0], "[1, 2", json.dumps(broken)] + lines[2:]) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["build-prompts", "-i", str(bad), "-o", str(out), "--max-prompt-tokens", "0", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"{bad}:2" in err
    assert f"{bad}:3: field 'samples[2].turns[0].public.passing'" in err
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())["summary"]
    assert (summary["records_read"], summary["records_valid"], summary["bad_records"]) == (7, 5, 2)
    assert summary["problems_kept"] == 3  # many-improving was the broken one
    assert not list(tmp_path.glob("*.tmp"))


def test_all_bad_input_fails(tmp_path):
    bad = tmp_path / "in.jsonl"
    bad.write_text('{"id": 1}\n', encoding="utf-8")
    assert main(["build-prompts", "-i", str(bad), "-o", str(tmp_path / "o.jsonl"), "--max-prompt-tokens", "0",
                 "--no-progress"]) == 1


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        main(["build-prompts", "--help"])
    text = capsys.readouterr().out
    for flag in ("--input", "--input_file", "--output_file", "--model_name", "--is_test", "--history-turns",
                 "--max-trajectories", "--variance-pool", "--max-prompt-tokens", "--history-max-chars",
                 "--too-easy-by", "--stop-when", "--seed", "--template-dir", "--chat-template-kwargs", "--no-progress"):
        assert flag in text
    assert "(default: 10000)" in text and "(default: 6000)" in text and "(default: 16)" in text
