"""`cobalt train-report`: learning curves of one or more training runs, side by side.

Input: the console logs of verl runs (``--run NAME=LOG``, the terminal output of
``scripts/train_*.sh``), read with the parser of ``cobalt cost-report``
(:func:`cobalt.verl_plugin.costs.read_step_metrics`; verl's file-logger JSONL
works too). Per step it keeps:

- the score (``critic/score/mean``, min, max);
- the reward components: of the training rows, the means of the reward
  workers' ``cobalt reward:`` lines printed since the previous step (each line
  holds one worker's running means), as ``train_reward/<component>``; of the
  validation rows, verl's ``val-aux/<source>/<component>/mean@N`` as
  ``val/<component>``;
- the advantages (``critic/advantages/mean``, min, max) and ``actor/grad_norm``;
- the validation accuracy (``val-core/<source>/acc/mean@N`` as ``val/acc``);
- the step time and its phases (``timing_s/*``).

Output in ``--out-dir``: ``train_report.csv`` (one row per run and step, one
column per kept metric) and ``train_report.png`` (six panels, the runs in
colours side by side).
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path
from typing import Mapping

from cobalt.verl_plugin.costs import parse_pairs, read_step_metrics

REPORT_STEM = "train_report"
COMPONENTS = ("score", "correctness", "improvement", "format")
_TALLY = re.compile(r"cobalt reward: .*?; means: (.*)$")
_VAL = re.compile(r"^val-(?:core|aux)/[^/]+/([^/]+)/mean@\d+$")
_KEEP = re.compile(r"^(critic/score/(mean|min|max)|critic/advantages/(mean|min|max)|actor/grad_norm|"
                   r"timing_s/.+|response_length/mean|actor/pg_loss)$")
PANELS = (
    ("score", ("critic/score/mean", "critic/score/min", "critic/score/max")),
    ("reward components", tuple(f"train_reward/{c}" for c in COMPONENTS[1:]) + ("val/correctness",)),
    ("advantages", ("critic/advantages/mean", "critic/advantages/min", "critic/advantages/max")),
    ("gradient norm", ("actor/grad_norm",)),
    ("validation accuracy", ("val/acc",)),
    ("step time and phases (s)", ("timing_s/step", "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob",
                                  "timing_s/ref", "timing_s/update_actor", "timing_s/update_weights",
                                  "timing_s/testing")),
)


def reward_tallies(path: str | Path) -> dict[int, dict[str, float]]:
    """{step: {train_reward/<component>: mean}} from the ``cobalt reward:`` lines before each step record."""
    step_line = re.compile(r"(?:^|\s)step:(\d+)\s+-\s")
    pending: dict[str, list[float]] = {}
    out: dict[int, dict[str, float]] = {}
    with Path(path).open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            tally = _TALLY.search(line)
            if tally:
                for item in tally.group(1).split(","):
                    name, _, value = item.strip().rpartition(" ")
                    try:
                        number = float(value)
                    except ValueError:
                        continue  # "n/a": no row of this component yet
                    pending.setdefault(name, []).append(number)
                continue
            step = step_line.search(line)
            if step and pending:
                out[int(step.group(1))] = {f"train_reward/{k}": sum(v) / len(v) for k, v in pending.items()}
                pending = {}
    return out


def read_run(path: str | Path) -> dict[int, dict[str, float]]:
    """{step: {metric: value}} of one run: the kept metrics under the names of the module docstring."""
    raw = read_step_metrics(path)
    steps: dict[int, dict[str, float]] = {}
    for step, metrics in raw.items():
        kept = {}
        for key, value in metrics.items():
            val = _VAL.match(key)
            if val and (key.startswith("val-core/") or val.group(1) in COMPONENTS[1:] + ("has_code", "n_tests")):
                kept[f"val/{val.group(1)}"] = value
            elif _KEEP.match(key):
                kept[key] = value
        if kept:
            steps[step] = kept
    for step, tally in reward_tallies(path).items():
        steps.setdefault(step, {}).update(tally)
    return steps


def write_csv(path: Path, runs: Mapping[str, Mapping[int, Mapping[str, float]]]) -> list[str]:
    """One row per run and step; returns the metric columns."""
    columns = sorted({k for steps in runs.values() for m in steps.values() for k in m})
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run", "step", *columns])
        for name, steps in runs.items():
            for step in sorted(steps):
                writer.writerow([name, step, *(steps[step].get(c, "") for c in columns)])
    return columns


def plot(path: Path, runs: Mapping[str, Mapping[int, Mapping[str, float]]], title: str) -> None:
    """Six panels (:data:`PANELS`); a colour per run, a line style per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    styles = ("-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (panel, metrics) in zip(axes.flat, PANELS):
        for r, (name, steps) in enumerate(runs.items()):
            for m, metric in enumerate(metrics):
                points = [(s, v[metric]) for s, v in sorted(steps.items()) if metric in v]
                if points:
                    xs, ys = zip(*points)
                    ax.plot(xs, ys, linestyle=styles[m % len(styles)], color=colours[r % len(colours)],
                            marker="o" if len(points) < 3 else None, label=f"{name}: {metric}")
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt train-report``."""
    parser.add_argument("--run", action="append", required=True, metavar="NAME=LOG",
                        help="a run's name and its verl console log (or file-logger JSONL); repeat for several runs")
    parser.add_argument("--out-dir", required=True, help="folder for train_report.csv and train_report.png")
    parser.add_argument("--title", default="Training curves", help="figure title")


def run(args: argparse.Namespace) -> int:
    """Read every run, write the CSV and the figure, print a short summary per run."""
    try:
        logs = parse_pairs(args.run, "--run")
    except ValueError as exc:
        print(f"train-report: {exc}", file=sys.stderr)
        return 2
    runs = {}
    for name, log in logs.items():
        if not Path(log).is_file():
            print(f"train-report: {log}: no such file (--run {name})", file=sys.stderr)
            return 2
        runs[name] = read_run(log)
        if not runs[name]:
            print(f"train-report: {log}: no verl step record (step:N - key:value ...) found", file=sys.stderr)
            return 1
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    columns = write_csv(out / f"{REPORT_STEM}.csv", runs)
    plot(out / f"{REPORT_STEM}.png", runs, args.title)
    for name, steps in runs.items():
        acc = [(s, v["val/acc"]) for s, v in sorted(steps.items()) if "val/acc" in v]
        print(f"{name}: {len(steps)} steps; validation accuracy " + (", ".join(f"step {s}: {a:.3f}" for s, a in acc)
                                                                  or "none logged"))
    print(f"train-report: {len(columns)} metrics of {len(runs)} runs in {out}/{REPORT_STEM}.csv and .png",
          file=sys.stderr)
    return 0
