"""`cobalt report`: Pass@1 per turn of one or more evaluated runs, side by side.

Input: evaluated inference records (the output of ``cobalt eval``), one file per
run. Output, in ``--out-dir``: ``pass_at_1.md`` (markdown table: Pass@1 per turn
and its change against turn 0 as a percentage of turn 0, one column pair per
run), ``pass_at_1.csv`` (one row per run and turn) and ``pass_at_1.png`` (Pass@1
against the turn, runs overlaid, as in the paper's figures).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Sequence

from cobalt.profile import add_profile_argument

REPORT_STEM = "pass_at_1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt report``."""
    parser.add_argument("runs", nargs="+", help="evaluated records (JSONL) of each run, as written by cobalt eval")
    parser.add_argument("--labels", nargs="+", default=None,
                        help="one label per run (default: the file names)")
    parser.add_argument("--out-dir", required=True, help="folder for pass_at_1.md, .csv and .png")
    parser.add_argument("--title", default="Pass@1 per turn", help="plot title")
    parser.add_argument("--note", default=None, help="a line printed under the table (e.g. what the model is)")
    parser.add_argument("--pass-n", type=int, default=None,
                        help="n of the estimator (default: 16 under --profile paper, each problem's own count under cobalt)")
    add_profile_argument(parser)


def load_table(path: str | Path, *, profile: str, pass_n: int | None):
    """The :class:`cobalt.evaluation.passk.PassTable` of one evaluated records file."""
    from cobalt.evaluation.passk import estimator_n, pass_table
    from cobalt.data.records import hidden_rates
    from cobalt.io import iter_jsonl

    records = []
    for line, rec in iter_jsonl(path):
        hidden_rates(rec, path=str(path), line=line, require=True)
        records.append(rec)
    return pass_table(records, n=estimator_n(profile, pass_n))


def write_csv(path: Path, tables: Sequence[tuple[str, object]]) -> None:
    """One row per run and turn: run, turn, pass_at_1 (percent), change vs turn 0 (percent), problems, n."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run", "turn", "pass_at_1_percent", "change_vs_turn0_percent", "mean_hidden_pass_rate",
                         "problems", "n"])
        for label, table in tables:
            changes = table.change_vs_turn0()
            for t in range(table.turns):
                writer.writerow([label, t, f"{100 * table.pass_at_1[t]:.4f}",
                                 "" if changes[t] is None else f"{changes[t]:.4f}",
                                 f"{table.mean_hidden_pass_rate[t]:.6f}", table.problems,
                                 table.n if table.n is not None else "per-problem"])


def plot(path: Path, tables: Sequence[tuple[str, object]], title: str) -> None:
    """PNG of Pass@1 (percent) against the turn, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    markers = "osD^v<>p*h"
    for i, (label, table) in enumerate(tables):
        ax.plot(range(table.turns), [100 * v for v in table.pass_at_1], marker=markers[i % len(markers)],
                label=label)
    ax.set_xlabel("turn (0 = first program)")
    ax.set_ylabel("Pass@1 (%)")
    ax.set_title(title)
    turns = max((t.turns for _, t in tables), default=1)
    ax.set_xticks(range(turns))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(runs: Sequence[str | Path], out_dir: str | Path, *, labels: Sequence[str] | None = None,
                 profile: str = "paper", pass_n: int | None = None, title: str = "Pass@1 per turn",
                 note: str | None = None) -> dict:
    """Write the markdown table, CSV and PNG for ``runs``; return their paths and the markdown."""
    from cobalt.evaluation.passk import format_table

    if labels is not None and len(labels) != len(runs):
        raise ValueError(f"{len(labels)} labels for {len(runs)} runs")
    labels = list(labels) if labels is not None else [Path(r).name.split(".")[0] for r in runs]
    tables = [(label, load_table(run, profile=profile, pass_n=pass_n)) for label, run in zip(labels, runs)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body = format_table(tables)
    lines = [f"# {title}", "", body, ""]
    for label, table in tables:
        n = table.n if table.n is not None else "each problem's own sample count"
        lines.append(f"- {label}: {table.problems} problems, n = {n} (profile {profile})")
    if note:
        lines += ["", note]
    markdown = "\n".join(lines) + "\n"
    md_path, csv_path, png_path = (out_dir / f"{REPORT_STEM}.{ext}" for ext in ("md", "csv", "png"))
    md_path.write_text(markdown, encoding="utf-8")
    write_csv(csv_path, tables)
    plot(png_path, tables, title)
    return {"markdown": markdown, "table": body, "md": str(md_path), "csv": str(csv_path), "png": str(png_path),
            "tables": {label: table.to_dict() for label, table in tables}}


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt report``."""
    from cobalt.io import RecordError
    from cobalt.profile import profile_from_args

    for path in args.runs:
        if not Path(path).exists():
            print(f"cobalt report: {path}: no such file", file=sys.stderr)
            return 2
    try:
        result = write_report(args.runs, args.out_dir, labels=args.labels, profile=str(profile_from_args(args)),
                              pass_n=args.pass_n, title=args.title, note=args.note)
    except (RecordError, ValueError) as exc:
        print(f"cobalt report: {exc}", file=sys.stderr)
        return 1
    print(result["markdown"])
    print(f"wrote {result['md']}, {result['csv']}, {result['png']}", file=sys.stderr)
    return 0
