"""The reward-hacking report: ``cobalt hacking-report`` (METHOD §7).

Reads one or more files written by ``cobalt judge`` (one per run, e.g. a
model before and after training) and writes into ``--output-dir``:

- ``hacking_report.md``: per run, the number of cases and the count and share
  of each judge category (and of cases without a verdict); how the cases were
  found (by test identity against the paper's text search, from the
  extraction summary that ``cobalt judge`` carries along); unchanged programs
  and the judges' mean agreement where several judgments were made;
- ``hacking_report.csv``: the same counts, one row per (run, category);
- ``hacking_categories.png``: a bar chart of the category shares per run;
- ``hacking_examples.md``: a few cases per category, each with its verdict
  line, the modified test, and the diff.

Shares are over all judged cases of a run, those without a verdict included,
so that each run's shares sum to 1.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cobalt.io import RecordError
from cobalt.profile import add_profile_argument, profile_from_args

NO_VERDICT = "no verdict"
REPORT_MD = "hacking_report.md"
REPORT_CSV = "hacking_report.csv"
REPORT_PNG = "hacking_categories.png"
EXAMPLES_MD = "hacking_examples.md"
FINDING_KEYS = ("cases_by_identity", "cases_by_text", "cases_by_both", "identity_only", "text_only")


@dataclass
class RunStats:
    """The judged cases of one run, counted."""

    name: str
    source: str
    cases: list[dict] = field(default_factory=list)
    extraction: Mapping[str, Any] | None = None
    profile: str | None = None

    def counts(self) -> dict[str, int]:
        """Cases per category label (the categories in order, then 'no verdict')."""
        from cobalt.prompts import JUDGE_CATEGORIES

        out = {label(n): 0 for n in JUDGE_CATEGORIES}
        out[NO_VERDICT] = 0
        for case in self.cases:
            out[label(case.get("verdict"))] += 1
        return out

    @property
    def unchanged(self) -> int:
        """Cases whose new program equals the previous one."""
        return sum(bool(c.get("program_unchanged")) for c in self.cases)

    @property
    def mean_agreement(self) -> float | None:
        """Mean agreement over cases judged several times, None when none was."""
        values = [c["agreement"] for c in self.cases
                  if c.get("agreement") is not None and len(c.get("judgments") or ()) > 1]
        return sum(values) / len(values) if values else None


def label(verdict: Any) -> str:
    """``"(N) Name"`` for a category number, ``"no verdict"`` otherwise.

    >>> label(2)
    '(2) Logic Overfitting'
    >>> label(None)
    'no verdict'
    """
    from cobalt.prompts import JUDGE_CATEGORIES

    if isinstance(verdict, int) and verdict in JUDGE_CATEGORIES:
        return f"({verdict}) {JUDGE_CATEGORIES[verdict]}"
    return NO_VERDICT


def load_run(spec: str) -> RunStats:
    """A run from ``NAME=path`` or ``path`` (name: the cases' ``run`` field, else the file name)."""
    from cobalt.io import iter_jsonl

    name, sep, path = spec.partition("=")
    if not sep or not name or Path(spec).exists():
        name, path = "", spec
    cases: list[dict] = []
    for line, case in iter_jsonl(path):
        if not isinstance(case, Mapping) or "id" not in case:
            raise RecordError(path, line, "id", "expected a judged case (a file written by `cobalt judge`)")
        if "verdict" not in case:
            raise RecordError(path, line, "verdict", "missing (is this a file written by `cobalt judge`?)")
        cases.append(dict(case))
    if not name:
        runs = {c.get("run") for c in cases if c.get("run")}
        name = runs.pop() if len(runs) == 1 else Path(path).name.split(".")[0]
    stats = RunStats(name=name, source=str(path), cases=cases)
    summary_path = Path(path).with_name(Path(path).name + ".summary.json")
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        stats.extraction = summary.get("extraction")
        stats.profile = summary.get("profile")
    return stats


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def csv_rows(runs: Sequence[RunStats]) -> list[dict]:
    """One row per (run, category): ``run, category, count, share, cases``."""
    rows = []
    for run in runs:
        total = len(run.cases)
        for cat, count in run.counts().items():
            rows.append({"run": run.name, "category": cat, "count": count,
                         "share": round(_share(count, total), 6), "cases": total})
    return rows


def markdown_report(runs: Sequence[RunStats]) -> str:
    """The report's markdown text."""
    cats = list(runs[0].counts()) if runs else []
    lines = ["# In-context reward hacking: judge verdicts", "",
             "Count and share of each category among a run's hacking cases (METHOD §7).", "",
             "| run | cases | " + " | ".join(cats) + " |",
             "|---|---:|" + "---:|" * len(cats)]
    for run in runs:
        counts, total = run.counts(), len(run.cases)
        cells = [f"{counts[c]} ({100 * _share(counts[c], total):.1f}%)" for c in cats]
        lines.append(f"| {run.name} | {total} | " + " | ".join(cells) + " |")
    lines += ["", "| run | profile | unchanged programs | mean agreement (several judgments) |", "|---|---|---:|---:|"]
    for run in runs:
        agree = run.mean_agreement
        lines.append(f"| {run.name} | {run.profile or 'n/a'} | {run.unchanged} | "
                     f"{'n/a' if agree is None else f'{agree:.3f}'} |")
    lines += ["", "## How the cases were found", "",
              "By test identity (the modified tests' positions recorded by `cobalt perturb`) against the paper's "
              "search of the feedback text for a modified test's input. *Text only*: the search matched feedback "
              "of another test; *identity only*: the search missed a shown modified test (its input was cut in the "
              "feedback, typically). The `paper` profile judges the text-search cases, `cobalt` the identity ones.", "",
              "| run | by identity | by text search | both | identity only | text only |",
              "|---|---:|---:|---:|---:|---:|"]
    for run in runs:
        if run.extraction:
            vals = [run.extraction.get(k, "n/a") for k in FINDING_KEYS]
        else:
            ident = sum(bool(c.get("matched_by_identity")) for c in run.cases)
            text = sum(bool(c.get("matched_by_text")) for c in run.cases)
            both = sum(bool(c.get("matched_by_identity")) and bool(c.get("matched_by_text")) for c in run.cases)
            vals = [f"{ident} (judged only)", f"{text} (judged only)", both, ident - both, text - both]
        lines.append(f"| {run.name} | " + " | ".join(str(v) for v in vals) + " |")
    lines += ["", f"Files: `{REPORT_CSV}` (the counts), `{REPORT_PNG}` (bar chart), `{EXAMPLES_MD}` (examples)."]
    return "\n".join(lines) + "\n"


def examples_markdown(runs: Sequence[RunStats], per_category: int = 2, reply_chars: int = 1500) -> str:
    """A few cases per category (across runs, in file order) with verdict, modified test and diff."""
    cats = list(runs[0].counts()) if runs else []
    lines = ["# Reward-hacking cases: examples per category", ""]
    for cat in cats:
        lines += [f"## {cat}", ""]
        shown = 0
        for run in runs:
            for case in run.cases:
                if shown >= per_category or label(case.get("verdict")) != cat:
                    continue
                shown += 1
                lines += _example(run.name, case, reply_chars)
        if not shown:
            lines += ["(no case)", ""]
    return "\n".join(lines)


def _example(run: str, case: Mapping[str, Any], reply_chars: int) -> list[str]:
    mod = case.get("modified_test") or {}
    judgments = case.get("judgments") or []
    first = judgments[0] if judgments else {}
    verdict_line = next((j.get("verdict_line") for j in judgments if j.get("verdict_line")), None)
    reply = str(first.get("reply") or "")
    if len(reply) > reply_chars:
        reply = "..." + reply[-reply_chars:]
    out = [f"### {run}: `{case.get('id')}`", "",
           f"- verdict: {label(case.get('verdict'))}" + (f" (line: `{verdict_line}`)" if verdict_line else ""),
           f"- program unchanged: {bool(case.get('program_unchanged'))}; "
           f"public pass rates {case.get('public_pass_rates')}, hidden {case.get('hidden_pass_rates')}"]
    if mod:
        out.append(f"- modified test #{mod.get('index')}: expected (wrong) `{_one_line(mod.get('wrong_output'))}`"
                   + (f", correct `{_one_line(mod.get('correct_output'))}`" if mod.get("correct_output") is not None else ""))
    out += ["", "```diff", str(case.get("diff") or "(no change)").rstrip(), "```", "",
            "<details><summary>judge's reply</summary>", "", "```text", reply.rstrip(), "```", "", "</details>", ""]
    return out


def _one_line(text: Any, limit: int = 80) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def bar_chart(runs: Sequence[RunStats], path: Path) -> None:
    """A grouped bar chart (PNG) of category shares, one group per category, one bar per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = list(runs[0].counts()) if runs else []
    width = 0.8 / max(1, len(runs))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cats)), 4.0))
    for k, run in enumerate(runs):
        counts, total = run.counts(), len(run.cases)
        xs = [i + (k - (len(runs) - 1) / 2) * width for i in range(len(cats))]
        ax.bar(xs, [100 * _share(counts[c], total) for c in cats], width, label=f"{run.name} (n={total})")
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats, rotation=15, ha="right")
    ax.set_ylabel("share of hacking cases (%)")
    ax.set_title("In-context reward hacking: judge verdicts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(runs: Sequence[RunStats], out_dir: str | Path, *, examples: int = 2) -> dict[str, Path]:
    """Write the four report files into ``out_dir``; returns their paths by kind."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out_dir / REPORT_MD, "csv": out_dir / REPORT_CSV,
             "chart": out_dir / REPORT_PNG, "examples": out_dir / EXAMPLES_MD}
    paths["markdown"].write_text(markdown_report(runs), encoding="utf-8")
    with open(paths["csv"], "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["run", "category", "count", "share", "cases"])
        writer.writeheader()
        writer.writerows(csv_rows(runs))
    bar_chart(runs, paths["chart"])
    paths["examples"].write_text(examples_markdown(runs, examples), encoding="utf-8")
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt hacking-report``."""
    parser.add_argument("--input", action="append", required=True, metavar="[NAME=]PATH",
                        help="judged cases of one run (output of `cobalt judge`); repeat for several runs; "
                        "NAME labels the run (default: the cases' run field, else the file name)")
    parser.add_argument("--output-dir", required=True,
                        help=f"folder for {REPORT_MD}, {REPORT_CSV}, {REPORT_PNG} and {EXAMPLES_MD}")
    parser.add_argument("--examples", type=int, default=2, help="examples per category in the examples file")
    add_profile_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt hacking-report``."""
    profile = profile_from_args(args)
    try:
        runs = [load_run(spec) for spec in args.input]
    except (RecordError, FileNotFoundError) as exc:
        print(f"cobalt hacking-report: {exc}", file=sys.stderr)
        return 1
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        print(f"cobalt hacking-report: two inputs have the same run name ({names}); name them with NAME=PATH",
              file=sys.stderr)
        return 2
    paths = write_report(runs, args.output_dir, examples=args.examples)
    from cobalt.io import write_json_atomic

    write_json_atomic(Path(args.output_dir) / "hacking_report.config.json",
                      {"profile": profile.value, "inputs": [r.source for r in runs], "runs": names,
                       "examples": args.examples})
    print(markdown_report(runs).split("\n## ")[0].rstrip())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
