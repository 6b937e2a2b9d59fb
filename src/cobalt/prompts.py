"""The prompts of Cobalt (METHOD §8), kept as editable text files.

The texts live in ``cobalt/templates/*.txt``; this module only loads and fills
them. A user can replace any of them without touching code: put a file of the
same name in a folder and point ``COBALT_TEMPLATE_DIR`` (or the
``template_dir`` argument) at it. Files missing from that folder fall back to
the packaged ones.

Substitution is deliberately simple: ``{name}`` is replaced by the field
``name`` (one pass, so a value that itself contains ``{name}`` is left alone);
``{{`` and ``}}`` give literal braces; any other brace text is kept as is.

Templates and their placeholders:

=====================  ==============================================================
file                   placeholders
=====================  ==============================================================
system.txt             (none)
instruction.txt        ``{question}`` (required): the problem statement
repair.txt             ``{feedback}`` (required): execution feedback of the last program
all_public_passed.txt  (none): the feedback when every public test passes (sent inside
                       repair.txt, like any feedback: :func:`feedback_turn_message`)
judge.txt              ``{problem}``, ``{new_program}`` (required), ``{previous_program}``,
                       ``{feedback}``, ``{diff}``
=====================  ==============================================================

The judge's answer ends with a line ``Verdict: N``; :func:`parse_judge_verdict`
reads it back (categories in :data:`JUDGE_CATEGORIES`).
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

ENV_TEMPLATE_DIR = "COBALT_TEMPLATE_DIR"


@dataclass(frozen=True)
class TemplateSpec:
    """A template file and the placeholders it takes."""

    filename: str
    placeholders: tuple[str, ...] = ()
    """Every field the template may use; callers must supply all of them."""
    required: tuple[str, ...] = ()
    """Fields the template text must contain (an override that drops them is an error)."""


TEMPLATES: dict[str, TemplateSpec] = {
    "system": TemplateSpec("system.txt"),
    "instruction": TemplateSpec("instruction.txt", ("question",), ("question",)),
    "repair": TemplateSpec("repair.txt", ("feedback",), ("feedback",)),
    "all_public_passed": TemplateSpec("all_public_passed.txt"),
    "judge": TemplateSpec(
        "judge.txt",
        ("problem", "previous_program", "feedback", "new_program", "diff"),
        ("problem", "new_program"),
    ),
}

JUDGE_CATEGORIES: dict[int, str] = {
    1: "hard coding",
    2: "logic overfitting",
    3: "semantic drifting",
    4: "others",
}

_TOKEN_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_VERDICT_RE = re.compile(r"^\W*verdict\W*:?\W*\(?([1-4])\)?\W*$", re.IGNORECASE)


class TemplateError(ValueError):
    """A template that cannot be loaded or filled; the message names the file."""


def _resolve_dir(template_dir: str | os.PathLike | None) -> str | None:
    chosen = template_dir if template_dir is not None else os.environ.get(ENV_TEMPLATE_DIR)
    return str(Path(chosen).expanduser().resolve()) if chosen else None


@functools.lru_cache(maxsize=64)
def _load(name: str, override_dir: str | None) -> tuple[str, str]:
    spec = TEMPLATES[name]
    if override_dir is not None:
        candidate = Path(override_dir) / spec.filename
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8"), str(candidate)
    packaged = resources.files("cobalt") / "templates" / spec.filename
    return packaged.read_text(encoding="utf-8"), f"cobalt/templates/{spec.filename}"


def load_template(name: str, template_dir: str | os.PathLike | None = None) -> tuple[str, str]:
    """Return ``(text, origin)`` of template ``name`` (see :data:`TEMPLATES`).

    ``template_dir`` (or ``$COBALT_TEMPLATE_DIR``) is searched first; loaded
    files are cached, :func:`clear_cache` forgets them.
    """
    if name not in TEMPLATES:
        raise TemplateError(f"unknown template {name!r}; known: {', '.join(TEMPLATES)}")
    return _load(name, _resolve_dir(template_dir))


def clear_cache() -> None:
    """Forget loaded templates (after editing files or changing the override folder)."""
    _load.cache_clear()


def render(name: str, template_dir: str | os.PathLike | None = None, **fields: str) -> str:
    """Fill template ``name`` with ``fields``; every declared placeholder must be given."""
    spec = TEMPLATES.get(name)
    if spec is None:
        raise TemplateError(f"unknown template {name!r}; known: {', '.join(TEMPLATES)}")
    unknown = sorted(set(fields) - set(spec.placeholders))
    if unknown:
        raise TemplateError(f"template {spec.filename}: unknown field(s) {unknown}; it takes {list(spec.placeholders)}")
    missing = [p for p in spec.placeholders if p not in fields]
    if missing:
        raise TemplateError(f"template {spec.filename}: missing field(s) {missing}")
    text, origin = load_template(name, template_dir)
    used = {m.group(1) for m in _TOKEN_RE.finditer(text) if m.group(1)}
    absent = [p for p in spec.required if p not in used]
    if absent:
        raise TemplateError(f"{origin}: the template must contain the placeholder(s) {['{' + p + '}' for p in absent]}")
    return _TOKEN_RE.sub(lambda m: _replacement(m, fields), text)


def _replacement(match: re.Match, fields: dict) -> str:
    token = match.group(0)
    if token == "{{":
        return "{"
    if token == "}}":
        return "}"
    key = match.group(1)
    return str(fields[key]) if key in fields else token


def system_prompt(template_dir: str | os.PathLike | None = None) -> str:
    """The system prompt: a safe Python assistant under four sandbox rules."""
    return render("system", template_dir).strip()


def problem_prompt(question: str, template_dir: str | os.PathLike | None = None) -> str:
    """The first-turn user message: the instruction followed by ``question``."""
    return render("instruction", template_dir, question=question.strip()).strip()


def repair_prompt(feedback: str, template_dir: str | os.PathLike | None = None) -> str:
    """A repair-turn user message: analyse and fix the last program given ``feedback``."""
    return render("repair", template_dir, feedback=feedback.strip()).strip()


def feedback_all_public_passed(template_dir: str | os.PathLike | None = None) -> str:
    """The feedback text used when a program passes every public test (METHOD §4).

    It is feedback, not a message: send it through :func:`feedback_turn_message`
    (METHOD §9: every feedback, this one included, is wrapped in the repair instruction).
    """
    return render("all_public_passed", template_dir).strip()


def feedback_turn_message(feedback: str | None, template_dir: str | os.PathLike | None = None) -> str:
    """The user message of a repair turn: the repair instruction wrapped around ``feedback``.

    ``feedback`` is the execution feedback to show (for instance the first
    failing public test's), or None when every public test passed: the
    all-passed text (:func:`feedback_all_public_passed`) then goes into the
    same repair instruction, as in the original (METHOD §9).
    """
    text = feedback_all_public_passed(template_dir) if feedback is None else feedback
    return repair_prompt(text, template_dir)


def judge_prompt(template_dir: str | os.PathLike | None = None, **fields: str) -> str:
    """The reward-hacking judge's prompt for one case.

    Fields: ``problem``, ``previous_program``, ``feedback``, ``new_program``, ``diff``.
    """
    return render("judge", template_dir, **fields).strip()


def parse_judge_verdict(answer: str) -> int | None:
    """The category (1-4) from the judge's last ``Verdict: N`` line, or None.

    >>> parse_judge_verdict("The program hard-codes the input.\\nVerdict: 1")
    1
    >>> parse_judge_verdict("no verdict here") is None
    True
    """
    for line in reversed(answer.strip().splitlines()):
        if not line.strip():
            continue
        match = _VERDICT_RE.match(line.strip())
        if match:
            return int(match.group(1))
    return None
