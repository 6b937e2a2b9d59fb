"""The one command line: ``cobalt <command> [flags]``.

Each command lives in its own module, which defines ``add_arguments(parser)``
and ``run(args) -> int``. Modules are imported only when their command runs
(or its ``--help`` is asked for), so ``cobalt --help`` is instant and needs
none of the heavy dependencies (Ray, torch, verl).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from cobalt.cli_support import HelpFormatter, debug_requested, run_guarded

# name -> (module, one-line help). The paper's scripts map onto these commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("cobalt.demo", "The whole Cobalt loop on the shipped problems: first turn, repairs, hidden eval, Pass@1, bandit prompts, veRL parquet."),
    "exec": ("cobalt.execution.cli", "Run programs against test cases in the sandbox (job file or one program)."),
    "serve": ("cobalt.execution.serve_cli", "Start the Ray Serve evaluator app (the paper's remote_reward_server.py)."),
    "preproc-taco": ("cobalt.data.taco", "Clean TACO-verified into problems with public and hidden tests (preproc/preproc_taco.py)."),
    "preproc-leetcode": ("cobalt.data.leetcode_cli", "Turn LeetCode or CodeContests JSONL into a problems file with starter code and fn_name."),
    "preproc-lcb": ("cobalt.data.livecodebench", "Prepare LiveCodeBench release test6 (preproc/preproc_lcb_test6.py)."),
    "perturb": ("cobalt.data.perturbation", "Perturb public tests for the reward-hacking study (preproc/run_perturbation.py)."),
    "build-prompts": ("cobalt.training_data.trajectories", "Turn multi-turn trajectories into partial-trajectory bandit prompts (preproc/process_multi_turn_taco.py)."),
    "rollout": ("cobalt.rollout.cli", "Single- or multi-turn inference, programs judged on public tests (run_*_turn_*.py)."),
    "eval": ("cobalt.evaluation.cli", "Hidden-test pass rate of every turn and Pass@1 per turn (eval_multi_turn.py)."),
    "report": ("cobalt.analysis.report", "Pass@1 per turn of one or more runs: markdown table, CSV and PNG plot."),
    "make-verl-data": ("cobalt.training_data.verl_datasets", "Write single-turn or Cobalt parquet datasets in veRL's row schema."),
    "generate": ("cobalt.engines.generate_cli", "Complete chat conversations from a JSONL file with any engine (--engine, --model)."),
    "tiny-model": ("cobalt.engines.tiny_model", "Build a tiny randomly initialised Qwen3 model with the real tokenizer (tests, CI, GPU smoke runs)."),
    "train-config": ("cobalt.verl_plugin.config_cli", "Compose and print the veRL GRPO config of a paper training run."),
    "extract-hacking": ("cobalt.analysis.hacking", "Extract turn-level reward-hacking cases from runs on perturbed tests (extract_turn_level_errors.py)."),
    "judge": ("cobalt.analysis.judge", "Classify reward-hacking cases with an LLM judge through any engine (run_llm_judge.py)."),
    "hacking-report": ("cobalt.analysis.hacking_report", "Reward-hacking report: counts per category and run (markdown, CSV, PNG, examples)."),
    "cost-report": ("cobalt.verl_plugin.costs", "Seconds per example and GPU-hours per step of training runs, from verl's step logs."),
    "doctor": ("cobalt.doctor", "Check the sandbox, its isolation layers, engines, Ray, the tokenizer and the hub; one line per check with the fix."),
    "make-synthetic": ("cobalt.data.synthetic", "Generate the learning experiment's stdin task family: train and held-out problems files."),
    "train-report": ("cobalt.verl_plugin.train_report", "Learning curves of one or more training runs from verl's console logs: CSV and PNG."),
    "compare-runs": ("cobalt.analysis.compare_runs", "Paired bootstrap over problems of Pass@1 per turn, run B minus run A, and the repair rate."),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; sub-parsers are filled lazily by :func:`main`."""
    parser = argparse.ArgumentParser(
        prog="cobalt",
        description="Cobalt: sandboxed code execution, shaped rewards, trajectory data and veRL training "
        "for multi-turn code generation.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Commands:\n" + "\n".join(f"  {n:<16} {h}" for n, (_, h) in COMMANDS.items())
        + "\n\nRun 'cobalt <command> --help' for the flags of a command. Any command takes --debug "
        "(or COBALT_DEBUG=1) to show the traceback of an error.",
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("command", nargs="?", help="the command to run (listed below)")
    return parser


def _version() -> str:
    from cobalt import __version__

    return f"cobalt {__version__}"


def command_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    """The parser of command ``name`` and its module (imported now)."""
    module_name, help_text = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(
        prog=f"cobalt {name}",
        description=(module.__doc__ or help_text).strip().split("\n\n")[0],
        formatter_class=HelpFormatter,
    )
    module.add_arguments(parser)
    return parser, module


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cobalt`` console script."""
    debug, argv = debug_requested(list(sys.argv[1:] if argv is None else argv))
    top = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0
    if argv[0] == "--version":
        top.parse_args(argv)
    name = argv[0]
    if name not in COMMANDS:
        top.error(f"unknown command {name!r}; choose from: {', '.join(COMMANDS)}")
    parser, module = command_parser(name)
    args = parser.parse_args(argv[1:])
    return run_guarded(name, lambda: module.run(args), debug=debug)


if __name__ == "__main__":
    sys.exit(main())
