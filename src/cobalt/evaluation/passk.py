"""The unbiased pass@k estimator and Pass@1 per turn over evaluated inference records.

pass@k = 1 - C(n - c, k) / C(n, k) for a problem with ``n`` samples of which
``c`` are correct (Chen et al., 2021). Pass@1 per turn (METHOD §6, §9): per
problem, ``c`` = trajectories whose hidden pass rate is 1.0 at that turn; the
mean over problems. In both profiles ``n`` is the number of samples drawn for
the problem (the original fixes it at 16, its sample count: the same numbers
when every problem has 16 samples, a fraction of them when a run has fewer).

What a table leaves out is reported, never averaged in: a problem without
hidden tests, and, at each turn, the trajectories shorter than that turn.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from cobalt.data.records import evaluator_failure, hidden_rates

CONFIG_SAMPLES = "samples"
"""The field of a rollout's ``<output>.config.json`` with its samples per problem."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for ``c`` correct out of ``n`` samples.

    >>> pass_at_k(16, 4, 1)
    0.25
    >>> round(pass_at_k(5, 2, 2), 4)
    0.7
    >>> pass_at_k(4, 3, 2)
    1.0
    """
    if n < 1 or k < 1 or c < 0 or c > n or k > n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def is_correct(rate: Any) -> bool:
    """A hidden pass rate of 1.0 (a turn without a rate counts as wrong)."""
    return isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate >= 1.0 - 1e-12



@dataclass
class PassTable:
    """Pass@1 per turn of one run, with what it left out."""

    turns: int
    problems: int
    """Problems counted (those with hidden tests)."""
    pass_at_1: list[float] = field(default_factory=list)
    """Per turn, as a fraction in [0, 1]."""
    mean_hidden_pass_rate: list[float] = field(default_factory=list)
    samples_per_problem: list[int] = field(default_factory=list)
    profile: str | None = None
    """The profile the file was made with (read from the file), None when it does not say."""
    run_samples: int | None = None
    """The run's samples per problem (its rollout config, else the most common count)."""
    odd_samples: list[tuple[str, int]] = field(default_factory=list)
    """(id, samples) of every problem whose sample count differs from ``run_samples``."""
    short_trajectories: list[tuple[str, int, int]] = field(default_factory=list)
    """(id, sample index, turns it has) of every trajectory shorter than ``turns``."""
    no_hidden_tests: list[str] = field(default_factory=list)
    """Ids of problems without hidden tests (left out)."""

    @property
    def samples_min(self) -> int:
        """The fewest samples of a counted problem (0 when none)."""
        return min(self.samples_per_problem, default=0)

    @property
    def samples_max(self) -> int:
        """The most samples of a counted problem (0 when none)."""
        return max(self.samples_per_problem, default=0)

    def n_text(self) -> str:
        """How the table states the estimator's n, e.g. ``n = 16`` or ``n = samples per problem (2 to 16)``."""
        if self.samples_min == self.samples_max:
            return f"n = {self.samples_max}"
        return f"n = samples per problem ({self.samples_min} to {self.samples_max})"

    def change_vs_turn0(self) -> list[float | None]:
        """Per turn, the change against turn 0 as a percentage of turn 0 (None when turn 0 is 0)."""
        base = self.pass_at_1[0] if self.pass_at_1 else 0.0
        return [None if base == 0 else (v - base) / base * 100.0 for v in self.pass_at_1]

    def notes(self) -> list[str]:
        """One line per thing the table left out or that differs from the run (for stderr and the summary)."""
        out = []
        if self.odd_samples:
            listed = ", ".join(f"({pid}, {k})" for pid, k in self.odd_samples)
            out.append(f"{len(self.odd_samples)} problem(s) with a sample count other than the run's "
                       f"{self.run_samples} (id, samples): {listed}")
        if self.short_trajectories:
            listed = ", ".join(f"({pid}, sample {i}, {k} turns)" for pid, i, k in self.short_trajectories[:20])
            more = "" if len(self.short_trajectories) <= 20 else f" and {len(self.short_trajectories) - 20} more"
            out.append(f"{len(self.short_trajectories)} trajectory(ies) shorter than the table's {self.turns} turns, "
                       f"left out of the turns they lack, not counted as wrong: {listed}{more}")
        if self.no_hidden_tests:
            out.append(f"{len(self.no_hidden_tests)} problem(s) without hidden tests, left out of Pass@1: "
                       + ", ".join(self.no_hidden_tests))
        return out

    def caption(self, label: str | None = None) -> str:
        """The line under the table: problems, n with the min and max samples, and the file's profile."""
        who = f"{label}: " if label else ""
        return (f"{who}{self.problems} problems, {self.n_text()} (samples per problem: min {self.samples_min}, "
                f"max {self.samples_max}), profile {self.profile or 'not recorded'}")

    def to_dict(self) -> dict:
        """JSON-ready form; rates also as percentages rounded to 2 decimals."""
        return {
            "turns": self.turns,
            "problems": self.problems,
            "n": "samples drawn per problem",
            "estimator": "pass@1 = 1 - C(n-c,1)/C(n,1), n = the problem's samples (that reach the turn), "
                         "c = those with hidden pass rate 1.0 at the turn",
            "samples_min": self.samples_min,
            "samples_max": self.samples_max,
            "run_samples": self.run_samples,
            "profile": self.profile,
            "pass_at_1": self.pass_at_1,
            "pass_at_1_percent": [round(100 * v, 2) for v in self.pass_at_1],
            "change_vs_turn0_percent": [None if v is None else round(v, 2) for v in self.change_vs_turn0()],
            "mean_hidden_pass_rate": self.mean_hidden_pass_rate,
            "odd_samples": [list(x) for x in self.odd_samples],
            "short_trajectories": [list(x) for x in self.short_trajectories],
            "no_hidden_tests": list(self.no_hidden_tests),
            "notes": self.notes(),
        }


def has_hidden_tests(record: Mapping[str, Any]) -> bool:
    """True when an evaluated record's problem has hidden tests (its ``hidden_test_cases``, else any rate)."""
    raw = record.get("hidden_test_cases")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = None
    if isinstance(raw, Mapping):
        return bool(raw.get("inputs"))
    return any(rate is not None for rates in hidden_rates(record) for rate in rates)


def most_common_count(counts: Sequence[int]) -> int | None:
    """The most common of ``counts`` (the larger on a tie), None when empty.

    >>> most_common_count([16, 16, 8, 8, 4])
    16
    """
    if not counts:
        return None
    tally = Counter(counts)
    return max(tally, key=lambda k: (tally[k], k))


def pass_table(records: Iterable[Mapping[str, Any]], *, turns: int | None = None, run_samples: int | None = None,
               profile: str | None = None) -> PassTable:
    """Pass@1 per turn over evaluated records; ``n`` is each problem's number of samples.

    ``turns``: how many turns to report (default: the most turns of any
    trajectory). At a turn, a trajectory shorter than it is left out (and
    reported), so a problem's ``n`` there is its trajectories that reach it; a
    problem none of whose trajectories reach it is left out of that turn.
    ``run_samples``: the run's samples per problem (default: the most common
    count); problems with another count are reported. Problems without hidden
    tests are reported and left out.
    """
    kept: list[tuple[str, list[list[Any]]]] = []
    table = PassTable(turns=0, problems=0, profile=profile)
    for k, record in enumerate(records):
        pid = str(record.get("id", f"#{k}"))
        if not has_hidden_tests(record):
            table.no_hidden_tests.append(pid)
            continue
        kept.append((pid, hidden_rates(record)))
    if turns is None:
        turns = max((len(s) for _, rates in kept for s in rates), default=0)
    table.turns, table.problems = turns, len(kept)
    table.samples_per_problem = [len(rates) for _, rates in kept]
    table.run_samples = run_samples if run_samples is not None else most_common_count(table.samples_per_problem)
    table.odd_samples = [(pid, len(rates)) for pid, rates in kept if len(rates) != table.run_samples]
    table.short_trajectories = [(pid, i, len(s)) for pid, rates in kept for i, s in enumerate(rates) if len(s) < turns]
    for t in range(turns):
        values, means = [], []
        for _, rates in kept:
            column = [s[t] for s in rates if t < len(s)]
            if not column:
                continue
            values.append(pass_at_k(len(column), sum(is_correct(v) for v in column), 1))
            means.append(sum(float(v) for v in column if isinstance(v, (int, float))) / len(column))
        table.pass_at_1.append(sum(values) / len(values) if values else 0.0)
        table.mean_hidden_pass_rate.append(sum(means) / len(means) if means else 0.0)
    return table


def format_table(tables: Sequence[tuple[str, PassTable]]) -> str:
    """A markdown table: one row per turn, one Pass@1 column (and change vs turn 0) per run.

    Under it, one line per run: its problems, the estimator's n with the
    minimum and maximum samples per problem, and the profile the file was made with.
    """
    turns = max((t.turns for _, t in tables), default=0)
    head = "| turn | " + " | ".join(f"{label} Pass@1 | {label} vs turn 0" for label, _ in tables) + " |"
    rule = "|---|" + "---|---|" * len(tables)
    lines = [head, rule]
    for i in range(turns):
        cells = []
        for _, table in tables:
            if i < table.turns:
                change = table.change_vs_turn0()[i]
                cells.append(f"{100 * table.pass_at_1[i]:.2f}")
                cells.append("" if i == 0 else ("n/a" if change is None else f"{change:+.1f}%"))
            else:
                cells += ["", ""]
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [table.caption(label if len(tables) > 1 else None) for label, table in tables]
    return "\n".join(lines)


def read_evaluated(path: str | Path, flagged: list[str] | None = None) -> list[dict]:
    """The evaluated records of ``path``, checked: each has samples with ``hidden_pass_rate`` on every turn,
    and no id twice (:class:`cobalt.io.RecordError` names the file, line and field).

    A record whose public feedback holds an evaluator-failure text
    (:func:`cobalt.data.records.evaluator_failure`) is left out, and described in
    ``flagged`` when given: its rollout fed an infrastructure failure to the model.
    """
    from cobalt.data.records import read_turns
    from cobalt.io import check_unique_id, iter_jsonl

    records, seen = [], {}
    for line, rec in iter_jsonl(path):
        read_turns(rec, path=str(path), line=line, responses=False)
        check_unique_id(rec.get("id"), seen, path=path, line=line)
        failure = evaluator_failure(rec)
        if failure is not None:
            if flagged is not None:
                flagged.append(f"{path}:{line}: problem {rec.get('id')}: not scored: its rollout fed an evaluator "
                               f"failure to the model ({failure}); rerun its rollout")
            continue
        hidden_rates(rec, path=str(path), line=line, require=True)
        records.append(rec)
    return records


def file_profile(records: Sequence[Mapping[str, Any]], path: str | Path) -> str | None:
    """The profile an evaluated file was made with: its records' ``hidden_eval.profile``, else its saved settings."""
    found = sorted({str(r["hidden_eval"]["profile"]) for r in records
                    if isinstance(r.get("hidden_eval"), Mapping) and r["hidden_eval"].get("profile")})
    if found:
        return found[0] if len(found) == 1 else "mixed (" + ", ".join(found) + ")"
    settings = _saved_config(path).get("settings") or {}
    return str(settings["profile"]) if isinstance(settings, Mapping) and settings.get("profile") else None


def rollout_samples(rollout: str | Path) -> int | None:
    """``samples`` of a rollout's ``<rollout>.config.json``, None when it has none."""
    value = _saved_config(rollout).get(CONFIG_SAMPLES)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _saved_config(path: str | Path) -> dict:
    from cobalt.io import config_path

    try:
        loaded = json.loads(config_path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def load_pass_table(path: str | Path, *, rollout: str | Path | None = None,
                    flagged: list[str] | None = None) -> PassTable:
    """The Pass@1 table of one evaluated records file, as eval, report and the demo all compute it.

    The run's samples come from ``<rollout>.config.json``; ``rollout`` defaults
    to the ``input`` saved in ``<path>.config.json`` (what ``cobalt eval``
    read), and without one the most common count is the run's. Records that
    hold an evaluator failure are left out and described in ``flagged``.
    """
    records = read_evaluated(path, flagged)
    if rollout is None:
        settings = _saved_config(path).get("settings") or {}
        rollout = settings.get("input") if isinstance(settings, Mapping) else None
    run_samples = rollout_samples(rollout) if rollout else None
    return pass_table(records, run_samples=run_samples, profile=file_profile(records, path))


def summarize(output: str | Path, *, rollout: str | Path | None = None) -> dict:
    """Pass@1 per turn of an evaluated records file (read back from disk, so resumed runs count whole).

    The same table as ``cobalt report`` and the demo (:func:`load_pass_table`);
    ``rollout``: the evaluated rollout, whose ``<rollout>.config.json`` gives the run's samples.
    """
    return load_pass_table(output, rollout=rollout).to_dict()
