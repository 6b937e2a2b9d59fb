"""Nothing under src/cobalt imports "upwards" (CONTRIBUTING.md, the architecture rule).

Data flows one way: data -> rollout (engines + execution) -> evaluation/analysis ->
training data -> veRL, on top of base layers. Each module gets a layer number from
:data:`LAYERS` (the longest matching dotted prefix wins); a module may import its own
layer or lower ones. Imports are read with ``ast`` from the source, all of them:
module level, inside functions (lazy imports count), relative ones resolved.
"""
from __future__ import annotations

import ast
from pathlib import Path

import cobalt

SRC = Path(cobalt.__file__).resolve().parent

LAYERS: dict[str, int] = {
    # base: shared helpers
    "cobalt": 0,  # the package itself (__version__)
    "cobalt.io": 0,
    "cobalt.profile": 0,
    "cobalt.cli_support": 0,
    "cobalt.hub": 0,
    "cobalt.defaults": 0,
    "cobalt.text": 1,
    "cobalt.prompts": 1,
    # base: services every stage may use
    "cobalt.execution": 2,
    "cobalt.engines": 2,
    "cobalt.health": 2,  # pre-flight checks and the failure breaker (uses execution and engines)
    "cobalt.reward": 3,  # scores programs through the execution layer
    # data sets, problem records and the inference-record schema
    "cobalt.data": 4,
    # rollouts (engines + execution)
    "cobalt.rollout": 5,
    # evaluation and analysis of rollouts
    "cobalt.evaluation": 6,
    "cobalt.analysis": 6,
    # training data built from evaluated rollouts
    "cobalt.training_data": 7,
    # veRL
    "cobalt.verl_plugin": 8,
    # entry points that run any stage: the CLI, the demo, the paper's script front-ends
    "cobalt.cli": 9,
    "cobalt.doctor": 9,
    "cobalt.__main__": 9,
    "cobalt.demo": 9,
    "cobalt.shims": 9,
}


def layer_of(module: str) -> int:
    """The layer of a dotted module name: its longest prefix in :data:`LAYERS`."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise KeyError(f"{module}: no layer (add it to LAYERS)")


def module_name(path: Path) -> str:
    """Dotted name of a file under src/cobalt (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def cobalt_imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, imported module)`` for every import of a ``cobalt`` module in ``source``.

    ``from cobalt import x`` counts as ``cobalt.x`` (x may be a submodule);
    relative imports are resolved against ``module``.
    """
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "cobalt"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "cobalt":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((node.lineno, sub if _is_module(sub) else target))
    return out


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def upward_imports() -> list[str]:
    """Every import of a higher layer, as ``file:line module (layer) -> imported (layer)``."""
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        module = module_name(path)
        mine = layer_of(module)
        for line, target in cobalt_imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            theirs = layer_of(target)
            if theirs > mine:
                problems.append(f"{path.relative_to(SRC)}:{line} {module} ({mine}) -> {target} ({theirs})")
    return problems


def test_every_module_has_a_layer():
    for path in SRC.rglob("*.py"):
        layer_of(module_name(path))


def test_nothing_imports_upwards():
    problems = upward_imports()
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_the_parser_sees_lazy_relative_and_from_package_imports():
    source = (
        "import os\n"
        "from cobalt.io import JsonlAppender\n"
        "def run():\n"
        "    from cobalt.rollout.loop import run_rollout\n"
        "    import cobalt.verl_plugin.reward\n"
        "    from . import problems\n"
        "    from ..evaluation import passk\n"
        "    from cobalt import __version__\n"
    )
    found = cobalt_imports(source, "cobalt.data.leetcode")
    assert found == [(2, "cobalt.io"), (4, "cobalt.rollout.loop"), (5, "cobalt.verl_plugin.reward"),
                     (6, "cobalt.data.problems"), (7, "cobalt.evaluation.passk"), (8, "cobalt")]
    assert [layer_of(m) for _, m in found] == [0, 5, 8, 4, 6, 0]
    assert layer_of("cobalt.training_data.verl_datasets") == 7 and layer_of("cobalt.data.taco") == 4


def test_each_layer_is_a_whole_folder_or_top_level_module():
    """No special cases: a layer is given to a package or a top-level module, never to one module
    inside a package (a module that belongs elsewhere moves to that folder)."""
    deeper = [name for name in LAYERS if name.count(".") > 1]
    assert not deeper, f"modules with a layer of their own inside a package: {deeper}"


def test_the_moved_training_data_modules_keep_their_old_names_for_a_release():
    import importlib
    import sys
    import warnings

    from cobalt.training_data import trajectories, verl_datasets

    for old, new in (("cobalt.data.trajectories", trajectories), ("cobalt.data.verl_datasets", verl_datasets)):
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is new
        assert any(issubclass(w.category, DeprecationWarning) and "cobalt.training_data" in str(w.message)
                   for w in caught)


def test_evaluation_imports_nothing_from_rollout():
    """Evaluation reads records (cobalt.data.records) and runs programs; it needs no rollout code."""
    found = []
    for path in sorted((SRC / "evaluation").rglob("*.py")):
        module = module_name(path)
        found += [f"{path.relative_to(SRC)}:{line} {target}"
                  for line, target in cobalt_imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
                  if target.startswith("cobalt.rollout")]
    assert not found, "\n".join(found)
