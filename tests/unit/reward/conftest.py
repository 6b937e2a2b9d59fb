"""Fixtures for the reward tests (data built in reward_data.py from ../shared/data)."""
from __future__ import annotations

import pytest

from reward_data import build_responses, load_leetcode


@pytest.fixture(scope="session")
def leetcode_rows() -> list[dict]:
    return load_leetcode()


@pytest.fixture(scope="session")
def responses(leetcode_rows) -> dict[str, str]:
    return build_responses(leetcode_rows)
