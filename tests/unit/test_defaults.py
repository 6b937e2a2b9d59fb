"""Every shared default is defined once, in cobalt.defaults.

The history cut, the sampling defaults, the data directory and each link of
the timeout chain are assigned in ``cobalt/defaults.py`` only (other modules
import them, possibly under another name), the history cut's number appears
nowhere else, and the chain's links outlast one another in order.
"""
from __future__ import annotations

import ast
from pathlib import Path

import cobalt
from cobalt import defaults

SRC = Path(cobalt.__file__).resolve().parent
NAMES = [n for n in vars(defaults) if n.isupper()]


def module_assignments(source: str) -> set[str]:
    """Names assigned at module or class level (constants and dataclass defaults)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def numbers(source: str) -> set:
    """Every numeric literal of ``source``."""
    return {n.value for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)}


def test_the_defaults_are_the_ones_the_issue_names():
    for name in ("HISTORY_MAX_CHARS", "TEMPERATURE", "TOP_P", "MAX_NEW_TOKENS", "DATA_DIR", "DATA_DIR_ENV",
                 "TEST_WALL_S", "TEST_CPU_S", "PROGRAM_WALL_S", "HOST_GRACE_S", "CALLER_TIMEOUT_S",
                 "COMMAND_EVAL_TIMEOUT_S", "REWARD_CLIENT_GRACE_S", "REWARD_MANAGER_TIMEOUT_S"):
        assert name in NAMES


def test_each_default_is_defined_in_cobalt_defaults_only():
    twice = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "defaults.py" and path.parent == SRC:
            continue
        twice += [f"{path.relative_to(SRC)}: {n}" for n in module_assignments(path.read_text("utf-8")) & set(NAMES)]
    assert not twice, "defined outside cobalt.defaults:\n" + "\n".join(twice)


def test_the_history_cut_is_typed_once():
    found = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
             if p.name != "defaults.py" and defaults.HISTORY_MAX_CHARS in numbers(p.read_text("utf-8"))]
    assert not found, f"{defaults.HISTORY_MAX_CHARS} typed in {found}"


def test_users_see_the_same_values():
    from cobalt.training_data.trajectories import BuildConfig
    from cobalt.engines.base import SamplingParams
    from cobalt.execution.base import Limits
    from cobalt.execution.client import DEFAULT_TIMEOUT_S
    from cobalt.reward.scoring import CLIENT_GRACE_S
    from cobalt.rollout.loop import RolloutConfig
    from cobalt.verl_plugin.reward_manager import DEFAULT_TIMEOUT_S as MANAGER_TIMEOUT_S

    assert BuildConfig().history_max_chars == RolloutConfig().history_max_chars == defaults.HISTORY_MAX_CHARS
    params = SamplingParams()
    assert (params.temperature, params.top_p, params.max_new_tokens) == (
        defaults.TEMPERATURE, defaults.TOP_P, defaults.MAX_NEW_TOKENS)
    limits = Limits()
    assert (limits.test_wall_s, limits.test_cpu_s, limits.program_wall_s) == (
        defaults.TEST_WALL_S, defaults.TEST_CPU_S, defaults.PROGRAM_WALL_S)
    assert DEFAULT_TIMEOUT_S == defaults.CALLER_TIMEOUT_S
    assert CLIENT_GRACE_S == defaults.REWARD_CLIENT_GRACE_S
    assert MANAGER_TIMEOUT_S == defaults.REWARD_MANAGER_TIMEOUT_S


def test_the_timeout_chain_outlasts_itself_in_order():
    program = defaults.PROGRAM_WALL_S + defaults.HOST_GRACE_S
    assert defaults.TEST_WALL_S < defaults.PROGRAM_WALL_S < program
    assert program < defaults.COMMAND_EVAL_TIMEOUT_S <= defaults.CALLER_TIMEOUT_S
    for manager in defaults.REWARD_MANAGER_TIMEOUT_S.values():
        assert program + defaults.REWARD_CLIENT_GRACE_S < manager


def test_the_defaults_doc_names_every_default():
    doc = (SRC.parents[1] / "docs" / "DEFAULTS.md").read_text("utf-8")
    missing = [n for n in NAMES if f"`{n}`" not in doc]
    assert not missing, f"docs/DEFAULTS.md does not name {missing}"
