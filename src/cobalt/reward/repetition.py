"""Fast detection of a long block repeated many times in a row.

The predicate (the paper's): for some block length ``L >= min_len`` there is
a block of ``L`` characters immediately followed by ``min_repeats - 1`` more
copies of itself. Written the direct way, that is one regex search
``(.{L})\\1{k-1}`` per ``L`` (DOTALL), about 1.4 s for 24,000 characters.
:func:`has_repetition` decides the same predicate in well under a
millisecond on such texts, using only ``str`` operations that run in C.

Why it is exact (the full argument is in docs/REWARD.md):

* A match is a window of length ``k*L`` with period ``L``. By the Fine-Wilf
  theorem its smallest period ``p`` divides ``L``, and the window lies inside
  a *run*: a maximal interval with smallest period ``p``. Conversely a run of
  length ``len`` with smallest period ``p`` holds a match iff some multiple of
  ``p`` that is ``>= min_len`` fits ``k`` times, i.e. iff
  ``len >= need(p) = k * p * ceil(min_len / p)``.
* Periods are handled in levels ``(lo, hi]``. For a grid point ``x`` inside
  such a run (far enough from its end), the first re-occurrence of the
  ``hi``-character needle ``text[x:x+hi]`` after ``x`` is exactly at ``x + p``:
  an earlier one at ``x + d`` would give the run the period ``gcd(p, d) < p``
  (Fine-Wilf again). Because ``need(p)`` is large, grid points spaced
  ``step = min need(p) - p - hi + 1`` apart cannot all miss such a run.
* Every shift ``d`` found this way is checked exactly: the maximal
  ``d``-periodic interval around it is measured with slice comparisons and
  tested against ``need(d)``. Nothing is decided by a heuristic.

For ``min_repeats == 2`` (squares) the level bound degenerates; a per-length
scan on a grid of multiples of ``L`` is used instead (exact, slower, never
on the reward's default path).
"""
from __future__ import annotations

from bisect import bisect_right
from math import ceil

_GALLOP_START = 32


def has_repetition(text: str, min_len: int = 32, min_repeats: int = 8) -> bool:
    """True when a block of at least ``min_len`` characters occurs ``min_repeats``
    or more times in a row in ``text`` (characters are code points; newlines count).

    The defaults are the paper's (they equal ``cobalt.reward.shaped.REPETITION_MIN_LEN``
    and ``REPETITION_MIN_REPEATS``).

    >>> has_repetition("x" + "abcd" * 8, min_len=4, min_repeats=8)
    True
    >>> has_repetition("abcd" * 7, min_len=4, min_repeats=8)
    False
    >>> has_repetition("ab" * 100, min_len=32, min_repeats=8)   # period 2, 32-char block x 8 needs 256
    False
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    for name, value in (("min_len", min_len), ("min_repeats", min_repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if len(text) < min_len * min_repeats:
        return False
    if min_repeats == 1:
        return True
    if min_repeats == 2:
        return _has_square(text, min_len)
    return _scan_levels(text, min_len, min_repeats)


def _need(period: int, min_len: int, k: int) -> int:
    """Shortest run with this period that holds ``k`` copies of a block ``>= min_len``."""
    return k * period * ceil(min_len / period)


def _grid_step(lo: int, hi: int, min_len: int, k: int) -> int:
    # min over p in (lo, hi] of need(p) - p is reached at p = max(lo + 1, min_len):
    # (k - 1) * p for p >= min_len, and more than (k - 1) * min_len below it.
    step = (k - 1) * max(lo + 1, min_len) - hi + 1
    assert step >= 1, (lo, hi, min_len, k)
    return step


def _scan_levels(text: str, min_len: int, k: int) -> bool:
    n = len(text)
    p_max = n // k
    ratio = 2.0 if k >= 4 else 1.5
    rev: str | None = None
    checked: dict[int, tuple[list[int], list[int]]] = {}  # shift -> (starts, ends) of measured intervals
    lo, hi = 0, min_len
    while lo < p_max:
        hi = min(hi, p_max)
        step = _grid_step(lo, hi, min_len, k)
        for x in range(0, n - hi, step):
            pos = text.find(text[x:x + hi], x + 1, x + 2 * hi)
            if pos < 0:
                continue
            d = pos - x
            starts, ends = checked.setdefault(d, ([], []))
            at = bisect_right(starts, x) - 1
            if at >= 0 and x + d + hi <= ends[at]:
                continue  # inside a maximal d-periodic interval already measured (too short)
            if rev is None:
                rev = text[::-1]
            start, end = _periodic_extent(text, rev, x, d, hi)
            if end - start >= _need(d, min_len, k):
                return True
            at = bisect_right(starts, start)
            starts.insert(at, start)
            ends.insert(at, end)
        lo, hi = hi, max(hi + 1, int(hi * ratio))
    return False


def _periodic_extent(text: str, rev: str, x: int, d: int, known: int) -> tuple[int, int]:
    """The maximal interval with period ``d`` around ``x``, given that
    ``text[x:x+known] == text[x+d:x+d+known]``."""
    n = len(text)
    forward = known + _lce(text, x + known, x + d + known)
    backward = _lce(rev, n - x - d, n - x)
    return x - backward, x + d + forward


def _lce(s: str, i: int, j: int) -> int:
    """Longest common extension: the largest ``t`` with ``s[i:i+t] == s[j:j+t]`` (``i < j``)."""
    limit = len(s) - j
    done, width = 0, _GALLOP_START
    while done < limit:
        upto = min(done + width, limit)
        if s[i + done:i + upto] == s[j + done:j + upto]:
            done, width = upto, width * 2
            continue
        # s agrees on [0, done) and differs somewhere in [done, upto): bisect.
        while upto - done > 1:
            mid = (done + upto) // 2
            if s[i + done:i + mid] == s[j + done:j + mid]:
                done = mid
            else:
                upto = mid
        return done
    return done


def _has_square(text: str, min_len: int) -> bool:
    # A square of period L covers L consecutive positions u with text[u] == text[u + L],
    # and so contains a multiple of L; measure the agreement run through each multiple.
    n = len(text)
    rev = text[::-1]
    for length in range(min_len, n // 2 + 1):
        for x in range(0, n - length, length):
            if text[x] != text[x + length]:
                continue
            run = _lce(text, x, x + length) + _lce(rev, n - x - length, n - x)
            if run >= length:
                return True
    return False
