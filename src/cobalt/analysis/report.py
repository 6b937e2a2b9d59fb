"""`cobalt report`: Pass@1 per turn of one or more evaluated runs, side by side.

Input: evaluated inference records (the output of ``cobalt eval``), one file per
run. Output, in ``--output-dir``: ``pass_at_1.md`` (markdown table: Pass@1 per turn
and its change against turn 0 as a percentage of turn 0, one column pair per
run), ``pass_at_1.csv`` (one row per run and turn) and ``pass_at_1.png`` (Pass@1
against the turn, runs overlaid, as in the paper's figures). Each run's table
is the one ``cobalt eval`` printed for its file (n = the samples drawn for each
problem; the profile is the one the file was made with, read from the file);
what a table left out is printed on stderr and listed under it.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Sequence

from cobalt.cli_support import add_alias

REPORT_STEM = "pass_at_1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt report``."""
    parser.add_argument("runs", nargs="+", help="evaluated records (JSONL) of each run, as written by cobalt eval")
    parser.add_argument("--labels", nargs="+", default=None,
                        help="one label per run (default: the file names)")
    parser.add_argument("--output-dir", dest="out_dir", required=True, help="folder for pass_at_1.md, .csv and .png")
    add_alias(parser, "--out-dir", dest="out_dir")
    parser.add_argument("--title", default="Pass@1 per turn", help="plot title")
    parser.add_argument("--note", default=None, help="a line printed under the table (e.g. what the model is)")


def load_table(path: str | Path, *, flagged: list[str] | None = None):
    """The :class:`cobalt.evaluation.passk.PassTable` of one evaluated records file (as ``cobalt eval`` makes it).

    A record whose public feedback holds an evaluator-failure text is left out of
    the table and described in ``flagged`` when given.
    """
    from cobalt.evaluation.passk import load_pass_table

    return load_pass_table(path, flagged=flagged)


def write_csv(path: Path, tables: Sequence[tuple[str, object]]) -> None:
    """One row per run and turn: run, turn, pass_at_1 (percent), change vs turn 0 (percent), problems,
    the fewest and most samples per problem (the estimator's n) and the file's profile."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run", "turn", "pass_at_1_percent", "change_vs_turn0_percent", "mean_hidden_pass_rate",
                         "problems", "samples_min", "samples_max", "profile"])
        for label, table in tables:
            changes = table.change_vs_turn0()
            for t in range(table.turns):
                writer.writerow([label, t, f"{100 * table.pass_at_1[t]:.4f}",
                                 "" if changes[t] is None else f"{changes[t]:.4f}",
                                 f"{table.mean_hidden_pass_rate[t]:.6f}", table.problems,
                                 table.samples_min, table.samples_max, table.profile or ""])


def plot(path: Path, tables: Sequence[tuple[str, object]], title: str) -> None:
    """PNG of Pass@1 (percent) against the turn, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    markers = "osD^v<>p*h"
    for i, (label, table) in enumerate(tables):
        ax.plot(range(table.turns), [100 * v for v in table.pass_at_1], marker=markers[i % len(markers)],
                label=f"{label} ({table.n_text()}, profile {table.profile or 'not recorded'})")
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
                 title: str = "Pass@1 per turn", note: str | None = None) -> dict:
    """Write the markdown table, CSV and PNG for ``runs``; return their paths and the markdown."""
    from cobalt.evaluation.passk import format_table

    if labels is not None and len(labels) != len(runs):
        raise ValueError(f"{len(labels)} labels for {len(runs)} runs")
    labels = list(labels) if labels is not None else [Path(r).name.split(".")[0] for r in runs]
    flagged: list[str] = []
    tables = [(label, load_table(run, flagged=flagged)) for label, run in zip(labels, runs)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body = format_table(tables)
    lines = [f"# {title}", "", body, ""]
    for label, table in tables:
        lines += [f"- {label}: {line}" for line in table.notes()]
    if flagged:
        lines += ["", f"{len(flagged)} record(s) left out: their rollout fed an evaluator failure to the model "
                  "(see the flagged list)."]
    if note:
        lines += ["", note]
    markdown = "\n".join(lines) + "\n"
    md_path, csv_path, png_path = (out_dir / f"{REPORT_STEM}.{ext}" for ext in ("md", "csv", "png"))
    md_path.write_text(markdown, encoding="utf-8")
    write_csv(csv_path, tables)
    plot(png_path, tables, title)
    return {"markdown": markdown, "table": body, "notes": [(label, t.notes()) for label, t in tables],
            "md": str(md_path), "csv": str(csv_path), "png": str(png_path),
            "tables": {label: table.to_dict() for label, table in tables}, "flagged": flagged}


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt report``."""
    from cobalt.io import RecordError, count_unique_records, empty_input_warning

    for path in args.runs:
        if not Path(path).exists():
            print(f"cobalt report: {path}: no such file", file=sys.stderr)
            return 2
    try:
        empty = [path for path in args.runs if count_unique_records(path) == 0]
        if empty:
            for path in empty:
                print(empty_input_warning("cobalt report", path), file=sys.stderr)
            return 1
        result = write_report(args.runs, args.out_dir, labels=args.labels, title=args.title, note=args.note)
    except (RecordError, ValueError) as exc:
        print(f"cobalt report: {exc}", file=sys.stderr)
        return 1
    for label, notes in result["notes"]:
        for line in notes:
            print(f"cobalt report: note: {label}: {line}", file=sys.stderr)
    print(result["markdown"])
    print(f"wrote {result['md']}, {result['csv']}, {result['png']}", file=sys.stderr)
    for line in result["flagged"][:10]:
        print(f"cobalt report: {line}", file=sys.stderr)
    if result["flagged"]:
        print(f"cobalt report: {len(result['flagged'])} record(s) flagged and left out of the table", file=sys.stderr)
        return 1
    return 0
