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

Start-up: the same logs' timestamps give each run's start-up breakdown
(:func:`startup_phases`), written as ``startup.csv`` (one row per run and phase)
and ``startup.md`` (a table per run, also printed). The milestones are those of
:data:`MILESTONES`, from ``ray start`` (or, without one, the trainer's own Ray
start) to the end of the first training step; a milestone whose marker is not in
the log is reported as missing, and the next phase is timed from the last one found.
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Mapping, Sequence

from cobalt.verl_plugin.costs import parse_pairs, read_step_metrics

REPORT_STEM = "train_report"
STARTUP_STEM = "startup"
COMPONENTS = ("score", "correctness", "improvement", "format")
_TALLY = re.compile(r"cobalt reward: .*?; means: (.*)$")
# Ray's log deduplication appends " [repeated 14x across cluster]" in colour to a line printed by several workers
_RAY_SUFFIX = re.compile(r"\s*\[repeated \d+x across cluster\].*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
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
            tally = _TALLY.search(_RAY_SUFFIX.sub("", _ANSI.sub("", line.rstrip("\n"))))
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


# Start-up breakdown ---------------------------------------------------------

_STAMP_FULL = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[,.](\d{1,9}))?")
# vLLM's "WARNING 11-25 00:37:50" and glog's "W1125 00:36:49.696829" carry no year: it is borrowed
_STAMP_LEVEL = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\b")
_STAMP_GLOG = re.compile(r"(?<![A-Za-z0-9])[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_PROGRESS = re.compile(r"Training Progress:.*?\|\s*(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)")
_NO_YEAR = 1900

START_MARKERS = {
    "ray start": re.compile(r"Local node IP"),
    "trainer's ray init": re.compile(r"ray init kwargs"),
}
"""The start of a run: ``ray start --head``'s ``Local node IP`` line, else the trainer's own Ray start."""

MILESTONES = (
    ("ray head started", re.compile(r"Ray runtime started"), None),
    ("evaluator app ready", re.compile(r"Application '[^']+' is ready at"), None),
    ("trainer connected", re.compile(r"Connected to Ray cluster|Started a local Ray instance"),
     re.compile(r"ray init kwargs")),
    ("datasets loaded", re.compile(r"train and validate dataloader initialized"), None),
    ("worker group created", re.compile(r"create worker group"), None),
    ("actor engine initialized", re.compile(r"actor and ref model engine initialized"), None),
    ("rollout server ready", re.compile(r"all initialize finished"), None),
    ("first validation done", re.compile(r"Initial validation metrics"), None),
)
"""(phase, the marker that ends it, a marker that must come first or None), in order; the last phase,
``first step done``, is the first step's ``Training Progress`` bar (its elapsed time after the 0/N bar)."""
FIRST_STEP = "first step done"


@dataclass(frozen=True)
class Phase:
    """One phase of a run's start-up: it ends at ``at`` (None: its marker is missing)."""

    name: str
    at: datetime | None
    since: str = ""  # the phase it is timed from: the last one found before it
    seconds: float | None = None
    since_start: float | None = None


def _stamp(year: int, month: int, day: int, fraction: str | None, groups: Sequence[str]):
    hour, minute, second = (int(g) for g in groups)
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        return datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        return None  # not a date after all (a glog-like token in free text)


def line_time(line: str, year: int | None = None) -> datetime | None:
    """The timestamp of one log line, or None; ``year`` completes the stamps that have none (vLLM, glog)."""
    full = _STAMP_FULL.search(line)
    if full:
        return _stamp(int(full.group(1)), int(full.group(2)), int(full.group(3)), full.group(7),
                      full.group(4, 5, 6))
    year = year or _NO_YEAR
    short = _STAMP_LEVEL.search(line)
    if short:
        return _stamp(year, int(short.group(1)), int(short.group(2)), None, short.group(3, 4, 5))
    glog = _STAMP_GLOG.search(line)
    if glog:
        return _stamp(year, int(glog.group(1)), int(glog.group(2)), glog.group(6), glog.group(3, 4, 5))
    return None


def line_times(lines: Sequence[str]) -> list[datetime | None]:
    """Each line's timestamp (None where it has none), a stamp without year taking the last full date's year."""
    first_full = next((m for m in map(_STAMP_FULL.search, lines) if m), None)
    year = int(first_full.group(1)) if first_full else None
    times = []
    for line in lines:
        stamp = line_time(line, year)
        if stamp is not None and _STAMP_FULL.search(line):
            year = stamp.year
        times.append(stamp)
    return times


def nearest_time(times: Sequence[datetime | None], index: int) -> datetime | None:
    """The timestamp of line ``index``, else of the nearest line that has one (the earlier one on a tie)."""
    for distance in range(len(times)):
        for i in (index - distance, index + distance):
            if 0 <= i < len(times) and times[i] is not None:
                return times[i]
    return None


def _first(lines: Sequence[str], pattern: re.Pattern, start: int = 0) -> int | None:
    return next((i for i in range(start, len(lines)) if pattern.search(lines[i])), None)


def first_step_time(lines: Sequence[str], times: Sequence[datetime | None]) -> datetime | None:
    """End of the first training step: the first ``Training Progress`` bar's time plus the elapsed time
    of the next bar with a higher count (a resumed run's bar starts at its checkpoint's step)."""
    zero = None
    for i, line in enumerate(lines):
        bar = _PROGRESS.search(line)
        if bar is None:
            continue
        count = int(bar.group(1))
        if zero is None:
            zero = (count, nearest_time(times, i))
        elif count > zero[0] and zero[1] is not None:
            elapsed = int(bar.group(3) or 0) * 3600 + int(bar.group(4)) * 60 + int(bar.group(5))
            return zero[1] + timedelta(seconds=elapsed)
    return None


def startup_phases(path: str | Path) -> list[Phase]:
    """A run's start-up, from the timestamps of its console log: the start, then one :class:`Phase` per
    milestone and the first step. Raises ``ValueError`` naming the file when it has no start marker."""
    # newline="": a tqdm bar's \r must not split its line from the Ray prefix (nor move it from its neighbours)
    with Path(path).open(encoding="utf-8", errors="replace", newline="") as fh:
        lines = fh.read().split("\n")
    times = line_times(lines)
    start = None
    for label, marker in START_MARKERS.items():
        index = _first(lines, marker)
        at = nearest_time(times, index) if index is not None else None
        if at is not None:
            start = Phase(f"start ({label})", at)
            break
    if start is None:
        raise ValueError(f"{path}: no start-up marker (ray start's 'Local node IP' or the trainer's "
                         f"'ray init kwargs' with a timestamp) found")
    found: dict[str, datetime | None] = {}
    for name, marker, after in MILESTONES:
        begin = _first(lines, after) if after is not None else 0
        index = _first(lines, marker, begin) if begin is not None else None
        found[name] = nearest_time(times, index) if index is not None else None
    found[FIRST_STEP] = first_step_time(lines, times)
    phases, last = [start], start
    for name, at in found.items():
        if at is None:
            phases.append(Phase(name, None))
            continue
        phases.append(Phase(name, at, last.name, (at - last.at).total_seconds(), (at - start.at).total_seconds()))
        last = phases[-1]
    return phases


def startup_total(phases: Sequence[Phase]) -> float | None:
    """Seconds from the start to the end of the first step, None when the first step is missing."""
    return next((p.since_start for p in phases if p.name == FIRST_STEP), None)


def _seconds(value: float | None) -> str:
    return "missing" if value is None else f"{value:.1f}"


def startup_markdown(name: str, phases: Sequence[Phase] | str) -> str:
    """A run's start-up as a markdown table (``phases`` a string: the reason there is none)."""
    if isinstance(phases, str):
        return f"### {name}\n\n{phases}\n"
    rows = [f"### {name}\n", "| phase | from | at | seconds | since start |", "|---|---|---|---:|---:|"]
    for p in phases:
        at = p.at.strftime("%H:%M:%S.%f")[:-3] if p.at else "missing"
        seconds = "" if p is phases[0] else _seconds(p.seconds)
        since = "" if p is phases[0] else _seconds(p.since_start)
        rows.append(f"| {p.name} | {p.since} | {at} | {seconds} | {since} |")
    rows.append(f"| **start to first step** | | | | **{_seconds(startup_total(phases))}** |")
    return "\n".join(rows) + "\n"


def startup_breakdowns(logs: Mapping[str, str | Path]) -> dict[str, list[Phase] | str]:
    """{run: its start-up phases, or why there are none (said on stderr too)} for ``{run: console log}``."""
    out: dict[str, list[Phase] | str] = {}
    for name, log in logs.items():
        try:
            out[name] = startup_phases(log)
        except ValueError as exc:  # a dry run, or a run cut before its start: its table says so
            print(f"train-report: {exc}; no start-up breakdown of run {name}", file=sys.stderr)
            out[name] = str(exc)
    return out


def write_startup(out: Path, runs: Mapping[str, Sequence[Phase] | str]) -> str:
    """``startup.csv`` (one row per run and phase) and ``startup.md``; returns the markdown."""
    with (out / f"{STARTUP_STEM}.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run", "phase", "from", "at", "seconds", "since_start"])
        for name, phases in runs.items():
            for p in phases if not isinstance(phases, str) else ():
                writer.writerow([name, p.name, p.since, p.at.isoformat(sep=" ") if p.at else "",
                                 "" if p.seconds is None else f"{p.seconds:.3f}",
                                 "" if p.since_start is None else f"{p.since_start:.3f}"])
    text = "# Start-up of the training runs\n\n" + "\n".join(
        startup_markdown(name, phases) for name, phases in runs.items())
    (out / f"{STARTUP_STEM}.md").write_text(text)
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt train-report``."""
    parser.add_argument("--run", action="append", required=True, metavar="NAME=LOG",
                        help="a run's name and its verl console log (or file-logger JSONL); repeat for several runs")
    parser.add_argument("--out-dir", required=True, help="folder for train_report.{csv,png} and startup.{csv,md}")
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
    startups = startup_breakdowns(logs)
    for name, steps in runs.items():
        acc = [(s, v["val/acc"]) for s, v in sorted(steps.items()) if "val/acc" in v]
        print(f"{name}: {len(steps)} steps; validation accuracy " + (", ".join(f"step {s}: {a:.3f}" for s, a in acc)
                                                                  or "none logged"))
    print(write_startup(out, startups))
    print(f"train-report: {len(columns)} metrics of {len(runs)} runs in {out}/{REPORT_STEM}.csv and .png",
          file=sys.stderr)
    return 0
