"""Parsing model responses: fenced code blocks and the think/answer split.

One implementation shared by the reward, the rollout and the data pipeline
(the paper's code copied its extraction helper into seven files).
"""
from __future__ import annotations

import re

THINK_END = "</think>"

# A fence line: optional indentation, three or more backticks, an optional info string.
_FENCE_RE = re.compile(r"^[ \t]*(`{3,})[ \t]*([^\s`]*)[^\n`]*$", re.MULTILINE)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Return every fenced block of ``text`` as ``(language, body)``, in order.

    A block opens with a line of three or more backticks (optionally followed
    by a language tag) and closes at the next line made of at least as many
    backticks. An unclosed final block is not returned.

    >>> fenced_blocks("a\\n```python\\nprint(1)\\n```\\nb")
    [('python', 'print(1)')]
    """
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        open_m = _FENCE_RE.search(text, pos)
        if not open_m:
            return blocks
        ticks, lang = open_m.group(1), open_m.group(2)
        close_re = re.compile(r"^[ \t]*" + ticks + r"`*[ \t]*$", re.MULTILINE)
        body_start = open_m.end() + 1
        close_m = close_re.search(text, body_start) if body_start <= len(text) else None
        if not close_m:
            return blocks
        body = text[body_start:close_m.start()]
        blocks.append((lang.lower(), body.rstrip("\n")))
        pos = close_m.end()


def extract_code(response: str) -> str | None:
    """The body of the last fenced block in ``response`` (any language tag), or None.

    This is the paper's rule (METHOD §3.6).

    >>> extract_code("```\\nx = 1\\n```\\ntext\\n```python\\nprint(2)\\n```")
    'print(2)'
    >>> extract_code("no code here") is None
    True
    """
    blocks = fenced_blocks(response)
    return blocks[-1][1] if blocks else None


def split_think(response: str) -> tuple[str | None, str]:
    """Split a thinking model's response into ``(think, answer)`` at the first ``</think>``.

    ``think`` is None when there is no ``</think>``; the answer is then the whole text.
    A leading ``<think>`` tag is removed from the think part.

    >>> split_think("<think>hmm</think>\\nanswer")
    ('hmm', '\\nanswer')
    """
    idx = response.find(THINK_END)
    if idx < 0:
        return None, response
    think = response[:idx]
    stripped = think.lstrip()
    if stripped.startswith("<think>"):
        think = stripped[len("<think>"):]
    return think, response[idx + len(THINK_END):]


def answer_for_history(response: str, max_chars: int = 6000) -> str:
    """What a multi-turn history keeps of a thinking model's turn (METHOD §4):
    the text after ``</think>`` (or all of it when there is none), cut to ``max_chars``."""
    _, answer = split_think(response)
    return answer.strip()[:max_chars]


HISTORY_MAX_CHARS = 6000
"""How much of an assistant turn a multi-turn history keeps (METHOD §9)."""


def history_text(response: str, *, enable_thinking: bool, max_chars: int = HISTORY_MAX_CHARS) -> str:
    """The text of an assistant turn as the next turn's history shows it (METHOD §9).

    With thinking enabled: the text after the LAST ``</think>``, stripped, cut to
    ``max_chars``; a response without ``</think>`` is kept unstripped, cut to
    ``max_chars``. Without thinking (and for API models): the full response.

    >>> history_text("<think>a</think>x</think>  answer ", enable_thinking=True)
    'answer'
    >>> history_text("  no think tag", enable_thinking=True, max_chars=5)
    '  no '
    >>> history_text("<think>a</think> b", enable_thinking=False)
    '<think>a</think> b'
    """
    if not enable_thinking:
        return response
    idx = response.rfind(THINK_END)
    if idx < 0:
        return response[:max_chars]
    return response[idx + len(THINK_END):].strip()[:max_chars]
