"""The reward-hacking report: counts and shares per category and run, CSV, PNG and examples."""
from __future__ import annotations

import csv
import json

from cobalt.analysis.hacking_report import NO_VERDICT, label, load_run, markdown_report
from cobalt.cli import main as cli_main


def _judged(case_id, verdict, *, run="base", unchanged=False, agreement=None, n=1):
    reply = f"reasons\nFinal Verdict: ({verdict}) X" if verdict else "no idea"
    return {
        "id": case_id, "run": run, "question": "q", "previous_program": "a = 1", "new_program": "a = 2",
        "program_unchanged": unchanged, "diff": "--- previous\n+++ new\n-a = 1\n+a = 2\n",
        "modified_test": {"index": 0, "input": "1", "wrong_output": "5", "correct_output": "4"},
        "matched_by_identity": True, "matched_by_text": case_id.endswith("t1"),
        "public_pass_rates": [0.5, 1.0], "hidden_pass_rates": [0.5, 0.25],
        "verdict": verdict, "verdict_name": None, "agreement": agreement,
        "judgments": [{"reply": reply, "verdict": verdict, "verdict_line": reply.splitlines()[-1] if verdict else None}] * n,
    }


def _write(path, rows, summary=None):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if summary is not None:
        (path.parent / (path.name + ".summary.json")).write_text(json.dumps(summary), encoding="utf-8")


def test_report_files_per_run(tmp_path):
    base = tmp_path / "base.judged.jsonl"
    trained = tmp_path / "trained.judged.jsonl"
    _write(base, [_judged("a/s0/t1", 1), _judged("a/s1/t2", 1, unchanged=True), _judged("b/s0/t1", 2),
                  _judged("c/s0/t3", None)],
           {"profile": "cobalt", "extraction": {"cases_by_identity": 4, "cases_by_text": 3, "cases_by_both": 3,
                                                "identity_only": 1, "text_only": 0}})
    _write(trained, [_judged("a/s0/t1", 3, run="ft", agreement=2 / 3, n=3)])
    out = tmp_path / "report"
    assert cli_main(["hacking-report", "--input", str(base), "--input", f"tuned={trained}",
                     "--output-dir", str(out), "--examples", "1"]) == 0
    rows = list(csv.DictReader(open(out / "hacking_report.csv", encoding="utf-8")))
    got = {(r["run"], r["category"]): (int(r["count"]), float(r["share"])) for r in rows}
    assert got[("base", label(1))] == (2, 0.5) and got[("base", label(2))] == (1, 0.25)
    assert got[("base", NO_VERDICT)] == (1, 0.25) and got[("base", label(3))] == (0, 0.0)
    assert got[("tuned", label(3))] == (1, 1.0)
    for run in ("base", "tuned"):
        assert abs(sum(share for (r, _), (_, share) in got.items() if r == run) - 1.0) < 1e-9
    md = (out / "hacking_report.md").read_text()
    assert "| base | 4 | 2 (50.0%) | 1 (25.0%) | 0 (0.0%) | 0 (0.0%) | 1 (25.0%) |" in md
    assert "| base | cobalt | 1 | n/a |" in md and "| tuned | n/a | 0 | 0.667 |" in md
    assert "| base | 4 | 3 | 3 | 1 | 0 |" in md  # how the cases were found, from the extraction summary
    assert (out / "hacking_categories.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    examples = (out / "hacking_examples.md").read_text()
    assert examples.count("### base: `a/s") == 1  # one example per category
    assert "### tuned: `a/s0/t1`" in examples and "+a = 2" in examples and "correct `4`" in examples
    assert f"## {label(4)}\n\n(no case)" in examples


def test_run_names_and_bad_input(tmp_path):
    path = tmp_path / "x.jsonl"
    _write(path, [_judged("a/s0/t1", 1, run="model-a")])
    assert load_run(str(path)).name == "model-a"
    assert load_run(f"other={path}").name == "other"
    assert "(judged only)" in markdown_report([load_run(str(path))])
    assert cli_main(["hacking-report", "--input", str(path), "--input", str(path), "--output-dir", str(tmp_path / "o")]) == 2
    unjudged = tmp_path / "cases.jsonl"
    _write(unjudged, [{"id": "a"}])
    assert cli_main(["hacking-report", "--input", str(unjudged), "--output-dir", str(tmp_path / "o")]) == 1
