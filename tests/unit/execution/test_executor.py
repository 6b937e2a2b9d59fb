"""The sandboxed executor on small real programs: verdicts, feedback, limits, modes."""
from __future__ import annotations

import json

import pytest

from cobalt.execution.base import ExecOptions, Limits, Status, TestCaseError, TestCases
from cobalt.execution.feedback import PAPER_TRUNCATE_MARKER, TRUNCATE_MARKER
from cobalt.execution.local import LocalExecutor, lossy_program

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
TESTS = TestCases(("1 2\n", "3 4\n", "5 5\n"), ("3", "7", "11"))


def test_verdicts_and_paper_result_shape(executor):
    res = executor.run_sync(ADD, TESTS)
    assert res.passing == (True, True, False)
    assert res.status == ("passed", "passed", "wrong_answer")
    d = res.to_dict()
    assert list(d)[:2] == ["passing", "feedback"]
    assert len(d["feedback"]) == 3 and abs(d["pass_rate"] - 2 / 3) < 1e-9
    assert res.feedback[2] == "Input:\n5 5\nProgram's Output:\n10\nExpected Output:\n11"  # paper labels
    res = executor.run_sync(ADD, TESTS, ExecOptions(profile="cobalt"))
    assert res.feedback[2] == "Input:\n5 5\nYour output:\n10\nExpected output:\n11"


def test_exact_rule_strips_only_outer_whitespace(executor):
    prog = "print('  1 2  ')\nprint()\n"
    res = executor.run_sync(prog, TestCases(("",) * 3, ("1 2", "\n1 2\n\n", "1  2")))
    assert res.passing == (True, True, False)


def test_tolerant_mode_is_opt_in(executor):
    prog = "print('0.3333333 ')\nprint('x  ')\n"
    tests = TestCases(("",), ("0.33333333\nx",))
    assert executor.run_sync(prog, tests).passing == (False,)
    assert executor.run_sync(prog, tests, ExecOptions(compare="tolerant", float_tol=1e-6)).passing == (True,)


def test_runtime_error_feedback_starts_at_user_code(executor):
    res = executor.run_sync("def f(x):\n    return 1 // x\nprint(f(int(input())))\n", TestCases(("0",), ("1",)),
                            ExecOptions(profile="cobalt"))
    assert res.status == ("runtime_error",)
    fb = res.feedback[0]
    assert "Error:\nTraceback (most recent call last):\n  File \"<solution>\", line 3" in fb
    assert "ZeroDivisionError" in fb and "Expected output" not in fb
    assert "_runner" not in fb and "runner.py" not in fb


def test_syntax_error_fails_every_test(executor):
    res = executor.run_sync("def broken(:\n", TESTS)
    assert res.passing == (False,) * 3 and set(res.status) == {"runtime_error"}
    assert "SyntaxError" in res.feedback[0]


def test_exit_and_sys_exit_behave_normally(executor):
    """cobalt: exit() and quit() work as in a normal interpreter; paper disables them as the
    original's reliability guard does (builtins.exit = None), sys.exit works in both."""
    tests = TestCases(("",), ("ok",))
    cobalt = ExecOptions(profile="cobalt")
    for prog in ("print('ok')\nexit()", "print('ok')\nquit(0)", "import sys\nprint('ok')\nsys.exit()",
                 "import sys\nprint('ok')\nsys.exit(0)"):
        assert executor.run_sync(prog, tests, cobalt).passing == (True,), prog
        assert executor.run_sync(prog, tests).passing == (("sys.exit" in prog),), prog
    res = executor.run_sync("import sys\nprint('ok')\nsys.exit(3)", tests, cobalt)
    assert res.status == ("runtime_error",)


def test_timeout_kills_and_reports_four_seconds():
    ex = LocalExecutor(Limits(test_wall_s=1.0, test_cpu_s=1.0))
    res = ex.run_sync("while True:\n    pass\n", TestCases(("",), ("",)))
    assert res.status == ("timeout",)
    assert "timed out after 1 seconds" in res.feedback[0]
    # A sleeping program uses no CPU: only the wall limit can stop it, and the runner
    # reports a kill it made as a timeout.
    res = ex.run_sync("import time\ntime.sleep(30)\n", TestCases(("",), ("",)))
    assert res.status == ("timeout",)


SLOW_AFTER_FIRST = "s = input()\nif s != 'fast':\n    while True:\n        pass\nprint('ok')\n"


def test_program_cap_paper_returns_one_failing_entry():
    ex = LocalExecutor(Limits(test_wall_s=1.0, test_cpu_s=1.0, program_wall_s=2.5))
    tests = TestCases(("fast",) + ("slow",) * 11, ("ok",) * 12)
    res = ex.run_sync(SLOW_AFTER_FIRST, tests, ExecOptions(profile="paper"))
    assert res.passing == (False,) and res.status == ("timeout",)
    # remote_reward_server.py, Evaluator.__call__: on asyncio.TimeoutError (its 27 s cap) the one
    # entry is this fixed sentence, naming 30 seconds whatever the cap.
    assert res.feedback == ("TimeoutError: Program timed out because it did not finish running all test cases "
                            "within 30 seconds.",)


def test_program_cap_cobalt_keeps_the_tests_that_finished():
    ex = LocalExecutor(Limits(test_wall_s=1.0, test_cpu_s=1.0, program_wall_s=2.5, test_parallelism=1))
    tests = TestCases(("fast",) + ("slow",) * 11, ("ok",) * 12)
    res = ex.run_sync(SLOW_AFTER_FIRST, tests, ExecOptions(profile="cobalt"))
    assert len(res.passing) == 12
    assert res.passing[0] is True and not any(res.passing[1:])
    assert set(res.status[1:]) == {"timeout"}


def test_a_program_under_its_cap_is_judged_per_test_in_both_profiles():
    ex = LocalExecutor(Limits(test_wall_s=1.0, test_cpu_s=1.0, program_wall_s=20))
    tests = TestCases(("fast", "slow", "fast"), ("ok",) * 3)
    for profile in ("paper", "cobalt"):
        res = ex.run_sync(SLOW_AFTER_FIRST, tests, ExecOptions(profile=profile))
        assert res.status == ("passed", "timeout", "passed"), profile


def test_memory_and_output_limits(executor):
    res = executor.run_sync("x = bytearray(2 * 1024 ** 3)", TestCases(("",), ("",)))
    assert res.status == ("memory_limit",) and "MemoryError" in res.feedback[0]
    res = executor.run_sync("import sys\nsys.stdout.write('y' * (2 << 20))", TestCases(("",), ("y",)))
    assert res.status == ("output_limit",) and "output limit exceeded" in res.feedback[0]


def test_feedback_truncated_to_head_and_tail(executor):
    res = executor.run_sync("print('a' * 300 + 'b' * 300)", TestCases(("",), ("c",)), ExecOptions(profile="cobalt"))
    fb = res.feedback[0]
    assert TRUNCATE_MARKER in fb and "a" * 200 + TRUNCATE_MARKER + "b" * 200 in fb
    fb = executor.run_sync("print('a' * 300 + 'b' * 300)", TestCases(("",), ("c",))).feedback[0]
    assert "a" * 200 + PAPER_TRUNCATE_MARKER + "b" * 200 in fb  # paper: the inline marker


def test_call_based_global_function_and_solution_method(executor):
    tests = TestCases(('[1, 2, 3]\n2\n', '[]\n5\n'), ('[3, 4, 5]', '[]'), "shift")
    assert executor.run_sync("def shift(xs, k):\n    return [x + k for x in xs]\n", tests).passing == (True, True)
    cls = "class Solution:\n    def shift(self, xs, k):\n        return tuple(x + k for x in xs)\n"
    assert executor.run_sync(cls, tests).passing == (True, True)
    wrong = "class Solution:\n    def shift(self, xs, k):\n        return xs\n"
    assert executor.run_sync(wrong, tests).status == ("wrong_answer", "passed")


def test_call_based_ignores_prints_and_main_guard(executor):
    prog = ("def double(x):\n    print('debug', x)\n    return 2 * x\n"
            "if __name__ == '__main__':\n    double(int(input()))\n")
    assert executor.run_sync(prog, TestCases(("21\n",), ("42",), "double")).passing == (True,)


def test_lossy_mode_is_the_papers_driver(executor):
    prog = "class Solution:\n    def add(self, a, b):\n        return a + b\n"
    assert lossy_program(prog, "add").endswith("print(Solution().add(*input().split()))\n")
    tests = TestCases(("1 2",), ("3",), "add")
    # Arguments arrive as strings: '1' + '2' == '12'. That is why the mode is lossy.
    res = executor.run_sync(prog, tests, ExecOptions(call_mode="lossy"))
    assert res.passing == (False,) and "Program's Output:\n12" in res.feedback[0]
    assert executor.run_sync(prog, TestCases(("1\n2\n",), ("3",), "add")).passing == (True,)


def test_stop_on_first_failure_skips_the_rest(executor):
    res = executor.run_sync(ADD, TestCases(("1 1", "2 2", "3 3"), ("2", "5", "6")), ExecOptions(stop_on_first_failure=True))
    assert res.passing[:2] == (True, False)
    assert res.status[2] == Status.SKIPPED.value


def test_big_ints_and_deep_recursion_work(executor):
    prog = ("import sys\nn = int(input())\nprint(len(str(7 ** n)))\n"
            "def depth(k):\n    return 0 if k == 0 else 1 + depth(k - 1)\nprint(depth(100000))\n")
    res = executor.run_sync(prog, TestCases(("20000",), ("16902\n100000",)), ExecOptions(profile="cobalt"))
    assert res.passing == (True,), res.feedback
    # paper keeps Python's 4,300-digit and 1,000-frame defaults, as the original
    assert executor.run_sync(prog, TestCases(("20000",), ("16902\n100000",))).passing == (False,)


def test_packages_hidden_by_default_and_importable_on_request(executor):
    prog = "import sortedcontainers\nprint('ok')\n"
    tests = TestCases(("",), ("ok",))
    assert executor.run_sync(prog, tests).status == ("runtime_error",)
    assert executor.run_sync(prog, tests, ExecOptions(allow_packages=True)).passing == (True,)


def test_non_utf8_output_is_judged_not_crashed(executor):
    prog = "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok')\n"
    res = executor.run_sync(prog, TestCases(("",), ("ok",)), ExecOptions(profile="cobalt"))
    assert res.status == ("wrong_answer",)
    assert "\ufffd" in res.feedback[0]
    res = executor.run_sync(prog, TestCases(("",), ("ok",)))  # paper: the original's strict decode
    assert res.status == ("runtime_error",) and "codec can't decode byte 0xff" in res.feedback[0]


def test_each_test_gets_a_fresh_process(executor):
    prog = "import builtins\nprint(getattr(builtins, 'seen', 0))\nbuiltins.seen = 1\n"
    assert executor.run_sync(prog, TestCases(("", ""), ("0", "0"))).passing == (True, True)


def test_bad_test_cases_raise_clear_errors():
    with pytest.raises(TestCaseError, match=r"test_cases.inputs\[1\]: expected a string"):
        TestCases.from_obj({"inputs": ["a", 3], "outputs": ["x", "y"]})
    with pytest.raises(TestCaseError, match="2 inputs but 1 outputs"):
        TestCases.from_obj({"inputs": ["a", "b"], "outputs": ["x"]})
    with pytest.raises(TestCaseError, match="outputs: missing"):
        TestCases.from_obj(json.dumps({"inputs": []}))


def test_no_sandbox_mode_warns_loudly():
    from cobalt.execution.local import NoSandboxWarning

    with pytest.warns(NoSandboxWarning):
        ex = LocalExecutor(sandbox="none")
    assert ex.run_sync(ADD, TESTS).passing == (True, True, False)


def test_runaway_recursion_ends_in_an_error_not_a_hang():
    # Generous limits: the 10^6-deep recursion touches the 256 MiB stack, slow on a loaded machine.
    ex = LocalExecutor(Limits(test_wall_s=60.0, test_cpu_s=60.0, program_wall_s=60.0))
    res = ex.run_sync("def f(n):\n    return f(n + 1)\nf(0)\n", TestCases(("",), ("",)))
    assert res.status[0] in ("runtime_error", "memory_limit"), res.status
    assert "<solution>" in res.feedback[0]


def _running_sandboxes(psutil) -> list:
    """Live bubblewrap children of this process; a zombie awaiting its reaper or a
    process that vanished while being inspected counts as gone."""
    live = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "bwrap" in " ".join(p.cmdline()):
                live.append(p)
        except psutil.Error:
            continue
    return live


def test_a_caller_timeout_kills_the_sandbox_at_once(executor):
    import asyncio
    import time

    import psutil

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(executor.run("import time\ntime.sleep(60)", TestCases(("",) * 5, ("",) * 5)), 0.5)
        # The program would sleep for minutes; the sandbox must be gone long before,
        # i.e. killed by the cancellation rather than left to finish.
        start = time.monotonic()
        while time.monotonic() - start < 20:
            kids = _running_sandboxes(psutil)
            if not kids:
                return True
            await asyncio.sleep(0.05)
        raise AssertionError(f"sandbox still running: {kids}")

    assert asyncio.run(main())


HEADER = "import math, collections\nfrom random import *\nfrom typing import List  # LeetCode-style\n\n"


def test_a_hoisted_import_header_changes_nothing_a_program_sees(executor):
    # The leading standard-library imports run once in the runner; the program must
    # see the same names, a fresh random seed per test, and the same line numbers.
    prog = HEADER + "x: List[int] = [math.isqrt(int(input()))]\nprint(x[0], collections.Counter('aab')['a'])\n" \
        "print(randint(0, 10**18))\nif x[0] == 3:\n    raise ValueError('boom')\n"
    res = executor.run_sync(prog, TestCases(("16", "16", "9"), ("", "", "")))
    assert all("4 2" in fb for fb in res.feedback[:2]), res.feedback
    draws = [fb.split("4 2")[1].split()[0] for fb in res.feedback[:2]]
    assert draws[0] != draws[1], "each test must draw from a fresh seed"
    assert res.status[2] == "runtime_error"
    assert 'File "<solution>", line 9' in res.feedback[2] and "ValueError: boom" in res.feedback[2]


def test_a_header_that_cannot_be_hoisted_runs_as_written(executor):
    ok = TestCases(("",), ("1.0",))
    assert executor.run_sync("from __future__ import annotations\nimport math\nprint(math.cos(0))\n", ok).passing == (True,)
    bad = executor.run_sync("import math\nfrom math import no_such_name\nprint(1.0)\n", ok)
    assert bad.status == ("runtime_error",) and "ImportError" in bad.feedback[0] and "line 2" in bad.feedback[0]
    # A program that shadows a module name before importing: nothing is hoisted past it.
    assert executor.run_sync("math = 3\nimport math\nprint(math.cos(0))\n", ok).passing == (True,)


def test_which_headers_the_runner_hoists():
    from cobalt.execution import _runner

    g = {}
    code = _runner._hoisted_header(HEADER + "print(math.pi)\n", g)
    assert code is not None and {"math", "collections", "randint", "List"} <= set(g)
    for not_hoisted in ("from __future__ import annotations\nimport math\nx = 1\n",
                        "import os\nx = 1\n",  # not a side-effect-free preloadable module
                        "import math; import os\nx = 1\n",
                        "from math import (pi,\n    e)\nx = 1\n",
                        "import numpy\nx = 1\n",
                        "x = 1\nimport math\n",
                        "import math\nfrom math import no_such_name\nx = 1\n"):
        g = {}
        assert _runner._hoisted_header(not_hoisted, g) is None and not g, not_hoisted
