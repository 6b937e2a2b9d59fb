"""cobalt.io's reading helpers on real records: bad lines and records are named by file, line and field."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cobalt.io import (
    MAX_SAVED_ERRORS,
    RecordError,
    counts_dict,
    good_records,
    iter_jsonl,
    iter_jsonl_keep_going,
    require_field,
)

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
LEETCODE = SHARED / "leetcode" / "leetcode_problems.jsonl.gz"


@dataclass
class Tally:
    records_read: int = 0
    bad_records: int = 0
    errors: list[str] = field(default_factory=list)


def _real_lines(k: int) -> list[str]:
    """The first ``k`` lines of the real LeetCode problems file."""
    with gzip.open(LEETCODE, "rt", encoding="utf-8") as fh:
        return [next(fh).rstrip("\n") for _ in range(k)]


@pytest.fixture
def mixed_file(tmp_path) -> Path:
    """Line 1, 3 and 6: real records; 2: not JSON; 4: blank; 5: a record without its id."""
    real = _real_lines(3)
    no_id = json.loads(real[2])
    del no_id["task_id"]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([real[0], "{not json", real[1], "", json.dumps(no_id), real[2]]) + "\n")
    return path


def _parse_task_id(record, line):
    return require_field(record, "task_id", str, path="mixed.jsonl", line=line)


def test_keep_going_yields_errors_in_file_order(mixed_file):
    items = list(iter_jsonl_keep_going(mixed_file))
    assert [line for line, _ in items] == [1, 2, 3, 5, 6]
    assert isinstance(items[1][1], RecordError) and not isinstance(items[0][1], RecordError)
    assert str(items[1][1]).startswith(f"{mixed_file}:2: invalid JSON")
    # the good records are the ones iter_jsonl reads
    good = [(line, rec) for line, rec in items if not isinstance(rec, RecordError)]
    assert good == list(iter_jsonl(mixed_file, skip_bad=True))


def test_keep_going_reports_a_bad_last_line(tmp_path):
    path = tmp_path / "tail.jsonl"
    path.write_bytes(_real_lines(1)[0].encode("utf-8") + b"\n\xff\xfe broken\n")
    items = list(iter_jsonl_keep_going(path))
    assert [line for line, _ in items] == [1, 2]
    assert isinstance(items[1][1], RecordError) and items[1][1].line == 2
    assert str(items[1][1]) == f"{path}:2: not valid UTF-8 (byte 0)"


def test_good_records_counts_and_names_file_line_and_field(mixed_file, capsys):
    tally = Tally()
    real = [json.loads(line) for line in _real_lines(3)]
    got = list(good_records(iter_jsonl_keep_going(mixed_file), _parse_task_id, tally, echo=True))
    assert got == [(1, real[0]["task_id"]), (3, real[1]["task_id"]), (6, real[2]["task_id"])]
    assert (tally.records_read, tally.bad_records) == (5, 2)
    assert tally.errors[0].startswith(f"{mixed_file}:2: invalid JSON")
    assert tally.errors[1] == "mixed.jsonl:5: field 'task_id': missing"
    assert capsys.readouterr().err.splitlines() == [f"bad record skipped: {e}" for e in tally.errors]


def test_good_records_is_quiet_without_echo_and_lets_other_errors_through(mixed_file, capsys):
    tally = Tally()
    list(good_records(iter_jsonl_keep_going(mixed_file), _parse_task_id, tally))
    assert tally.bad_records == 2 and capsys.readouterr().err == ""

    def broken(record, line):
        raise KeyError("a bug, not a bad record")

    with pytest.raises(KeyError):
        list(good_records(iter_jsonl_keep_going(mixed_file), broken, Tally()))


def test_counts_dict_keeps_every_count_and_the_first_errors():
    tally = Tally(records_read=250, bad_records=150, errors=[f"f.jsonl:{i}: bad" for i in range(1, 151)])
    out = counts_dict(tally)
    assert (out["records_read"], out["bad_records"]) == (250, 150)
    assert out["errors"] == tally.errors[:MAX_SAVED_ERRORS] and len(out["errors"]) == 100
    assert len(tally.errors) == 150  # the run's own list is left whole
    json.dumps(out)


def test_settings_saved_compared_and_refused_by_name(tmp_path):
    import argparse

    from cobalt.io import config_path, resume_guard, save_settings

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1}\n')
    out = tmp_path / "out.jsonl"
    args = argparse.Namespace(input=str(src), output=str(out), seed=1, no_progress=True, max_problems=4,
                              ray_address="auto", api_key="sk-secret", base_url="http://h:1/v1", max_new_tokens=9)
    settings, error = resume_guard(args, [args.input])
    assert error is None
    assert settings == {"input": str(src.resolve()), "seed": 1, "max_new_tokens": 9}
    save_settings(out, "cobalt x", settings)
    assert "sk-secret" not in config_path(out).read_text()
    # an empty output starts over whatever its settings were
    args.seed = 2
    assert resume_guard(args, [args.input])[1] is None
    out.write_text('{"id": 1}\n')
    error = resume_guard(args, [args.input])[1]
    assert error == f"{out} was made with --seed 1, this run has 2: rerun with --seed 1, or use another --output"
    # flags that are not saved may change
    args.seed, args.max_problems, args.no_progress, args.api_key = 1, 64, False, "sk-other"
    assert resume_guard(args, [args.input])[1] is None
    # the output as an input
    args.output = str(src)
    assert "the output is also an input" in resume_guard(args, [args.input])[1]
