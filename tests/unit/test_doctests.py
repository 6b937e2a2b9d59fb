"""Every docstring example of every module under src/cobalt runs, and passes.

Examples are documentation that can rot; collecting them here means a module
whose examples break fails the suite, and a new module is covered without
anyone listing it. Modules that cannot be imported here (a missing optional
dependency such as verl or vllm) are reported as skipped, by name.
"""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import cobalt

SRC = Path(cobalt.__file__).resolve().parent


NOT_IMPORTED = {"cobalt.__main__"}
"""Modules whose import runs a program (``python -m cobalt``); they hold no examples."""


def module_names() -> list[str]:
    """Dotted names of every module file under src/cobalt (a package's ``__init__`` is the package)."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return sorted(names)


def test_every_module_is_collected():
    names = module_names()
    assert len(names) == len(list(SRC.rglob("*.py")))
    for expected in ("cobalt", "cobalt.text", "cobalt.execution.compare", "cobalt.execution.feedback",
                     "cobalt.data.taco", "cobalt.data.livecodebench", "cobalt.profile"):
        assert expected in names
    assert NOT_IMPORTED <= set(names)
    assert all("__main__" not in n or n in NOT_IMPORTED for n in names)


@pytest.mark.parametrize("name", module_names())
def test_module_doctests(name):
    if name in NOT_IMPORTED:
        assert "\n>>> " not in (SRC.parent / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        return
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional dependency this environment lacks
        pytest.skip(f"{name} not importable here: {exc}")
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed (output above)"


def test_doctests_exist_where_the_issue_names_them():
    # execution/compare.py, execution/feedback.py and the data modules document rules by example
    counts = {}
    for name in ("cobalt.execution.compare", "cobalt.execution.feedback", "cobalt.data.taco",
                 "cobalt.data.livecodebench", "cobalt.text"):
        module = importlib.import_module(name)
        counts[name] = sum(len(t.examples) for t in doctest.DocTestFinder().find(module, name))
    assert all(counts.values()), counts
