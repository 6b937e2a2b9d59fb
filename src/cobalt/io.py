"""JSONL input/output with clear errors and crash-safe, resumable writing.

- :func:`iter_jsonl` yields ``(line_no, record)`` and raises :class:`RecordError`
  naming the file, the line and (where known) the field;
  :func:`iter_jsonl_keep_going` yields a bad line's error in its place instead.
- :func:`good_records` is the reading loop of commands that skip bad records:
  it parses each record, counts the bad ones with their messages and goes on.
- :func:`counts_dict` is the saved form of a run's counters (the first
  :data:`MAX_SAVED_ERRORS` error messages).
- :class:`JsonlAppender` appends one record per line, flushed (and fsynced on
  close) per record, and knows which ids are already done, so a rerun resumes
  where a crash stopped without duplicates. A torn last line left by a crash is
  truncated on open.
- :func:`resume_settings` / :func:`save_settings` keep a command's flags beside
  its output (``<output>.config.json``): a rerun whose flags differ from the
  saved ones is refused with one line naming the flag, so a resumed output
  never mixes settings; :func:`same_file_error` refuses ``--input X --output X``.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

T = TypeVar("T")

MAX_SAVED_ERRORS = 100
MAX_SHOWN_ERRORS = 10
"""Error lines printed to stderr for one run; the rest are counted."""
"""Error messages kept in a saved summary (the first ones; the counts cover all)."""


class RecordError(ValueError):
    """A bad input record; the message names the file, line and field."""

    def __init__(self, path: str | os.PathLike, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field = str(path), line, field
        where = f"{path}"
        if line is not None:
            where += f":{line}"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {message}")


def _open_binary(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def iter_jsonl(path: str | os.PathLike, *, skip_bad: bool = False, errors: list | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSONL file (``.gz`` ok).

    A line that is not valid JSON raises :class:`RecordError`, or, with
    ``skip_bad``, is appended to ``errors`` and skipped.
    """
    path = Path(path)
    with _open_binary(path) as fh:
        for line_no, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                yield line_no, json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                err = RecordError(path, line_no, None, f"not valid UTF-8 (byte {exc.start})")
            except json.JSONDecodeError as exc:
                err = RecordError(path, line_no, None, f"invalid JSON ({exc.msg} at column {exc.colno})")
            else:
                continue
            if not skip_bad:
                raise err
            if errors is not None:
                errors.append(err)


def iter_jsonl_keep_going(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` like :func:`iter_jsonl`; a bad line comes as ``(line, RecordError)``.

    The errors stand in file order among the records, so a caller can count
    them and go on with the next line:

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
    ...     _ = fh.write('{"id": 1}\\nnot json\\n')
    >>> [(line, type(rec).__name__) for line, rec in iter_jsonl_keep_going(fh.name)]
    [(1, 'dict'), (2, 'RecordError')]
    >>> os.unlink(fh.name)
    """
    errors: list[RecordError] = []
    for line, record in iter_jsonl(path, skip_bad=True, errors=errors):
        while errors:
            err = errors.pop(0)
            yield err.line, err
        yield line, record
    for err in errors:
        yield err.line, err


def good_records(records: Iterable[tuple[int, Any]], parse: Callable[[Any, int], T], tally: Any, *,
                 echo: bool = False) -> Iterator[tuple[int, T]]:
    """``(line, parse(record, line))`` for each good record of ``records``; bad ones are counted and skipped.

    ``records`` yields ``(line, record)``, where a record may be the
    :class:`RecordError` of a line that could not be read (as
    :func:`iter_jsonl_keep_going` yields them); ``parse`` raises
    :class:`RecordError` on a bad record. ``tally`` is the run's counters:
    each record adds 1 to ``tally.records_read``; a bad one adds 1 to
    ``tally.bad_records`` and its message (file, line, field) to
    ``tally.errors``, and with ``echo`` a line ``bad record skipped: ...`` to
    stderr (the first :data:`MAX_SHOWN_ERRORS`, then one line saying more follow). Records that are not bad are the caller's to count.
    """
    for line, record in records:
        tally.records_read += 1
        try:
            if isinstance(record, RecordError):
                raise record
            parsed = parse(record, line)
        except RecordError as exc:
            tally.bad_records += 1
            tally.errors.append(str(exc))
            if echo and tally.bad_records <= MAX_SHOWN_ERRORS:
                print(f"bad record skipped: {exc}", file=sys.stderr)
            elif echo and tally.bad_records == MAX_SHOWN_ERRORS + 1:
                print("bad records: more are skipped without a line here; the summary counts them all",
                      file=sys.stderr)
            continue
        yield line, parsed


def counts_dict(counts: Any) -> dict:
    """JSON-ready form of a dataclass of counters: every field, ``errors`` cut to the first :data:`MAX_SAVED_ERRORS`.

    >>> @dataclasses.dataclass
    ... class Counts:
    ...     read: int = 0
    ...     errors: list = dataclasses.field(default_factory=list)
    >>> counts_dict(Counts(3, [f"e{i}" for i in range(150)]))["errors"][-1]
    'e99'
    """
    out = dataclasses.asdict(counts)
    if "errors" in out:
        out["errors"] = out["errors"][:MAX_SAVED_ERRORS]
    return out


def require_field(record: Any, name: str, types: type | tuple[type, ...], *, path: str, line: int | None) -> Any:
    """Return ``record[name]`` checked against ``types``; raise :class:`RecordError` otherwise."""
    if not isinstance(record, Mapping):
        raise RecordError(path, line, None, f"expected a JSON object, got {type(record).__name__}")
    if name not in record:
        raise RecordError(path, line, name, "missing")
    value = record[name]
    if not isinstance(value, types):
        names = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise RecordError(path, line, name, f"expected {names}, got {type(value).__name__}")
    return value


@dataclass
class JsonlAppender:
    """Append-only JSONL writer that resumes: ``done`` holds the ids already written.

    Use as a context manager. Each :meth:`write` appends one line and flushes, so
    a crash loses at most the record being written; on open, a torn final line is
    cut off before appending.
    """

    path: Path
    id_field: str = "id"

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.done: set = set()
        self._fh = None

    def __enter__(self) -> "JsonlAppender":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._repair_and_scan()
        self._fh = open(self.path, "a", encoding="utf-8")
        return self

    def _repair_and_scan(self) -> None:
        good_end = 0
        with open(self.path, "rb") as fh:
            offset = 0
            for raw in fh:
                offset += len(raw)
                if not raw.endswith(b"\n"):
                    break  # torn final line from a crash
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    break
                good_end = offset
                if isinstance(rec, Mapping) and self.id_field in rec:
                    self.done.add(_hashable(rec[self.id_field]))
        if good_end != self.path.stat().st_size:
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one JSON line and flush it. An OSError (disk full)
        names the file; a partly written line is cut off on the next open."""
        assert self._fh is not None, "use JsonlAppender as a context manager"
        try:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        if self.id_field in record:
            self.done.add(_hashable(record[self.id_field]))

    def __exit__(self, *exc_info) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:
                if exc_info[0] is None:
                    raise OSError(exc.errno, exc.strerror, str(self.path)) from None
            finally:
                try:
                    fh.close()
                except OSError:
                    pass


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, ensure_ascii=False, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


CONFIG_SUFFIX = ".config.json"
"""Suffix of the file beside an output that keeps the settings it was made with."""

UNSAVED_FLAGS = frozenset({
    "output", "out_dir", "work_dir", "no_progress",
    # scope: how many records this call takes on, never how each is made
    "limit",
    # concurrency: how much runs at once, never what comes out
    "max_problems", "max_requests", "eval_concurrency", "workers", "concurrency", "max_in_flight", "batch_size",
    "window",
    # transport: how long a caller waits or retries; a call that fails is an error, never a result
    "timeout", "eval_timeout", "max_retries", "retries", "backoff",
    # placement of the model on the hardware
    "device", "tensor_parallel_size",
    # free-form KEY=VALUE engine options may carry a key or an address
    "engine_option",
})
"""Flags never saved nor compared on resume (addresses and credentials are recognised by name)."""

_ADDRESS_OR_SECRET = re.compile(r"(^|_)(address|url|host|port|region_name|key|key_id|secret|secret_access_key|"
                                r"password|token|api_key)$")


def config_path(output: str | os.PathLike) -> Path:
    """``<output>.config.json``: where the settings of the run that made ``output`` are kept."""
    output = Path(output)
    return output.with_name(output.name + CONFIG_SUFFIX)


def saved_flag(name: str) -> bool:
    """True when flag ``name`` (argparse dest) is saved beside the output and must agree on resume.

    >>> [saved_flag(n) for n in ("seed", "no_progress", "ray_address", "api_key", "max_new_tokens", "base_url")]
    [True, False, False, False, True, False]
    """
    return name not in UNSAVED_FLAGS and not _ADDRESS_OR_SECRET.search(name)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def run_settings(args: Any, **resolved: Any) -> dict:
    """The saved settings of a run: every saved flag of ``args`` (see :func:`saved_flag`), then ``resolved``.

    ``resolved`` replaces flags whose parsed value is not what the run uses
    (``profile=None`` resolved from the environment, an input path made absolute).
    Paths of ``input``-like flags that exist are saved absolute so a rerun from
    another folder compares equal (a hub data set name stays as given).
    """
    out = {}
    for name, value in sorted(vars(args).items()):
        if not saved_flag(name):
            continue
        if (name in ("input", "data", "first_turn_from", "template_dir", "problems")
                and isinstance(value, (str, os.PathLike)) and os.path.exists(value)):
            value = os.path.abspath(value)
        out[name] = _jsonable(value)
    out.update({k: _jsonable(v) for k, v in resolved.items()})
    return out


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def resume_settings(output: str | os.PathLike, settings: Mapping[str, Any]) -> str | None:
    """One line naming the first setting that differs from the run that made ``output``, else None.

    Only an ``output`` that holds records is checked (an empty or missing one
    starts over); a setting the earlier run did not save is not compared.
    """
    output = Path(output)
    path = config_path(output)
    if not output.exists() or output.stat().st_size == 0 or not path.exists():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8")).get("settings")
    except (OSError, json.JSONDecodeError, AttributeError):
        return f"{path}: unreadable, so {output} cannot be resumed safely; delete both to start over"
    if not isinstance(saved, Mapping):
        return None
    for name in sorted(settings):
        if name in saved and saved[name] != _jsonable(settings[name]):
            return (f"{output} was made with {_flag(name)} {saved[name]!r}, this run has {settings[name]!r}: "
                    f"rerun with {_flag(name)} {saved[name]!r}, or use another --output")
    return None


def save_settings(output: str | os.PathLike, command: str, settings: Mapping[str, Any],
                  extra: Mapping[str, Any] | None = None) -> None:
    """Write ``settings`` (and ``extra`` keys) into ``<output>.config.json``, keeping its other keys."""
    path = config_path(output)
    current: dict = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            current = loaded if isinstance(loaded, dict) else {}
        except (OSError, json.JSONDecodeError):
            current = {}
    current.update({"command": command, "settings": _jsonable(dict(settings))})
    current.update(extra or {})
    write_json_atomic(path, current)


def same_file_error(inputs: Iterable[str | os.PathLike | None], output: str | os.PathLike) -> str | None:
    """One line when ``output`` is one of ``inputs`` (reading and appending one file), else None."""
    out = Path(output)
    for item in inputs:
        if item is None:
            continue
        src = Path(item)
        same = (src.exists() and out.exists() and os.path.samefile(src, out)) or src.resolve() == out.resolve()
        if same:
            return f"{output}: the output is also an input; write to another --output"
    return None


def resume_guard(args: Any, inputs: Iterable[str | os.PathLike | None], **resolved: Any) -> tuple[dict, str | None]:
    """``(settings, error)`` of a command about to append to ``args.output``.

    ``settings`` is :func:`run_settings` of ``args`` (with ``resolved``);
    ``error`` is one line when the output is also an input or was made with
    other settings (:func:`same_file_error`, :func:`resume_settings`), else
    None. Save ``settings`` with :func:`save_settings` once the run starts.
    """
    settings = run_settings(args, **resolved)
    error = same_file_error(inputs, args.output) or resume_settings(args.output, settings)
    return settings, error


def check_unique_id(rid: Any, seen: dict, *, path: str | os.PathLike, line: int) -> None:
    """Note that id ``rid`` is at ``line`` of ``path``; a :class:`RecordError` naming both lines when it was seen."""
    if rid is None:
        return
    key = json.dumps(rid, sort_keys=True)
    if key in seen:
        raise RecordError(path, line, "id", f"duplicate problem id {rid!r} (first at line {seen[key]}); "
                          "each problem must appear once")
    seen[key] = line


def count_unique_records(path: str | os.PathLike, id_field: str = "id") -> int:
    """The number of records of a JSONL input; :class:`RecordError` on a bad line or an id seen twice (file:line).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
    ...     _ = fh.write('{"id": "a"}\\n{"id": "b"}\\n{"id": "a"}\\n')
    >>> count_unique_records(fh.name)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    cobalt.io.RecordError: ...:3: field 'id': duplicate problem id 'a' (first at line 1); each problem must appear once
    >>> os.unlink(fh.name)
    """
    return count_unique(iter_jsonl(path), path, id_field)


def count_unique(records: Iterable[tuple[int, Any]], path: str | os.PathLike, id_field: str = "id") -> int:
    """The number of ``(line, record)`` pairs of ``records`` (read from ``path``); :class:`RecordError`
    when an id comes twice (records that are not objects are counted, not checked)."""
    seen: dict = {}
    count = 0
    for line, record in records:
        count += 1
        if isinstance(record, Mapping):
            check_unique_id(record.get(id_field), seen, path=path, line=line)
    return count


def empty_input_warning(command: str, path: str | os.PathLike) -> str:
    """The one-line warning of a command whose input holds no records (it then exits 1)."""
    return f"{command}: warning: {path} holds no records; nothing to do"
