"""Token counting for the reward's length terms, behind one small interface.

The paper measures lengths with tiktoken's ``o200k_base`` whatever the policy
model is; that stays the default. Another tokenizer is chosen with the
setting ``COBALT_REWARD_TOKENIZER`` (or by passing a :class:`TokenCounter`):

- ``o200k_base`` or ``tiktoken:<encoding>``: a tiktoken encoding;
- ``hf:<folder or tokenizer.json>``: a Hugging Face ``tokenizers`` tokenizer.

Nothing is loaded at import time. tiktoken downloads its encoding file on
first use unless ``TIKTOKEN_CACHE_DIR`` points at a folder holding it (the
machines here are offline: tests use ``../shared/data/tiktoken``). Counting
uses ``encode_ordinary``, so text such as ``<|endoftext|>`` in a response is
counted as plain text and can never raise. The ``paper`` reward counts with
:meth:`TiktokenCounter.count_strict` instead, the original's ``encode``: the
encoding's special-token text (``<|endoftext|>``, ``<|endofprompt|>`` for
``o200k_base``) raises :class:`SpecialTokenError`.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

DEFAULT_TOKENIZER = "o200k_base"
TOKENIZER_ENV = "COBALT_REWARD_TOKENIZER"


class SpecialTokenError(ValueError):
    """Text holds an encoding's special-token text and was counted as the original counts it."""


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a text."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (special-token text counted as ordinary text)."""
        ...


@dataclass(frozen=True)
class TiktokenCounter:
    """Counts with a tiktoken encoding (``o200k_base`` by default, as in the paper)."""

    encoding_name: str = DEFAULT_TOKENIZER

    @property
    def name(self) -> str:
        """The setting string that selects this counter."""
        return f"tiktoken:{self.encoding_name}"

    def count(self, text: str) -> int:
        """Token count via ``encode_ordinary`` (loads the encoding on first use)."""
        return len(_tiktoken_encoding(self.encoding_name).encode_ordinary(text))

    def count_strict(self, text: str) -> int:
        """Token count via ``encode`` with its defaults, as the original measures lengths:
        special-token text raises :class:`SpecialTokenError`.

        >>> TiktokenCounter().count_strict("a <|im_end|> b") > 0   # not an o200k_base special token
        True
        """
        encoding = _tiktoken_encoding(self.encoding_name)
        try:
            return len(encoding.encode(text))
        except ValueError as exc:
            raise SpecialTokenError(f"{self.encoding_name} cannot encode the text: {exc}") from exc


@dataclass(frozen=True)
class HFTokenCounter:
    """Counts with a Hugging Face ``tokenizers`` tokenizer file (no special tokens added)."""

    path: str

    @property
    def name(self) -> str:
        """The setting string that selects this counter."""
        return f"hf:{self.path}"

    def count(self, text: str) -> int:
        """Token count of ``text`` without added special tokens."""
        return len(_hf_tokenizer(self.path).encode(text, add_special_tokens=False).ids)


@functools.lru_cache(maxsize=None)
def _tiktoken_encoding(name: str):
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # offline without a cache, unknown name, bad file
        cache = os.environ.get("TIKTOKEN_CACHE_DIR")
        raise RuntimeError(
            f"cannot load tiktoken encoding {name!r} ({type(exc).__name__}: {exc}); "
            f"offline, set TIKTOKEN_CACHE_DIR to a folder holding its file "
            f"(currently {cache!r})"
        ) from exc


@functools.lru_cache(maxsize=None)
def _hf_tokenizer(path: str):
    from tokenizers import Tokenizer

    file = Path(path)
    if file.is_dir():
        file = file / "tokenizer.json"
    if not file.is_file():
        raise FileNotFoundError(f"no tokenizer.json at {path!r}")
    return Tokenizer.from_file(str(file))


def make_token_counter(spec: str) -> TokenCounter:
    """Build a counter from a setting string: ``o200k_base``, ``tiktoken:<encoding>``
    or ``hf:<path>``.

    >>> make_token_counter("o200k_base").name
    'tiktoken:o200k_base'
    >>> make_token_counter("hf:/models/qwen3").name
    'hf:/models/qwen3'
    """
    spec = spec.strip()
    if spec.startswith("hf:"):
        if not spec[3:]:
            raise ValueError("tokenizer setting 'hf:' needs a path")
        return HFTokenCounter(spec[3:])
    name = spec[len("tiktoken:"):] if spec.startswith("tiktoken:") else spec
    if not name or "/" in name or os.sep in name:
        raise ValueError(f"unknown tokenizer setting {spec!r}: use o200k_base, tiktoken:<name> or hf:<path>")
    return TiktokenCounter(name)


@functools.lru_cache(maxsize=8)
def _cached_counter(spec: str) -> TokenCounter:
    return make_token_counter(spec)


def get_token_counter(spec: str | None = None) -> TokenCounter:
    """The counter for ``spec``, else ``$COBALT_REWARD_TOKENIZER``, else ``o200k_base``
    (one instance per setting; the tokenizer itself loads on first count)."""
    return _cached_counter(spec or os.environ.get(TOKENIZER_ENV) or DEFAULT_TOKENIZER)
