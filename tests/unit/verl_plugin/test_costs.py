"""The cost report on step logs written by verl 0.9.1's own loggers (console and file)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cobalt.cli import main
from cobalt.verl_plugin.costs import method_cost, read_step_metrics, run_shape

pytest.importorskip("verl", reason="needs the pinned verl")

STEP_TIMES = {"cobalt": [100.0, 60.0, 64.0], "grpo-mt": [300.0, 200.0, 220.0]}


def write_console_log(path, times):
    """A terminal log as verl's console logger prints it (numpy values included), among other output."""
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    lines = ["(TaskRunner pid=1) Training Progress:  0%|", "validation generation end"]
    for step, t in enumerate(times, 1):
        data = {"timing_s/step": np.float64(t), "timing_s/gen": t / 2, "timing_s/update_actor": t / 4,
                "training/global_step": step, "actor/pg_loss": np.float32(0.5), "val-aux/x/reason": "text"}
        lines.append("(TaskRunner pid=1) " + concat_dict_to_str(data, step=step))
    path.write_text("\n".join(lines) + "\n")


def write_file_log(path, times, monkeypatch):
    """The JSONL of verl's file logger."""
    from verl.utils.tracking import FileLogger

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    logger = FileLogger("cobalt", "grpo-mt")
    for step, t in enumerate(times, 1):
        logger.log({"timing_s/step": t, "timing_s/gen": t / 2, "perf/time_per_step": t}, step)
    logger.finish()


def test_both_log_formats_give_the_step_times(tmp_path, monkeypatch):
    write_console_log(tmp_path / "console.log", STEP_TIMES["cobalt"])
    write_file_log(tmp_path / "metrics.jsonl", STEP_TIMES["grpo-mt"], monkeypatch)
    console = read_step_metrics(tmp_path / "console.log")
    assert [console[s]["timing_s/step"] for s in (1, 2, 3)] == STEP_TIMES["cobalt"]
    assert console[2]["actor/pg_loss"] == 0.5 and "val-aux/x/reason" not in console[2]
    jsonl = read_step_metrics(tmp_path / "metrics.jsonl")
    assert [jsonl[s]["timing_s/step"] for s in (1, 2, 3)] == STEP_TIMES["grpo-mt"]


def test_figures_per_method(tmp_path, monkeypatch):
    write_file_log(tmp_path / "metrics.jsonl", STEP_TIMES["grpo-mt"], monkeypatch)
    cost = method_cost("grpo-mt", read_step_metrics(tmp_path / "metrics.jsonl"), prompts_per_step=128,
                       rollouts_per_prompt=16, gpus=8, skip_first=1)
    assert cost.steps == 2 and cost.step_s == 210.0 and cost.gen_s == 105.0
    assert cost.s_per_example == pytest.approx(210.0 / 128)
    assert cost.gpu_h_per_step == pytest.approx(210.0 * 8 / 3600)


def test_cli_table_beside_cobalt_with_shapes_from_train_config(tmp_path, monkeypatch, capsys):
    cobalt_dir, mt_dir = tmp_path / "cobalt", tmp_path / "grpo"
    cobalt_dir.mkdir(), mt_dir.mkdir()
    write_console_log(cobalt_dir / "train.log", STEP_TIMES["cobalt"])
    write_file_log(mt_dir / "metrics.jsonl", STEP_TIMES["grpo-mt"], monkeypatch)
    (mt_dir / "train_config.json").write_text(json.dumps({"run": "grpo-mt", "config": {
        "data": {"train_batch_size": 64}, "actor_rollout_ref": {"rollout": {"n": 16}},
        "trainer": {"n_gpus_per_node": 4, "nnodes": 2}}}))
    assert run_shape(mt_dir / "train_config.json") == {"prompts_per_step": 64, "rollouts_per_prompt": 16, "gpus": 8}
    out_json = tmp_path / "costs.json"
    assert main(["cost-report", "--run", f"cobalt={cobalt_dir / 'train.log'}", "--run",
                 f"grpo-mt={mt_dir / 'metrics.jsonl'}", "--gpus", "4", "--paper", "--json", str(out_json)]) == 0
    table = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:]}
    assert set(rows) >= {"cobalt", "grpo-mt", "Cobalt", "VeRPO-MT"}
    # cobalt: mean 224/3 s over 128 prompts (the default shape), 4 GPUs
    assert float(rows["cobalt"][6]) == pytest.approx(224 / 3 / 128, abs=0.005)
    # grpo-mt: mean 240 s over 64 prompts (from its train_config.json), 8 GPUs
    assert float(rows["grpo-mt"][6]) == pytest.approx(240 / 64, abs=0.005)
    assert float(rows["grpo-mt"][8]) == pytest.approx(240 * 8 / 3600, abs=0.0005)
    saved = json.loads(out_json.read_text())
    assert [m["method"] for m in saved["methods"]] == ["cobalt", "grpo-mt"] and saved["profile"] == "paper"


def test_bad_input_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "data": {"timing_s/step": 3}}\n{"oops": 1}\n')
    assert main(["cost-report", "--run", f"x={bad}"]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert main(["cost-report", "--run", "no-equals-sign"]) == 2
