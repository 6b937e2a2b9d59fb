"""Fixtures shared by the data tests."""
from __future__ import annotations

import threading

import pytest


@pytest.fixture
def tqdm_lock_of_this_process(monkeypatch):
    """tqdm's default lock is a multiprocessing semaphore, shared by forked processes: under
    mutation testing (scripts/mutation.sh forks one process per mutant) a process that died
    holding it hung every later one. The bars of a test get a lock of their own process, and
    no monitor thread (it only tunes the refresh rate of slow bars)."""
    from tqdm import tqdm

    monkeypatch.setattr(tqdm, "_lock", threading.RLock(), raising=False)
    monkeypatch.setattr(tqdm, "monitor_interval", 0)
