"""The learning experiment's CPU dry run (scripts/gpu/learn.sh --dry-run): every step on tiny sizes
with the transformers engine, the real sandbox and tokenizer, and verl's config check of the
training script (no training step runs on CPU: the "trained" model is a copy of the base, said so)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
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
    for line in ("lr: 0.0001", "use_kl_loss: false", "train_batch_size: 16", "total_training_steps: 5", "max_prompt_length: 1536",
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
    env = {**os.environ, "ENV_FILE": str(env_file), "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "device_run.sh"), "learn-nonsense"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown learning step 'learn-nonsense'" in proc.stderr
    # learn-startup reaches learn.sh's startup step, which refuses the bad variant before anything starts
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "device_run.sh"), "learn-startup"],
                          env={**env, "LEARN_STARTUP_VARIANTS": "bogus", "STOP_RAY": "0"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "unknown variant 'bogus'" in proc.stdout
    assert re.search(r"^learn-startup +rc=2 ", (tmp_path / "out" / "summary.log").read_text(), re.M)


def config_value(log: str, key: str) -> list[str]:
    """Every value of KEY in a composed config printed into LOG (YAML lines 'key: value')."""
    return re.findall(rf"^\s*{key}: (.*)$", log, re.M)


def test_startup_variants_compose_their_configs(tmp_path):
    start = time.monotonic()
    out, logs = tmp_path / "out", tmp_path / "work" / "learn" / "logs"
    proc = learn(tmp_path, "--out", str(out), "--dry-run", "--steps", "startup",
                 LEARN_STARTUP_VARIANTS="embedded,ref,workers")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    model = tmp_path / "work" / "learn" / "startup-model"   # no warm start: a random tiny model of the experiment's size
    config = json.loads((model / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (256, 4)
    expected = {  # variant: (evaluator, use_kl_loss, dataloader workers)
        "embedded": ("embedded", "false", "0"), "ref": ("ray", "true", "0"), "workers": ("ray", "false", "8")}
    for variant, (evaluator, kl, workers) in expected.items():
        log = (logs / f"startup_{variant}.log").read_text()
        assert "All configuration checks passed" in log, variant
        assert config_value(log, "COBALT_EVALUATOR") == [evaluator], variant
        assert config_value(log, "use_kl_loss") == [kl], variant
        assert config_value(log, "dataloader_num_workers") == [workers], variant
        assert "1" in config_value(log, "total_training_steps"), variant
        for key, value in (("val_before_train", "false"), ("test_freq", "-1"), ("save_freq", "-1"),
                           ("experiment_name", f"startup-{variant}"),
                           ("default_local_dir", str(tmp_path / "work" / "learn" / "runs" / f"startup-{variant}" / "checkpoints"))):
            assert value in config_value(log, key), (variant, key)
        assert f"  path: {model}" in log, variant
        assert "single_turn/train.parquet" in log, variant
    assert config_value((logs / "startup_ref.log").read_text(), "kl_loss_coef") == ["0.001"]
    table = (out / "startup.md").read_text()
    assert table.count("no start-up marker") == 3 and "### workers" in table
    with tarfile.open(out / "startup_logs.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["startup_embedded.log", "startup_ref.log", "startup_workers.log"]
    assert "DRY RUN: verl's config check only" in (out / "learn_startup.log").read_text()

    # A rerun: the warm start wins over the tiny model, earlier problems and rows are kept, and a
    # variant whose first step is done is not run again.
    shutil.copytree(model, tmp_path / "work" / "learn" / "base")
    (logs / "startup_embedded.log").write_text("Training Progress: 100%|##########| 1/1 [00:12<00:00, 12.0s/it]\n")
    proc = learn(tmp_path, "--out", str(tmp_path / "out2"), "--dry-run", "--steps", "startup",
                 LEARN_STARTUP_VARIANTS="embedded,base")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "startup: embedded: first step done in an earlier call" in proc.stdout
    assert "make-synthetic:" not in proc.stdout and "problems: " in proc.stdout
    assert "(made earlier)" in proc.stdout and "single-turn rows in" in proc.stdout
    base_log = (logs / "startup_base.log").read_text()
    assert f"  path: {tmp_path / 'work' / 'learn' / 'base'}" in base_log
    assert config_value(base_log, "COBALT_EVALUATOR") == ["ray"] and config_value(base_log, "use_kl_loss") == ["false"]

    # A variant cut by its deadline is reported, the next one still runs, and the step fails.
    proc = learn(tmp_path, "--out", str(tmp_path / "out3"), "--dry-run", "--steps", "startup",
                 LEARN_STARTUP_VARIANTS="ref,workers", LEARN_STARTUP_TIMEOUT="1")
    assert proc.returncode == 1
    assert "startup: variant ref rc 124 (timed out after 1 s)" in proc.stdout
    assert "startup: variant workers rc 124" in proc.stdout and "startup: failed: ref workers" in proc.stdout
    assert re.search(r"^learn-startup +rc=1 ", (tmp_path / "out3" / "summary.log").read_text(), re.M)
    assert (tmp_path / "out3" / "startup.md").is_file()
    print(f"startup dry runs: {time.monotonic() - start:.0f} s")


def test_an_unknown_startup_variant_stops_before_anything_starts(tmp_path):
    proc = learn(tmp_path, "--out", str(tmp_path / "out"), "--dry-run", "--steps", "startup",
                 LEARN_STARTUP_VARIANTS="embedded,fast,ref")
    assert proc.returncode == 1
    assert "startup: unknown variant 'fast' in LEARN_STARTUP_VARIANTS; the variants are base, embedded, ref, workers" \
        in proc.stdout
    assert not (tmp_path / "work" / "learn" / "problems").exists()
    assert not list((tmp_path / "work" / "learn" / "logs").glob("startup_*"))
