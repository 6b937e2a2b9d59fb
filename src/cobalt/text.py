"""Parsing model responses: fenced code blocks and the think/answer split.

One implementation shared by the reward, the rollout and the data pipeline
(the paper's code copied its extraction helper into seven files).
"""
from __future__ import annotations

import os
import re

from cobalt.defaults import HISTORY_MAX_CHARS
from cobalt.profile import DEFAULT_PROFILE, Profile, resolve_profile

THINK_END = "</think>"

# A fence line: optional indentation, three or more backticks, an optional info string.
_FENCE_RE = re.compile(r"^[ \t]*(`{3,})[ \t]*([^\s`]*)[^\n`]*$", re.MULTILINE)

PAPER_CODE_RE = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
"""The original code's extraction rule (METHOD §9): three backticks, an optional
word-character tag, a newline, then everything lazily up to the next three
backticks wherever they stand (mid-line too)."""


def fenced_blocks(text: str, *, inline_close: bool = False) -> list[tuple[str, str]]:
    """Return every fenced block of ``text`` as ``(language, body)``, in order.

    A block opens with a line of three or more backticks (optionally followed
    by an info string such as ``python`` or ``c++``) and closes at the next line
    made of at least as many backticks. An unclosed final block is not
    returned. With ``inline_close``, a code line that ends with the fence's
    backticks (``print(1)```)``) also closes the block, when it comes before
    the next closing fence line.

    >>> fenced_blocks("a\\n```python\\nprint(1)\\n```\\nb")
    [('python', 'print(1)')]
    >>> fenced_blocks("```c++\\nint x;\\n```")
    [('c++', 'int x;')]
    >>> fenced_blocks("```python\\nprint(1)```", inline_close=True)
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
        if body_start > len(text):
            return blocks
        close_m = close_re.search(text, body_start)
        if inline_close:
            tail_m = re.compile(r"(?<!`)" + ticks + r"[ \t]*$", re.MULTILINE).search(text, body_start)
            if tail_m and (close_m is None or tail_m.start() < close_m.start()):
                close_m = tail_m
        if not close_m:
            return blocks
        body, pos = text[body_start:close_m.start()], close_m.end()
        blocks.append((lang.lower(), body.rstrip("\n")))


def extract_code(response: str, profile: "str | Profile | None" = None) -> str | None:
    """The program in a model response, or None when there is none; the rule depends on ``profile``.

    ``paper`` (the default; the original code, METHOD §9): the last match of
    :data:`PAPER_CODE_RE` over the whole text, its body stripped on both ends
    (``str.strip()``, as every copy of the original's extractor does, so an
    indented one-block program runs). A block closed on the code's own last line
    counts; a tag with a non-word character (``c++``) or a space before the
    newline does not match at that fence (the regex may then match from a
    later fence).

    ``cobalt``: the body of the last fenced block of :func:`fenced_blocks`
    (fences are whole lines, any info string, a longer fence may contain a
    shorter one, trailing newlines and common indentation removed); a block whose closing backticks
    end its last code line (``print(1)```)``) closes there.

    >>> extract_code("```python\\nprint(1)```")
    'print(1)'
    >>> extract_code("```\\nx = 1\\n```\\ntext\\n```python\\nprint(2)\\n```")
    'print(2)'
    >>> extract_code("```c++\\nint x;\\n```") is None
    True
    >>> extract_code("```c++\\nint x;\\n```", profile="cobalt")
    'int x;'
    >>> extract_code("no code here", profile="cobalt") is None
    True
    """
    if _profile(profile) is Profile.PAPER:
        matches = PAPER_CODE_RE.findall(response)
        return matches[-1][1].strip() if matches else None
    blocks = fenced_blocks(response, inline_close=True)
    # Common indentation is removed (an indented block is still the model's program);
    # relative indentation stays, where strip() would break a block indented throughout.
    return _dedent(blocks[-1][1]) if blocks else None


def _dedent(body: str) -> str:
    r"""``body`` without the indentation common to its non-blank lines; unchanged when there is none.

    >>> _dedent("  x = 1\n    \n  if x:\n      y = 2"), _dedent("x\n  \ny")
    ('x = 1\n  \nif x:\n    y = 2', 'x\n  \ny')
    """
    lines = body.split("\n")
    margin = os.path.commonprefix([re.match(r"[ \t]*", line).group() for line in lines if line.strip()])
    if not margin:
        return body
    return "\n".join(line[len(margin):] if line.startswith(margin) else line for line in lines)


def _profile(value: "str | Profile | None") -> Profile:
    # None means the default profile; the environment is read only by commands (cobalt.profile).
    return DEFAULT_PROFILE if value is None else resolve_profile(value)


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
