"""Shared test fixtures: paths to ../shared/data and a real embedded executor; one Ray
authentication setting for the whole session."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
LEETCODE_FILE = SHARED_DATA / "leetcode" / "leetcode_problems.jsonl.gz"


def pytest_configure(config):
    """Fix Ray's token authentication for the session before any test imports Ray.

    Left unset, Ray decides per process: a ``ray.init()`` that starts a local cluster turns
    token auth on and writes ``RAY_AUTH_MODE=token`` into this process's environment (so every
    later subprocess inherits it), ``ray start`` turns it on only if ``~/.ray/auth_token``
    exists, and a driver given an explicit address keeps it off. A driver whose mode differs
    from its cluster's never receives its actors' results (the workers' replies are refused
    with ``InvalidAuthToken``) and waits forever. So: token auth with a token of this session,
    in the environment that every head, worker, ``serve`` CLI and driver inherits. A mode set
    by the caller is kept as it is.
    """
    if "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)


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
def broken_server():
    """A real HTTP server on 127.0.0.1 that answers every request with HTTP 500; yields its /v1 URL."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Always500(BaseHTTPRequestHandler):
        def _fail(self) -> None:
            body = b'{"error": {"message": "the model server is broken"}}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _fail

        def log_message(self, *args) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Always500)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


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
