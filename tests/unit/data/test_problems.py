"""Problem records and raw-source readers shared by the data pipeline."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cobalt.data.problems import ProblemRecord, iter_local_records, iter_problems, problem_from_dict
from cobalt.execution.base import TestCases as Cases
from cobalt.io import RecordError

REPO = Path(__file__).resolve().parents[3]
LCB_FIXTURE = REPO / "tests" / "fixtures" / "livecodebench" / "test6_sample.jsonl"


def test_record_round_trip():
    rec = ProblemRecord(
        id="p1", question="Q", public=Cases(("1",), ("2",)), hidden=Cases(("3", "4"), ("5", "6")),
        difficulty="EASY", source="x", extra={"starter_code": "s"},
    )
    d = rec.to_dict()
    assert list(d)[:3] == ["id", "difficulty", "question"]
    assert json.loads(d["test_cases"]) == {"inputs": ["1", "3", "4"], "outputs": ["2", "5", "6"]}
    back = problem_from_dict(json.loads(json.dumps(d)), path="f", line=1)
    assert back.public == rec.public and back.hidden == rec.hidden and back.extra["starter_code"] == "s"


def test_iter_problems_reports_bad_records_and_goes_on(tmp_path):
    good = ProblemRecord("a", "Q", Cases(("1",), ("1",), "f"), Cases((), (), "f")).to_dict()
    rows = [json.dumps(good), "{oops", json.dumps({"id": "b", "question": "Q"}),
            json.dumps({"id": "c", "question": "Q", "public_test_cases": '{"inputs": ["1"], "outputs": [2]}'})]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(rows) + "\n")
    errors: list[RecordError] = []
    got = list(iter_problems(path, errors))
    assert [(line, p.id) for line, p in got] == [(1, "a")]
    assert [str(e).split(str(path))[1] for e in errors] == [
        ":2: invalid JSON (Expecting property name enclosed in double quotes at column 2)",
        ":3: field 'public_test_cases': missing",
        ":4: field 'public_test_cases': public_test_cases.outputs[0]: expected a string, got int",
    ]
    with pytest.raises(RecordError):
        list(iter_problems(path))


def test_local_readers_agree(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # the first six records share one set of fields (parquet would fill a missing one with null)
    rows = [json.loads(line) for line in LCB_FIXTURE.read_text().splitlines()][:6]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "a.json").write_text(json.dumps(rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")
    want = list(enumerate(rows, 1))
    assert list(iter_local_records(tmp_path / "a.jsonl")) == want
    assert list(iter_local_records(tmp_path / "a.json")) == want
    assert list(iter_local_records(tmp_path / "a.parquet")) == want
