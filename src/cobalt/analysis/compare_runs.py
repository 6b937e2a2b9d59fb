"""`cobalt compare-runs`: is run B better than run A beyond noise? (paired bootstrap over problems)

Input: two evaluated record files (``cobalt eval`` output) of the same problems,
e.g. the base and the trained model with the same seeds. Per problem and turn,
Pass@1 is the share of its trajectories whose hidden pass rate is 1.0 at that
turn (each problem's own sample count: the unbiased pass@1 estimate). The
difference B - A of the mean over problems gets a 95% interval from a paired
bootstrap: problems are drawn with replacement (the same draw for both runs),
``--resamples`` times, and the 2.5th and 97.5th percentiles of the resampled
differences are the bounds. "Beyond noise" means the interval excludes 0.

The repair rate of turn t is P(pass at t | fail at t-1), pooled over every
trajectory of the run (failures at t-1 that pass at t, over failures at t-1),
with a bootstrap interval over problems as well.

``--noise RUN``: a second run of model A with another seed set; A against it
is printed as the noise floor. Output: markdown on stdout, and with ``--out``
a JSON file of every figure.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

DEFAULT_RESAMPLES = 10_000
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval."""

    value: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class TurnRow:
    """One turn of a comparison: Pass@1 of A and B, B - A, and the repair rates (turn > 0)."""

    turn: int
    pass_a: float
    pass_b: float
    diff: Interval
    repair_a: Interval | None
    repair_b: Interval | None
    repair_diff: Interval | None


def correct_matrix(record: Mapping, turns: int) -> np.ndarray:
    """samples x turns booleans: hidden pass rate 1.0 (a missing turn counts as wrong)."""
    from cobalt.data.records import hidden_rates
    from cobalt.evaluation.passk import is_correct

    rows = []
    for rates in hidden_rates(record):
        rows.append([t < len(rates) and is_correct(rates[t]) for t in range(turns)])
    return np.array(rows, dtype=bool).reshape(len(rows), turns)


def load_run(path: str | Path) -> dict[str, Mapping]:
    """{problem id: evaluated record}; errors name the file, line and field."""
    from cobalt.data.records import hidden_rates
    from cobalt.io import RecordError, iter_jsonl

    out: dict[str, Mapping] = {}
    for line, rec in iter_jsonl(path):
        hidden_rates(rec, path=str(path), line=line, require=True)
        pid = str(rec.get("id"))
        if pid in out:
            raise RecordError(path, line, "id", f"problem {pid} appears twice")
        out[pid] = rec
    return out


def paired(a: Mapping[str, Mapping], b: Mapping[str, Mapping], names: tuple[str, str]) -> list[str]:
    """The problem ids of both runs, sorted; refuses runs of different problems."""
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b))[:3], sorted(set(b) - set(a))[:3]
        raise ValueError(f"{names[0]} and {names[1]} hold different problems (only in the first: {only_a}, "
                         f"only in the second: {only_b})")
    return sorted(a)


def bootstrap_indices(n_problems: int, resamples: int, seed: int) -> np.ndarray:
    """resamples x n_problems indices drawn with replacement (one draw shared by every statistic)."""
    return np.random.default_rng(seed).integers(0, n_problems, size=(resamples, n_problems))


def percentile_interval(value: float, draws: np.ndarray) -> Interval:
    """``value`` with the central 95% of ``draws`` (NaN draws, from empty resamples, dropped)."""
    draws = draws[~np.isnan(draws)]
    tail = (1 - LEVEL) / 2 * 100
    low, high = (np.percentile(draws, [tail, 100 - tail]) if draws.size else (np.nan, np.nan))
    return Interval(float(value), float(low), float(high))


def ratio_draws(num: np.ndarray, den: np.ndarray, idx: np.ndarray) -> tuple[float, np.ndarray]:
    """The pooled ratio sum(num)/sum(den) and its bootstrap draws (NaN where a draw has no denominator)."""
    value = float(num.sum() / den.sum()) if den.sum() else float("nan")
    d = den[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return value, np.where(d > 0, num[idx].sum(axis=1) / np.where(d > 0, d, 1), np.nan)


def compare(a: Mapping[str, Mapping], b: Mapping[str, Mapping], *, names: tuple[str, str] = ("A", "B"),
            resamples: int = DEFAULT_RESAMPLES, seed: int = 0, turns: int | None = None) -> list[TurnRow]:
    """Per turn: Pass@1 of both runs, B - A with a paired bootstrap interval, repair rates."""
    ids = paired(a, b, names)
    if not ids:
        raise ValueError("no problems to compare")
    if turns is None:
        from cobalt.data.records import hidden_rates

        turns = max(len(rates) for run in (a, b) for r in run.values() for rates in hidden_rates(r))
    mats = {k: [correct_matrix(run[i], turns) for i in ids] for k, run in (("a", a), ("b", b))}
    idx = bootstrap_indices(len(ids), resamples, seed)
    rows = []
    for t in range(turns):
        pa = np.array([m[:, t].mean() for m in mats["a"]])
        pb = np.array([m[:, t].mean() for m in mats["b"]])
        diff = percentile_interval(float((pb - pa).mean()), (pb - pa)[idx].mean(axis=1))
        repair = {}
        if t > 0:
            for k in ("a", "b"):
                fail = np.array([(~m[:, t - 1]).sum() for m in mats[k]], dtype=float)
                fixed = np.array([(~m[:, t - 1] & m[:, t]).sum() for m in mats[k]], dtype=float)
                repair[k] = ratio_draws(fixed, fail, idx)
        rows.append(TurnRow(
            turn=t, pass_a=float(pa.mean()), pass_b=float(pb.mean()), diff=diff,
            repair_a=percentile_interval(*repair["a"]) if repair else None,
            repair_b=percentile_interval(*repair["b"]) if repair else None,
            repair_diff=percentile_interval(repair["b"][0] - repair["a"][0], repair["b"][1] - repair["a"][1])
            if repair else None,
        ))
    return rows


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.1f}"


def _ci(iv: Interval | None, signed: bool = False) -> str:
    if iv is None:
        return "-"
    fmt = (lambda x: "n/a" if x != x else f"{100 * x:+.1f}") if signed else _pct
    mark = " *" if signed and iv.excludes_zero else ""
    return f"{fmt(iv.value)} [{fmt(iv.low)}, {fmt(iv.high)}]{mark}"


def format_rows(rows: Sequence[TurnRow], names: tuple[str, str], problems: int, resamples: int) -> str:
    """A markdown table of a comparison (percentages; * marks an interval that excludes 0)."""
    a, b = names
    lines = [f"| turn | Pass@1 {a} | Pass@1 {b} | {b} - {a} [95% CI] | repair {a} | repair {b} | repair {b} - {a} |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.turn} | {_pct(r.pass_a)} | {_pct(r.pass_b)} | {_ci(r.diff, True)} | {_ci(r.repair_a)} | "
                     f"{_ci(r.repair_b)} | {_ci(r.repair_diff, True)} |")
    lines.append(f"\n{problems} problems, paired bootstrap over problems, {resamples} resamples; "
                 "repair = P(pass at t | fail at t-1); * = the 95% interval excludes 0.")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt compare-runs``."""
    parser.add_argument("run_a", help="evaluated records of run A (e.g. the base model)")
    parser.add_argument("run_b", help="evaluated records of run B (e.g. the trained model), same problems")
    parser.add_argument("--labels", nargs=2, default=("base", "trained"), help="names of A and B")
    parser.add_argument("--noise", default=None,
                        help="evaluated records of model A with a second seed set: A against it is the noise floor")
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--out", default=None, help="write every figure as JSON here")


def run(args: argparse.Namespace) -> int:
    """Print the comparison (and the noise floor); write the JSON."""
    names = tuple(args.labels)
    a, b = load_run(args.run_a), load_run(args.run_b)
    rows = compare(a, b, names=names, resamples=args.resamples, seed=args.seed)
    print(f"## {names[1]} vs {names[0]}\n")
    print(format_rows(rows, names, len(a), args.resamples))
    result = {"names": names, "problems": len(a), "resamples": args.resamples, "seed": args.seed,
              "rows": [asdict(r) for r in rows]}
    if args.noise:
        noise_names = (names[0], f"{names[0]} (seed set 2)")
        noise = compare(a, load_run(args.noise), names=noise_names, resamples=args.resamples, seed=args.seed)
        print(f"\n## noise floor: {noise_names[1]} vs {noise_names[0]}\n")
        print(format_rows(noise, noise_names, len(a), args.resamples))
        result["noise"] = [asdict(r) for r in noise]
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"\ncompare-runs: figures in {args.out}", file=sys.stderr)
    return 0
