"""Every command's help: each flag has help text and shows its default at most once;
the top-level help lists each command once, on one line."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from cobalt.cli import COMMANDS, command_parser


def _flag_helps(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    formatter = parser._get_formatter()
    out = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        text = formatter._expand_help(action) if action.help else ""
        out.append((name, text))
    return out


def help_problems(parser: argparse.ArgumentParser) -> list[str]:
    """Flags without help, or whose help shows a default twice."""
    problems = []
    for flag, text in _flag_helps(parser):
        if not text.strip():
            problems.append(f"{flag}: no help")
        if text.lower().count("(default") > 1 or len(re.findall(r"\bdefault\b", text, re.I)) > 2:
            problems.append(f"{flag}: default shown twice: {text!r}")
    return problems


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_flag_has_help_and_one_default(name):
    parser, _ = command_parser(name)
    problems = help_problems(parser)
    assert not problems, f"cobalt {name}: " + "; ".join(problems)


def test_checker_catches_a_doubled_default_and_a_missing_help():
    from cobalt.cli_support import HelpFormatter

    plain = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    plain.add_argument("--x", default=None, help="x (default: $X)")
    plain.add_argument("--y", type=int, default=3)
    assert help_problems(plain) == ["--x: default shown twice: 'x (default: $X) (default: None)'", "--y: no help"]
    ours = argparse.ArgumentParser(formatter_class=HelpFormatter)
    ours.add_argument("--x", default=None, help="x (default: $X)")
    ours.add_argument("--y", type=int, default=3, help="y")
    ours.add_argument("--z", action="store_true", help="z")
    assert help_problems(ours) == []
    assert dict(_flag_helps(ours)) == {"--x": "x (default: $X)", "--y": "y (default: 3)", "--z": "z"}


def test_top_level_help_lists_each_command_once_whole():
    out = subprocess.run([sys.executable, "-m", "cobalt", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr
    for name in COMMANDS:
        lines = [line for line in out.stdout.splitlines() if re.match(rf"\s+{re.escape(name)}\s", line)]
        assert len(lines) == 1, (name, lines)
        assert len(re.findall(rf"^  {re.escape(name)}\s", out.stdout, re.M)) == 1, name
    assert "hacking-\n" not in out.stdout
