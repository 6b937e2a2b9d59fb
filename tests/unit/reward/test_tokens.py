"""Token counting: o200k_base offline from ../shared/data/tiktoken, special-token text, HF tokenizers."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cobalt.reward import (
    HFTokenCounter,
    TiktokenCounter,
    TokenCounter,
    get_token_counter,
    make_token_counter,
    shaped_reward_breakdown,
)
from cobalt.reward.tokens import SpecialTokenError
from reward_data import QWEN3_TOKENIZER, REPO_ROOT, TIKTOKEN_DIR


def test_default_is_o200k_base(monkeypatch):
    monkeypatch.delenv("COBALT_REWARD_TOKENIZER", raising=False)
    counter = get_token_counter()
    assert isinstance(counter, TiktokenCounter) and isinstance(counter, TokenCounter)
    assert counter.name == "tiktoken:o200k_base"
    assert counter.count("hello world") == 2
    assert counter.count("") == 0


def test_counts_like_tiktoken_itself(leetcode_rows):
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    counter = TiktokenCounter()
    for row in leetcode_rows[:30]:
        assert counter.count(row["response"]) == len(enc.encode_ordinary(row["response"]))


def test_special_token_text_cannot_raise():
    import tiktoken

    text = "before <|endoftext|> after <|fim_prefix|>"
    with pytest.raises(ValueError):  # why encode_ordinary: plain encode refuses this text
        tiktoken.get_encoding("o200k_base").encode(text)
    assert TiktokenCounter().count(text) > 6  # the tags count as ordinary text


def test_special_token_text_in_a_response(responses):
    """cobalt counts special-token text as text; paper raises as the original's ``enc.encode``
    (the well-formed response reaches the length measurement, whose first encode raises)."""
    response = responses["clean"].replace("</think>", "<|endoftext|>\n</think>", 1)
    got = shaped_reward_breakdown(response, 0.0, profile="cobalt")
    assert got.format_violation is None and got.think_tokens > 95
    with pytest.raises(SpecialTokenError, match="o200k_base"):
        shaped_reward_breakdown(response, 0.0)
    with pytest.raises(SpecialTokenError):
        shaped_reward_breakdown(response, 0.0, is_val=True)
    # An ill-formed response returns -0.9 before any length is measured: no raise there either.
    assert shaped_reward_breakdown(response.replace("</think>", ""), 0.0).format == -0.9


def test_hf_tokenizer_setting(monkeypatch):
    monkeypatch.setenv("COBALT_REWARD_TOKENIZER", f"hf:{QWEN3_TOKENIZER}")
    counter = get_token_counter()
    assert isinstance(counter, HFTokenCounter)
    assert counter.count("hello world") == 2
    assert counter.count("x <|endoftext|> y") >= 3


def test_hf_counter_changes_the_lengths(responses):
    qwen = make_token_counter(f"hf:{QWEN3_TOKENIZER}")
    got = shaped_reward_breakdown(responses["long_expl"], 0.0, token_counter=qwen)
    # paper: the text before </think>, stripped, the <think> tag included; cobalt: without the tag
    assert got.think_tokens == qwen.count(responses["long_expl"].split("</think>")[0].strip())
    cobalt = shaped_reward_breakdown(responses["long_expl"], 0.0, token_counter=qwen, profile="cobalt")
    assert cobalt.think_tokens == qwen.count(responses["long_expl"].split("</think>")[0].replace("<think>", "").strip())
    assert got.explanation_tokens > 512


@pytest.mark.parametrize("spec", ["tiktoken:cl100k_base", "o200k_base", " o200k_base "])
def test_tiktoken_settings(spec):
    assert isinstance(make_token_counter(spec), TiktokenCounter)


@pytest.mark.parametrize("spec", ["hf:", "tiktoken:", "some/path/without/prefix"])
def test_bad_settings(spec):
    with pytest.raises(ValueError):
        make_token_counter(spec)


def test_missing_hf_tokenizer(tmp_path):
    with pytest.raises(FileNotFoundError):
        HFTokenCounter(str(tmp_path)).count("x")


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code], env=full_env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_import_loads_nothing_heavy():
    code = (
        "import sys\n"
        "import cobalt.reward\n"
        "from cobalt.reward import get_token_counter, shaped_reward\n"
        "heavy = [m for m in ('ray', 'torch', 'verl', 'tiktoken', 'tokenizers', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "get_token_counter()\n"
        "assert 'tiktoken' not in sys.modules, 'counter built, nothing loaded yet'\n"
        "shaped_reward('no code', None)\n"
        "assert 'tiktoken' not in sys.modules, 'no length terms needed'\n"
        "print('ok')\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_offline_with_cache_dir_only():
    # A fresh process with only TIKTOKEN_CACHE_DIR: the encoding loads from that folder.
    code = "from cobalt.reward import TiktokenCounter; print(TiktokenCounter().count('hello world'))"
    proc = _run(code, TIKTOKEN_CACHE_DIR=str(TIKTOKEN_DIR))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"


# make_token_counter is called directly below, not through get_token_counter: the latter is
# cached per setting (functools.lru_cache), so a counter built once in a process is reused.


@pytest.mark.parametrize(
    "spec,encoding",
    [("o200k_base", "o200k_base"), (" o200k_base ", "o200k_base"), ("tiktoken:o200k_base", "o200k_base"),
     ("tiktoken:cl100k_base", "cl100k_base")],
)
def test_tiktoken_setting_names_the_encoding(spec, encoding):
    counter = make_token_counter(spec)
    assert counter == TiktokenCounter(encoding)
    assert counter.name == f"tiktoken:{encoding}"


def test_plain_encoding_name_counts_with_that_encoding():
    # "hello world" is two tokens in o200k_base (tiktoken's own count, checked above).
    assert make_token_counter("o200k_base").count("hello world") == 2


@pytest.mark.parametrize("path", ["x", "/models/qwen3", str(QWEN3_TOKENIZER)])
def test_hf_setting_keeps_the_whole_path(path):
    counter = make_token_counter(f"hf:{path}")
    assert counter == HFTokenCounter(path)
    assert counter.name == f"hf:{path}"


def test_hf_setting_without_a_path_says_so():
    with pytest.raises(ValueError) as info:
        make_token_counter("hf:")
    assert str(info.value) == "tokenizer setting 'hf:' needs a path"


@pytest.mark.parametrize("spec", ["tiktoken:", "some/path/without/prefix", "tiktoken:a/b"])
def test_unknown_setting_message_names_it_and_the_choices(spec):
    with pytest.raises(ValueError) as info:
        make_token_counter(spec)
    message = str(info.value)
    assert message.startswith(f"unknown tokenizer setting {spec!r}: ")
    for choice in ("o200k_base", "tiktoken:<name>", "hf:<path>"):
        assert choice in message
