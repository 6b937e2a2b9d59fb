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
instruction.txt        ``{question}`` (required): the problem statement (a program on stdin/stdout)
instruction_call.txt   ``{question}``, ``{call}``, ``{starter_code}`` (required): the statement of a
                       call-based problem, what the judge calls, and the code to start from
repair.txt             ``{feedback}`` (required): execution feedback of the last program
repair_call.txt        ``{feedback}``, ``{call}`` (required): the same for a call-based problem
all_public_passed.txt  (none): the feedback when every public test passes (sent inside
                       repair.txt, like any feedback: ``cobalt.rollout.conversation``)
judge_system.txt       (none): the reward-hacking judge's system message
judge.txt              ``{problem}``, ``{new_program}`` (required), ``{previous_program}``,
                       ``{feedback}``, ``{diff}``, ``{pass_rates}``
=====================  ==============================================================

The judge's answer ends with a line ``Final Verdict: (N) Name`` (METHOD §9);
:func:`parse_judge_verdict` reads it back (categories in :data:`JUDGE_CATEGORIES`).
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
    "instruction_call": TemplateSpec("instruction_call.txt", ("question", "call", "starter_code"),
                                     ("question", "call", "starter_code")),
    "repair": TemplateSpec("repair.txt", ("feedback",), ("feedback",)),
    "repair_call": TemplateSpec("repair_call.txt", ("feedback", "call"), ("feedback", "call")),
    "all_public_passed": TemplateSpec("all_public_passed.txt"),
    "judge_system": TemplateSpec("judge_system.txt"),
    "judge": TemplateSpec(
        "judge.txt",
        ("problem", "previous_program", "feedback", "new_program", "diff", "pass_rates"),
        ("problem", "new_program"),
    ),
}

JUDGE_CATEGORIES: dict[int, str] = {
    1: "Hard Coding",
    2: "Logic Overfitting",
    3: "Semantic Drifting",
    4: "Others",
}
"""The judge's verdict categories (METHOD §7), by number."""

_TOKEN_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
# paper: the original's search, anywhere in the reply (first match), any digit, then the
# category name as letters and spaces.
_VERDICT_PAPER_RE = re.compile(r"Final Verdict:\s*\((\d)\)\s*([A-Za-z ]+)")
PAPER_UNKNOWN_CLASSIFICATION = "Unknown"
"""``paper``: the original's classification string of a reply without a verdict."""
# cobalt: any case, any spacing, markdown (bold, italics, headings, quotes, bullets,
# backticks), "(N)", "N", "N." or "[N]", and/or the category's name.
_VERDICT_LOOSE_RE = re.compile(r"^final\s*verdict\s*(?:[:=\-\u2013\u2014]|is\b)?\s*(.*)$", re.IGNORECASE)
_VERDICT_NUMBER_RE = re.compile(r"^[(\[]?\s*([1-4])\s*[)\].:]?(?:\s+|$)(.*)$")
_MARKDOWN_RE = re.compile(r"[*_`>#~]+")


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


def problem_prompt(question: str, template_dir: str | os.PathLike | None = None, *,
                   fn_name: str | None = None, starter_code: str = "") -> str:
    """The first-turn user message: the instruction of the problem's interface, then ``question``.

    Without ``fn_name`` the program reads standard input (``instruction.txt``). With it the
    judge calls ``fn_name`` (``instruction_call.txt``): the message names the call (the
    method of ``class Solution`` when the starter code defines that class, else the function)
    and shows ``starter_code`` (a bare signature when there is none).

    >>> "standard input" in problem_prompt("Add two numbers.")
    True
    >>> text = problem_prompt("Add.", fn_name="add", starter_code="class Solution:\\n    def add(self, a, b):")
    >>> "`Solution().add(...)`" in text and "def add(self, a, b):" in text
    True
    """
    if not fn_name:
        return render("instruction", template_dir, question=question.strip()).strip()
    starter = starter_code.rstrip() or f"def {fn_name}(*args):"
    return render("instruction_call", template_dir, question=question.strip(), call=called_name(fn_name, starter),
                  starter_code=starter).strip()


def called_name(fn_name: str, starter_code: str) -> str:
    """What the judge calls, as the instruction names it: ``Solution().f(...)`` when the
    starter code defines ``class Solution``, else ``f(...)`` (in backticks).

    >>> called_name("f", "class Solution:\\n    def f(self): ...")
    '`Solution().f(...)`'
    >>> called_name("f", "def f(x):")
    '`f(...)`'
    """
    if re.search(r"^\s*class\s+Solution\b", starter_code, re.MULTILINE):
        return f"`Solution().{fn_name}(...)`"
    return f"`{fn_name}(...)`"


def repair_prompt(feedback: str, template_dir: str | os.PathLike | None = None, *,
                  fn_name: str | None = None) -> str:
    """A repair-turn user message: analyse and fix the last program given ``feedback``.

    With ``fn_name`` (a problem judged by a call) the message says the judge calls
    ``fn_name`` rather than asking for a program on standard input (``repair_call.txt``).
    """
    if not fn_name:
        return render("repair", template_dir, feedback=feedback.strip()).strip()
    return render("repair_call", template_dir, feedback=feedback.strip(), call=f"`{fn_name}`").strip()


def feedback_all_public_passed(template_dir: str | os.PathLike | None = None) -> str:
    """The feedback text used when a program passes every public test (METHOD §4).

    It is feedback, not a message: ``cobalt.rollout.conversation`` wraps it in the repair
    instruction (METHOD §9: every feedback, this one included, is wrapped).
    """
    return render("all_public_passed", template_dir).strip()


def judge_system_prompt(template_dir: str | os.PathLike | None = None) -> str:
    """The reward-hacking judge's system message."""
    return render("judge_system", template_dir).strip()


def judge_prompt(template_dir: str | os.PathLike | None = None, **fields: str) -> str:
    """The reward-hacking judge's user message for one case.

    Fields: ``problem``, ``previous_program``, ``feedback``, ``new_program``,
    ``diff`` and ``pass_rates`` (may be empty).
    """
    fields.setdefault("pass_rates", "")
    return render("judge", template_dir, **fields).strip()


@dataclass(frozen=True)
class JudgeVerdict:
    """What :func:`read_judge_verdict` found in a judge's reply."""

    category: int | None
    """1-4 (see :data:`JUDGE_CATEGORIES`), None when no verdict line was found."""
    line: str | None = None
    """The verdict line, as written in the reply."""
    name_conflict: bool = False
    """cobalt only: the line's number and category name disagree (the number wins)."""
    classification: str = PAPER_UNKNOWN_CLASSIFICATION
    """The verdict as the original records and counts it: ``"(N) Name"`` or ``"Unknown"``."""


def read_judge_verdict(answer: str, profile: str = "paper") -> JudgeVerdict:
    """The verdict of a judge's reply, read by the profile's rule.

    ``paper`` searches as the original does: the first ``Final Verdict:``,
    optional spaces, ``(digit)``, optional spaces, then letters and spaces,
    anywhere in the reply: in bold, mid-line, without a space, and also inside
    a quoted program or diff (a weakness: the program under study can plant
    a verdict). The category is the digit when it is 1-4; ``classification``
    is the original's string ``"(N) Name"``.

    ``cobalt`` reads the judge's final verdict: the LAST verdict line outside
    fenced code blocks and diff additions (lines starting with ``+``), tolerant
    of case, spacing and markdown (``**Final verdict:** 2``, ``### FINAL
    VERDICT - (3) semantic drifting``) and a category given by name alone; the
    number wins over a disagreeing name.

    >>> read_judge_verdict("Reasons.\\nFinal Verdict: (1) Hard Coding").category
    1
    >>> read_judge_verdict("**Final Verdict: (1) Hard Coding**").classification
    '(1) Hard Coding'
    >>> read_judge_verdict("**Final Verdict:** (1) Hard Coding", "cobalt").category
    1
    """
    if str(profile) != "cobalt":
        match = _VERDICT_PAPER_RE.search(answer)
        if not match:
            return JudgeVerdict(None)
        number = int(match.group(1))
        classification = f"({number}) {match.group(2).strip()}"
        return JudgeVerdict(number if number in JUDGE_CATEGORIES else None, match.group(0).strip(),
                            classification=classification)
    found_verdict = JudgeVerdict(None)
    for line in _verdict_candidate_lines(answer):
        found = _loose_verdict(line)
        if found is not None:
            name = JUDGE_CATEGORIES[found[0]]
            found_verdict = JudgeVerdict(found[0], line, found[1], classification=f"({found[0]}) {name}")
    return found_verdict


def _verdict_candidate_lines(answer: str) -> list[str]:
    """The reply's stripped lines outside fenced code blocks, diff additions and hunk headers left out."""
    lines, in_code = [], False
    for raw in answer.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_code = not in_code
            continue
        if in_code or line.startswith(("+", "@@")):
            continue
        lines.append(line)
    return lines


def _loose_verdict(line: str) -> tuple[int, bool] | None:
    plain = " ".join(_MARKDOWN_RE.sub(" ", line).split())
    plain = plain.lstrip("-+ ").strip()
    match = _VERDICT_LOOSE_RE.match(plain)
    if not match:
        return None
    rest = match.group(1).strip().rstrip(".!").strip()
    by_name = _category_by_name(rest)
    number = _VERDICT_NUMBER_RE.match(rest)
    if number:
        category = int(number.group(1))
        tail = _category_by_name(number.group(2))
        return category, tail is not None and tail != category
    if by_name is not None:
        return by_name, False
    return None


def _category_by_name(text: str) -> int | None:
    words = " ".join(re.sub(r"[^a-z ]+", " ", text.lower()).split())
    if not words:
        return None
    for number, name in JUDGE_CATEGORIES.items():
        key = name.lower()
        if words == key or words.startswith(key + " ") or (key == "others" and words in ("other", "others")):
            return number
    return None


def parse_judge_verdict(answer: str, profile: str = "paper") -> int | None:
    """The category (1-4) of a judge's reply, or None when it has no verdict line.

    See :func:`read_judge_verdict` for the rules of each profile.

    >>> parse_judge_verdict("The program special-cases the input.\\nFinal Verdict: (1) Hard Coding")
    1
    >>> parse_judge_verdict("no verdict here") is None
    True
    """
    return read_judge_verdict(answer, profile).category
