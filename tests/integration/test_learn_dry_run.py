"""The learning experiment's CPU dry run (scripts/gpu/learn.sh --dry-run): every step on tiny sizes
with the transformers engine, the real sandbox and tokenizer, and verl's config check of the
training script (no training step runs on CPU: the "trained" model is a copy of the base, said so)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs the pinned verl")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
STEPS = ("problems", "warm", "base-train", "gate", "data", "eval-base", "train", "merge", "eval-trained", "report")


def learn(tmp, *args, **env):
    env_file = tmp / "env.sh"
    env_file.write_text(f"export PYTHON={sys.executable}\nexport COBALT_SHARED={SHARED}\n"
                        f"export TIKTOKEN_CACHE_DIR={SHARED / 'data' / 'tiktoken'}\n"
                        f"export COBALT_QWEN3_TOKENIZER={SHARED / 'data' / 'qwen3_tokenizer'}\n")
    # STOP_RAY=0: the dry run must never stop a Ray of someone else on this machine
    full_env = {**os.environ, "ENV_FILE": str(env_file), "WORK": str(tmp / "work"), "STOP_RAY": "0", **env}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "learn.sh"), *args], env=full_env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learn")
    start = time.monotonic()
    proc = learn(tmp, "--out", str(tmp / "out"), "--dry-run")
    return tmp, proc, time.monotonic() - start


def test_every_step_runs_and_says_it_is_a_dry_run(dry):
    tmp, proc, seconds = dry
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp / "out" / "summary.log").read_text()
    for step in STEPS:
        assert f"learn-{step}" in summary
    assert "rc=1" not in summary and "rc=2" not in summary
    out = tmp / "out"
    assert "DRY RUN: no checkpoint; the 'trained' model is a copy of the base" in (out / "learn_merge.log").read_text()
    print(f"learn.sh --dry-run: {seconds:.0f} s")


def test_problems_warm_start_and_gate(dry):
    tmp, proc, _ = dry
    learn_dir = tmp / "work" / "learn"
    held = [json.loads(line) for line in (learn_dir / "problems" / "heldout.jsonl").open()]
    train = [json.loads(line) for line in (learn_dir / "problems" / "train.jsonl").open()]
    assert len(held) == 2 and len(train) == 4
    assert not {(r["template"], r["k"]) for r in held} & {(r["template"], r["k"]) for r in train}
    config = json.loads((learn_dir / "base" / "config.json").read_text())
    assert config.get("torch_dtype", config.get("dtype")) == "float32"
    first = json.loads((learn_dir / "base_train.jsonl").open().readline())
    assert first["enable_thinking"] is True  # histories as the warm start taught them (text after </think>)
    gate = json.loads((learn_dir / "gate.json").read_text())
    assert gate["problems"] == 4 and 0.0 <= gate["turn0_pass_at_1_train"] <= 1.0


def test_training_config_carries_the_experiments_settings(dry):
    tmp, _, _ = dry
    log = (tmp / "out" / "learn_train_cobalt.log").read_text()
    assert "All configuration checks passed" in log
    for line in ("lr: 0.0001", "use_kl_loss: false", "train_batch_size: 16", "total_training_steps: 16", "max_prompt_length: 1536",
                 "test_freq: 5", "dataloader_num_workers: 0", "filter_overlong_prompts: false",
                 "ppo_max_token_len_per_gpu: 16384", "val_before_train: true", "'n': 8"):
        assert line in log, line
    assert "do_sample: false" in log.split("val_kwargs:")[1][:400]


def test_tables_of_the_held_out_comparison(dry):
    tmp, _, _ = dry
    report = tmp / "work" / "learn" / "report"
    assert (tmp / "out" / "learn_report.tar.gz").stat().st_size > 1000
    saved = json.loads((report / "compare_cobalt.json").read_text())
    assert saved["problems"] == 2 and saved["resamples"] == 10_000 and len(saved["rows"]) == 2
    assert len(saved["noise"]) == 2
    assert (report / "pass_at_1.md").read_text().count("|") > 8
    assert "noise floor" in (report / "compare_cobalt.md").read_text()


def test_single_turn_run_from_the_same_base_and_the_side_by_side_table(dry):
    tmp, _, _ = dry
    proc = learn(tmp, "--out", str(tmp / "single-out"), "--dry-run", "--run", "single",
                 "--steps", "train,merge,eval-trained,report")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train_log = (tmp / "single-out" / "learn_train_single.log").read_text()
    assert "verl/single_turn/train.parquet" in train_log and "All configuration checks passed" in train_log
    report = tmp / "work" / "learn" / "report"
    assert json.loads((report / "compare_single_cobalt.json").read_text())["names"] == ["single", "cobalt"]
    assert "| single Pass@1 |" in (report / "pass_at_1.md").read_text()


def test_the_gate_stops_the_experiment(dry):
    tmp, _, _ = dry
    proc = learn(tmp, "--out", str(tmp / "gate-out"), "--dry-run", "--steps", "gate,data", LEARN_GATE_LOW="0.5")
    assert proc.returncode == 1
    log = (tmp / "gate-out" / "learn_gate.log").read_text()
    assert "FAILED: the warm start did not plant partial competence" in log
    assert "learn-data" not in (tmp / "gate-out" / "summary.log").read_text()


def test_bad_flags():
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "learn.sh"), "--out", "/tmp/x", "--run", "other"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--run must be cobalt or single" in proc.stderr


def test_device_run_routes_learning_steps(tmp_path):
    env_file = tmp_path / "env.sh"
    env_file.write_text(f"export PYTHON={sys.executable}\n")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "device_run.sh"), "learn-nonsense"],
                          env={**os.environ, "ENV_FILE": str(env_file), "OUT": str(tmp_path / "out")},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown learning step 'learn-nonsense'" in proc.stderr
