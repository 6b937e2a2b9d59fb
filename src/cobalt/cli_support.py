"""What every command shares at its edge: errors, number checks, flag aliases, progress.

- :func:`run_guarded` runs a command and turns a user's or the environment's
  mistake into one line on stderr and an exit status: 2 for usage
  (:class:`UsageError`), 1 for a failure, 130 for Ctrl-C (after the command's
  own ``finally`` blocks have flushed its output). The traceback is shown
  only with ``--debug`` or ``COBALT_DEBUG=1``.
- Argparse types that refuse bad numbers before anything runs
  (:func:`positive_int`, :func:`non_negative_float`, ...).
- :func:`add_alias`: an old flag spelling kept working but hidden from help.
- :class:`HelpFormatter`: every flag's default shown once.
- :func:`progress`: a tqdm bar on a terminal; in a log (stderr not a
  terminal) one plain line every 30 s or every 5 %, never ``\\r`` frames.
- :func:`capped`: at most a few messages of a long error list, then a count.

A base module (standard library and :mod:`cobalt.io` only): every layer of the package may use it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Iterable, TextIO

from cobalt.io import MAX_SHOWN_ERRORS

ENV_DEBUG = "COBALT_DEBUG"
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
LOG_INTERVAL_S = 30.0
LOG_STEP_FRACTION = 0.05
RESUME_HINT = "rerun the same command to resume"


class CommandError(Exception):
    """A failure a command reports in one line (exit status 1, or ``status``)."""

    status = EXIT_FAILURE

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class UsageError(CommandError):
    """A bad flag value or combination (exit status 2)."""

    status = EXIT_USAGE


# ---------------------------------------------------------------- errors

_interrupt_status: list[tuple[int, Callable[[], str | None]]] = []


def on_interrupt(status: Callable[[], str | None], *, priority: int = 1) -> None:
    """Register how far the running command got (e.g. ``"4 of 6 problems"``) for the Ctrl-C line.

    The latest of the highest ``priority`` that has something to say wins; a
    progress counter registers itself with priority 0, so that a command's own
    count of resumable units (problems written) comes first.
    """
    _interrupt_status.append((priority, status))


def debug_requested(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether ``--debug`` is in ``argv`` (or ``COBALT_DEBUG=1``), and ``argv`` without it.

    >>> debug_requested(["rollout", "--debug", "--input", "x"])[1]
    ['rollout', '--input', 'x']
    """
    rest = [a for a in argv if a != "--debug"]
    env = os.environ.get(ENV_DEBUG, "").strip().lower() in ("1", "true", "yes", "on")
    return env or len(rest) != len(argv), rest


def describe_error(exc: BaseException) -> tuple[str, int]:
    """One line saying what went wrong and what to do, and the exit status, for ``exc``."""
    if isinstance(exc, CommandError):
        return str(exc), exc.status
    if isinstance(exc, OSError) and exc.filename is not None:
        name = exc.filename
        if isinstance(exc, IsADirectoryError):
            return f"{name}: is a folder; give a file path (folders go to --output-dir)", EXIT_USAGE
        if isinstance(exc, NotADirectoryError) or (isinstance(exc, FileExistsError) and not os.path.isdir(name)):
            return f"{name}: a part of this path is a file, not a folder", EXIT_USAGE
        if isinstance(exc, PermissionError):
            return f"{name}: permission denied; choose a location you can write to", EXIT_FAILURE
        if isinstance(exc, FileNotFoundError):
            return f"{name}: no such file or folder", EXIT_USAGE
        return f"{name}: {exc.strerror or exc}", EXIT_FAILURE
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, FileNotFoundError) and text:
        return text, EXIT_USAGE
    if text and (own_error(exc) or isinstance(exc, (ValueError, OSError))):
        return text, EXIT_FAILURE  # cobalt's own errors (RecordError names file, line and field) speak for themselves
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__, EXIT_FAILURE


def own_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of cobalt's own exception classes (their messages are written for users)."""
    return type(exc).__module__.split(".")[0] == "cobalt"


def interrupt_line() -> str:
    """The line printed on Ctrl-C: how much was done, and how to resume."""
    for _, status in sorted(reversed(_interrupt_status), key=lambda item: -item[0]):
        try:
            done = status()
        except Exception:  # noqa: BLE001 - the line must print whatever the state
            done = None
        if done:
            return f"interrupted: {done} done; {RESUME_HINT}"
    return f"interrupted; {RESUME_HINT}"


def run_guarded(name: str, func: Callable[[], Any], *, debug: bool = False,
                stream: TextIO | None = None) -> int:
    """Run ``func`` (a command); return its exit status, never letting a traceback out unless ``debug``."""
    stream = stream or sys.stderr
    _interrupt_status.clear()
    try:
        return int(func() or 0)
    except KeyboardInterrupt:
        _quiet_shutdown()
        if debug:
            import traceback

            traceback.print_exc(file=stream)
        print(f"cobalt {name}: {interrupt_line()}", file=stream, flush=True)
        return EXIT_INTERRUPTED
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the edge of the program
        if debug:
            import traceback

            traceback.print_exc(file=stream)
        message, status = describe_error(exc)
        generic = message.startswith(type(exc).__name__)
        hint = "" if debug or not generic else f" (--debug or {ENV_DEBUG}=1 shows the traceback)"
        print(f"cobalt {name}: error: {message}{hint}", file=stream, flush=True)
        return status


def _quiet_shutdown() -> None:
    """Silence the loggers that report cancelled tasks and closed loops after Ctrl-C."""
    import logging

    for logger in ("asyncio", "ray", "httpx", "openai", "LiteLLM"):
        logging.getLogger(logger).setLevel(logging.CRITICAL + 1)


def capped(messages: Iterable[str], limit: int = MAX_SHOWN_ERRORS) -> list[str]:
    """At most ``limit`` messages, then one line counting the rest.

    >>> capped(["a", "b", "c"], 2)
    ['a', 'b', '... and 1 more']
    """
    items = list(messages)
    if len(items) <= limit:
        return items
    return items[:limit] + [f"... and {len(items) - limit} more"]


# ---------------------------------------------------------------- numbers


def _number(kind: type, low: float | None, *, strict: bool, what: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if low is not None and (value <= low if strict else value < low):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {what}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


positive_int = _number(int, 0, strict=True, what="at least 1")
non_negative_int = _number(int, 0, strict=False, what="0 or more")
positive_float = _number(float, 0.0, strict=True, what="more than 0")
non_negative_float = _number(float, 0.0, strict=False, what="0 or more")


def fraction(text: str) -> float:
    """Argparse type: a number in (0, 1] (nucleus mass, shares)."""
    value = positive_float(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be in (0, 1]")
    return value


# ---------------------------------------------------------------- flags and help


def add_alias(parser: Any, old: str, *, dest: str, action: str | None = None, const: Any = None,
              type: Callable[[str], Any] | None = None, choices: Iterable[str] | None = None) -> None:
    """Keep the old spelling ``old`` working for ``dest``, hidden from ``--help``.

    Without ``action``, ``old`` becomes another spelling of the flag that
    already stores ``dest`` (same type, choices and requiredness; ``type`` and
    ``choices`` are then the flag's own). With ``action="store_const"``, ``old``
    is a switch that stores ``const`` in ``dest`` (a bare flag that became a
    choice).
    """
    if action is None:
        target = next((a for a in parser._actions if a.dest == dest and a.option_strings), None)
        if target is None:
            raise ValueError(f"add_alias: no flag stores {dest!r} yet")
        target.option_strings.append(old)
        parser._option_string_actions[old] = target
        target.hidden_spellings = set(getattr(target, "hidden_spellings", ())) | {old}
        return
    kwargs: dict[str, Any] = {"dest": dest, "help": argparse.SUPPRESS, "default": argparse.SUPPRESS,
                              "action": action}
    if action == "store_const":
        kwargs["const"] = const
    parser.add_argument(old, **kwargs)


THINKING_CHOICES = ("on", "off", "auto")


def on_off(text: str) -> bool:
    """Argparse type: ``on`` -> True, ``off`` -> False.

    >>> on_off("on"), on_off("off")
    (True, False)
    """
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"{text!r}: choose on or off")
    return text == "on"


def thinking_value(choice: str | None) -> bool | None:
    """``--thinking`` as the engine takes it: on -> True, off -> False, auto -> None (the template's choice)."""
    return {"on": True, "off": False}.get(choice or "auto")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default once (not when the help already speaks of it, nor when there is none),
    and leaves out the old spellings that :func:`add_alias` hid."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        hidden = getattr(action, "hidden_spellings", ())
        if not hidden:
            return super()._format_action_invocation(action)
        saved = action.option_strings
        action.option_strings = [s for s in saved if s not in hidden]
        try:
            return super()._format_action_invocation(action)
        finally:
            action.option_strings = saved

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or "%(default)" in text:
            return text
        if action.default is None or action.default is argparse.SUPPRESS or action.default is False:
            return text
        if action.option_strings and action.nargs == 0:
            return text
        return text + " (default: %(default)s)"


# ---------------------------------------------------------------- progress


class LineProgress:
    """Progress for logs: one line every ``interval_s`` seconds or every ``step`` of the total."""

    def __init__(self, total: int | None, desc: str, unit: str, *, initial: int = 0, stream: TextIO | None = None,
                 interval_s: float = LOG_INTERVAL_S, step_fraction: float = LOG_STEP_FRACTION):
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.step = max(1, int((total or 0) * step_fraction)) if total else None
        self._start = self._last_time = time.monotonic()
        self._last_n = initial
        self._closed = False

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; print a line when the time or the step has come."""
        self.n += n
        now = time.monotonic()
        if now - self._last_time >= self.interval_s or (self.step and self.n - self._last_n >= self.step):
            self._emit(now)

    def _emit(self, now: float) -> None:
        self._last_time, self._last_n = now, self.n
        print(self.format_line(now - self._start), file=self.stream, flush=True)

    def format_line(self, elapsed: float) -> str:
        """``desc: n/total unit (p%), Ns``."""
        if self.total:
            return f"{self.desc}: {self.n}/{self.total} {self.unit} ({100 * self.n / self.total:.0f}%), {elapsed:.0f}s"
        return f"{self.desc}: {self.n} {self.unit}, {elapsed:.0f}s"

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Accepted for tqdm compatibility; lines carry counts only."""

    def close(self) -> None:
        """Print the final line once."""
        if not self._closed:
            self._closed = True
            if self.n != self._last_n or (self.n == 0 and self.total):
                self._emit(time.monotonic())


class _Silent:
    def __init__(self, total: int | None, initial: int = 0):
        self.total, self.n = total, initial

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def progress(total: int | None, desc: str, unit: str, *, enabled: bool = True, initial: int = 0,
             stream: TextIO | None = None) -> Any:
    """A progress counter with ``update(n)`` and ``close()``; its count also feeds the Ctrl-C line.

    A tqdm bar with the total when ``stream`` (stderr) is a terminal, plain
    lines (:class:`LineProgress`) otherwise, nothing shown when not ``enabled``.
    """
    stream = stream or sys.stderr
    if not enabled:
        bar: Any = _Silent(total, initial)
    elif _is_terminal(stream):
        from tqdm import tqdm

        bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream, dynamic_ncols=True)
    else:
        bar = LineProgress(total, desc, unit, initial=initial, stream=stream)
    on_interrupt(lambda: f"{bar.n} of {bar.total} {unit}" if bar.total else None, priority=0)
    return bar


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def resumed_line(done: int, total: int, unit: str) -> str:
    """``"4 of 6 problems already done"`` (what a rerun found in its output).

    >>> resumed_line(4, 6, "problems")
    '4 of 6 problems already done'
    """
    return f"{done} of {total} {unit} already done"


def progress_iter(items: Iterable[Any], total: int | None, desc: str, unit: str, *,
                  enabled: bool = True) -> Iterable[Any]:
    """Yield ``items``, counting each on a :func:`progress` counter with ``total``; closed at the end."""
    bar = progress(total, desc, unit, enabled=enabled)
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()


def require_file(path: Any, flag: str = "--input") -> None:
    """Refuse (usage error) an input ``path`` that is not a readable file, before any output is opened."""
    if not os.path.isfile(path):
        what = "a folder, not a file" if os.path.isdir(path) else "no such file"
        raise UsageError(f"{flag} {path}: {what}")


def require_output_file(path: Any) -> None:
    """Refuse (usage error) an output ``path`` that is a folder or lies under a file, before any check or run.

    The same lines as the ones :func:`describe_error` gives when opening such a path fails,
    so that a user's mistake is named before a server or sandbox is asked for anything.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a folder; give a file path (folders go to --output-dir)")
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise UsageError(f"{path}: a part of this path is a file, not a folder")
