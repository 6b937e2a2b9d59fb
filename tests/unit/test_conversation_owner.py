"""The conversation has one owner: no other module of src/cobalt writes a chat message.

A chat message literal is a dict display whose keys are exactly ``role`` and
``content`` (or a ``dict(role=..., content=...)`` call); the only module that
builds them is ``cobalt.rollout.conversation``. The engines' liveness probe is
the one other place: it sits below the problem layer (it cannot import the
conversation module) and its one-token "ping" is no conversation.
"""
from __future__ import annotations

import ast
from pathlib import Path

import cobalt

SRC = Path(cobalt.__file__).resolve().parent
OWNER = Path("rollout/conversation.py")
PROBE = (Path("engines/litellm_engine.py"), "check")
"""(file, function) of the engines' liveness probe."""


def _is_message(node: ast.AST) -> bool:
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        return len(keys) == len(node.keys) and sorted(keys) == ["content", "role"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return sorted(k.arg for k in node.keywords if k.arg) == ["content", "role"]
    return False


def message_literals(source: str) -> list[tuple[int, str | None]]:
    """``(line, enclosing function)`` of every chat-message literal in ``source``."""
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if _is_message(child):
                found.append((child.lineno, name))
            visit(child, name)

    visit(ast.parse(source), None)
    return found


def test_the_finder_sees_displays_and_dict_calls():
    source = ('a = {"role": "user", "content": "x"}\n'
              'def f():\n    return [dict(role="user", content="y")]\n'
              'b = {"role": "user", "content": "x", "name": "n"}\n'
              'c = {"passing": [], "feedback": []}\n')
    assert message_literals(source) == [(1, None), (3, "f")]


def test_no_chat_message_literal_outside_the_conversation_module():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel == OWNER:
            continue
        for line, function in message_literals(path.read_text(encoding="utf-8")):
            if (rel, function) != PROBE:
                offenders.append(f"{rel}:{line}")
    assert not offenders, "chat messages built outside cobalt.rollout.conversation:\n" + "\n".join(offenders)


def test_the_conversation_module_builds_messages():
    assert message_literals((SRC / OWNER).read_text(encoding="utf-8"))
