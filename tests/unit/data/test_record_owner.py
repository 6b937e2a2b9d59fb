"""One owner of the inference record: cobalt.data.records writes and reads it.

- docs/TRAJECTORIES.md's field tables list exactly the module's fields;
- a record without a schema version reads as version 1, one with an unknown version is refused;
- no other module of src/cobalt reads a record field by hand (AST check).
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import cobalt
from cobalt.data import records
from cobalt.data.records import (
    SCHEMA_FIELD,
    SCHEMA_VERSION,
    TrajectoryRecord,
    hidden_rates,
    inference_record,
    public_field,
    read_first_turns,
    record_version,
    turn_dict,
)
from cobalt.io import RecordError

SRC = Path(cobalt.__file__).resolve().parent
DOC = SRC.parents[1] / "docs" / "TRAJECTORIES.md"
RECORD_KEYS = ("samples", "hidden_pass_rate", "public_pass_rate", SCHEMA_FIELD)
"""Keys that only an inference record has (``turns`` is left out: summaries use it too)."""


def doc_tables() -> list[list[str]]:
    """Field names of the tables in section 1 of docs/TRAJECTORIES.md, table by table."""
    section = DOC.read_text(encoding="utf-8").split("## 1.")[1].split("\n## ")[0]
    tables, current = [], []
    for line in section.splitlines():
        m = re.match(r"^\| `([a-z_]+)` \|", line)
        if m:
            current.append(m.group(1))
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def test_trajectories_doc_lists_the_record_modules_fields():
    record_fields, turn_fields = doc_tables()
    assert record_fields == list(records.RECORD_FIELDS)
    assert turn_fields == list(records.TURN_FIELDS)


def _problem() -> dict:
    return {"id": "p1", "question": "Print 1.", "public_test_cases": json.dumps({"inputs": ["", ""], "outputs": ["1", "1"]}),
            "hidden_test_cases": json.dumps({"inputs": [""], "outputs": ["1"]})}


def _record() -> dict:
    turn = turn_dict("```python\nprint(1)\n```", "print(1)\n", public_field([True, False], ["ok", "bad"]),
                     finish_reason="stop", completion_tokens=7, engine=True)
    return inference_record({**_problem(), "samples": "old", "hidden_eval": {}}, [{"turns": [turn]}],
                            enable_thinking=False)


def test_written_record_has_the_version_and_only_documented_fields():
    rec = _record()
    assert rec[SCHEMA_FIELD] == SCHEMA_VERSION == 2 and "hidden_eval" not in rec
    assert set(rec) <= set(records.RECORD_FIELDS)
    (turn,) = rec["samples"][0]["turns"]
    assert set(turn) <= set(records.TURN_FIELDS) and turn["public_pass_rate"] == 0.5
    assert record_version(rec, path="x", line=1) == 2


def test_a_record_without_a_version_reads_as_version_1():
    rec = _record()
    del rec[SCHEMA_FIELD]
    assert record_version(rec, path="old.jsonl", line=3) == 1
    assert read_first_turns(rec, path="old.jsonl", line=3)[0]["code"] == "print(1)\n"
    evaluated = {**rec, "samples": [{"turns": [{**rec["samples"][0]["turns"][0], "hidden_pass_rate": 1.0}]}]}
    assert hidden_rates(evaluated, require=True) == [[1.0]]
    assert TrajectoryRecord.from_dict(evaluated, path="old.jsonl", line=3).samples[0].turns[0].hidden_pass_rate == 1.0


@pytest.mark.parametrize("bad", [3, 0, "2", True])
def test_an_unknown_version_is_refused_naming_file_line_and_field(bad):
    rec = {**_record(), SCHEMA_FIELD: bad}
    with pytest.raises(RecordError, match=r"new\.jsonl:9: field 'schema_version'"):
        read_first_turns(rec, path="new.jsonl", line=9)


def test_unevaluated_turn_is_named():
    with pytest.raises(RecordError, match=r"samples\[0\]\.turns\[0\]\.hidden_pass_rate.*cobalt eval"):
        hidden_rates(_record(), path="r.jsonl", line=1, require=True)


def record_reads(source: str) -> list[int]:
    """Lines that read a record-only key: ``x["samples"]`` or ``x.get("samples")`` (and the like)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if key in RECORD_KEYS:
            lines.append(node.lineno)
    return lines


def test_the_finder_sees_subscripts_and_gets():
    assert record_reads('a = r["samples"]\nb = t.get("hidden_pass_rate")\nc = s["turns"]\nd = x.get("n")\n') == [1, 2]


def test_no_record_parsing_outside_the_record_module():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "data" / "records.py":
            continue
        offenders += [f"{path.relative_to(SRC)}:{n}" for n in record_reads(path.read_text(encoding="utf-8"))]
    assert not offenders, "inference-record fields read outside cobalt.data.records:\n" + "\n".join(offenders)
