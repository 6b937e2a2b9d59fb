"""`cobalt train-report` on console logs as verl 0.9.1's console logger prints them (its own
formatter), with the reward workers' tally lines between the step records."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from cobalt.cli import main
from cobalt.verl_plugin.train_report import read_run, reward_tallies

pytest.importorskip("verl", reason="needs the pinned verl")

SOURCE = "code_taco_verified"


def write_log(path, scores, val_acc):
    """A terminal log of a short run: validation at step 0, then steps with tallies and step records."""
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    lines = ["(TaskRunner pid=7) Training Progress:   0%|", "(TaskRunner pid=7) validation generation end"]
    lines.append("(TaskRunner pid=7) " + concat_dict_to_str(
        {f"val-core/{SOURCE}/acc/mean@1": np.float64(val_acc[0]), f"val-aux/{SOURCE}/correctness/mean@1": 0.5,
         f"val-aux/{SOURCE}/reward/mean@1": 0.1, f"val-aux/{SOURCE}/reason/mean@1": 0.0}, step=0))
    for step, score in enumerate(scores, 1):
        for worker, corr in ((11, score), (12, score + 0.2)):
            lines.append(f"(RewardLoopWorker pid={worker}) cobalt reward: 64 training responses judged (60 with a "
                         f"program, 600 tests run, 0 failed); means: score {score:.3f}, correctness {corr:.3f}, "
                         f"improvement n/a, format -0.100")
        data = {"critic/score/mean": np.float32(score), "critic/score/min": -1.0, "critic/score/max": 1.0,
                "critic/advantages/mean": 0.0, "critic/advantages/min": np.float32(-1.5),
                "critic/advantages/max": 1.2, "actor/grad_norm": 0.3 * step, "timing_s/step": 10.0 + step,
                "timing_s/gen": 4.0, "timing_s/update_actor": 3.0, "training/global_step": step,
                "perf/max_memory_allocated_gb": 3.0}
        if step in val_acc:
            data[f"val-core/{SOURCE}/acc/mean@1"] = val_acc[step]
        lines.append("(TaskRunner pid=7) " + concat_dict_to_str(data, step=step))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_kept_metrics_per_step(tmp_path):
    log = write_log(tmp_path / "cobalt.log", [0.1, 0.3, 0.5], {0: 0.25, 2: 0.5})
    steps = read_run(log)
    assert sorted(steps) == [0, 1, 2, 3]
    assert steps[0] == {"val/acc": 0.25, "val/correctness": 0.5}
    assert steps[2]["val/acc"] == 0.5 and steps[2]["actor/grad_norm"] == pytest.approx(0.6)
    assert steps[3]["critic/score/mean"] == 0.5 and steps[3]["critic/advantages/min"] == -1.5
    assert steps[3]["timing_s/step"] == 13.0 and "perf/max_memory_allocated_gb" not in steps[3]
    # the two workers' lines before step 2's record: correctness 0.3 and 0.5; improvement not yet known
    assert steps[2]["train_reward/correctness"] == pytest.approx(0.4)
    assert steps[2]["train_reward/format"] == pytest.approx(-0.1) and "train_reward/improvement" not in steps[2]
    assert set(reward_tallies(log)) == {1, 2, 3}


def test_two_runs_side_by_side_csv_and_png(tmp_path, capsys):
    a = write_log(tmp_path / "cobalt.log", [0.1, 0.3, 0.5], {0: 0.25, 3: 0.75})
    b = write_log(tmp_path / "single.log", [0.2, 0.2], {0: 0.25, 2: 0.3})
    out = tmp_path / "report"
    assert main(["train-report", "--run", f"cobalt={a}", "--run", f"single={b}", "--out-dir", str(out)]) == 0
    assert "cobalt: 4 steps; validation accuracy step 0: 0.250, step 3: 0.750" in capsys.readouterr().out
    rows = list(csv.DictReader((out / "train_report.csv").open()))
    assert [(r["run"], r["step"]) for r in rows] == [("cobalt", "0"), ("cobalt", "1"), ("cobalt", "2"),
                                                     ("cobalt", "3"), ("single", "0"), ("single", "1"), ("single", "2")]
    assert rows[6]["val/acc"] == "0.3" and rows[1]["val/acc"] == ""
    png = (out / "train_report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_bad_input_is_named(tmp_path, capsys):
    empty = tmp_path / "empty.log"
    empty.write_text("nothing from verl here\n")
    assert main(["train-report", "--run", f"x={empty}", "--out-dir", str(tmp_path / "o")]) == 1
    assert main(["train-report", "--run", "x", "--out-dir", str(tmp_path / "o")]) == 2
    assert main(["train-report", "--run", f"x={tmp_path / 'missing.log'}", "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "empty.log: no verl step record" in err and "missing.log: no such file" in err
