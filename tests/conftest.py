"""Shared test fixtures: paths to ../shared/data and a real embedded executor."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
LEETCODE_FILE = SHARED_DATA / "leetcode" / "leetcode_problems.jsonl.gz"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real public data sets beside the repository."""
    assert SHARED_DATA.is_dir(), f"missing {SHARED_DATA}: clone the repository beside shared/"
    return SHARED_DATA


@pytest.fixture(scope="session")
def leetcode_problems():
    """All 286 LeetCode problems with reference solutions."""
    from cobalt.data.leetcode import load_leetcode

    return load_leetcode(LEETCODE_FILE)


@pytest.fixture(scope="session")
def executor():
    """A real bubblewrap-sandboxed executor with the paper's limits."""
    from cobalt.execution.local import LocalExecutor

    return LocalExecutor()


@pytest.fixture
def openai_server():
    """A real OpenAI-compatible chat server on 127.0.0.1 (see tests/support/openai_server.py)."""
    from support.openai_server import OpenAIServer

    with OpenAIServer() as server:
        yield server


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound once, then closed again)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory) -> Path:
    """A tiny random Qwen3 model (2 layers, hidden 64, seed 0) with the real Qwen3 tokenizer."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from cobalt.engines.tiny_model import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"), tokenizer_dir=SHARED_DATA / "qwen3_tokenizer")
