"""The Hugging Face hub, offline first: decide once whether it answers, never wait a minute for it.

A tokenizer or data set named by hub id is fetched only when the hub answers
a TCP connection within :data:`HUB_TIMEOUT_S`; otherwise ``HF_HUB_OFFLINE=1``
is set for the rest of the process (so that no library retries) and only the
local cache is tried. When that fails too the command stops with one line
naming the flag that takes a local path. Nothing is ever substituted: another
tokenizer would change prompt-length filtering, and so the numbers.
"""
from __future__ import annotations

import functools
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from cobalt.cli_support import CommandError

HUB_HOST = "huggingface.co"
HUB_PORT = 443
HUB_TIMEOUT_S = 3.0
ENV_OFFLINE = "HF_HUB_OFFLINE"


class HubUnavailable(CommandError):
    """A hub name that can be neither fetched nor found in the local cache."""


def _connect(host: str, port: int, timeout: float, result: list) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            result.append(True)
    except OSError:
        result.append(False)


def hub_reachable(timeout: float = HUB_TIMEOUT_S, host: str | None = None) -> bool:
    """Whether the hub accepts a TCP connection within ``timeout`` seconds (name lookup included).

    ``HF_HUB_OFFLINE=1`` counts as unreachable without trying. The host is
    ``$HF_ENDPOINT``'s when that is set.
    """
    if _offline_env():
        return False
    endpoint_host, port = _endpoint()
    result: list = []
    # getaddrinfo has no timeout of its own: a thread bounds the name lookup too.
    worker = threading.Thread(target=_connect, args=(host or endpoint_host, port, timeout, result), daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    return bool(result and result[0])


def _endpoint() -> tuple[str, int]:
    """Host and port of the hub: ``$HF_ENDPOINT``'s when set, else huggingface.co:443."""
    from urllib.parse import urlparse

    endpoint = os.environ.get("HF_ENDPOINT", "")
    if not endpoint:
        return HUB_HOST, HUB_PORT
    url = urlparse(endpoint)
    return url.hostname or HUB_HOST, url.port or (80 if url.scheme == "http" else HUB_PORT)


def _offline_env() -> bool:
    return os.environ.get(ENV_OFFLINE, "").strip().lower() in ("1", "true", "yes", "on")


def go_offline() -> None:
    """Set ``HF_HUB_OFFLINE=1`` for this process, also in huggingface_hub if it is already imported."""
    os.environ[ENV_OFFLINE] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    for name in ("transformers.utils.hub", "datasets.config"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "HF_HUB_OFFLINE"):
            setattr(module, "HF_HUB_OFFLINE", True)


@functools.lru_cache(maxsize=1)
def hub_online() -> bool:
    """Whether to use the hub in this process (decided once; offline sets ``HF_HUB_OFFLINE``)."""
    online = hub_reachable()
    if not online:
        go_offline()
    return online


def is_local(name_or_path: str) -> bool:
    """Whether ``name_or_path`` names something on this machine rather than a hub id."""
    return Path(name_or_path).expanduser().exists()


def looks_like_path(name: str) -> bool:
    """Whether ``name`` is a file-system path rather than a hub id (``org/name`` or ``name``).

    >>> looks_like_path("Qwen/Qwen3-8B"), looks_like_path("./tok"), looks_like_path("/data/a/b")
    (False, True, True)
    """
    return name.startswith(("/", ".", "~")) or name.count("/") > 1


def load_tokenizer(name_or_path: str, *, flag: str = "--tokenizer") -> Any:
    """The transformers tokenizer of a local folder or a hub id; a hub id offline comes from the cache only.

    Raises :class:`HubUnavailable` naming ``flag`` when it cannot be had.
    """
    local_only = False
    if not is_local(name_or_path):
        if looks_like_path(name_or_path):
            raise HubUnavailable(f"{flag} {name_or_path}: no such folder")
        local_only = not hub_online()
        if local_only and not cached(name_or_path, "tokenizer_config.json"):
            # decided before importing transformers, which alone takes seconds
            raise HubUnavailable(f"tokenizer {name_or_path!r} cannot be loaded (the hub is unreachable and it is "
                                 f"not in the local cache); pass a local folder with {flag} PATH (one with "
                                 "tokenizer.json and tokenizer_config.json)")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_only)
    except (OSError, ValueError) as exc:
        if is_local(name_or_path):
            raise HubUnavailable(f"{flag} {name_or_path}: not a tokenizer folder ({_first_line(exc)})") from None
        where = "the hub is unreachable and it is not in the local cache" if local_only else _first_line(exc)
        raise HubUnavailable(f"tokenizer {name_or_path!r} cannot be loaded ({where}); pass a local folder "
                             f"with {flag} PATH (one with tokenizer.json and tokenizer_config.json)") from None


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached(repo_id: str, filename: str, kind: str = "models") -> bool:
    """Whether a snapshot of hub repository ``repo_id`` in the local cache holds ``filename``."""
    folder = hub_cache_dir() / f"{kind}--{repo_id.replace('/', '--')}" / "snapshots"
    return folder.is_dir() and any((snap / filename).exists() for snap in folder.iterdir())


def require_hub(name: str, *, what: str, flag: str) -> None:
    """Refuse at once to fetch ``name`` (a hub id of a ``what``) when the hub does not answer."""
    if not is_local(name) and not hub_online():
        raise HubUnavailable(f"{what} {name!r} is a hub name and the hub ({_endpoint()[0]}) is unreachable; "
                             f"pass a local copy with {flag} PATH")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
