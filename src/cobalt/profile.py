"""The behaviour profile: ``paper`` (exactly the original code) or ``cobalt`` (corrected).

Every rule that the original code implements differently from what Cobalt
considers correct is switched by one value, the profile (docs/FIDELITY.md
lists the rules). ``paper`` is the default everywhere; ``--profile`` on any
command or the environment variable ``COBALT_PROFILE`` chooses the other.
Fixes that only stop crashes, leaks or sandbox escapes apply to both.

The profile is plain data: pass it down explicitly (as a string or
:class:`Profile`), never read the environment deep inside library code.
"""
from __future__ import annotations

import argparse
import enum
import os

ENV_PROFILE = "COBALT_PROFILE"


class Profile(str, enum.Enum):
    """Which behaviour to follow where the original code and Cobalt differ."""

    PAPER = "paper"
    """Exactly what the original public code does, wherever it shows in outputs."""
    COBALT = "cobalt"
    """The corrected behaviour (each difference documented in docs/FIDELITY.md)."""

    def __str__(self) -> str:  # argparse and f-strings show the plain value
        return self.value


DEFAULT_PROFILE = Profile.PAPER
_NAMES = frozenset(p.value for p in Profile)


def resolve_profile(value: "str | Profile | None" = None) -> Profile:
    """The profile named by ``value``, else by ``$COBALT_PROFILE``, else ``paper``.

    >>> resolve_profile("cobalt")
    <Profile.COBALT: 'cobalt'>
    >>> resolve_profile(Profile.PAPER)
    <Profile.PAPER: 'paper'>
    """
    if isinstance(value, Profile):
        return value
    chosen = value if value not in (None, "") else os.environ.get(ENV_PROFILE, "")
    if chosen in (None, ""):
        return DEFAULT_PROFILE
    try:
        return Profile(str(chosen).strip().lower())
    except ValueError:
        source = "--profile" if value not in (None, "") else f"${ENV_PROFILE}"
        raise ValueError(
            f"{source}: unknown profile {chosen!r}; choose 'paper' (the original code's behaviour) "
            "or 'cobalt' (the corrected one)"
        ) from None


def profile_name(value: object) -> str:
    """The plain name of ``value``, which must be a profile exactly (no environment fallback).

    For the pure functions that take an explicit ``profile`` argument.

    >>> profile_name(Profile.COBALT), profile_name("paper")
    ('cobalt', 'paper')
    >>> profile_name("PAPER")
    Traceback (most recent call last):
    ...
    ValueError: profile must be 'paper' or 'cobalt', got 'PAPER'
    """
    name = str(value)  # a Profile prints as its value
    if name not in _NAMES:
        raise ValueError(f"profile must be 'paper' or 'cobalt', got {value!r}")
    return name



def add_profile_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--profile {paper,cobalt}`` to a command (default: ``$COBALT_PROFILE`` or paper)."""
    parser.add_argument(
        "--profile",
        choices=[p.value for p in Profile],
        default=None,
        help="'paper' behaves exactly as the original code; 'cobalt' applies the documented "
        f"corrections (docs/FIDELITY.md). Default: ${ENV_PROFILE}, else 'paper'.",
    )


def profile_from_args(args: argparse.Namespace) -> Profile:
    """The profile a command runs with, from its parsed ``--profile`` (or the environment)."""
    return resolve_profile(getattr(args, "profile", None))
