"""Bounds on what a model may hand back: one response is stored and resent at most so large.

A response within the request's ``max_new_tokens`` (as the engine counted
them) and within :data:`MAX_RESPONSE_BYTES` is kept unchanged, as the original
does. Beyond either, it is cut: to the share of its characters that
``max_new_tokens`` is of the tokens the engine reports (the engine's own
tokenizer is not at hand), and to at most :data:`MAX_RESPONSE_BYTES` of UTF-8.
A cut completion says so in ``extra["cut"]`` (``"max_tokens"`` or ``"bytes"``),
its ``finish_reason`` becomes ``length`` and its token count is capped; the run
counts cuts in its summary (``responses_cut``).
"""
from __future__ import annotations

import dataclasses

from cobalt.engines.base import Completion

MAX_RESPONSE_BYTES = 1 << 20
"""1 MiB: the largest response kept, whatever the token limit."""


def cut_to_bytes(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``limit`` bytes (no split character).

    >>> cut_to_bytes("aé" * 3, 5)  # a, é (2 bytes), a, then half of an é: left out
    'aéa'
    """
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")


def bound_completion(completion: Completion, max_new_tokens: int | None,
                     max_bytes: int = MAX_RESPONSE_BYTES) -> Completion:
    """``completion`` unchanged when within both bounds, else cut and marked (see the module)."""
    text, reason = completion.text, None
    tokens = int(completion.completion_tokens or 0)
    if max_new_tokens and tokens > max_new_tokens and text:
        text = text[: max(1, len(text) * max_new_tokens // tokens)]
        reason = "max_tokens"
    if len(text) > max_bytes // 4 and len(text.encode("utf-8")) > max_bytes:
        text = cut_to_bytes(text, max_bytes)
        reason = reason or "bytes"
    if reason is None:
        return completion
    extra = dict(completion.extra)
    extra["cut"] = reason
    extra["original_chars"] = len(completion.text)
    return dataclasses.replace(completion, text=text, finish_reason="length", extra=extra,
                               completion_tokens=min(tokens, max_new_tokens or tokens))
