"""Prepare LiveCodeBench release test6 (``test6.jsonl``) as Cobalt problems (METHOD §4).

For each record: the public tests (a JSON list of ``{input, output, testtype}``)
and the private ones (base64 -> zlib -> pickle -> JSON) become the public and
hidden test sets; the statement is cut before its first worked example and put
in the instruction template. Two rules depend on ``--profile``:

- the cut (METHOD §9). ``paper``: at the exact marker ``"\nExample 1:\n\n"``,
  else at ``"\nSample Input 1\n\n"``, else nothing is cut; the text before the
  marker is kept as it is. ``cobalt``: at the earliest of "Example 1:" and
  "Sample Input 1" wherever they stand (so a statement whose marker is followed
  by one newline, or uses Windows line ends, is still cut), line ends
  normalised and trailing blanks removed;
- functional problems (``metadata.func_name``). ``paper`` (``--functional stdin``):
  their tests are plain stdin tests without a function name and the statement
  gets no starter code, as in the original. ``cobalt`` (``--functional call``):
  the tests keep ``fn_name`` and are judged call-based (JSON arguments, values
  compared), and the starter code is appended to the statement.

Unpickling downloaded data can run arbitrary code. The private tests are
therefore checked opcode by opcode first (only the opcodes of a plain string
pass, see :func:`check_string_opcodes`), then read with
:class:`StringOnlyUnpickler`, which refuses every global (so no callable can be
reached, and nothing runs) and accepts only a plain string as the result. It does not defend against a huge payload beyond the
``--max-decoded-mb`` cap on the decompressed size.

Output (appended per record, resumable by id): id, instruction, question,
difficulty, platform, public_test_cases, hidden_test_cases, test_cases
(public + hidden), as JSON strings of ``{inputs, outputs, fn_name?}``.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import pickle
import sys
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Mapping

from cobalt.execution.base import TestCases
from cobalt.io import RecordError, require_field
from cobalt.data.problems import DropSummary, count_local_records, is_local_source, iter_local_records, tests_json
from cobalt.profile import Profile, add_profile_argument, profile_from_args, resolve_profile

HUB_NAME = "livecodebench/code_generation_lite"
HUB_FILE = "test6.jsonl"
DEFAULT_OUTPUT = "data/livecodebench/lcb_test6.jsonl"
EXAMPLE_MARKERS = ("Example 1:", "Sample Input 1")
"""Markers of the first worked example (cobalt: the earliest one, wherever it stands)."""
PAPER_EXAMPLE_MARKERS = ("\nExample 1:\n\n", "\nSample Input 1\n\n")
"""The original's exact markers, tried in this order (the first one present wins)."""
TEST_TYPES = ("stdin", "functional")
FUNCTIONAL_MODES = ("stdin", "call")

BAD_RECORD = "bad_record"
UNSUPPORTED_TESTTYPE = "unsupported_testtype"
NO_TESTS = "no_tests"


class UnsafePickleError(pickle.UnpicklingError, ValueError):
    """The private tests' pickle asked for something other than a plain string."""


class StringOnlyUnpickler(pickle.Unpickler):
    """An unpickler that loads plain strings only: any global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        """Refuse every global: a plain string never needs one."""
        raise UnsafePickleError(f"refusing to load {module}.{name}: only plain strings are accepted")

    def persistent_load(self, pid: Any) -> Any:
        """Refuse every persistent id."""
        raise UnsafePickleError("refusing a persistent id: only plain strings are accepted")


STRING_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT",
    "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
})
"""The only pickle opcodes that a pickled plain ``str`` needs."""


def check_string_opcodes(data: bytes) -> None:
    """Refuse a pickle that uses any opcode beyond :data:`STRING_OPCODES`, before anything is loaded.

    The unpickler's ``find_class`` refusal alone is not enough: the EXT1/EXT2/EXT4
    opcodes fetch callables from ``copyreg``'s extension cache without calling
    ``find_class`` once some earlier load has filled that cache.
    """
    import pickletools

    try:
        for opcode, _arg, pos in pickletools.genops(data):
            if opcode.name not in STRING_OPCODES:
                raise UnsafePickleError(
                    f"refusing pickle opcode {opcode.name} at byte {pos}: only plain strings are accepted")
    except UnsafePickleError:
        raise
    except Exception as exc:  # a truncated or garbled pickle
        raise ValueError(f"not a valid pickle: {type(exc).__name__}: {exc}") from None


def safe_unpickle_string(data: bytes) -> str:
    """Unpickle ``data`` that must hold one plain ``str``; nothing else is loaded or run.

    Two guards: the opcodes are checked first (:func:`check_string_opcodes`), and the
    unpickler refuses every global and persistent id."""
    check_string_opcodes(data)
    value = StringOnlyUnpickler(io.BytesIO(data)).load()
    if not isinstance(value, str):
        raise UnsafePickleError(f"expected a pickled string, got {type(value).__name__}")
    return value


def _decompress(data: bytes, max_bytes: int) -> bytes:
    decomp = zlib.decompressobj()
    out = decomp.decompress(data, max_bytes + 1)
    if len(out) > max_bytes or decomp.unconsumed_tail:
        raise ValueError(f"decompressed private tests exceed {max_bytes} bytes")
    return out + decomp.flush()


def decode_private_tests(blob: str, max_bytes: int = 1 << 30) -> list:
    """The private tests of a record: a JSON list as is, else base64 -> zlib -> pickle -> JSON.

    Raises ``ValueError`` (including :class:`UnsafePickleError`) when the blob
    cannot be decoded safely.
    """
    text = blob.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass  # not plain JSON: try the encoded form
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not base64: {exc}") from None
    try:
        pickled = _decompress(raw, max_bytes)
    except zlib.error as exc:
        raise ValueError(f"not zlib data: {exc}") from None
    try:
        payload = safe_unpickle_string(pickled)
    except UnsafePickleError:
        raise
    except Exception as exc:  # a truncated or garbled pickle
        raise ValueError(f"not a valid pickle: {type(exc).__name__}: {exc}") from None
    try:
        tests = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise ValueError(f"unpickled text is not JSON ({exc.msg})") from None
    return tests


def encode_private_tests(tests: list) -> str:
    """The inverse of :func:`decode_private_tests` (LiveCodeBench's encoding), for fixtures and tools."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("ascii")


def cut_statement(question: str, markers: tuple[str, ...] | None = None,
                  profile: "str | Profile" = "paper") -> str:
    """The statement before its first worked example.

    ``paper``: the text before the first marker of :data:`PAPER_EXAMPLE_MARKERS`
    that occurs (tried in order), unchanged. ``cobalt``: the text before the
    earliest of :data:`EXAMPLE_MARKERS`, with ``\\r\\n`` made ``\\n`` and trailing
    blanks removed. ``markers`` overrides the profile's list.

    >>> cut_statement("Sum two numbers.\\n\\nExample 1:\\n\\nInput: 1 2")
    'Sum two numbers.\\n'
    >>> cut_statement("Sum two numbers.\\n\\nExample 1:\\nInput: 1 2")
    'Sum two numbers.\\n\\nExample 1:\\nInput: 1 2'
    >>> cut_statement("Sum two numbers.\\n\\nExample 1:\\nInput: 1 2", profile="cobalt")
    'Sum two numbers.'
    """
    if resolve_profile(profile) is Profile.PAPER:
        for marker in markers or PAPER_EXAMPLE_MARKERS:
            idx = question.find(marker)
            if idx >= 0:
                return question[:idx]
        return question
    positions = [p for p in (question.find(m) for m in markers or EXAMPLE_MARKERS) if p >= 0]
    cut = question[: min(positions)] if positions else question
    return cut.replace("\r\n", "\n").rstrip()


def tests_from_list(items: Any, fn_name: str | None, *, field: str, path: str, line: int) -> TestCases:
    """A LiveCodeBench test list (``[{input, output, testtype}]``) as typed tests."""
    if not isinstance(items, list):
        raise RecordError(path, line, field, f"expected a list of tests, got {type(items).__name__}")
    inputs, outputs = [], []
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise RecordError(path, line, where, f"expected an object, got {type(item).__name__}")
        for key in ("input", "output"):
            if not isinstance(item.get(key), str):
                raise RecordError(path, line, f"{where}.{key}", "missing or not a string")
        testtype = item.get("testtype", "functional" if fn_name else "stdin")
        if testtype not in TEST_TYPES:
            raise _Unsupported(f"{where}.testtype {testtype!r}")
        if (testtype == "functional") != bool(fn_name):
            raise RecordError(path, line, f"{where}.testtype",
                              f"{testtype!r} does not match metadata func_name {fn_name!r}")
        inputs.append(item["input"])
        outputs.append(item["output"])
    return TestCases(tuple(inputs), tuple(outputs), fn_name)


class _Unsupported(Exception):
    pass


def _metadata(record: Mapping, path: str, line: int) -> dict:
    raw = record.get("metadata") or "{}"
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RecordError(path, line, "metadata", f"invalid JSON ({exc.msg})") from None
    if not isinstance(raw, Mapping):
        raise RecordError(path, line, "metadata", f"expected an object, got {type(raw).__name__}")
    return dict(raw)


def problem_text(question: str, starter_code: str, fn_name: str | None, with_starter: bool,
                 profile: "str | Profile" = "paper") -> str:
    """The problem shown to the model: the cut statement, plus the starter code of a
    functional problem when ``with_starter``."""
    text = cut_statement(question, profile=profile)
    if with_starter and fn_name and starter_code.strip():
        text += (
            f"\n\nYour program is judged by calling `{fn_name}`; start from this code:\n"
            f"```python\n{starter_code.rstrip()}\n```"
        )
    return text


def convert_record(record: Any, *, path: str, line: int, with_starter: bool | None = None,
                   template_dir: str | None = None, max_bytes: int = 1 << 30,
                   profile: "str | Profile" = "paper", functional: str | None = None) -> dict:
    """One test6 record as a Cobalt problem; raises :class:`RecordError` for bad input.

    ``functional`` is 'stdin' (paper default: tests without ``fn_name``) or 'call'
    (cobalt default); ``with_starter`` defaults to False under paper, True under cobalt."""
    from cobalt.prompts import problem_prompt

    paper = resolve_profile(profile) is Profile.PAPER
    functional = functional or ("stdin" if paper else "call")
    if functional not in FUNCTIONAL_MODES:
        raise ValueError(f"functional must be one of {FUNCTIONAL_MODES}, got {functional!r}")
    if with_starter is None:
        with_starter = not paper
    qid = require_field(record, "question_id", (str, int), path=path, line=line)
    question = require_field(record, "question_content", str, path=path, line=line)
    public_raw = require_field(record, "public_test_cases", (str, list), path=path, line=line)
    private_raw = require_field(record, "private_test_cases", (str, list), path=path, line=line)
    meta = _metadata(record, path, line)
    fn_name = meta.get("func_name") or None
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        raise RecordError(path, line, "metadata.func_name", f"expected an identifier, got {fn_name!r}")
    if isinstance(public_raw, str):
        try:
            public_raw = json.loads(public_raw)
        except json.JSONDecodeError as exc:
            raise RecordError(path, line, "public_test_cases", f"invalid JSON ({exc.msg})") from None
    if isinstance(private_raw, str):
        try:
            private_raw = decode_private_tests(private_raw, max_bytes)
        except ValueError as exc:
            raise RecordError(path, line, "private_test_cases", f"cannot decode: {exc}") from None
    public = tests_from_list(public_raw, fn_name, field="public_test_cases", path=path, line=line)
    hidden = tests_from_list(private_raw, fn_name, field="private_test_cases", path=path, line=line)
    test_fn = fn_name if functional == "call" else None
    public, hidden = (TestCases(t.inputs, t.outputs, test_fn) for t in (public, hidden))
    starter = record.get("starter_code") or ""
    starter = starter if isinstance(starter, str) else ""
    # judged by a call: the call instruction shows the starter code, the statement stays bare
    text = problem_text(question, starter, fn_name, with_starter and test_fn is None, profile)
    all_tests = TestCases(public.inputs + hidden.inputs, public.outputs + hidden.outputs, test_fn)
    return {
        "id": str(qid),
        "instruction": problem_prompt(text, template_dir, fn_name=test_fn, starter_code=starter),
        "question": text,
        "difficulty": record.get("difficulty"),
        "platform": record.get("platform"),
        "public_test_cases": tests_json(public),
        "hidden_test_cases": tests_json(hidden),
        "test_cases": tests_json(all_tests),
    }


def iter_source(source: str, filename: str = HUB_FILE) -> Iterator[tuple[int, Any]]:
    """Records of a local test6-format file, or of ``filename`` downloaded from the hub data set."""
    if is_local_source(source):
        return iter_local_records(source)
    from cobalt.hub import require_hub

    require_hub(source, what="data set", flag="--input")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit(f"downloading {source!r} needs huggingface_hub ({exc}); or pass a local file") from None
    local = hf_hub_download(repo_id=source, filename=filename, repo_type="dataset")
    return iter_local_records(local)


def prepare_file(source: str, output: Path, *, filename: str = HUB_FILE, with_starter: bool | None = None,
                 template_dir: str | None = None, max_bytes: int = 1 << 30, progress: bool = True,
                 profile: "str | Profile" = "paper", functional: str | None = None) -> DropSummary:
    """Convert every record of ``source`` into ``output`` (appended, resumable by id)."""
    from cobalt.cli_support import progress_iter
    from cobalt.io import JsonlAppender

    summary = DropSummary()
    summary.dropped = Counter({BAD_RECORD: 0, UNSUPPORTED_TESTTYPE: 0, NO_TESTS: 0})
    with JsonlAppender(output) as out:
        total = count_local_records(source) if is_local_source(source) else None
        for line, record in progress_iter(iter_source(source, filename), total, "livecodebench", "problems",
                                          enabled=progress):
            summary.total += 1
            if isinstance(record, Mapping) and str(record.get("question_id")) in out.done:
                summary.kept += 1
                continue
            try:
                if isinstance(record, RecordError):
                    raise record
                converted = convert_record(record, path=str(source), line=line, with_starter=with_starter,
                                           template_dir=template_dir, max_bytes=max_bytes, profile=profile,
                                           functional=functional)
            except RecordError as exc:
                summary.dropped[BAD_RECORD] += 1
                summary.errors.append(str(exc))
                continue
            except _Unsupported as exc:
                summary.dropped[UNSUPPORTED_TESTTYPE] += 1
                summary.errors.append(f"{source}:{line}: unsupported test type: {exc}")
                continue
            if not json.loads(converted["test_cases"])["inputs"]:
                summary.dropped[NO_TESTS] += 1
                continue
            out.write(converted)
            summary.kept += 1
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt preproc-lcb``."""
    parser.add_argument("--input", default=HUB_NAME,
                        help="hub data set name, or a local test6-format .jsonl/.json/.parquet file")
    parser.add_argument("--hub-file", default=HUB_FILE, help="file of the hub data set to download")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="output JSONL (appended, resumable); <output>.summary.json is written beside it")
    parser.add_argument("--functional", choices=FUNCTIONAL_MODES, default=None,
                        help="functional problems: 'stdin' (paper default: plain stdin tests without a function "
                             "name, as the original) or 'call' (cobalt default: fn_name kept, judged call-based)")
    parser.add_argument("--starter-code", choices=("append", "omit"), default=None,
                        help="functional problems judged on stdin: append the starter code to the statement "
                             "(cobalt default) or omit it (paper default); a problem judged by a call always "
                             "shows it in the call instruction")
    parser.add_argument("--template-dir", default=None,
                        help="folder with an instruction.txt overriding the packaged template "
                             "(default: $COBALT_TEMPLATE_DIR, else the packaged one)")
    parser.add_argument("--max-decoded-mb", type=int, default=1024,
                        help="refuse private tests that decompress to more than this many MiB")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_profile_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt preproc-lcb``."""
    from cobalt.io import resume_guard, save_settings, write_json_atomic

    output = Path(args.output)
    profile = profile_from_args(args)
    settings, refused = resume_guard(args, [args.input], profile=profile.value)
    if refused:
        print(f"cobalt preproc-lcb: {refused}", file=sys.stderr)
        return 2
    save_settings(output, "cobalt preproc-lcb", settings)
    paper = profile is Profile.PAPER
    functional = args.functional or ("stdin" if paper else "call")
    starter = args.starter_code or ("omit" if paper else "append")
    summary = prepare_file(args.input, output, filename=args.hub_file, with_starter=starter == "append",
                           template_dir=args.template_dir, max_bytes=args.max_decoded_mb << 20,
                           progress=not args.no_progress, profile=profile, functional=functional)
    summary_path = output.with_name(output.name + ".summary.json")
    write_json_atomic(summary_path, {**summary.to_dict(), "source": str(args.input), "profile": profile.value,
                                     "config": {"functional": functional, "starter_code": starter,
                                                "max_decoded_mb": args.max_decoded_mb}})
    print(summary.format(f"LiveCodeBench ({profile.value} profile) -> {output}"))
    for err in summary.errors[:20]:
        print(f"  {err}")
    return 0
