"""LiveCodeBench release-test6 preparation on a fixture built from ../shared/data."""
from __future__ import annotations

import ast
import asyncio
import base64
import io
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from cobalt import prompts
from cobalt.cli import main as cli_main
from cobalt.data import livecodebench as lcb
from cobalt.execution.client import EvaluatorClient
from cobalt.io import RecordError

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "livecodebench" / "test6_sample.jsonl"
SOURCE = REPO / ".." / "shared" / "data" / "livecodebench" / "livecodebench_public_tests.json"

SPLIT_WORDS = """class Solution:
    def splitWordsBySeparator(self, words, separator):
        # split every word and keep the non-empty pieces, in order
        return [piece for word in words for piece in word.split(separator) if piece]
"""
WINNER = """n = int(input())
s = input().strip()
t, a = s.count("T"), s.count("A")
if t != a:
    print("T" if t > a else "A")
else:
    # equal wins: whoever reached the final count first is the one who did not win the last game
    print("A" if s[-1] == "T" else "T")
"""


SPLIT_WORDS_STDIN = """import json, sys
lines = sys.stdin.read().split("\\n")
words, separator = json.loads(lines[0]), json.loads(lines[1])
print(json.dumps([piece for word in words for piece in word.split(separator) if piece]))
"""


def source_tests(index: int) -> list[dict]:
    items = json.loads(SOURCE.read_text(encoding="utf-8"))
    tests = items[index]["tests"]
    return ast.literal_eval(tests) if isinstance(tests, str) else tests


@pytest.fixture(scope="module", params=["paper", "cobalt"])
def prepared(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("lcb") / "lcb.jsonl"
    rc = cli_main(["preproc-lcb", "--input", str(FIXTURE), "--output", str(out), "--no-progress",
                   "--profile", request.param])
    assert rc == 0
    return out, {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}, request.param


def test_good_records_kept_and_bad_ones_reported(prepared):
    out, records, profile = prepared
    assert list(records) == ["lcb-19", "lcb-63", "lcb-71", "lcb-190", "lcb-192", "lcb-193"]
    summary = json.loads(out.with_name(out.name + ".summary.json").read_text())
    assert summary["kept"] == 6 and summary["total"] == 9 and summary["bad_records"] == 3
    assert summary["profile"] == profile
    assert summary["config"]["functional"] == {"paper": "stdin", "cobalt": "call"}[profile]
    errors = summary["errors"]
    assert any(e.endswith(":7: field 'question_content': missing") for e in errors)
    assert any(":8: field 'private_test_cases': cannot decode: not base64" in e for e in errors)
    assert any(":9: field 'metadata': invalid JSON" in e for e in errors)


@pytest.mark.parametrize("index", [19, 63, 71, 190, 192, 193])
def test_decoded_hidden_tests_are_the_original_tests(prepared, index):
    _, records, profile = prepared
    rec = records[f"lcb-{index}"]
    original = source_tests(index)
    public, hidden, tests = (json.loads(rec[k]) for k in ("public_test_cases", "hidden_test_cases", "test_cases"))
    assert public["inputs"] == [t["input"] for t in original[:1]]
    assert hidden["inputs"] == [t["input"] for t in original[1:]]
    assert hidden["outputs"] == [t["output"] for t in original[1:]]
    assert tests["inputs"] == public["inputs"] + hidden["inputs"]
    functional = original[0]["testtype"] == "functional"
    # paper: functional problems run as stdin tests (no function name), as in the original
    assert ("fn_name" in tests) is (functional and profile == "cobalt")


def test_instruction_is_the_template_with_the_statement_cut_before_examples(prepared):
    _, records, profile = prepared
    for rec in records.values():
        assert "Example 1" not in rec["instruction"] and "Sample Input 1" not in rec["instruction"]
        fn_name = json.loads(rec["public_test_cases"]).get("fn_name")
        if fn_name is None:  # judged on stdin: the stdin instruction
            assert rec["instruction"] == prompts.problem_prompt(rec["question"])
        else:  # judged by a call: the call instruction names it and shows the starter code
            assert f"the judge calls `Solution().{fn_name}(...)`" in rec["instruction"]
            assert f"    def {fn_name}(self" in rec["instruction"] and "standard input and print" not in rec["instruction"]
            assert rec["instruction"].endswith("Problem:\n" + rec["question"].strip())
    tail = ("the overall winner is the one who reached that number of wins first.\nFind the overall winner: "
            "Takahashi or Aoki.\n\nInput\n\nThe input is given from Standard Input in the following format:\n"
            "N\nS\n\nOutput\n\nIf the overall winner is Takahashi, print T; if it is Aoki, print A.\n\n"
            "Constraints\n\n\n- 1\\leq N \\leq 100\n- N is an integer.\n- S is a string of length N consisting of "
            "T and A.")
    if profile == "paper":
        # the text before "\nSample Input 1\n\n" / "\nExample 1:\n\n", kept as it is
        # the statement's own Windows line ends are kept too
        question = records["lcb-190"]["question"]
        assert question.startswith("Takahashi and Aoki played N games.\r\nYou are given")
        assert question.replace("\r\n", "\n").endswith(tail + "\n") and question.endswith("T and A.\n")
        assert records["lcb-19"]["question"].endswith("containing each number exactly once.\n ")
        assert "splitWordsBySeparator" not in records["lcb-63"]["instruction"]  # no starter code
    else:
        assert records["lcb-190"]["question"].endswith(tail) and "\r" not in records["lcb-190"]["question"]
        assert records["lcb-19"]["question"].endswith("containing each number exactly once.")
        assert "splitWordsBySeparator" in records["lcb-63"]["instruction"]


def test_starter_code_flag_overrides_the_profile(tmp_path):
    # the flag decides the statement; a problem judged by a call always shows its starter code
    for profile, flag, in_question, in_instruction in (("paper", "append", True, True),
                                                       ("cobalt", "omit", False, True),
                                                       ("paper", "omit", False, False)):
        out = tmp_path / f"{profile}-{flag}.jsonl"
        assert cli_main(["preproc-lcb", "--input", str(FIXTURE), "--output", str(out), "--no-progress",
                         "--profile", profile, "--starter-code", flag]) == 0
        rec = json.loads(out.read_text().splitlines()[1])
        assert rec["id"] == "lcb-63" and ("class Solution" in rec["question"]) is in_question
        assert ("class Solution" in rec["instruction"]) is in_instruction
        assert ("the judge calls" in rec["instruction"]) is (profile == "cobalt")


def test_functional_and_stdin_tests_run_in_the_sandbox(prepared):
    _, records, profile = prepared
    client = EvaluatorClient.embedded(max_concurrency=4)
    # paper: the functional problem is a stdin problem (a program must read the JSON lines itself)
    good_split = SPLIT_WORDS if profile == "cobalt" else SPLIT_WORDS_STDIN
    other_split = SPLIT_WORDS_STDIN if profile == "cobalt" else SPLIT_WORDS
    jobs = [
        (good_split, records["lcb-63"]["test_cases"]),
        (WINNER, records["lcb-190"]["test_cases"]),
        (good_split.replace("if piece", ""), records["lcb-63"]["test_cases"]),
        ("print('T')", records["lcb-190"]["test_cases"]),
        (other_split, records["lcb-63"]["test_cases"]),
    ]
    good_call, good_stdin, bad_call, bad_stdin, other = asyncio.run(client.evaluate_many(jobs))
    assert good_call.all_passed and good_stdin.all_passed
    assert not bad_call.all_passed and not bad_stdin.all_passed
    assert not other.all_passed  # the other profile's form of the program does not fit


def test_rerun_resumes_without_duplicates(prepared):
    out, _, profile = prepared
    before = out.read_text(encoding="utf-8")
    summary = lcb.prepare_file(str(FIXTURE), out, progress=False, profile=profile)
    assert out.read_text(encoding="utf-8") == before
    assert summary.kept == 6


class _TouchFile:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_malicious_pickle_runs_nothing(tmp_path, protocol):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_TouchFile(marker), protocol=protocol)
    # the payload is real: an ordinary unpickler would run the command
    pickle.loads(payload)
    assert marker.exists()
    marker.unlink()
    blob = base64.b64encode(zlib.compress(payload)).decode()
    with pytest.raises(lcb.UnsafePickleError, match="refusing"):
        lcb.decode_private_tests(blob)
    record = json.loads(FIXTURE.read_text().splitlines()[0])
    record["private_test_cases"] = blob
    with pytest.raises(RecordError, match=r"x\.jsonl:5: field 'private_test_cases'.*refusing"):
        lcb.convert_record(record, path="x.jsonl", line=5)
    assert not marker.exists()


def _hostile_pickles(marker: Path) -> dict[str, bytes]:
    """Pickles written by hand, opcode by opcode; each one, loaded by a plain unpickler,
    creates ``marker`` (a file) and so proves that it runs code."""
    m = str(marker)
    py_touch = f"open({m!r}, 'w').close()"
    sh_touch = f"touch {m}"

    class ViaReduce:
        def __reduce__(self):
            return (exec, (py_touch,))

    class ViaPartial:
        def __reduce__(self):
            import functools

            return (functools.partial(os.system, sh_touch), ())

    return {
        "builtins.exec": b"cbuiltins\nexec\n(V" + py_touch.encode() + b"\ntR.",
        "builtins.eval": b"cbuiltins\neval\n(V" + f"__import__('os').system({sh_touch!r})".encode() + b"\ntR.",
        "getattr chain": (b"cbuiltins\ngetattr\n(cbuiltins\n__import__\n(Vos\ntRVsystem\ntR(V"
                          + sh_touch.encode() + b"\ntR."),
        "os.system": b"cos\nsystem\n(V" + sh_touch.encode() + b"\ntR.",
        "posix.system": b"cposix\nsystem\n(V" + sh_touch.encode() + b"\ntR.",
        "INST opcode": b"(V" + sh_touch.encode() + b"\nios\nsystem\n.",
        "OBJ opcode": b"(cos\nsystem\nV" + sh_touch.encode() + b"\no.",
        "exec in a list": b"(lp0\ncbuiltins\nexec\n(V" + py_touch.encode() + b"\ntRa.",
        "__reduce__ protocol 2": pickle.dumps(ViaReduce(), protocol=2),
        "__reduce__ protocol 5 (STACK_GLOBAL)": pickle.dumps(ViaReduce(), protocol=5),
        "functools.partial": pickle.dumps(ViaPartial(), protocol=2),
        # str is the one type allowed as a result; reaching a callable through it still needs a global
        "str.format through getattr": (b"cbuiltins\ngetattr\n(cbuiltins\nstr\nVformat\ntR(Vx\ntR"
                                       b"0cbuiltins\nexec\n(V" + py_touch.encode() + b"\ntR."),
    }


def test_hostile_pickles_run_nothing(tmp_path):
    payloads = _hostile_pickles(tmp_path / "pwned")
    for name, payload in payloads.items():
        marker = tmp_path / "pwned"
        try:  # the payload is real: an ordinary unpickler runs it
            pickle.loads(payload)
        except Exception:  # noqa: BLE001 - some return values are not picklable results; the side effect counts
            pass
        assert marker.exists(), name
        marker.unlink()
        # each guard on its own: the unpickler refuses the global, the opcode check refuses the pickle
        with pytest.raises(lcb.UnsafePickleError, match="refusing to load"):
            lcb.StringOnlyUnpickler(io.BytesIO(payload)).load()
        assert not marker.exists(), name
        with pytest.raises(lcb.UnsafePickleError, match="refusing pickle opcode"):
            lcb.check_string_opcodes(payload)
        with pytest.raises(lcb.UnsafePickleError, match="refusing"):
            lcb.safe_unpickle_string(payload)
        assert not marker.exists(), name
        blob = base64.b64encode(zlib.compress(payload)).decode()
        with pytest.raises(lcb.UnsafePickleError):
            lcb.decode_private_tests(blob)
        assert not marker.exists(), name


def test_refusal_happens_before_any_global_is_resolved(tmp_path, monkeypatch):
    # even a harmless global of an allowed-looking module is refused: the unpickler knows no globals
    for payload in (b"cbuiltins\nstr\n(V1\ntR.", b"ccopyreg\n_reconstructor\n.", b"c__builtin__\nlen\n."):
        with pytest.raises(lcb.UnsafePickleError, match="refusing to load"):
            lcb.StringOnlyUnpickler(io.BytesIO(payload)).load()
        with pytest.raises(lcb.UnsafePickleError, match="refusing pickle opcode"):
            lcb.safe_unpickle_string(payload)


def test_extension_registry_and_persistent_ids_are_refused(tmp_path):
    import copyreg

    marker = tmp_path / "pwned"
    code = 0x7A11
    copyreg.add_extension("os", "system", code)
    try:
        # EXT2 <code> pushes os.system through the registry, then one argument and REDUCE
        payload = b"\x80\x02\x83" + code.to_bytes(2, "little") + b"X" \
            + len(f"touch {marker}").to_bytes(4, "little") + f"touch {marker}".encode() + b"\x85R."
        pickle.loads(payload)  # also fills copyreg's extension cache
        assert marker.exists()
        marker.unlink()
        # with the cache filled, the unpickler would call os.system without asking find_class:
        # the opcode check is what stops it
        with pytest.raises(lcb.UnsafePickleError, match="refusing pickle opcode EXT2"):
            lcb.safe_unpickle_string(payload)
        assert not marker.exists()
    finally:
        copyreg.remove_extension("os", "system", code)
    for payload in (b"P1\n.", b"\x80\x02K\x01Q."):
        with pytest.raises(lcb.UnsafePickleError, match="persistent"):
            lcb.StringOnlyUnpickler(io.BytesIO(payload)).load()
        with pytest.raises(lcb.UnsafePickleError, match="refusing pickle opcode"):
            lcb.safe_unpickle_string(payload)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_strings_pass_both_guards(protocol):
    text = json.dumps([{"input": "1 2\n", "output": "3", "testtype": "stdin"}]) + "é" * 70000
    payload = pickle.dumps(text, protocol=protocol)
    lcb.check_string_opcodes(payload)
    assert lcb.safe_unpickle_string(payload) == text


def test_pickle_of_anything_but_a_string_is_refused():
    payload = pickle.dumps([{"input": "1", "output": "1"}])
    blob = base64.b64encode(zlib.compress(payload)).decode()
    with pytest.raises(lcb.UnsafePickleError, match="refusing pickle opcode"):
        lcb.decode_private_tests(blob)
    # a list needs no global either, so the unpickler alone would load it: the opcode check refuses it
    assert lcb.StringOnlyUnpickler(io.BytesIO(payload)).load() == [{"input": "1", "output": "1"}]


def test_encoding_round_trip_and_size_cap():
    tests = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}] * 50
    blob = lcb.encode_private_tests(tests)
    assert lcb.decode_private_tests(blob) == tests
    with pytest.raises(ValueError, match="exceed"):
        lcb.decode_private_tests(blob, max_bytes=100)


@pytest.mark.parametrize(
    "text, paper, cobalt",
    [
        ("Do X.\n\nExample 1:\n\nInput: 1", "Do X.\n", "Do X."),
        ("Do X.\n \nExample 1:\n\nInput: 1", "Do X.\n ", "Do X."),
        ("Do X.\n\nExample 1:\nInput: 1", "Do X.\n\nExample 1:\nInput: 1", "Do X."),  # one newline: no paper cut
        ("Do X. Example 1:\n\nInput: 1", "Do X. Example 1:\n\nInput: 1", "Do X."),  # not at a line start
        ("Read N.\n\nSample Input 1\n\n3", "Read N.\n", "Read N."),
        ("Read N.\r\n\r\nSample Input 1\r\n\r\n3", "Read N.\r\n\r\nSample Input 1\r\n\r\n3", "Read N."),
        # paper tries "Example 1:" first even when "Sample Input 1" comes earlier
        ("A\nSample Input 1\n\nB\nExample 1:\n\nC", "A\nSample Input 1\n\nB", "A"),
        ("A\n\nSample Input 1\n\nExample 1:", "A\n", "A"),
        ("No examples here.\n", "No examples here.\n", "No examples here."),
    ],
)
def test_cut_statement_per_profile(text, paper, cobalt):
    assert lcb.cut_statement(text) == paper
    assert lcb.cut_statement(text, profile="paper") == paper
    assert lcb.cut_statement(text, profile="cobalt") == cobalt


def test_help_lists_flags(capsys):
    with pytest.raises(SystemExit):
        cli_main(["preproc-lcb", "--help"])
    text = capsys.readouterr().out
    for flag in ("--input", "--hub-file", "--output", "--starter-code", "--functional", "--template-dir",
                 "--max-decoded-mb", "--profile"):
        assert flag in text


def test_paper_script_shim_prepares_the_file(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "o.jsonl"
    proc = subprocess.run([sys.executable, str(REPO / "preproc" / "preproc_lcb_test6.py"), "--input", str(FIXTURE),
                           "--output", str(out), "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_text().splitlines()) == 6 and "6 kept of 9" in proc.stdout
