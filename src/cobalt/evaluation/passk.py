"""The unbiased pass@k estimator and Pass@1 per turn over evaluated inference records.

pass@k = 1 - C(n - c, k) / C(n, k) for a problem with ``n`` samples of which
``c`` are correct (Chen et al., 2021). Pass@1 per turn (METHOD §6, §9): per
problem, ``c`` = trajectories whose hidden pass rate is 1.0 at that turn; the
mean over problems. The original code fixes ``n`` at 16 (its sample count):
the ``paper`` profile does the same, ``cobalt`` uses each problem's own number
of samples.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from cobalt.data.records import hidden_rates

PAPER_N = 16
"""The ``n`` that the original evaluation hard-codes."""


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
    """Pass@1 per turn of one run."""

    turns: int
    problems: int
    n: int | None
    """The ``n`` of the estimator (None: each problem's own sample count)."""
    pass_at_1: list[float] = field(default_factory=list)
    """Per turn, as a fraction in [0, 1]."""
    mean_hidden_pass_rate: list[float] = field(default_factory=list)
    samples_per_problem: list[int] = field(default_factory=list)

    def change_vs_turn0(self) -> list[float | None]:
        """Per turn, the change against turn 0 as a percentage of turn 0 (None when turn 0 is 0)."""
        base = self.pass_at_1[0] if self.pass_at_1 else 0.0
        return [None if base == 0 else (v - base) / base * 100.0 for v in self.pass_at_1]

    def to_dict(self) -> dict:
        """JSON-ready form; rates also as percentages rounded to 2 decimals."""
        return {
            "turns": self.turns,
            "problems": self.problems,
            "n": self.n,
            "samples_min": min(self.samples_per_problem) if self.samples_per_problem else 0,
            "samples_max": max(self.samples_per_problem) if self.samples_per_problem else 0,
            "pass_at_1": self.pass_at_1,
            "pass_at_1_percent": [round(100 * v, 2) for v in self.pass_at_1],
            "change_vs_turn0_percent": [None if v is None else round(v, 2) for v in self.change_vs_turn0()],
            "mean_hidden_pass_rate": self.mean_hidden_pass_rate,
        }


def pass_table(records: Iterable[Mapping[str, Any]], *, n: int | None = PAPER_N, turns: int | None = None) -> PassTable:
    """Pass@1 per turn over evaluated records (``n`` fixed, or None for each problem's own count).

    ``turns``: how many turns to report (default: the most turns of any
    trajectory). A trajectory shorter than that counts as wrong at the turns it lacks.
    """
    per_problem: list[list[list[Any]]] = [hidden_rates(r) for r in records]
    if turns is None:
        turns = max((len(s) for rates in per_problem for s in rates), default=0)
    table = PassTable(turns=turns, problems=len(per_problem), n=n,
                      samples_per_problem=[len(r) for r in per_problem])
    if not per_problem:
        return table
    for t in range(turns):
        values, means = [], []
        for rates in per_problem:
            column = [s[t] if t < len(s) else None for s in rates]
            c = sum(is_correct(v) for v in column)
            n_here = n if n is not None else len(column)
            if c > n_here:
                raise ValueError(f"{c} correct trajectories but n={n_here}: use n=None (the run's own count)")
            values.append(pass_at_k(n_here, c, 1))
            means.append(sum(float(v) for v in column if isinstance(v, (int, float))) / len(column))
        table.pass_at_1.append(sum(values) / len(values))
        table.mean_hidden_pass_rate.append(sum(means) / len(means))
    return table


def estimator_n(profile: str, override: int | None = None) -> int | None:
    """The estimator's ``n``: ``override``, else 16 under ``paper``, else None (each problem's count)."""
    if override is not None:
        return override
    return PAPER_N if str(profile) == "paper" else None


def format_table(tables: Sequence[tuple[str, PassTable]]) -> str:
    """A markdown table: one row per turn, one Pass@1 column (and change vs turn 0) per run."""
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
    return "\n".join(lines)


def summarize(output: "str | os.PathLike", *, profile: str, pass_n: int | None) -> dict:
    """Pass@1 per turn of an evaluated records file (read back from disk, so resumed runs count whole)."""
    from cobalt.io import iter_jsonl

    records = [rec for _, rec in iter_jsonl(output)]
    n = estimator_n(profile, pass_n)
    counts = sorted({len(hidden_rates(r)) for r in records})
    table = pass_table(records, n=n)
    out = table.to_dict()
    out["profile"] = str(profile)
    out["estimator"] = "pass@1 = 1 - C(n-c,1)/C(n,1), c = trajectories with hidden pass rate 1.0 at the turn"
    if n is not None and counts and counts != [n]:
        out["note"] = (f"n is fixed at {n} (profile {profile}, as the original) but the run has {counts} samples "
                       "per problem: use --pass-n or --profile cobalt for the run's own n")
    return out
