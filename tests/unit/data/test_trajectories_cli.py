"""`cobalt build-prompts` and the paper's shim on the trajectory fixture, with hand-derived outcomes.

The fixture (tests/fixtures/trajectories) has 4 public and 8 hidden tests per
problem; its verdicts and feedback come from real sandbox runs. A turn passing
p public tests with hidden rate h has pass rate (p + 8h) / 12. Expected
outcomes, worked out by hand from PATTERNS in build_trajectory_fixture.py,
under the paper profile (stop rules: (a) the feedbacks after the last two turns
are both the all-passed message, i.e. p = 4 twice; (b) at t = 1, rate 1.0 at
turns 0 and 2):

- too-easy: every first turn is fully correct -> dropped.
- public-easy: first turns pass every public test but s1 (rate 10/12) not every
  hidden one -> kept (dynamic sampling looks at all tests). s1: d = 1/6; t = 1,
  then (a) stops -> 1 prompt (training and evaluation).
- many-improving: d = 1, .75, 5/12, .5, .25, 1, 0 -> six kept; max variance picks
  the two smallest (s4 .25, s2 5/12) and the two largest (s0, s5: 1).
  s4 (p = 4 throughout): 1 prompt, stop (a); s2 (p = 3, 4, 4): 2, stop (a);
  s0, s5: 3 each -> 9. Evaluation: smallest d is s4 -> 1, one stop.
- never-correct: no training trajectory; evaluation keeps s0 (d = 5/12 < .5) -> 3.
- two-paths: s0 (p = 3, 4, 4) -> 2, stop (a); s1 -> 3; s2 has d = 0.
  Evaluation keeps s0 (d = .25) -> 2, one stop.
- regress-then-fix: s0 (rates 1, 1/3, 1, 1): rule (b) at t = 1 -> 0 prompts;
  s1 -> 3. Evaluation keeps s0 (d = 2/3) -> 0, one stop.
- slow-climb: s0 never correct; s1, s2 -> 3 + 3; evaluation keeps s0 (d = 2/3) -> 3.

Training: 6 first-turn + 1 + 9 + 5 + 3 + 6 = 30 prompts, 5 early stops.
Evaluation: 6 + 1 + 1 + 3 + 2 + 0 + 3 = 16 prompts, 4 early stops.
Under the cobalt profile (stop after two consecutive fully correct turns):
public-easy 2, many-improving 3 x 4, two-paths 2 + 3 (s0 stops: turns 1, 2
correct), regress-then-fix 3 + 3, slow-climb 3 + 3 -> 31 partial + 6 = 37, 1 stop.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.cli import main

pytestmark = pytest.mark.usefixtures("tqdm_lock_of_this_process")  # see conftest.py: mutation testing forks

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
    report = json.loads((tmp_path / "train.jsonl.summary.json").read_text())
    assert report["profile"] == report["config"]["profile"] == "paper"
    assert report["config"]["stop_when"] == "paper" and report["config"]["too_easy_by"] == "full"
    assert {k: summary[k] for k in ("records_read", "problems_too_easy", "problems_considered", "problems_kept",
                                    "trajectories_kept", "first_turn_prompts", "partial_prompts", "prompts",
                                    "early_stops", "prompts_cut_by_length")} == {
        "records_read": 7, "problems_too_easy": 1, "problems_considered": 6, "problems_kept": 5,
        "trajectories_kept": 11, "first_turn_prompts": 6, "partial_prompts": 24, "prompts": 30,
        "early_stops": 5, "prompts_cut_by_length": 0,
    }
    chosen = {(r["problem_id"].split("/")[0], r["sample_index"]) for r in rows if r["sample_index"] is not None}
    assert chosen == {("public-easy", 1), ("many-improving", 4), ("many-improving", 2), ("many-improving", 0),
                      ("many-improving", 5), ("two-paths", 0), ("two-paths", 1), ("regress-then-fix", 1),
                      ("slow-climb", 1), ("slow-climb", 2)}
    turns = {}
    for r in rows:
        if r["sample_index"] is not None:
            turns.setdefault((r["problem_id"].split("/")[0], r["sample_index"]), []).append(r["turn"])
    assert sorted(turns[("two-paths", 0)]) == [1, 2] and sorted(turns[("many-improving", 2)]) == [1, 2]
    assert turns[("many-improving", 4)] == [1] and turns[("public-easy", 1)] == [1]
    best = {(r["problem_id"].split("/")[0], r["sample_index"], r["turn"]): r["prev_best_pass_rate"] for r in rows}
    assert best[("many-improving", 2, 2)] == pytest.approx(11 / 12)
    assert best[("regress-then-fix", 1, 3)] == pytest.approx(7 / 12)
    assert best[("slow-climb", 2, 1)] == pytest.approx(1 / 6)
    assert all(best[k] == 0.0 for k in best if k[1] is None)
    assert len({r["id"] for r in rows}) == len(rows)


def test_training_prompts_under_the_cobalt_profile(tmp_path):
    out = tmp_path / "train.jsonl"
    assert main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--max-prompt-tokens", "0", "--no-progress",
                 "--profile", "cobalt"]) == 0
    report = json.loads((tmp_path / "train.jsonl.summary.json").read_text())
    assert report["profile"] == "cobalt" and report["config"]["stop_when"] == "correct"
    summary = report["summary"]
    assert (summary["partial_prompts"], summary["prompts"], summary["early_stops"]) == (31, 37, 1)


def test_feedback_in_prompts_is_the_real_evaluator_output(tmp_path):
    # the fixture's feedback comes from sandbox runs: wrong outputs and tracebacks of the programs
    out = tmp_path / "train.jsonl"
    assert main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--max-prompt-tokens", "0",
                 "--no-progress"]) == 0
    users = [m["content"] for r in read_jsonl(out) for m in r["messages"][3::2]]
    assert any("RuntimeError: this case is not handled yet" in u for u in users)
    assert any("?" in u and "Expected" in u for u in users)


def test_evaluation_prompts_through_the_paper_shim(tmp_path):
    out = tmp_path / "val.parquet"
    cmd = [sys.executable, str(REPO / "preproc" / "process_multi_turn_taco.py"), "--input_file", str(FIXTURE),
           "--output_file", str(out), "--model_name", str(TOKENIZER), "--is_test", "--no-progress"]
    # the checkout under test, not whichever cobalt the environment has installed
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=os.environ | {"PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr
    assert "prompts:                   16" in proc.stdout
    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    chosen = {r["problem_id"].split("/")[0]: r["sample_index"] for r in rows if r["sample_index"] is not None}
    # regress-then-fix keeps s0, which rule (b) stops before any prompt
    assert chosen == {"public-easy": 1, "many-improving": 4, "never-correct": 0, "two-paths": 0, "slow-climb": 0}
    assert max(r["turn"] for r in rows) == 3
    assert sum(r["turn"] == 0 for r in rows) == 6
    summary = json.loads((tmp_path / "val.parquet.summary.json").read_text())
    assert summary["config"]["is_test"] is True and summary["summary"]["early_stops"] == 4
    assert summary["profile"] == "paper"


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
    assert (summary["records_read"], summary["records_valid"], summary["bad_records"]) == (8, 6, 2)
    assert summary["problems_kept"] == 4  # public-easy was the broken one
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
                 "--too-easy-by", "--stop-when", "--seed", "--template-dir", "--chat-template-kwargs", "--no-progress",
                 "--thinking {on,off}", "--profile"):
        assert flag in text
    assert "(default: 10000)" in text and "(default: 6000)" in text and "(default: 16)" in text


# ------------------------------------------------------------------ flags (found by mutation testing)


def build_prompts_parser():
    import argparse

    from cobalt.training_data.trajectories import add_arguments

    parser = argparse.ArgumentParser(prog="cobalt build-prompts")
    add_arguments(parser)
    return parser


DEFAULTS = {  # the paper's numbers (METHOD §4), written out by hand
    "input": "in.jsonl", "output": "out.jsonl", "model_name": "Qwen/Qwen3-8B", "chat_template_kwargs": "{}",
    # enable_thinking None: each record's own flag decides the history cut
    "is_test": False, "history_turns": 3, "max_trajectories": 4, "variance_pool": 16, "max_prompt_tokens": 10000,
    "history_max_chars": 6000, "enable_thinking": None, "too_easy_by": "full", "stop_when": None, "seed": 42,
    "template_dir": None, "no_progress": False, "profile": None,
}


def test_flag_defaults_are_the_papers():
    args = build_prompts_parser().parse_args(["-i", "in.jsonl", "-o", "out.jsonl"])
    assert vars(args) == DEFAULTS


@pytest.mark.parametrize("spellings, dest, value, expected", [
    (["--input", "--input-file", "--input_file", "-i"], "input", "a.jsonl", "a.jsonl"),
    (["--output", "--output-file", "--output_file", "-o"], "output", "b.parquet", "b.parquet"),
    (["--model-name", "--model_name", "--tokenizer"], "model_name", "tok/dir", "tok/dir"),
    (["--chat-template-kwargs"], "chat_template_kwargs", '{"enable_thinking": false}', '{"enable_thinking": false}'),
    (["--history-turns"], "history_turns", "5", 5),
    (["--max-trajectories", "-m"], "max_trajectories", "2", 2),
    (["--variance-pool", "-n"], "variance_pool", "8", 8),
    (["--max-prompt-tokens"], "max_prompt_tokens", "0", 0),
    (["--history-max-chars"], "history_max_chars", "-1", -1),
    (["--too-easy-by"], "too_easy_by", "public", "public"),
    (["--too-easy-by"], "too_easy_by", "full", "full"),
    (["--stop-when"], "stop_when", "paper", "paper"),
    (["--stop-when"], "stop_when", "public", "public"),
    (["--stop-when"], "stop_when", "correct", "correct"),
    (["--seed"], "seed", "7", 7),
    (["--template-dir"], "template_dir", "my/templates", "my/templates"),
    (["--profile"], "profile", "cobalt", "cobalt"),
    (["--thinking"], "enable_thinking", "on", True),
    (["--thinking"], "enable_thinking", "off", False),
])
def test_every_spelling_of_a_valued_flag(spellings, dest, value, expected):
    for spelling in spellings:
        args = build_prompts_parser().parse_args(["--input", "in.jsonl", "--output", "out.jsonl", spelling, value])
        assert vars(args) == DEFAULTS | {dest: expected}, spelling


@pytest.mark.parametrize("spellings, dest", [
    (["--is-test", "--is_test"], "is_test"),
    (["--enable-thinking", "--enable_thinking"], "enable_thinking"),  # the original's spelling, hidden
    (["--no-progress"], "no_progress"),
])
def test_every_spelling_of_a_switch(spellings, dest):
    for spelling in spellings:
        # the switch before another flag: a switch that wanted a value would swallow "-i"
        args = build_prompts_parser().parse_args([spelling, "-i", "in.jsonl", "-o", "out.jsonl"])
        assert vars(args) == DEFAULTS | {dest: True}, spelling


@pytest.mark.parametrize("argv", [
    ["-o", "out.jsonl"],                                         # --input is required
    ["-i", "in.jsonl"],                                          # --output is required
    ["-i", "in.jsonl", "-o", "out.jsonl", "--too-easy-by", "hidden"],
    ["-i", "in.jsonl", "-o", "out.jsonl", "--stop-when", "never"],
    ["-i", "in.jsonl", "-o", "out.jsonl", "--profile", "fast"],
    ["-i", "in.jsonl", "-o", "out.jsonl", "--seed", "x"],
    ["-i", "in.jsonl", "-o", "out.jsonl", "--history-turns", "2.5"],
])
def test_bad_command_lines_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as info:
        build_prompts_parser().parse_args(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_config_from_every_flag(monkeypatch):
    from cobalt.training_data.trajectories import config_from_args

    monkeypatch.delenv("COBALT_PROFILE", raising=False)
    args = build_prompts_parser().parse_args([
        "-i", "in.jsonl", "-o", "out.jsonl", "--is-test", "--history-turns", "5", "-m", "2", "-n", "8",
        "--max-prompt-tokens", "123", "--history-max-chars", "77", "--enable-thinking", "--too-easy-by", "public",
        "--stop-when", "public", "--seed", "9", "--template-dir", "tpl", "--profile", "cobalt",
    ])
    assert dataclasses.asdict(config_from_args(args)) == {
        "is_test": True, "history_turns": 5, "max_trajectories": 2, "variance_pool": 8, "max_prompt_tokens": 123,
        "history_max_chars": 77, "enable_thinking": True, "too_easy_by": "public", "stop_when": "public", "seed": 9,
        "template_dir": "tpl", "profile": "cobalt",
    }
    defaults = config_from_args(build_prompts_parser().parse_args(["-i", "in.jsonl", "-o", "out.jsonl"]))
    assert dataclasses.asdict(defaults) == {
        "is_test": False, "history_turns": 3, "max_trajectories": 4, "variance_pool": 16, "max_prompt_tokens": 10000,
        "history_max_chars": 6000, "enable_thinking": None, "too_easy_by": "full", "stop_when": "paper", "seed": 42,
        "template_dir": None, "profile": "paper",
    }
    monkeypatch.setenv("COBALT_PROFILE", "cobalt")  # no --profile: the environment's
    from_env = config_from_args(build_prompts_parser().parse_args(["-i", "in.jsonl", "-o", "out.jsonl"]))
    assert (from_env.profile, from_env.stop_when) == ("cobalt", "correct")


# ------------------------------------------------------------------ `run` (found by mutation testing)


def test_run_prints_the_summary_and_records_its_inputs(tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    assert main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--model-name", str(TOKENIZER), "--no-progress",
                 "--chat-template-kwargs", '{"enable_thinking": false}']) == 0
    captured = capsys.readouterr()
    assert captured.out == "\n".join([  # the numbers of the module docstring, worked out by hand
        "records read:              7 (7 valid)",
        "bad records (skipped):     0",
        "problems too easy:         1",
        "problems considered:       6",
        "problems kept:             5",
        "trajectories kept:         11",
        "prompts:                   30 (6 first-turn, 24 partial)",
        "early stops:               5",
        "prompts cut by length:     0",
        f"wrote 30 prompts to {out} (summary: {out}.summary.json)",
    ]) + "\n"
    assert "problems:" not in captured.err  # --no-progress
    report = json.loads((tmp_path / "train.jsonl.summary.json").read_text())
    assert sorted(report) == ["chat_template_kwargs", "config", "input", "model_name", "output", "profile", "summary"]
    assert (report["input"], report["output"], report["model_name"]) == (str(FIXTURE), str(out), str(TOKENIZER))
    assert report["chat_template_kwargs"] == {"enable_thinking": False}
    assert report["summary"]["prompts"] == 30 and report["config"]["max_prompt_tokens"] == 10000


def test_run_shows_progress_and_records_empty_template_arguments(tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    assert main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--max-prompt-tokens", "0"]) == 0
    assert "build-prompts: 7/7 problems (100%)" in capsys.readouterr().err  # plain lines with the total in a log
    report = json.loads((tmp_path / "train.jsonl.summary.json").read_text())
    assert report["chat_template_kwargs"] == {} and report["model_name"] == "Qwen/Qwen3-8B"


def test_run_without_a_limit_loads_no_tokenizer(tmp_path):
    out = tmp_path / "train.jsonl"
    missing = tmp_path / "no-such-tokenizer"
    assert main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--model-name", str(missing),
                 "--max-prompt-tokens", "0", "--no-progress"]) == 0
    assert len(read_jsonl(out)) == 30


def test_run_cuts_by_length_with_the_template_arguments(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    base = ["build-prompts", "-i", str(FIXTURE), "--model-name", str(TOKENIZER), "--no-progress"]
    # a one-token limit cuts every kept trajectory at its first prompt; regress-then-fix s0 stops
    # before it by rule (b): 11 kept, 10 cut, 1 early stop, only the 6 first-turn prompts left
    assert main(base + ["-o", str(tmp_path / "one.jsonl"), "--max-prompt-tokens", "1"]) == 0
    summary = json.loads((tmp_path / "one.jsonl.summary.json").read_text())["summary"]
    assert (summary["prompts"], summary["prompts_cut_by_length"], summary["early_stops"]) == (6, 10, 1)
    # the limit at the longest partial prompt under the plain template: nothing is cut; the same
    # limit with enable_thinking false (4 more tokens per prompt in Qwen3's template) cuts
    rows = read_jsonl(tmp_path / "one.jsonl")
    assert main(base + ["-o", str(tmp_path / "all.jsonl"), "--max-prompt-tokens", "0"]) == 0
    partial = [r["messages"] for r in read_jsonl(tmp_path / "all.jsonl") if r["turn"] > 0]
    longest = max(len(tokenizer.apply_chat_template(m, tokenize=True, add_generation_prompt=True)["input_ids"])
                  for m in partial)
    assert main(base + ["-o", str(tmp_path / "plain.jsonl"), "--max-prompt-tokens", str(longest)]) == 0
    assert json.loads((tmp_path / "plain.jsonl.summary.json").read_text())["summary"]["prompts_cut_by_length"] == 0
    assert main(base + ["-o", str(tmp_path / "nothink.jsonl"), "--max-prompt-tokens", str(longest),
                        "--chat-template-kwargs", '{"enable_thinking": false}']) == 0
    assert json.loads((tmp_path / "nothink.jsonl.summary.json").read_text())["summary"]["prompts_cut_by_length"] >= 1
    assert len(rows) == 6


@pytest.mark.parametrize("flags, message", [
    (["--chat-template-kwargs", "{bad"], "error: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n"),
    (["-m", "5", "-n", "2"], "error: need 1 <= max_trajectories <= variance_pool, got m=5, n=2\n"),
])
def test_run_refuses_bad_settings_with_exit_code_2(tmp_path, capsys, flags, message):
    out = tmp_path / "o.jsonl"
    assert main(["build-prompts", "-i", str(FIXTURE), "-o", str(out), "--max-prompt-tokens", "0", "--no-progress"]
                + flags) == 2
    captured = capsys.readouterr()
    assert captured.err == message and captured.out == ""
    assert not out.exists()
