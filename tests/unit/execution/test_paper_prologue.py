"""The original's program prologue under ``paper``, on the real sandbox (cobalt keeps its own).

Each expected verdict is worked out by hand from the original's remote_reward_server.py:
the program runs as ``python3 -S file`` after ``reliability_guard(1 GiB)`` (exit/quit set to
None, several os/shutil functions None, subprocess.Popen None, sys.modules[ipdb, joblib,
resource, psutil, tkinter] = None), Python's default recursion limit (1000) and int-to-str
digit limit (4300), its stdout decoded strictly as UTF-8 (text=True), and no output cap.
"""
from __future__ import annotations

import pytest

from cobalt.execution.base import ExecOptions, Limits, TestCases, test_output_cap
from cobalt.execution.local import LocalExecutor

PAPER, COBALT = ExecOptions(profile="paper"), ExecOptions(profile="cobalt")


def _verdict(executor, program, expected="42", options=PAPER):
    res = executor.run_sync(program, TestCases(("",), (expected,)), options)
    return res.passing[0], res.feedback[0]


@pytest.mark.parametrize("program, expected, paper, cobalt", [
    # builtins.exit = None: calling it raises TypeError after 42 is printed; exit code 1 -> fails
    ("print(42); exit()", "42", False, True),
    ("print(42); quit()", "42", False, True),
    # os.getcwd = None -> TypeError; import resource -> ImportError (None in sys.modules)
    ("import os\nos.getcwd()\nprint(42)", "42", False, True),
    ("import resource\nprint(42)", "42", False, True),
    # subprocess.Popen = None -> TypeError; cobalt's sandbox lets a child process run
    ("import subprocess\nsubprocess.Popen(['true']).wait()\nprint(42)", "42", False, True),
    # the default limit of 1000 frames: depth 5000 raises RecursionError there
    ("import sys\ndef f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nprint(f(5000))", "5000", False, True),
    # ... and a depth of 990 (plus the module frame and print's call) still fits under 1000
    ("def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nprint(f(990))", "990", True, True),
    # 2**20000 has 6021 digits > 4300: str() raises ValueError there
    ("print(len(str(2**20000)))", "6021", False, True),
    # a file written and read back in the working directory (/dev/shm there, writable)
    ("open('out.txt', 'w').write('42')\nprint(open('out.txt').read())", "42", True, True),
    # --ro-bind / /: /tmp is read-only there (OSError: read-only file system)
    ("open('/tmp/out.txt', 'w').write('42')\nprint(open('/tmp/out.txt').read())", "42", False, True),
])
def test_prologue_semantics_per_profile(executor, program, expected, paper, cobalt):
    assert _verdict(executor, program, expected)[0] is paper
    assert _verdict(executor, program, expected, COBALT)[0] is cobalt


def test_exit_shows_the_original_s_type_error(executor):
    ok, fb = _verdict(executor, "print(42); exit()")
    assert not ok and "TypeError: 'NoneType' object is not callable" in fb


def test_non_utf8_output_is_a_decode_error_under_paper(executor):
    # text=True makes communicate() decode strictly: UnicodeDecodeError, caught by the original's
    # generic handler -> "Input:\n<input>\nException: <message>", not passing.
    program = "import sys\nsys.stdout.buffer.write(b'\\xff42\\n')"
    ok, fb = _verdict(executor, program, "\ufffd42")
    assert not ok
    assert fb == "Input:\n\nException: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    assert _verdict(executor, program, "\ufffd42", COBALT)[0] is True  # cobalt: a replacement character


def test_output_cap_is_sized_from_the_expected_output_under_paper(executor):
    # The original has no cap: a correct 1.1 MB answer passes. Paper's cap is
    # max(1 MiB, 2 x 1,100,000 + 64 KiB) = 2,265,536 bytes; cobalt's stays 1 MiB.
    big = "x" * 1_100_000
    program = "print('x' * 1_100_000)"
    assert test_output_cap(Limits(), big) == 2 * 1_100_000 + 65536
    assert _verdict(executor, program, big)[0] is True
    ok, fb = _verdict(executor, program, big, COBALT)
    assert not ok and "output limit exceeded" in fb
    # a 10 MB flood against a 10-byte expected output still fails under paper (cap 1 MiB)
    ok, _ = _verdict(executor, "print('y' * 10_000_000)", "0123456789")
    assert not ok


def test_paper_workdir_is_a_private_empty_tmpfs(executor, tmp_path):
    # The original binds the host's /dev/shm; ours is a fresh tmpfs per sandbox (isolation
    # stays ours): a host file in /dev/shm is not visible, and the directory starts empty.
    import os

    marker = f"/dev/shm/cobalt-host-marker-{os.getpid()}"
    with open(marker, "w") as fh:
        fh.write("host")
    try:
        ok, fb = _verdict(executor, "import glob\nprint(sorted(glob.glob('/dev/shm/*')))", "[]")
        assert ok, fb
    finally:
        os.unlink(marker)
