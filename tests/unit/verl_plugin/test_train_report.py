"""`cobalt train-report` on console logs as verl 0.9.1's console logger prints them (its own
formatter), with the reward workers' tally lines between the step records; and on a real
console log of a Cobalt run on one H100 (tests/fixtures/verl_logs/learn_train_cobalt.log:
`ray start`, the evaluator app, the trainer's start-up, validation at step 0, 4 steps, then
the call's time limit), trimmed to the lines with a timestamp, a step record, the validation
metrics, a progress bar or a reward tally, each kept byte for byte."""
from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from cobalt.cli import main
from cobalt.verl_plugin.train_report import (line_time, line_times, read_run, reward_tallies, startup_phases,
                                             startup_total)

SOURCE = "code_taco_verified"
H100_LOG = Path(__file__).resolve().parents[2] / "fixtures" / "verl_logs" / "learn_train_cobalt.log"


def write_log(path, scores, val_acc):
    """A terminal log of a short run: validation at step 0, then steps with tallies and step records."""
    concat_dict_to_str = pytest.importorskip("verl.utils.logger.aggregate_logger",
                                             reason="needs the pinned verl").concat_dict_to_str

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


# the fixture's milestones, read off its lines: (phase, clock time of the line that ends it)
H100_MILESTONES = [
    ("start (ray start)", "00:33:20.815"),  # ray start's "Local node IP"
    ("ray head started", "00:33:30.218"),  # "Ray runtime started."
    ("evaluator app ready", "00:33:46.654"),  # serve: "Application 'evaluator' is ready at"
    ("trainer connected", "00:34:37.280"),  # "Connected to Ray cluster" after main_ppo's "ray init kwargs"
    ("datasets loaded", "00:36:09.056"),
    ("worker group created", "00:36:13.460"),
    ("actor engine initialized", "00:36:57.649"),
    ("rollout server ready", "00:39:09.589"),  # "all initialize finished"
    ("first validation done", "00:39:54.496"),  # no stamp of its own: the reward worker's line just before
    ("first step done", "00:40:28.430"),  # the 0/20 bar (its neighbour 00:39:54.430) + the 1/20 bar's 00:34
]


def clock(text):
    return datetime.strptime(f"2026-11-25 {text}", "%Y-%m-%d %H:%M:%S.%f")


def trimmed(tmp_path, drop, name="run.log"):
    """The H100 fixture without the lines that contain any of ``drop``."""
    with H100_LOG.open(encoding="utf-8", newline="") as fh:
        lines = fh.read().split("\n")
    path = tmp_path / name
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("\n".join(line for line in lines if not any(d in line for d in drop)))
    return path


def test_h100_log_csv_has_the_real_values(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["train-report", "--run", f"cobalt={H100_LOG}", "--out-dir", str(out)]) == 0
    assert "cobalt: 5 steps; validation accuracy step 0: 0.295" in capsys.readouterr().out
    rows = {int(r["step"]): r for r in csv.DictReader((out / "train_report.csv").open())}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert float(rows[0]["val/acc"]) == 0.295 and float(rows[0]["val/n_tests"]) == 13.0
    assert rows[0]["timing_s/step"] == "" and rows[1]["val/acc"] == ""
    assert float(rows[1]["timing_s/step"]) == pytest.approx(34.10, abs=0.005)
    assert float(rows[1]["timing_s/update_actor"]) == pytest.approx(21.33, abs=0.005)
    assert float(rows[3]["critic/advantages/min"]) == pytest.approx(-2.4749, abs=1e-4)
    assert float(rows[4]["critic/score/mean"]) == pytest.approx(0.7471, abs=1e-4)
    assert float(rows[4]["actor/grad_norm"]) == pytest.approx(0.18637, abs=1e-5)
    # the tally before step 3's record is a line that Ray's deduplication suffixed ("[repeated 16x across cluster]")
    assert float(rows[3]["train_reward/improvement"]) == -0.013 and float(rows[3]["train_reward/format"]) == 0.0
    assert float(rows[1]["train_reward/score"]) == 0.7


def test_h100_log_startup_phases_from_its_timestamps():
    phases = startup_phases(H100_LOG)
    assert [(p.name, p.at) for p in phases] == [(name, clock(at)) for name, at in H100_MILESTONES]
    start = clock(H100_MILESTONES[0][1])
    for (name, at), before, phase in zip(H100_MILESTONES[1:], H100_MILESTONES, phases[1:]):
        assert phase.since == before[0]
        assert phase.seconds == pytest.approx((clock(at) - clock(before[1])).total_seconds())
        assert phase.since_start == pytest.approx((clock(at) - start).total_seconds())
    seconds = {p.name: round(p.seconds, 3) for p in phases[1:]}
    assert seconds["trainer connected"] == 50.626 and seconds["rollout server ready"] == 131.940
    assert startup_total(phases) == pytest.approx(427.615)


def test_startup_files_and_printed_table(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["train-report", "--run", f"cobalt={H100_LOG}", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| rollout server ready | actor engine initialized | 00:39:09.589 | 131.9 | 348.8 |" in printed
    assert "| **start to first step** | | | | **427.6** |" in printed
    assert (out / "startup.md").read_text() in printed
    rows = list(csv.DictReader((out / "startup.csv").open()))
    assert [r["phase"] for r in rows] == [name for name, _ in H100_MILESTONES]
    assert rows[5] == {"run": "cobalt", "phase": "worker group created", "from": "datasets loaded",
                       "at": "2026-11-25 00:36:13.460000", "seconds": "4.404", "since_start": "172.645"}


def test_a_missing_phase_is_missing_and_the_next_is_timed_from_the_last_found(tmp_path):
    log = trimmed(tmp_path, ["create worker group", "Initial validation metrics"])
    phases = {p.name: p for p in startup_phases(log)}
    assert phases["worker group created"].at is None and phases["worker group created"].seconds is None
    assert phases["actor engine initialized"].since == "datasets loaded"
    assert phases["actor engine initialized"].seconds == pytest.approx(216.834 - 168.241)
    # without the validation's metrics the first step is still timed by its progress bars
    assert phases["first validation done"].at is None
    assert phases["first step done"].since == "rollout server ready"
    assert phases["first step done"].at == clock("00:40:28.430")
    out = tmp_path / "report"
    assert main(["train-report", "--run", f"cobalt={log}", "--out-dir", str(out)]) == 0
    assert "| worker group created |  | missing | missing | missing |" in (out / "startup.md").read_text()
    rows = {r["phase"]: r for r in csv.DictReader((out / "startup.csv").open())}
    assert rows["worker group created"]["seconds"] == "" and rows["worker group created"]["at"] == ""


def test_without_ray_start_the_trainers_ray_init_is_the_start(tmp_path):
    # as a run whose trainer starts Ray itself, with the evaluator inside the reward workers
    log = trimmed(tmp_path, ["Local node IP", "Ray runtime started", "is ready at"])
    phases = startup_phases(log)
    # "ray init kwargs" has no stamp: its nearest line is the trainer's "Using address auto set" (00:34:37.228)
    assert phases[0].name == "start (trainer's ray init)" and phases[0].at == clock("00:34:37.228")
    assert [p.at for p in phases[1:3]] == [None, None]
    assert phases[3].name == "trainer connected" and phases[3].since == "start (trainer's ray init)"
    assert phases[3].seconds == pytest.approx(0.052)
    assert startup_total(phases) == pytest.approx((clock("00:40:28.430") - clock("00:34:37.228")).total_seconds())


def test_no_start_marker_is_said_and_the_curves_still_written(tmp_path, capsys):
    log = trimmed(tmp_path, ["Local node IP", "ray init kwargs"], name="nostart.log")
    with pytest.raises(ValueError, match="nostart.log: no start-up marker"):
        startup_phases(log)
    out = tmp_path / "report"
    assert main(["train-report", "--run", f"cobalt={log}", "--out-dir", str(out)]) == 0
    captured = capsys.readouterr()
    assert "nostart.log: no start-up marker" in captured.err and "no start-up breakdown of run cobalt" in captured.err
    assert "nostart.log: no start-up marker" in (out / "startup.md").read_text()
    assert list(csv.DictReader((out / "startup.csv").open())) == []
    assert (out / "train_report.csv").is_file()


def test_a_resumed_runs_bar_starts_at_its_checkpoint(tmp_path):
    text = H100_LOG.read_bytes().replace(b"| 0/20 [00:00<?", b"| 5/20 [00:00<?").replace(
        b"| 1/20 [00:34<", b"| 6/20 [00:31<")
    log = tmp_path / "resumed.log"
    log.write_bytes(text)
    phases = {p.name: p for p in startup_phases(log)}
    assert phases["first step done"].at == clock("00:40:25.430")


@pytest.mark.parametrize("line, stamp", [
    ("2026-11-25 00:33:20,815\tINFO usage_lib.py:448 -- Usage stats collection is disabled.", "00:33:20.815"),
    ("\x1b[36m(TaskRunnerV1 pid=9516)\x1b[0m INFO:2026-11-25 00:36:09,056:Total training steps: 20", "00:36:09.056"),
    ("\x1b[36m(vLLMHttpServer pid=10351)\x1b[0m WARNING 11-25 00:37:50 [vllm.py:1062] Enforce eager", "00:37:50.000"),
    ("INFO 2026-11-25 00:33:42,518 serve 8178 -- Started Serve in namespace \"serve\".", "00:33:42.518"),
    ("[2026-11-25 00:42:16,080 E 9365 9365] logging.cc:474: *** SIGTERM received", "00:42:16.080"),
    ("(WorkerDict pid=10030) [W1125 00:36:49.696829176 socket.cpp:207] [c10d] The hostname", "00:36:49.696829"),
])
def test_timestamp_formats(line, stamp):
    assert line_time(line, 2026) == clock(stamp)


def test_lines_without_a_stamp_and_the_borrowed_year():
    assert line_time("ray init kwargs: {'num_cpus': None}") is None
    assert line_time("Training Progress:   5%|5         | 1/20 [00:34<10:49, 34.18s/it]") is None
    assert line_time("Time range: last 5.24 minutes; W9999 99:99:99") is None
    times = line_times(["WARNING 12-31 23:59:58 [a.py:1] x", "2025-12-31 23:59:59,000 INFO y", "none",
                        "WARNING 12-31 23:59:59 [a.py:1] z"])
    assert [t.year if t else None for t in times] == [2025, 2025, None, 2025]
