"""Every module under src/cobalt has a docstring, and so has every public function and method.

Read from the source with ``ast`` (nothing is imported), so modules with optional
dependencies (verl, vllm) are checked too. Public: a top-level function or a method
of a top-level class whose name does not start with ``_``, in a module whose dotted
path has no part starting with ``_`` (``_runner`` is private; ``__init__`` and
``__main__`` are not). Functions nested in functions are implementation details.
"""
from __future__ import annotations

import ast
from pathlib import Path

import cobalt

SRC = Path(cobalt.__file__).resolve().parent


def module_files() -> list[Path]:
    """Every Python file of the package."""
    return sorted(SRC.rglob("*.py"))


def is_private_module(path: Path) -> bool:
    """True when a part of the module's path starts with ``_`` (dunder files excepted)."""
    parts = path.relative_to(SRC).with_suffix("").parts
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts)


def public_functions(tree: ast.Module):
    """``(qualified name, node)`` of the public functions and methods of a module."""
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, funcs) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for sub in node.body:
                if isinstance(sub, funcs) and not sub.name.startswith("_"):
                    yield f"{node.name}.{sub.name}", sub


def missing_docstrings(source: str, name: str = "<module>", private: bool = False) -> list[str]:
    """What lacks a docstring in ``source``: the module itself, then ``name:line function``."""
    tree = ast.parse(source, name)
    out = [] if ast.get_docstring(tree) else [f"{name}: module docstring"]
    if not private:
        out += [f"{name}:{node.lineno} {qual}" for qual, node in public_functions(tree) if not ast.get_docstring(node)]
    return out


def test_the_package_is_walked():
    files = module_files()
    assert len(files) > 50
    names = {str(p.relative_to(SRC)) for p in files}
    assert {"cli.py", "execution/_runner.py", "rollout/loop.py", "analysis/judge.py"} <= names
    assert is_private_module(SRC / "execution" / "_runner.py")
    assert not is_private_module(SRC / "engines" / "__init__.py")


def test_every_module_and_public_function_has_a_docstring():
    problems = []
    for path in module_files():
        problems += missing_docstrings(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)),
                                       private=is_private_module(path))
    assert not problems, "missing docstrings:\n" + "\n".join(problems)


def test_the_check_catches_what_it_should():
    source = (
        '"""Module."""\n'
        "def documented():\n    '''Yes.'''\n"
        "def bare():\n    pass\n"
        "def _private():\n    pass\n"
        "class Thing:\n"
        "    def method(self):\n        pass\n"
        "    def __repr__(self):\n        return ''\n"
        "async def coro():\n    pass\n"
        "def outer():\n    '''Yes.'''\n    def inner():\n        pass\n"
    )
    assert missing_docstrings(source, "m.py") == ["m.py:4 bare", "m.py:9 Thing.method", "m.py:13 coro"]
    assert missing_docstrings("x = 1\n", "n.py") == ["n.py: module docstring"]
    assert missing_docstrings("x = 1\ndef f():\n    pass\n", "p.py", private=True) == ["p.py: module docstring"]
